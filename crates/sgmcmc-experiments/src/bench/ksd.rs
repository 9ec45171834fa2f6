//! `sgmcmc bench --ksd`: seconds per KSD (IMQ c = 1, β = −½, V-statistic) on all cores, and
//! seconds per full-batch score at thinned draws of the synthetic logistic regression.
//!
//! Cost model of one KSD of P draws in D dimensions with tiles of B rows (T = ⌈P/B⌉ tiles):
//! every tile pair I ≤ J takes the four Gram products x_aᵀx_b, x_aᵀs_b, s_aᵀx_b and s_aᵀs_b
//! of its rows, 2·(2|I|)·(2|J|)·D FLOPs, in all ≈ 4P²D·(1 + B/P), plus the kernel arithmetic on
//! the P(P−1)/2 pairs a < b: [`KERNEL_FLOPS_PER_PAIR`] operations each, a division and a square
//! root counted as one each. (The library's pair kernel skips the panels below the diagonal of
//! the diagonal tiles, so it does about B/(P + B) fewer multiply-adds than counted: 1.3 % at
//! P = 5,000.) Two limits are measured on this machine: the faer GEMM peak (sequential 1024³
//! products, on one thread and on every thread at once) and the same Gram products as faer tile
//! GEMMs alone, without the kernel arithmetic (all threads; the library's design before its
//! fused pair kernel).
//!
//! Full-batch scores: one parallel pass over the N rows per kept draw (N·D reads, 4·N·D FLOPs
//! plus one exp per row); the memory bound is N·D·8 bytes at the sequential read bandwidth.

use super::{BenchError, Result};
use super::{block_rate, calls_per_block, median, sequential_bandwidth};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatMut, MatRef, Par};
use serde::Serialize;
use sgmcmc::cpu::clear_upper_vector_state;
use sgmcmc::data::synthetic;
use sgmcmc::estimator::{DRAWS_PER_PASS, FullDataEvaluator};
use sgmcmc::model::{Bernoulli, Glm, Model, NormalPrior};
use sgmcmc::rng::{fill_standard_normal, stream};
use sgmcmc::stein::{ImqKernel, KSD_TILE, Kernel, full_batch_scores, ksd_with_tile};
use std::hint::black_box;
use std::time::Instant;

/// The KSD sizes measured (P draws × D).
const SIZES: &[(usize, usize)] = &[(1_000, 10), (5_000, 10), (1_000, 100)];

/// Operations of the kernel arithmetic per pair a < b (IMQ, β = −½): ‖r‖² (3), (s_a − s_b)ᵀr
/// (3), u, 1/u, sqrt, u^(β−1), u^(β−2) (5), the four terms and their sum (8), the lane sum (1).
/// A nominal count, kept fixed so that rates compare across versions: the library's kernel
/// takes u^(−½) by Newton's iteration (about 26 operations per pair in all, none a division).
const KERNEL_FLOPS_PER_PAIR: f64 = 20.0;

/// Seed of the synthetic data (that of the plain bench and the demo).
const DATA_SEED: u64 = 20_211_118;

/// SGMCMCJax `imq_KSD` in f64, seconds (reference peers.md, "Stein discrepancy cost"): the
/// fastest and slowest of the current and legacy versions on a 2-core machine.
fn peer_seconds(p: usize, d: usize) -> Option<(f64, f64)> {
    match (p, d) {
        (1_000, 10) => Some((0.074, 0.115)),
        (5_000, 10) => Some((2.25, 2.9)),
        _ => None,
    }
}

#[derive(Serialize)]
struct KsdRow {
    draws: usize,
    dim: usize,
    tile: usize,
    ksd: f64,
    /// |tiled − direct double loop| / direct, KSD²_V.
    relative_difference_from_direct_loop: f64,
    seconds: f64,
    block_seconds: Vec<f64>,
    gram_flops: f64,
    kernel_flops: f64,
    gflops_per_second: f64,
    /// The same Gram products as faer tile GEMMs alone (no kernel arithmetic), seconds, all
    /// threads.
    gemm_only_seconds: f64,
    gemm_only_gflops_per_second: f64,
    peer_f64_seconds: Option<(f64, f64)>,
    speedup_vs_fastest_peer: Option<f64>,
}

