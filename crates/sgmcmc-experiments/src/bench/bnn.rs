//! `sgmcmc bench --bnn DIR`: the 784-100-10 network's minibatch gradient on MNIST (issue 8,
//! must-show 2), one thread, against the faer GEMM peak measured for the same shapes.
//!
//! FLOPs per gradient at batch n (I = 784, H = 100, K = 10): the two large GEMMs X·B and
//! Xᵀ·dZ1, 2·n·I·H each, plus the three small ones H·A, dZ2·Aᵀ and Hᵀ·dZ2, 2·n·H·K each
//! (exp/log and the elementwise softmax work are not counted). The GEMM peak is the rate of
//! exactly those two large products (X·B: n×I · I×H, Xᵀ·dZ1: I×n · n×H) on stored operands,
//! sequential, one thread: the bound a batched gradient through faer can reach. For context
//! the 1024³ product's rate is printed too.

use super::{BenchArgs, median, rate};
use super::{BenchError, Result};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatMut, MatRef, Par};
use sgmcmc::cpu::clear_upper_vector_state;
use sgmcmc::data::{Dataset, Features, idx::mnist_pair};
use sgmcmc::model::{BNN_DEFAULT_HIDDEN, Bnn, DataIndex, Model, Scratch};
use sgmcmc::rng::{chain_stream, stream};
use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

/// The paper code's logged NN rate (reference peers.md): ≈ 390 iterations/s.
const PAPER_IT_S: f64 = 390.0;

/// Seconds per call of the two large GEMMs of one gradient (X·B and Xᵀ·dZ1), median of
/// `repeats` blocks of at least `seconds`.
fn gemm_pair_seconds(n: usize, i: usize, h: usize, seconds: f64, repeats: usize) -> f64 {
    let x: Vec<f64> = (0..n * i).map(|k| ((k * 7) % 11) as f64 / 11.0).collect();
    let b: Vec<f64> = (0..i * h).map(|k| ((k * 5) % 13) as f64 - 6.0).collect();
    let dz: Vec<f64> = (0..n * h).map(|k| ((k * 3) % 17) as f64 - 8.0).collect();
    let mut z = vec![0.0; n * h];
    let mut g = vec![0.0; i * h];
    let r = rate(seconds, repeats, || {
        matmul(
            MatMut::from_row_major_slice_mut(&mut z, n, h),
            Accum::Replace,
            MatRef::from_row_major_slice(&x, n, i),
            MatRef::from_row_major_slice(&b, i, h),
            1.0,
            Par::Seq,
        );
        matmul(
            MatMut::from_row_major_slice_mut(&mut g, i, h),
            Accum::Add,
            MatRef::from_row_major_slice(&x, n, i).transpose(),
            MatRef::from_row_major_slice(&dz, n, h),
            1e-9,
            Par::Seq,
        );
        clear_upper_vector_state();
    });
    black_box((z[0], g[0]));
    1.0 / r
}

/// GFLOP/s of a sequential 1024³ faer product (median of `repeats`).
fn square_peak(repeats: usize) -> f64 {
    let n = 1024;
    let a = Mat::<f64>::from_fn(n, n, |i, j| ((i * 7 + j * 3) % 11) as f64 - 5.0);
    let b = Mat::<f64>::from_fn(n, n, |i, j| ((i * 5 + j) % 13) as f64 - 6.0);
    let mut c = Mat::<f64>::zeros(n, n);
    let times = (0..repeats.max(3))
        .map(|_| {
            let t = Instant::now();
            matmul(
                c.as_mut(),
                Accum::Replace,
                a.as_ref(),
                b.as_ref(),
                1.0,
                Par::Seq,
            );
            clear_upper_vector_state();
            t.elapsed().as_secs_f64()
        })
        .collect();
    black_box(c[(0, 0)]);
    2.0 * (n * n * n) as f64 / median(times) / 1e9
}

/// `sgmcmc bench --bnn DIR`.
pub fn bnn(args: &BenchArgs, dir: &Path) -> Result<()> {
    let batch = args.bnn_batch;
    let (images, labels) = mnist_pair::<f64>(dir, "train").map_err(|e| {
        BenchError::step(
            format!("--bnn {}: loading the MNIST train split", dir.display()),
            e,
        )
    })?;
    let rows = images.rows();
    if batch == 0 || batch > rows {
        return Err(BenchError::Setting(format!(
            "--bnn-batch must be in 1..={rows}"
        )));
    }
    let data = Dataset {
        features: Features::F64(images),
        targets: Some(labels.into_iter().map(f64::from).collect()),
        feature_names: Vec::new(),
        features_source: dir.display().to_string(),
        targets_source: None,
    };
    let model = Bnn::new(data, BNN_DEFAULT_HIDDEN, 1.0)?;
    let (ni, nh, nk) = (model.inputs(), model.hidden(), model.classes());
    println!(
        "sgmcmc bench --bnn: {ni}-{nh}-{nk} network (D = {}) on MNIST train (N = {rows}), batch {batch}, \
         one thread; median of {} x {:.1} s",
        model.dim(),
        args.repeats,
        args.seconds
    );
    let big = 4.0 * (batch * ni * nh) as f64;
    let flops = big + 6.0 * (batch * nh * nk) as f64;
    let pair = gemm_pair_seconds(batch, ni, nh, args.seconds, args.repeats);
    let peak = big / pair;
    println!(
        "faer GEMM peak, the gradient's two large shapes ({batch}x{ni} . {ni}x{nh} and {ni}x{batch} . {batch}x{nh}): \
         {:.1} GFLOP/s ({:.3} ms per pair); 1024^3 product: {:.1} GFLOP/s",
        peak / 1e9,
        1e3 * pair,
        square_peak(args.repeats)
    );

    let mut rng = chain_stream(1, 0);
    let mut theta = vec![0.0; model.dim()];
    model.sample_prior(&mut rng, &mut theta)?;
    // 64 fixed random batches, cycled: index draws are not part of the gradient's cost here.
    let mut idx_rng = stream(2, 0);
    let batches: Vec<Vec<DataIndex>> = (0..64)
        .map(|_| {
            rand::seq::index::sample(&mut idx_rng, rows, batch)
                .into_iter()
                .map(|i| i as DataIndex)
                .collect()
        })
        .collect();
    let mut grad = vec![0.0; model.dim()];
    let mut scratch = Scratch::new();
    let weight = rows as f64 / batch as f64;
    let mut k = 0usize;
    let grads_s = rate(args.seconds, args.repeats, || {
        grad.fill(0.0);
        model.add_grad_log_lik(&theta, &batches[k % 64], weight, &mut grad, &mut scratch);
        model.add_grad_log_prior(&theta, &mut grad);
        k += 1;
    });
    black_box(grad[0]);
    let achieved = flops * grads_s;
    println!(
        "NN gradient (add_grad_log_lik + prior): {grads_s:.0} gradients/s ({:.3} ms), \
         {:.1} MFLOP each, {:.1} GFLOP/s = {:.0} % of the measured GEMM peak; paper code ≈ {PAPER_IT_S:.0} it/s ({:.2}x)",
        1e3 / grads_s,
        flops / 1e6,
        achieved / 1e9,
        100.0 * achieved / peak,
        grads_s / PAPER_IT_S
    );

    let it_s = super::sgld_rate(&model, batch, &theta, args.seconds, args.repeats)?;
    println!(
        "SGLD (step 1e-5, minibatch {batch} without replacement): {it_s:.0} iterations/s ({:.2}x the paper code)",
        it_s / PAPER_IT_S
    );
    Ok(())
}
