//! `sgmcmc bench --pmf FILE`: Bayesian PMF on MovieLens (issue 8, must-show 2), one thread:
//! SGLD iterations/s at batch 800 against the paper code's logged ≈ 760 it/s, and the split of
//! an iteration into its parts.
//!
//! Per iteration at batch n, latent dimension d, D parameters: the likelihood gradient reads n
//! ratings and 2·n·d factor values and scatters 2·n·d updates (O(n·d)); the prior gradient, the
//! estimator's zeroing of its buffer and the sampler's noise and update each touch all D
//! coordinates (O(D)). At n = 800, d = 20 the data part is 32,000 coordinates against D = 52,580.

use super::{BenchArgs, rate};
use super::{BenchError, Result};
use sgmcmc::data::{load_movielens, movielens_counts};
use sgmcmc::model::{DataIndex, Model, Pmf, PmfSettings, Scratch};
use sgmcmc::rng::{fill_standard_normal, stream};
use std::hint::black_box;
use std::path::Path;

/// The paper code's logged PMF rate (reference peers.md): ≈ 760 iterations/s.
const PAPER_IT_S: f64 = 760.0;

/// `sgmcmc bench --pmf FILE`.
pub fn pmf(args: &BenchArgs, file: &Path) -> Result<()> {
    let batch = args.pmf_batch;
    let data = load_movielens(file)
        .map_err(|e| BenchError::step(format!("--pmf {}", file.display()), e))?;
    let counts = movielens_counts(file)?;
    let rows = data.rows();
    if batch == 0 || batch > rows {
        return Err(BenchError::Setting(format!(
            "--pmf-batch must be in 1..={rows}"
        )));
    }
    let settings = PmfSettings {
        users: counts.map(|c| c.0),
        items: counts.map(|c| c.1),
        ..PmfSettings::default()
    };
    let model = Pmf::new(data, settings)?;
    let dim = model.dim();
    println!(
        "sgmcmc bench --pmf: d = {}, D = {dim}, N = {rows} ratings ({}), batch {batch}, one thread; \
         median of {} x {:.1} s",
        model.latent_dim(),
        file.display(),
        args.repeats,
        args.seconds
    );
    let mut rng = stream(1, 0);
    let mut theta = vec![0.0; dim];
    model.sample_prior(&mut rng, &mut theta)?;

    let it_s = super::sgld_rate(&model, batch, &theta, args.seconds, args.repeats)?;
    println!(
        "SGLD (step 1e-5, minibatch {batch} without replacement): {it_s:.0} iterations/s \
         ({:.1} us each; {:.2}x the paper code's {PAPER_IT_S:.0})",
        1e6 / it_s,
        it_s / PAPER_IT_S
    );

    // The parts, each timed alone.
    let mut idx_rng = stream(2, 0);
    let batches: Vec<Vec<DataIndex>> = (0..64)
        .map(|_| {
            rand::seq::index::sample(&mut idx_rng, rows, batch)
                .into_iter()
                .map(|i| i as DataIndex)
                .collect()
        })
        .collect();
    let mut grad = vec![0.0; dim];
    let mut scratch = Scratch::new();
    let weight = rows as f64 / batch as f64;
    let mut k = 0usize;
    let lik = rate(args.seconds, args.repeats, || {
        model.add_grad_log_lik(&theta, &batches[k % 64], weight, &mut grad, &mut scratch);
        k += 1;
    });
    let prior = rate(args.seconds, args.repeats, || {
        model.add_grad_log_prior(&theta, &mut grad)
    });
    let zero = rate(args.seconds, args.repeats, || grad.fill(0.0));
    let mut noise = vec![0.0; dim];
    let normals = rate(args.seconds, args.repeats, || {
        fill_standard_normal(&mut rng, &mut noise)
    });
    black_box((grad[0], noise[0]));
    println!(
        "parts (us per call): likelihood gradient {:.1} (O(batch·d)), prior gradient {:.1}, zeroing \
         {:.1}, {dim} standard normals {:.1} ({:.2} ns each) (O(D))",
        1e6 / lik,
        1e6 / prior,
        1e6 / zero,
        1e6 / normals,
        1e9 / (normals * dim as f64)
    );
    Ok(())
}