#[derive(Serialize)]
struct ScoreRow {
    rows: usize,
    dim: usize,
    draws: usize,
    /// The block route (`full_batch_scores`: one pass over the data per 256 draws, GEMMs).
    seconds_per_draw: f64,
    block_seconds_per_draw: Vec<f64>,
    /// The same scores one exact pass per draw (`FullDataEvaluator::grad_log_posterior`).
    one_pass_per_draw_seconds_per_draw: f64,
    /// FLOPs per draw of the two products (Z = XΘᵀ, G = RᵀX): 4·N·d.
    gemm_flops_per_draw: f64,
    gflops_per_second: f64,
    fraction_of_gemm_peak: f64,
    /// Feature bytes read per draw by the block route (N·d·8 per pass of up to 256 draws).
    feature_bytes_per_draw: f64,
    sequential_read_gigabytes_per_second: f64,
    peer_f64_seconds_per_draw: (f64, f64),
}

#[derive(Serialize)]
struct KsdReport {
    command: String,
    threads: usize,
    seconds_per_block: f64,
    repeats: usize,
    kernel_flops_per_pair: f64,
    gemm_peak_gflops_one_thread: f64,
    gemm_peak_gflops_all_threads: f64,
    ksd: Vec<KsdRow>,
    scores: ScoreRow,
}

/// Median seconds per call of `f`, over `repeats` calibrated blocks of ≥ `seconds`; also the
/// per-block values.
fn seconds_per_call(seconds: f64, repeats: usize, mut f: impl FnMut()) -> (f64, Vec<f64>) {
    let calls = calls_per_block(seconds, &mut f);
    let blocks: Vec<f64> = (0..repeats)
        .map(|_| 1.0 / block_rate(calls, &mut f))
        .collect();
    (median(blocks.clone()), blocks)
}

/// GFLOP/s of sequential n³ faer products, one per thread on `threads` threads at once (the
/// shape of the KSD's parallelism: independent sequential GEMMs); median of `repeats`.
fn gemm_peak(n: usize, threads: usize, repeats: usize) -> f64 {
    use rayon::prelude::*;
    let a = Mat::<f64>::from_fn(n, n, |i, j| ((i * 7 + j * 3) % 11) as f64 - 5.0);
    let b = Mat::<f64>::from_fn(n, n, |i, j| ((i * 5 + j) % 13) as f64 - 6.0);
    let mut cs: Vec<Mat<f64>> = (0..threads).map(|_| Mat::zeros(n, n)).collect();
    let flops = 2.0 * (n * n * n) as f64 * threads as f64;
    let times: Vec<f64> = (0..repeats.max(3))
        .map(|_| {
            let t = Instant::now();
            cs.par_iter_mut().with_max_len(1).for_each(|c| {
                matmul(
                    c.as_mut(),
                    Accum::Replace,
                    a.as_ref(),
                    b.as_ref(),
                    1.0,
                    Par::Seq,
                );
                clear_upper_vector_state();
            });
            t.elapsed().as_secs_f64()
        })
        .collect();
    black_box(cs[0][(0, 0)]);
    flops / median(times)
}

/// KSD²_V by a direct double loop over all ordered pairs (no Gram products, no tiles): the
/// reference the tiled value must equal.
fn direct_ksd2(x: &[f64], s: &[f64], d: usize) -> f64 {
    let n = x.len() / d;
    let total: f64 = (0..n)
        .map(|a| {
            let (xa, sa) = (&x[a * d..(a + 1) * d], &s[a * d..(a + 1) * d]);
            let mut row = 0.0;
            for b in 0..n {
                let (xb, sb) = (&x[b * d..(b + 1) * d], &s[b * d..(b + 1) * d]);
                let (mut h, mut dr, mut r2) = (0.0, 0.0, 0.0);
                for i in 0..d {
                    let r = xa[i] - xb[i];
                    h += sa[i] * sb[i];
                    dr += (sa[i] - sb[i]) * r;
                    r2 += r * r;
                }
                // IMQ c = 1, β = −½ (reference §4.1): u^(−1/2), u^(−3/2), u^(−5/2).
                let u: f64 = 1.0 + r2;
                let p0 = 1.0 / u.sqrt();
                let (p1, p2) = (p0 / u, p0 / (u * u));
                row += h * p0 + p1 * dr + d as f64 * p1 - 3.0 * p2 * r2;
            }
            row
        })
        .sum();
    total / (n * n) as f64
}

/// FLOPs of the tile GEMMs for P rows, D columns and tiles of B rows.
fn gram_flops(p: usize, d: usize, b: usize) -> f64 {
    let len = |t: usize| b.min(p - t * b) as f64;
    let tiles = p.div_ceil(b);
    let mut total = 0.0;
    for i in 0..tiles {
        for j in i..tiles {
            total += 8.0 * len(i) * len(j) * d as f64;
        }
    }
    total
}

