//! Stein discrepancies (reference §4.7; issue 4, must-show items 1 and 2): exact small cases,
//! closed-form expectations with Monte Carlo tolerances, the tiled KSD against a naive double
//! loop, FSSD and FSSD-opt (closed form, gradients, distinct locations, power), thread-count
//! independence, full-batch scores and errors.
//!
//! Break-once checks done while writing these tests (each broke the library once, ran this
//! file, and restored it):
//! - KSD: the `− 2dβ·u^(β−1)` term dropped (a2 = 0) → `exact_small_cases_imq`,
//!   `ksd_v_expectation_is_2d_over_n`, `overdispersed_draws_have_larger_ksd` and
//!   `tiled_equals_naive_double_loop` failed; the `s_aᵀs_b·u^β` term dropped → the same four.
//! - KSD tiles: diagonal tiles starting at b = a instead of a + 1 → `exact_small_cases_imq`,
//!   `ksd_v_expectation_is_2d_over_n`, `tiled_equals_naive_double_loop`; units after the first
//!   counted half → only `tiled_equals_naive_double_loop` and `bench_ksd_smoke` (the small
//!   cases fit in one unit).
//! - KSD: unit sums reduced with rayon's `sum()` instead of collected and added in order →
//!   `results_do_not_depend_on_the_thread_count` (last bit differs between 1 and 2 threads).
//! - FSSD²_U divided by n² instead of n(n−1) → `fssd_small_case`.
//! - FSSD-opt: Adam descending instead of ascending → `fssd_opt_improves_the_objective`.
//! - FSSD: Gaussian Jacobian without its `+ y` term → `fssd_gradients_match_finite_differences`.
//! - Locations: one normal vector reused for every location (the MAMBA defect) →
//!   `initial_locations_are_distinct_and_fitted` and `fssd_and_fssd_opt_detect_shift_and_scale`.
//! - Median heuristic without the even-count average → `median_heuristic`.
//! - Scores: thinning by k − 1 instead of k → `full_batch_scores_at_thinned_draws`.

use crate::common;

use common::{mean, normals, var};
use sgmcmc::model::GaussianModel;
use sgmcmc::rng::stream;
use sgmcmc::stein::{
    FssdObjective, FssdOptSettings, FssdSettings, GaussianKernel, ImqKernel, Kernel,
    KernelSettings, SteinError, SteinSettings, evaluate, fssd, fssd_opt, full_batch_scores,
    initial_locations, ksd, ksd_with_tile, linear_ksd, objective_and_gradient,
};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn imq() -> Kernel {
    Kernel::Imq(ImqKernel::default())
}

fn gauss(sigma2: f64) -> Kernel {
    Kernel::Gaussian(GaussianKernel::new(sigma2).unwrap())
}

