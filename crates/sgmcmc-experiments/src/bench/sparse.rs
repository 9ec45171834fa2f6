//! `sgmcmc bench --libsvm FILE`: logistic regression on a LIBSVM file (issue 24, must-show 5:
//! a9a) with its rows stored sparse (CSR) and dense, one thread: the cost per row of a
//! full-data gradient (what MAP, NUTS and full-batch scores make) and of a uniform minibatch
//! gradient, beside the bytes each storage reads per row.
//!
//! Per row the dense kernel reads d values and makes 2d multiply-adds (xᵀw, then g += r·x);
//! the sparse one reads nnz values and nnz column indices and makes 2·nnz multiply-adds.

use super::{BenchArgs, BenchError, Result, rate};
use sgmcmc::data::{CsrMatrix, Dataset, Features, load_libsvm};
use sgmcmc::estimator::FullDataEvaluator;
use sgmcmc::model::{Bernoulli, DataIndex, Glm, Model, NormalPrior, Scratch};
use sgmcmc::rng::stream;
use std::hint::black_box;
use std::path::Path;

/// Rows per uniform minibatch.
const BATCH: usize = 1_000;

/// `sgmcmc bench --libsvm FILE`.
pub fn sparse(args: &BenchArgs, file: &Path) -> Result<()> {
    let data = load_libsvm(file, None)
        .map_err(|e| BenchError::step(format!("--libsvm {}", file.display()), e))?;
    let (rows, cols) = (data.rows(), data.cols());
    let csr = match data.features {
        Features::Sparse(m) => m,
        Features::F64(m) => CsrMatrix::from_dense(m.as_slice(), rows, cols),
        Features::F32(_) => unreachable!("LIBSVM values are read as f64"),
    };
    let nnz_per_row = csr.nnz() as f64 / rows as f64;
    let dense = csr.to_dense();
    let with = |features: Features| Dataset {
        features,
        targets: data.targets.clone(),
        feature_names: Vec::new(),
        features_source: file.display().to_string(),
        targets_source: None,
    };
    let prior = || NormalPrior::new(10.0);
    let sparse_model = Glm::new(with(Features::Sparse(csr)), Bernoulli, prior()?, true)?;
    let dense_model = Glm::new(with(Features::F64(dense)), Bernoulli, prior()?, true)?;
    println!(
        "sgmcmc bench --libsvm: logistic regression with intercept on {} ({rows} rows, {cols} \
         columns, {nnz_per_row:.1} non-zeros per row = {:.1} %), one thread; median of {} x \
         {:.1} s",
        file.display(),
        100.0 * nnz_per_row / cols as f64,
        args.repeats,
        args.seconds
    );
    let dim = dense_model.dim();
    let theta: Vec<f64> = (0..dim).map(|j| 0.01 * (j as f64 - 60.0)).collect();
    let mut idx_rng = stream(3, 0);
    let batches: Vec<Vec<DataIndex>> = (0..64)
        .map(|_| {
            rand::seq::index::sample(&mut idx_rng, rows, BATCH)
                .into_iter()
                .map(|i| i as DataIndex)
                .collect()
        })
        .collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .map_err(|e| BenchError::step("one-thread pool".into(), e))?;
    let measure = |model: &dyn Model| {
        pool.install(|| {
            let mut eval = FullDataEvaluator::new(model);
            let mut grad = vec![0.0; dim];
            let full = rate(args.seconds, args.repeats, || {
                eval.grad_log_posterior(&theta, &mut grad);
                black_box(&grad);
            });
            let mut scratch = Scratch::new();
            let mut k = 0;
            let mini = rate(args.seconds, args.repeats, || {
                grad.fill(0.0);
                model.add_grad_log_lik(&theta, &batches[k % 64], 1.0, &mut grad, &mut scratch);
                k += 1;
                black_box(&grad);
            });
            (1e9 / (full * rows as f64), 1e9 / (mini * BATCH as f64))
        })
    };
    let (dense_full, dense_mini) = measure(&dense_model);
    let (sparse_full, sparse_mini) = measure(&sparse_model);
    let dense_bytes = cols as f64 * 8.0;
    let sparse_bytes = nnz_per_row * 12.0 + 8.0;
    println!(
        "\n| storage | bytes per row | full-data gradient, ns per row | minibatch {BATCH} (uniform), ns per row |"
    );
    println!("|---|---|---|---|");
    println!("| dense f64 | {dense_bytes:.0} | {dense_full:.2} | {dense_mini:.2} |");
    println!("| sparse (CSR) | {sparse_bytes:.0} | {sparse_full:.2} | {sparse_mini:.2} |");
    println!(
        "| dense / sparse | {:.1}x | {:.1}x | {:.1}x |",
        dense_bytes / sparse_bytes,
        dense_full / sparse_full,
        dense_mini / sparse_mini
    );
    Ok(())
}