/// The tile GEMMs of a KSD alone, spread over rayon like the library's units.
fn gemm_only(z: &[f64], p: usize, d: usize, b: usize) -> f64 {
    use rayon::prelude::*;
    let tiles = p.div_ceil(b);
    let len = |t: usize| b.min(p - t * b);
    let sums: Vec<f64> = (0..tiles.div_ceil(2))
        .into_par_iter()
        .map_init(
            || vec![0.0; 4 * b * b],
            |out, u| {
                let mut acc = 0.0;
                let rows = if tiles - 1 - u != u {
                    vec![u, tiles - 1 - u]
                } else {
                    vec![u]
                };
                for i in rows {
                    for j in i..tiles {
                        let (li, lj) = (len(i), len(j));
                        let zi = MatRef::from_row_major_slice(
                            &z[2 * i * b * d..2 * (i * b + li) * d],
                            2 * li,
                            d,
                        );
                        let zj = MatRef::from_row_major_slice(
                            &z[2 * j * b * d..2 * (j * b + lj) * d],
                            2 * lj,
                            d,
                        );
                        let o = &mut out[..4 * li * lj];
                        matmul(
                            MatMut::from_row_major_slice_mut(o, 2 * li, 2 * lj),
                            Accum::Replace,
                            zi,
                            zj.transpose(),
                            1.0,
                            Par::Seq,
                        );
                        clear_upper_vector_state();
                        acc += o[0];
                    }
                }
                acc
            },
        )
        .collect();
    sums.iter().sum()
}