/// Scores of N(μ, σ²·I): −(x − μ)/σ².
fn normal_scores(x: &[f64], mu: &[f64], sigma2: f64) -> Vec<f64> {
    let d = mu.len();
    x.chunks_exact(d)
        .flat_map(|row| {
            row.iter()
                .zip(mu)
                .map(move |(v, m)| -(v - m) / sigma2)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// n draws of N(μ, sd²·I) from stream (seed, s).
fn normal_draws(seed: u64, s: u64, n: usize, mu: &[f64], sd: f64) -> Vec<f64> {
    let d = mu.len();
    let mut x = normals(seed, s, n * d);
    for row in x.chunks_exact_mut(d) {
        row.iter_mut().zip(mu).for_each(|(v, m)| *v = m + sd * *v);
    }
    x
}

/// k_p(x, y) from the Langevin definition s_xᵀs_y·k + s_xᵀ∇_y k + s_yᵀ∇_x k + Σᵢ ∂²k/∂xᵢ∂yᵢ,
/// with the kernel's gradients written out component by component (independent of the
/// library's closed forms and Gram products).
fn naive_stein_kernel(kernel: &Kernel, x: &[f64], y: &[f64], sx: &[f64], sy: &[f64]) -> f64 {
    let d = x.len();
    let r: Vec<f64> = x.iter().zip(y).map(|(a, b)| a - b).collect();
    let r2: f64 = r.iter().map(|v| v * v).sum();
    let (k, grad_x, grad_y, trace): (f64, Vec<f64>, Vec<f64>, f64) = match *kernel {
        Kernel::Imq(p) => {
            let (c, beta) = (p.c(), p.beta());
            let u = c * c + r2;
            let k = u.powf(beta);
            let gx: Vec<f64> = r
                .iter()
                .map(|ri| beta * u.powf(beta - 1.0) * 2.0 * ri)
                .collect();
            let gy: Vec<f64> = gx.iter().map(|g| -g).collect();
            // ∂/∂xᵢ of ∂k/∂yᵢ = −2β·u^(β−1)·rᵢ.
            let trace: f64 = r
                .iter()
                .map(|ri| {
                    -2.0 * beta
                        * ((beta - 1.0) * u.powf(beta - 2.0) * 2.0 * ri * ri + u.powf(beta - 1.0))
                })
                .sum();
            (k, gx, gy, trace)
        }
        Kernel::Gaussian(g) => {
            let s2 = g.sigma2();
            let k = (-r2 / (2.0 * s2)).exp();
            let gx: Vec<f64> = r.iter().map(|ri| -k * ri / s2).collect();
            let gy: Vec<f64> = gx.iter().map(|g| -g).collect();
            // ∂/∂xᵢ of ∂k/∂yᵢ = k·rᵢ/σ².
            let trace: f64 = r.iter().map(|ri| -k * ri * ri / (s2 * s2) + k / s2).sum();
            (k, gx, gy, trace)
        }
    };
    let mut total = trace;
    for i in 0..d {
        total += sx[i] * sy[i] * k + sx[i] * grad_y[i] + sy[i] * grad_x[i];
    }
    total
}

/// (KSD²_V, KSD²_U) by the naive double loop over all ordered pairs.
fn naive_ksd(kernel: &Kernel, x: &[f64], s: &[f64], d: usize) -> (f64, f64) {
    let n = x.len() / d;
    let row = |v: &[f64], a: usize| v[a * d..(a + 1) * d].to_vec();
    let (mut all, mut off) = (0.0, 0.0);
    for a in 0..n {
        for b in 0..n {
            let h = naive_stein_kernel(kernel, &row(x, a), &row(x, b), &row(s, a), &row(s, b));
            all += h;
            if a != b {
                off += h;
            }
        }
    }
    let nf = n as f64;
    (all / (nf * nf), off / (nf * (nf - 1.0)))
}

/// Mean and standard error of independent replicates.
fn mean_se(x: &[f64]) -> (f64, f64) {
    (mean(x), (var(x) / x.len() as f64).sqrt())
}

/// The empirical q-quantile (nearest rank).
fn quantile(x: &[f64], q: f64) -> f64 {
    let mut v = x.to_vec();
    v.sort_by(f64::total_cmp);
    v[((q * (v.len() - 1) as f64).round() as usize).min(v.len() - 1)]
}

fn close(got: f64, want: f64, tol: f64, what: &str) {
    assert!(
        (got - want).abs() <= tol,
        "{what}: got {got:.12}, want {want:.12} (tolerance {tol:e})"
    );
}

fn in_pool<T: Send>(threads: usize, f: impl FnOnce() -> T + Send) -> T {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(f)
}

// ---------------------------------------------------------------------------------------------
// KSD
// ---------------------------------------------------------------------------------------------

/// §4.7.1: the hand-computed values (IMQ, c = 1, β = −½, target N(0, I), s = −x), and a
/// Gaussian case by hand: d = 1, σ² = 1, {0, 1}: k_p(0,0) = 1, k_p(1,1) = 2,
/// k_p(0,1) = −e^(−1/2), so KSD²_V = (3 − 2e^(−1/2))/4.
#[test]
fn exact_small_cases_imq() {
    let x = [0.0, 1.0];
    let s = [0.0, -1.0];
    let k = ksd(&x, &s, 1, &imq()).unwrap();
    close(k.squared_v, 0.4848349571, 1e-9, "d = 1 KSD²_V");
    close(k.ksd, 0.6963009098, 1e-9, "d = 1 KSD");
    // U: the two off-diagonal terms over n(n−1) = 2, i.e. k_p(0, 1) = −3·2^(−5/2).
    close(
        k.squared_u.unwrap(),
        -3.0 * 2f64.powf(-2.5),
        1e-12,
        "d = 1 KSD²_U",
    );

    let x2 = [0.0, 0.0, 1.0, 0.0, 0.0, 2.0];
    let s2: Vec<f64> = x2.iter().map(|v| -v).collect();
    let k2 = ksd(&x2, &s2, 2, &imq()).unwrap();
    close(k2.squared_v, 1.0123217202, 1e-9, "d = 2 KSD²_V");
    close(k2.ksd, 1.0061419980, 1e-9, "d = 2 KSD");
    // The V/U relation of §4.2: V = ((n−1)/n)·U + (1/n)·mean_a k_p(x_a, x_a), with
    // k_p(x, x) = ‖x‖² + 1·d (IMQ diagonal ‖s‖²c^(2β) − 2dβc^(2β−2) at c = 1, β = −½).
    let diag = mean(&[2.0, 3.0, 6.0]);
    close(
        k2.squared_v,
        (2.0 / 3.0) * k2.squared_u.unwrap() + diag / 3.0,
        1e-12,
        "V/U relation",
    );

    let kg = ksd(&x, &s, 1, &gauss(1.0)).unwrap();
    close(
        kg.squared_v,
        (3.0 - 2.0 * (-0.5f64).exp()) / 4.0,
        1e-12,
        "Gaussian d = 1 KSD²_V",
    );

    // A single draw: V is its diagonal term, U is undefined.
    let one = ksd(&[1.0], &[-1.0], 1, &imq()).unwrap();
    close(one.squared_v, 2.0, 1e-15, "n = 1");
    assert_eq!(one.squared_u, None);
}

/// §4.7.2: for i.i.d. draws from π = N(0, I_d), E[KSD²_V] = 2d/n (IMQ c = 1, β = −½) and
/// E[KSD²_U] = 0; d = 3, n = 50, 2000 replicates, tolerance 4 standard errors.
#[test]
fn ksd_v_expectation_is_2d_over_n() {
    let (d, n, reps) = (3usize, 50usize, 2000u64);
    let mu = vec![0.0; d];
    let (mut v, mut u) = (Vec::new(), Vec::new());
    for r in 0..reps {
        let x = normal_draws(401, r, n, &mu, 1.0);
        let s = normal_scores(&x, &mu, 1.0);
        let k = ksd(&x, &s, d, &imq()).unwrap();
        v.push(k.squared_v);
        u.push(k.squared_u.unwrap());
    }
    let want = 2.0 * d as f64 / n as f64;
    let (mv, sv) = mean_se(&v);
    let (mu_, su) = mean_se(&u);
    eprintln!("E[KSD²_V] = {mv:.5} ± {sv:.5} vs {want}; E[KSD²_U] = {mu_:.6} ± {su:.6} vs 0");
    assert!(
        (mv - want).abs() <= 4.0 * sv,
        "E[KSD²_V] {mv} ± {sv} vs {want}"
    );
    assert!(mu_.abs() <= 4.0 * su, "E[KSD²_U] {mu_} ± {su} vs 0");
}

/// §4.7.3: the tiled Gram-product KSD equals the naive double loop to 1e-12 relative at
/// n = 257, d = 7 on random (non-centred) inputs, for every tile size (1 row, a few rows, one
/// tile holding everything, the default), three kernels; linear KSD against its definition.
#[test]
fn tiled_equals_naive_double_loop() {
    let (n, d) = (257usize, 7usize);
    let mut x = normals(402, 0, n * d);
    x.iter_mut()
        .enumerate()
        .for_each(|(i, v)| *v = 3.0 + 2.0 * *v + (i % d) as f64);
    let s = normals(402, 1, n * d);
    let kernels = [
        imq(),
        Kernel::Imq(ImqKernel::new(1.7, -0.3).unwrap()),
        gauss(40.0),
    ];
    for kernel in &kernels {
        let (v, u) = naive_ksd(kernel, &x, &s, d);
        for tile in [1usize, 5, 64, 100, 256, 257, 1000] {
            let k = ksd_with_tile(&x, &s, d, kernel, tile).unwrap();
            let rel_v = ((k.squared_v - v) / v).abs();
            let rel_u = ((k.squared_u.unwrap() - u) / u).abs();
            assert!(
                rel_v <= 1e-12 && rel_u <= 1e-12,
                "{kernel:?}, tile {tile}: V {} vs {v} (rel {rel_v:e}), U {} vs {u} (rel {rel_u:e})",
                k.squared_v,
                k.squared_u.unwrap()
            );
        }
        let k = ksd(&x, &s, d, kernel).unwrap();
        assert_eq!(k.ksd, k.squared_v.sqrt());
        // Linear KSD: the first half against the second, the odd last point dropped.
        let m = n / 2;
        let h: Vec<f64> = (0..m)
            .map(|a| {
                let b = a + m;
                naive_stein_kernel(
                    kernel,
                    &x[a * d..(a + 1) * d],
                    &x[b * d..(b + 1) * d],
                    &s[a * d..(a + 1) * d],
                    &s[b * d..(b + 1) * d],
                )
            })
            .collect();
        let lin = linear_ksd(&x, &s, d, kernel).unwrap();
        assert!(
            ((lin - mean(&h)) / mean(&h)).abs() <= 1e-12,
            "linear KSD {lin} vs {}",
            mean(&h)
        );
    }
}

/// Must-show 1: draws from N(0, 1.2²) scored against a N(0, 1) target are clearly worse than
/// exact draws. 100 replicates of n = 2000 each; the overdispersed KSDs must exceed the exact
/// draws' 99 % quantile in at least 95 % of replicates, and their mean must exceed the exact
/// mean by more than 10 null standard deviations.
#[test]
fn overdispersed_draws_have_larger_ksd() {
    let (n, reps) = (2000usize, 100u64);
    let mu = [0.0];
    let mut exact = Vec::new();
    let mut wide = Vec::new();
    for r in 0..reps {
        let x = normal_draws(403, r, n, &mu, 1.0);
        exact.push(
            ksd(&x, &normal_scores(&x, &mu, 1.0), 1, &imq())
                .unwrap()
                .ksd,
        );
        let y = normal_draws(404, r, n, &mu, 1.2);
        wide.push(
            ksd(&y, &normal_scores(&y, &mu, 1.0), 1, &imq())
                .unwrap()
                .ksd,
        );
    }
    let q99 = quantile(&exact, 0.99);
    let above = wide.iter().filter(|&&w| w > q99).count() as f64 / reps as f64;
    let null_sd = var(&exact).sqrt();
    eprintln!(
        "KSD exact {:.4} (sd {null_sd:.4}, 99 % {q99:.4}); N(0, 1.2²) {:.4} (sd {:.4}); {:.0} % above",
        mean(&exact),
        mean(&wide),
        var(&wide).sqrt(),
        100.0 * above
    );
    assert!(
        above >= 0.95,
        "only {above} of overdispersed KSDs above the null 99 % quantile"
    );
    assert!(mean(&wide) - mean(&exact) > 10.0 * null_sd);
}

/// Same seed, same bits, whatever the number of threads (KSD tiles and FSSD chunks are summed
/// in a fixed order).
#[test]
fn results_do_not_depend_on_the_thread_count() {
    let (n, d) = (3000usize, 3usize);
    // Heavy-tailed values (normal cubes), so that a different summation order changes bits.
    let x: Vec<f64> = normals(405, 0, n * d).iter().map(|v| v * v * v).collect();
    let s: Vec<f64> = normals(405, 1, n * d)
        .iter()
        .map(|v| 3.0 * v * v * v)
        .collect();
    let run = || {
        let k = ksd(&x, &s, d, &imq()).unwrap();
        let g = ksd(&x, &s, d, &gauss(3.0)).unwrap();
        let opt = fssd_opt(
            &x,
            &s,
            d,
            &gauss(3.0),
            &FssdOptSettings {
                steps: 20,
                ..Default::default()
            },
            &mut stream(9, 0),
        )
        .unwrap();
        (k, g, opt)
    };
    let one = in_pool(1, run);
    let two = in_pool(2, run);
    let three = in_pool(3, run);
    for other in [&two, &three] {
        assert_eq!(one.0.squared_v.to_bits(), other.0.squared_v.to_bits());
        assert_eq!(
            one.0.squared_u.unwrap().to_bits(),
            other.0.squared_u.unwrap().to_bits()
        );
        assert_eq!(one.1.squared_v.to_bits(), other.1.squared_v.to_bits());
        assert_eq!(one.2, other.2, "FSSD-opt differs with the thread count");
    }
}

// ---------------------------------------------------------------------------------------------
// FSSD
// ---------------------------------------------------------------------------------------------

/// §4.7.4: d = 1, sample {0, 1}, s = −x, one location v = 0.5. IMQ: ξ = (0.5·1.25^(−3/2),
/// −1.25^(−1/2) − 0.5·1.25^(−3/2)), so FSSD²_V = 1/5 and FSSD²_U = −0.448 exactly; Gaussian
/// σ² = 1: ξ = (0.5, −1.5)·e^(−1/8), FSSD²_V = 0.25·e^(−1/4), FSSD²_U = −0.75·e^(−1/4).
#[test]
fn fssd_small_case() {
    let x = [0.0, 1.0];
    let s = [0.0, -1.0];
    let f = fssd(&x, &s, 1, &imq(), &[0.5]).unwrap();
    close(f.squared_v, 0.2, 1e-12, "IMQ FSSD²_V");
    close(f.squared_u, -0.448, 1e-12, "IMQ FSSD²_U");
    close(f.value, 0.2f64.sqrt(), 1e-12, "IMQ FSSD_V");
    let g = fssd(&x, &s, 1, &gauss(1.0), &[0.5]).unwrap();
    let e = (-0.25f64).exp();
    close(g.squared_v, 0.25 * e, 1e-12, "Gaussian FSSD²_V");
    close(g.squared_u, -0.75 * e, 1e-12, "Gaussian FSSD²_U");
    // The reference's rounded numbers.
    close(g.squared_v, 0.1947002, 1e-7, "Gaussian FSSD²_V (reference)");
    close(
        g.squared_u,
        -0.5841006,
        1e-7,
        "Gaussian FSSD²_U (reference)",
    );
}

/// §4.7.5: target N(0, I_2), draws from N(μ, I_2), Gaussian kernel σ² = 1.5, three fixed
/// locations: E[FSSD²_U] = (‖μ‖²/(dJ))·(σ²/(σ²+1))^d·Σ_j exp(−‖μ − v_j‖²/(σ²+1)) = 0.03361570;
/// and 0 under q = π. 4000 replicates of n = 200, tolerance 4 standard errors.
#[test]
fn fssd_gaussian_closed_form() {
    let (d, n, reps, s2) = (2usize, 200usize, 4000u64, 1.5f64);
    let mu = [0.5, -0.3];
    let v = [0.0, 0.0, 1.0, 1.0, -1.0, 0.5];
    let j = v.len() / d;
    let mu2: f64 = mu.iter().map(|m| m * m).sum();
    let want = mu2 / (d * j) as f64
        * (s2 / (s2 + 1.0)).powi(d as i32)
        * v.chunks_exact(d)
            .map(|vj| {
                let dist: f64 = vj.iter().zip(&mu).map(|(a, b)| (a - b) * (a - b)).sum();
                (-dist / (s2 + 1.0)).exp()
            })
            .sum::<f64>();
    close(want, 0.03361570, 5e-9, "closed form");
    let (mut shifted, mut null) = (Vec::new(), Vec::new());
    for r in 0..reps {
        let x = normal_draws(406, r, n, &mu, 1.0);
        let sc = normal_scores(&x, &[0.0, 0.0], 1.0);
        shifted.push(fssd(&x, &sc, d, &gauss(s2), &v).unwrap().squared_u);
        let y = normal_draws(407, r, n, &[0.0, 0.0], 1.0);
        let sy = normal_scores(&y, &[0.0, 0.0], 1.0);
        null.push(fssd(&y, &sy, d, &gauss(s2), &v).unwrap().squared_u);
    }
    let (m, se) = mean_se(&shifted);
    let (m0, se0) = mean_se(&null);
    eprintln!("E[FSSD²_U] = {m:.6} ± {se:.6} vs {want:.6}; under π {m0:.7} ± {se0:.7}");
    assert!((m - want).abs() <= 4.0 * se);
    assert!(m0.abs() <= 4.0 * se0);
}

/// Central finite differences (step 10⁻⁶) of the objectives match the analytic gradients to
/// 10⁻⁶ relative error (§4.7.6), for both kernels, both objectives, the locations and the
/// Gaussian log σ².
#[test]
fn fssd_gradients_match_finite_differences() {
    let (n, d) = (60usize, 3usize);
    let x = normal_draws(408, 0, n, &[0.3, -0.2, 0.1], 1.1);
    let s = normal_scores(&x, &[0.0; 3], 1.0);
    let v = normal_draws(408, 1, 4, &[0.0; 3], 0.8);
    let h = 1e-6;
    for kernel in [
        imq(),
        Kernel::Imq(ImqKernel::new(0.7, -0.8).unwrap()),
        gauss(1.3),
    ] {
        for objective in [FssdObjective::PowerCriterion, FssdObjective::UStatistic] {
            let f = |loc: &[f64], kern: &Kernel| {
                objective_and_gradient(&x, &s, d, kern, loc, objective, 1e-2)
                    .unwrap()
                    .value
            };
            let g = objective_and_gradient(&x, &s, d, &kernel, &v, objective, 1e-2).unwrap();
            let scale = g.locations.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            assert!(scale > 0.0);
            for i in 0..v.len() {
                let (mut p, mut m) = (v.clone(), v.clone());
                p[i] += h;
                m[i] -= h;
                let fd = (f(&p, &kernel) - f(&m, &kernel)) / (2.0 * h);
                let err = (g.locations[i] - fd).abs() / fd.abs().max(scale);
                assert!(
                    err <= 1e-6,
                    "{kernel:?} {objective:?} location coordinate {i}: {} vs FD {fd} (rel {err:e})",
                    g.locations[i]
                );
            }
            match kernel {
                Kernel::Gaussian(k) => {
                    let l = k.sigma2().ln();
                    let at = |l: f64| f(&v, &gauss(l.exp()));
                    let fd = (at(l + h) - at(l - h)) / (2.0 * h);
                    let an = g.log_sigma2.unwrap();
                    let err = (an - fd).abs() / fd.abs().max(1e-3 * scale);
                    assert!(
                        err <= 1e-6,
                        "{objective:?} log σ²: {an} vs FD {fd} (rel {err:e})"
                    );
                }
                _ => assert_eq!(g.log_sigma2, None),
            }
        }
    }
}

/// J = 10 initial locations are pairwise distinct and drawn from the Gaussian fitted to the
/// draws, both with the Cholesky factor (D ≤ n) and with the matrix-free form (D > n): the
/// mean and covariance of 4000 locations match x̄ and C within Monte Carlo error.
#[test]
fn initial_locations_are_distinct_and_fitted() {
    for (n, d) in [(200usize, 3usize), (12, 30)] {
        let x = normal_draws(409, n as u64, n, &vec![1.0; d], 2.0);
        let locs = initial_locations(&x, d, 10, &mut stream(10, 0)).unwrap();
        assert_eq!(locs.len(), 10 * d);
        for a in 0..10 {
            for b in 0..a {
                let dist: f64 = (0..d)
                    .map(|c| (locs[a * d + c] - locs[b * d + c]).powi(2))
                    .sum::<f64>()
                    .sqrt();
                assert!(dist > 1e-3, "locations {a} and {b} coincide (n {n}, d {d})");
            }
        }
        // Fit: sample mean and covariance of many locations against x̄ and C (two coordinates).
        let m = 4000;
        let many = initial_locations(&x, d, m, &mut stream(11, 0)).unwrap();
        for (i, j) in [(0usize, 0usize), (0, 1), (d - 1, d - 1)] {
            let xi = common::column(&x, d, i);
            let xj = common::column(&x, d, j);
            let (mi, mj) = (mean(&xi), mean(&xj));
            let cov: f64 = xi
                .iter()
                .zip(&xj)
                .map(|(a, b)| (a - mi) * (b - mj))
                .sum::<f64>()
                / (n - 1) as f64;
            let li = common::column(&many, d, i);
            let lj = common::column(&many, d, j);
            let (lmi, lmj) = (mean(&li), mean(&lj));
            let prods: Vec<f64> = li
                .iter()
                .zip(&lj)
                .map(|(a, b)| (a - lmi) * (b - lmj))
                .collect();
            let (c_hat, c_se) = mean_se(&prods);
            assert!(
                (c_hat - cov).abs() <= 4.0 * c_se + 1e-3 * cov.abs(),
                "n {n}, d {d}: Cov[{i},{j}] of locations {c_hat} ± {c_se} vs {cov}"
            );
            if i == j {
                let se = (var(&li) / m as f64).sqrt();
                assert!((lmi - mi).abs() <= 4.0 * se, "mean[{i}] {lmi} vs {mi}");
            }
        }
    }
}

/// After FSSD-opt the training objective is not below its initial value, and against a shifted
/// target it has increased; the same with the U-statistic objective.
#[test]
fn fssd_opt_improves_the_objective() {
    let d = 2;
    let x = normal_draws(410, 0, 1000, &[0.6, 0.0], 1.0);
    let s = normal_scores(&x, &[0.0, 0.0], 1.0);
    for (kernel, objective) in [
        (imq(), FssdObjective::PowerCriterion),
        (gauss(1.0), FssdObjective::PowerCriterion),
        (imq(), FssdObjective::UStatistic),
    ] {
        let settings = FssdOptSettings {
            objective,
            learning_rate: 1e-2,
            ..Default::default()
        };
        let opt = fssd_opt(&x, &s, d, &kernel, &settings, &mut stream(12, 0)).unwrap();
        eprintln!(
            "{kernel:?} {objective:?}: objective {:.5} -> {:.5}",
            opt.initial_objective, opt.final_objective
        );
        assert!(opt.final_objective >= opt.initial_objective);
        assert!(
            opt.final_objective > 1.02 * opt.initial_objective,
            "{kernel:?} {objective:?}: no improvement"
        );
        assert_ne!(opt.locations, opt.initial_locations);
        if objective == FssdObjective::PowerCriterion {
            assert_eq!((opt.train_points, opt.test_points), (200, 800));
        }
    }
}

/// Must-show 2: FSSD at random locations and FSSD-opt are ≈ 0 for exact draws (FSSD²_U
/// consistent with 0 over replicates) and have power against a shifted and a rescaled target:
/// every replicate's FSSD_V against those exceeds the largest exact-draw value.
#[test]
fn fssd_and_fssd_opt_detect_shift_and_scale() {
    let (d, n, reps) = (2usize, 500usize, 20u64);
    let zero = [0.0, 0.0];
    for (label, kernel) in [("IMQ", imq()), ("Gaussian", gauss(2.0))] {
        let mut null_u = Vec::new();
        let mut null_v = Vec::new();
        let mut opt_null = Vec::new();
        let mut alt = Vec::new();
        for r in 0..reps {
            let x = normal_draws(411, r, n, &zero, 1.0);
            let sx = normal_scores(&x, &zero, 1.0);
            let locs = initial_locations(&x, d, 10, &mut stream(13, r)).unwrap();
            let f = fssd(&x, &sx, d, &kernel, &locs).unwrap();
            null_u.push(f.squared_u);
            null_v.push(f.value);
            let settings = FssdOptSettings::default();
            let o = fssd_opt(&x, &sx, d, &kernel, &settings, &mut stream(14, r)).unwrap();
            opt_null.push(o.value.value);
            // Shifted: draws from N((0.5, 0), I); rescaled: draws from N(0, 1.5²·I).
            let y = normal_draws(412, r, n, &[0.5, 0.0], 1.0);
            let z = normal_draws(413, r, n, &zero, 1.5);
            for w in [y, z] {
                let sw = normal_scores(&w, &zero, 1.0);
                let locs = initial_locations(&w, d, 10, &mut stream(15, r)).unwrap();
                let plain = fssd(&w, &sw, d, &kernel, &locs).unwrap().value;
                let o = fssd_opt(&w, &sw, d, &kernel, &settings, &mut stream(16, r)).unwrap();
                alt.push((plain, o.value.value));
            }
        }
        let (mu, se) = mean_se(&null_u);
        let null_max = null_v
            .iter()
            .chain(&opt_null)
            .fold(0.0f64, |m, v| m.max(*v));
        let alt_min_plain = alt.iter().map(|a| a.0).fold(f64::INFINITY, f64::min);
        let alt_min_opt = alt.iter().map(|a| a.1).fold(f64::INFINITY, f64::min);
        eprintln!(
            "{label}: null FSSD²_U {mu:.2e} ± {se:.1e}; null FSSD_V max {null_max:.4}; \
             alternatives min {alt_min_plain:.4} (random locations), {alt_min_opt:.4} (opt)"
        );
        assert!(mu.abs() <= 4.0 * se, "{label}: null FSSD²_U {mu} ± {se}");
        assert!(null_v.iter().chain(&opt_null).all(|v| *v >= 0.0));
        assert!(
            alt_min_plain > null_max,
            "{label}: random locations lack power"
        );
        assert!(alt_min_opt > null_max, "{label}: FSSD-opt lacks power");
    }
}

// ---------------------------------------------------------------------------------------------
// Kernels, scores, report, errors
// ---------------------------------------------------------------------------------------------

/// Median heuristic by hand: 1-D points {0, 1, 3, 7} have distances {1, 2, 3, 4, 6, 7}, median
/// 3.5 (even count: the mean of the middle two), σ² = 12.25; {0, 1, 3}: median 2, σ² = 4. On
/// 3000 draws (subsample of 1000) it is reproducible and close to the full-sample value for
/// N(0, I_2) (median distance² = 2·2·ln 2 ≈ 2.77).
#[test]
fn median_heuristic() {
    let g = GaussianKernel::median_heuristic(&[0.0, 1.0, 3.0, 7.0], 1).unwrap();
    close(g.sigma2(), 12.25, 1e-12, "even count");
    let g = GaussianKernel::median_heuristic(&[0.0, 1.0, 3.0], 1).unwrap();
    close(g.sigma2(), 4.0, 1e-12, "odd count");
    let x = normals(414, 0, 3000 * 2);
    let a = GaussianKernel::median_heuristic(&x, 2).unwrap();
    let b = GaussianKernel::median_heuristic(&x, 2).unwrap();
    assert_eq!(a, b);
    let want = 4.0 * std::f64::consts::LN_2;
    assert!(
        (a.sigma2() - want).abs() < 0.15 * want,
        "{} vs {want}",
        a.sigma2()
    );
    assert!(matches!(
        GaussianKernel::median_heuristic(&[2.0, 2.0, 2.0], 1),
        Err(SteinError::Degenerate(_))
    ));
}

/// Full-batch scores at rows 0, k, 2k, … equal the closed-form score of the Gaussian target.
#[test]
fn full_batch_scores_at_thinned_draws() {
    let mean_ = [1.0, -2.0];
    let cov = [2.0, 0.5, 0.5, 1.0];
    let model = GaussianModel::target(&mean_, &cov).unwrap();
    let x = normals(415, 0, 11 * 2);
    let t = full_batch_scores(&model, &x, 2, 3).unwrap();
    assert_eq!(t.len(), 4); // rows 0, 3, 6, 9
    let prec = common::inverse(&cov, 2);
    for (k, (theta, s)) in t.draws.chunks(2).zip(t.scores.chunks(2)).enumerate() {
        assert_eq!(theta, &x[6 * k..6 * k + 2]);
        for i in 0..2 {
            let want: f64 = -(0..2)
                .map(|j| prec[i * 2 + j] * (theta[j] - mean_[j]))
                .sum::<f64>();
            close(s[i], want, 1e-12, "score");
        }
    }
    assert!(matches!(
        full_batch_scores(&model, &x, 2, 0),
        Err(SteinError::BadSetting(_))
    ));
    assert!(matches!(
        full_batch_scores(&model, &normals(415, 1, 9), 3, 1),
        Err(SteinError::ModelDimension { model: 2, draws: 3 })
    ));
}

/// `evaluate` returns what `ksd` and `fssd_opt` give, and serialises to JSON.
#[test]
fn evaluate_report() {
    let d = 3;
    let x = normal_draws(416, 0, 300, &[0.2, 0.0, 0.0], 1.0);
    let s = normal_scores(&x, &[0.0; 3], 1.0);
    let settings = SteinSettings {
        kernel: KernelSettings::Gaussian { sigma2: None },
        fssd: Some(FssdSettings::default()),
    };
    let r = evaluate(&x, &s, d, &settings).unwrap();
    let kernel = Kernel::Gaussian(GaussianKernel::median_heuristic(&x, d).unwrap());
    assert_eq!(r.kernel, kernel);
    assert_eq!(r.ksd, ksd(&x, &s, d, &kernel).unwrap());
    assert_eq!((r.draws, r.dim), (300, 3));
    let f = r.fssd.as_ref().unwrap();
    assert!(f.fssd >= 0.0 && f.final_objective >= f.initial_objective);
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["kernel"]["kind"], "gaussian");
    assert!(json["ksd"]["ksd"].as_f64().unwrap() > 0.0);
    assert!(json["fssd"]["fssd"].as_f64().is_some());
    // Settings round-trip through TOML as a run file would hold them.
    let text =
        "kernel = { kind = \"imq\", beta = -0.25 }\n[fssd]\nseed = 3\n[fssd.opt]\nsteps = 5\n";
    let parsed: SteinSettings = toml::from_str(text).unwrap();
    assert_eq!(parsed.fssd.as_ref().unwrap().opt.steps, 5);
    let r = evaluate(&x, &s, d, &parsed).unwrap();
    assert_eq!(r.detects_non_convergence, Some(true));
    assert!(toml::from_str::<SteinSettings>("kernl = 1").is_err());
}

/// Bad input gets a clear error naming the problem, never a panic.
#[test]
fn errors_name_the_problem() {
    let k = imq();
    let x = [0.0, 1.0, 2.0, 3.0];
    let s = [0.0, -1.0, -2.0, -3.0];
    assert_eq!(
        ksd(&x, &s[..3], 2, &k).unwrap_err(),
        SteinError::Ragged {
            what: "scores",
            len: 3,
            dim: 2
        }
    );
    assert!(matches!(
        ksd(&x, &s[..2], 2, &k),
        Err(SteinError::DimensionMismatch {
            draws: 2,
            scores: 1,
            ..
        })
    ));
    assert_eq!(ksd(&[], &[], 2, &k).unwrap_err(), SteinError::EmptySample);
    assert_eq!(ksd(&x, &s, 0, &k).unwrap_err(), SteinError::ZeroDimension);
    let mut bad = x;
    bad[3] = f64::NAN;
    let e = ksd(&bad, &s, 2, &k).unwrap_err();
    assert!(matches!(
        e,
        SteinError::NonFinite {
            what: "draws",
            row: 1,
            col: 1,
            ..
        }
    ));
    assert!(e.to_string().contains("row 1"), "{e}");
    let e = fssd(&x, &s, 2, &k, &[0.0, f64::INFINITY]).unwrap_err();
    assert!(matches!(
        e,
        SteinError::NonFinite {
            what: "locations",
            row: 0,
            col: 1,
            ..
        }
    ));
    // Kernel parameters.
    assert!(matches!(
        ImqKernel::new(0.0, -0.5),
        Err(SteinError::BadKernel(_))
    ));
    assert!(matches!(
        ImqKernel::new(1.0, 0.0),
        Err(SteinError::BadKernel(_))
    ));
    assert!(matches!(
        ImqKernel::new(f64::NAN, -0.5),
        Err(SteinError::BadKernel(_))
    ));
    assert!(matches!(
        GaussianKernel::new(-1.0),
        Err(SteinError::BadKernel(_))
    ));
    assert!(ImqKernel::default().detects_non_convergence());
    let outside = ImqKernel::new(1.0, -1.5).unwrap();
    assert!(!outside.detects_non_convergence());
    assert!(ksd(&x, &s, 2, &Kernel::Imq(outside)).is_ok());
    // Too few points.
    assert!(matches!(
        linear_ksd(&x[..2], &s[..2], 2, &k),
        Err(SteinError::TooFewPoints {
            needed: 2,
            got: 1,
            ..
        })
    ));
    assert!(matches!(
        fssd(&x[..2], &s[..2], 2, &k, &[0.0, 0.0]),
        Err(SteinError::TooFewPoints {
            needed: 2,
            got: 1,
            ..
        })
    ));
    let three = [0.0, 1.0, 2.0];
    assert!(matches!(
        fssd_opt(
            &three,
            &three,
            1,
            &k,
            &FssdOptSettings::default(),
            &mut stream(1, 0)
        ),
        Err(SteinError::TooFewPoints {
            needed: 4,
            got: 3,
            ..
        })
    ));
    // Settings.
    let bad_lr = FssdOptSettings {
        learning_rate: -1.0,
        ..Default::default()
    };
    let e = fssd_opt(&x, &s, 1, &k, &bad_lr, &mut stream(1, 0)).unwrap_err();
    assert!(matches!(e, SteinError::BadSetting(_)) && e.to_string().contains("learning rate"));
    let no_locs = FssdOptSettings {
        num_locations: 0,
        ..Default::default()
    };
    assert!(matches!(
        fssd_opt(&x, &s, 1, &k, &no_locs, &mut stream(1, 0)),
        Err(SteinError::BadSetting(_))
    ));
    assert!(matches!(
        ksd_with_tile(&x, &s, 2, &k, 0),
        Err(SteinError::BadSetting(_))
    ));
}

/// FSSD-opt's default kernel is the Gaussian at the draws' median distance, because a fixed
/// width fails on narrow posteriors (docs/experiments/mamba_fssd.md). On N(0, 0.01²·I₃), the
/// default ranks a sample from the target below one 100× too wide and one 3.3× too narrow (a
/// chain that barely leaves its start); the paper's IMQ kernel (c = 1), flat across the
/// target, ranks the too-narrow sample first (measured: 1.09 against 5.88).
#[test]
fn fssd_default_kernel_ranks_narrow_posteriors() {
    let (d, sd) = (3, 0.01);
    let good = normal_draws(7, 0, 400, &[0.0; 3], sd);
    let wide = normal_draws(7, 1, 400, &[0.0; 3], 100.0 * sd);
    let narrow = normal_draws(7, 1, 400, &[0.0; 3], 0.3 * sd);
    let value = |x: &[f64], kernel: KernelSettings| {
        let settings = SteinSettings {
            kernel: KernelSettings::default(),
            fssd: Some(FssdSettings {
                kernel,
                ..FssdSettings::default()
            }),
        };
        let s = normal_scores(x, &[0.0; 3], sd * sd);
        evaluate(x, &s, d, &settings).unwrap().fssd.unwrap().fssd
    };
    let default = FssdSettings::default().kernel;
    assert_eq!(default, KernelSettings::Gaussian { sigma2: None });
    let g = value(&good, default);
    let (w, n) = (value(&wide, default), value(&narrow, default));
    assert!(
        g < w && g < n,
        "default kernel: target {g}, too wide {w}, too narrow {n}"
    );
    let imq = KernelSettings::default();
    let (g, n) = (value(&good, imq), value(&narrow, imq));
    assert!(n < g, "IMQ c = 1: target {g} against too narrow {n}");
}
