/* The floor of a uniform minibatch on this machine: the time to bring in the cache lines of
 * n = 10,000 random rows of a 1,000,000 x d matrix (and, optionally, each row's one-byte target
 * from a separate 1 MB array), with nothing else done: indices drawn beforehand, a prefetch of
 * each row's first and last byte `dist` rows ahead, one load per line. Rows are f64 or f32, in
 * anonymous memory advised for transparent huge pages (as sgmcmc stores a large matrix).
 *
 *   cc -O2 -march=native gather_floor.c -o gather_floor
 *   ./gather_floor            # prints one line per case
 *
 * Written in C so that nothing of sgmcmc's code is measured: it is the machine's number. */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

enum { N = 1000000, BATCH = 10000, BATCHES = 1000, DIST = 64, REPEATS = 5 };

static double floor_ns_per_row(const char *m, size_t row_bytes, const unsigned char *targets,
                               const uint32_t *idx) {
    double best = 1e30, sink = 0;
    for (int rep = 0; rep < REPEATS; rep++) {
        double t0 = now(), acc = 0;
        for (int it = 0; it < BATCHES; it++) {
            const uint32_t *b = idx + (size_t)it * BATCH;
            for (size_t k = 0; k < BATCH; k++) {
                if (k + DIST < BATCH) {
                    const char *p = m + (size_t)b[k + DIST] * row_bytes;
                    _mm_prefetch(p, _MM_HINT_T0);
                    _mm_prefetch(p + row_bytes - 1, _MM_HINT_T0);
                    if (targets) _mm_prefetch((const char *)targets + b[k + DIST], _MM_HINT_T0);
                }
                const char *p = m + (size_t)b[k] * row_bytes;
                acc += p[0] + p[row_bytes - 1] + (targets ? targets[b[k]] : 0);
            }
        }
        double ns = (now() - t0) / ((double)BATCHES * BATCH) * 1e9;
        if (ns < best) best = ns;
        sink += acc;
    }
    if (sink == 42.0) puts("");
    return best;
}

int main(void) {
    uint32_t *idx = malloc(sizeof(uint32_t) * (size_t)BATCH * BATCHES);
    uint64_t s = 88172645463325252ULL;
    for (size_t i = 0; i < (size_t)BATCH * BATCHES; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        idx[i] = (uint32_t)(s % N);
    }
    unsigned char *targets = malloc(N);
    memset(targets, 1, N);
    printf("# gather_floor: %d random rows per batch of a %d-row matrix, prefetch %d rows ahead, best of %d x %d batches\n",
           BATCH, N, DIST, REPEATS, BATCHES);
    printf("%-5s %4s %8s %10s %12s\n", "prec", "d", "targets", "ns/row", "it/s(10000)");
    const int dims[] = {10};
    for (int e = 0; e < 2; e++) {
        size_t elem = e == 0 ? 8 : 4;
        for (size_t di = 0; di < sizeof dims / sizeof *dims; di++) {
            size_t row_bytes = dims[di] * elem, bytes = (size_t)N * row_bytes;
            char *m = mmap(0, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED) return 1;
            madvise(m, bytes, MADV_HUGEPAGE);
            memset(m, 1, bytes);
            for (int t = 0; t < 2; t++) {
                double ns = floor_ns_per_row(m, row_bytes, t ? targets : NULL, idx);
                printf("%-5s %4d %8s %10.2f %12.0f\n", e == 0 ? "f64" : "f32", dims[di],
                       t ? "u8" : "none", ns, 1e9 / (ns * BATCH));
            }
            munmap(m, bytes);
        }
    }
    return 0;
}