/// `sgmcmc bench --ksd`.
pub fn ksd(args: &super::BenchArgs) -> Result<()> {
    let tile = args.tile.unwrap_or(KSD_TILE);
    if tile == 0 {
        return Err(BenchError::Setting("--tile must be at least 1".to_string()));
    }
    if args.score_draws == 0 {
        return Err(BenchError::Setting(
            "--score-draws must be at least 1".to_string(),
        ));
    }
    let threads = rayon::current_num_threads();
    println!(
        "sgmcmc bench --ksd: IMQ KSD (c = 1, beta = -1/2, V-statistic), tiles of {tile} rows, {threads} \
         threads; median of {} blocks of {:.1} s",
        args.repeats, args.seconds
    );
    let peak1 = gemm_peak(1024, 1, args.repeats);
    let peak_all = gemm_peak(1024, threads, args.repeats);
    println!(
        "faer GEMM peak (1024^3, f64): {:.1} GFLOP/s on one thread, {:.1} GFLOP/s on {threads} threads",
        peak1 / 1e9,
        peak_all / 1e9
    );
    let kernel = Kernel::Imq(ImqKernel::default());
    let mut rows = Vec::new();
    println!(
        "\n{:>6} {:>4} {:>12} {:>10} {:>9} {:>9} {:>8} {:>9} {:>10} {:>8} {:>13} {:>9}",
        "P",
        "D",
        "KSD",
        "rel diff",
        "ms/KSD",
        "GFLOP",
        "GFLOP/s",
        "of peak",
        "GEMM ms",
        "of GEMM",
        "peer f64 s",
        "speed-up"
    );
    for (k, &(p, d)) in SIZES.iter().enumerate() {
        // Draws from N(0, I) and the scores of a slightly wider target N(0, 1.1²·I).
        let mut x = vec![0.0; p * d];
        fill_standard_normal(&mut stream(5, k as u64), &mut x);
        let s: Vec<f64> = x.iter().map(|v| -v / 1.21).collect();
        let value = ksd_with_tile(&x, &s, d, &kernel, tile)?;
        let direct = direct_ksd2(&x, &s, d);
        let rel = ((value.squared_v - direct) / direct).abs();
        let (secs, blocks) = seconds_per_call(args.seconds, args.repeats, || {
            black_box(ksd_with_tile(&x, &s, d, &kernel, tile).expect("valid input"));
        });
        // The tile layout of the library, for the GEMM-only limit.
        let mut z = vec![0.0; 2 * p * d];
        for t in 0..p.div_ceil(tile) {
            let (first, len) = (t * tile, tile.min(p - t * tile));
            z[2 * first * d..(2 * first + len) * d]
                .copy_from_slice(&x[first * d..(first + len) * d]);
            z[(2 * first + len) * d..2 * (first + len) * d]
                .copy_from_slice(&s[first * d..(first + len) * d]);
        }
        let (gemm_secs, _) = seconds_per_call(args.seconds, args.repeats, || {
            black_box(gemm_only(&z, p, d, tile));
        });
        let gram = gram_flops(p, d, tile);
        let kern = KERNEL_FLOPS_PER_PAIR * (p * (p - 1) / 2) as f64;
        let rate = (gram + kern) / secs;
        let peer = peer_seconds(p, d);
        let speedup = peer.map(|(lo, _)| lo / secs);
        println!(
            "{:>6} {:>4} {:>12.9} {:>10.1e} {:>9.3} {:>9.3} {:>8.1} {:>8.0}% {:>10.3} {:>7.0}% {:>13} {:>9}",
            p,
            d,
            value.ksd,
            rel,
            secs * 1e3,
            (gram + kern) / 1e9,
            rate / 1e9,
            100.0 * rate / peak_all,
            gemm_secs * 1e3,
            100.0 * gemm_secs / secs,
            peer.map_or("-".into(), |(lo, hi)| format!("{lo}-{hi}")),
            speedup.map_or("-".into(), |s| format!("{s:.0}x"))
        );
        rows.push(KsdRow {
            draws: p,
            dim: d,
            tile,
            ksd: value.ksd,
            relative_difference_from_direct_loop: rel,
            seconds: secs,
            block_seconds: blocks,
            gram_flops: gram,
            kernel_flops: kern,
            gflops_per_second: rate / 1e9,
            gemm_only_seconds: gemm_secs,
            gemm_only_gflops_per_second: gram / gemm_secs / 1e9,
            peer_f64_seconds: peer,
            speedup_vs_fastest_peer: speedup,
        });
    }

    // Full-batch scores at thinned draws.
    let (data, theta_star) = synthetic::logistic_regression(args.rows, args.dim, DATA_SEED);
    let model = Glm::new(data, Bernoulli, NormalPrior::new(10.0)?, false)?;
    let d = model.dim();
    let mut draws = vec![0.0; args.score_draws * d];
    fill_standard_normal(&mut stream(6, 0), &mut draws);
    for row in draws.chunks_exact_mut(d) {
        row.iter_mut()
            .zip(&theta_star)
            .for_each(|(v, t)| *v = t + 1e-3 * *v);
    }
    let bandwidth = sequential_bandwidth(model.features(), args.repeats);
    let (secs, blocks) = seconds_per_call(args.seconds, args.repeats, || {
        black_box(full_batch_scores(&model, &draws, d, 1).expect("valid draws"));
    });
    let per_draw = secs / args.score_draws as f64;
    let mut eval = FullDataEvaluator::new(&model);
    let mut score = vec![0.0; d];
    let (one_pass, _) = seconds_per_call(args.seconds, args.repeats, || {
        eval.grad_log_posterior(&draws[..d], &mut score);
        black_box(&score);
    });
    let flops = 4.0 * args.rows as f64 * d as f64;
    let passes = args.score_draws.div_ceil(DRAWS_PER_PASS);
    let bytes = (args.rows * d * 8 * passes) as f64 / args.score_draws as f64;
    let scores = ScoreRow {
        rows: args.rows,
        dim: d,
        draws: args.score_draws,
        seconds_per_draw: per_draw,
        block_seconds_per_draw: blocks.iter().map(|b| b / args.score_draws as f64).collect(),
        one_pass_per_draw_seconds_per_draw: one_pass,
        gemm_flops_per_draw: flops,
        gflops_per_second: flops / per_draw / 1e9,
        fraction_of_gemm_peak: flops / per_draw / peak_all,
        feature_bytes_per_draw: bytes,
        sequential_read_gigabytes_per_second: bandwidth / 1e9,
        peer_f64_seconds_per_draw: (0.0164, 0.0178),
    };
    println!(
        "\nfull-batch scores, synthetic logistic N = {}, D = {d}, {} draws: {:.3} ms per draw \
         (one pass over the data per draw: {:.2} ms, {:.1}x); {:.0} MFLOP per draw in two GEMMs, \
         {:.1} GFLOP/s = {:.0} % of the GEMM peak; {:.1} MB of features read per draw \
         (sequential read {:.1} GB/s); SGMCMCJax f64: 16.4-17.8 ms per draw",
        args.rows,
        args.score_draws,
        per_draw * 1e3,
        one_pass * 1e3,
        one_pass / per_draw,
        flops / 1e6,
        scores.gflops_per_second,
        100.0 * scores.fraction_of_gemm_peak,
        bytes / 1e6,
        scores.sequential_read_gigabytes_per_second
    );
    let report = KsdReport {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        threads,
        seconds_per_block: args.seconds,
        repeats: args.repeats,
        kernel_flops_per_pair: KERNEL_FLOPS_PER_PAIR,
        gemm_peak_gflops_one_thread: peak1 / 1e9,
        gemm_peak_gflops_all_threads: peak_all / 1e9,
        ksd: rows,
        scores,
    };
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report).expect("report serialises");
        std::fs::write(path, text + "\n")
            .map_err(|e| BenchError::step(format!("cannot write {}", path.display()), e))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
