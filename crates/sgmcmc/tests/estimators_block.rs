//! Contiguous-block minibatches (`MinibatchScheme::Block`): n consecutive rows from a uniformly
//! random offset, wrapping around. Every row is in a block with probability n/N, so each
//! estimator stays unbiased whatever the row order (tested on rows sorted by their feature, the
//! worst order); the offsets of successive calls are independent, so SGLD's stationary law on
//! a Gaussian has the closed form of §2.1 with the block scheme's own noise variance.

use crate::common;

use common::{Section21, dataset, logistic_data, mean};
use sgmcmc::estimator::{
    BatchSize, ControlVariates, GradientEstimator, Minibatch, MinibatchScheme, Svrg,
};
use sgmcmc::io::MemorySink;
use sgmcmc::mh::LikelihoodRatios;
use sgmcmc::model::{Bernoulli, GaussianModel, LogisticRegression, Model, NormalPrior};
use sgmcmc::rng::{fill_standard_normal, stream};
use sgmcmc::runner::{Budget, Chain, NoProgress, RunError, RunSettings, run};
use sgmcmc::sampler::{Sgld, StepSize};

/// Logistic regression on 2,000 rows sorted by their first feature: contiguous blocks of these
/// rows are anything but random samples, so only exact unbiasedness survives.
fn sorted_logistic() -> LogisticRegression {
    let d = 3;
    let (x, y) = logistic_data(31, 2_000, &[1.5, -0.7, 0.4], 0.3);
    let mut rows: Vec<(Vec<f64>, f64)> = x.chunks_exact(d).map(<[f64]>::to_vec).zip(y).collect();
    rows.sort_by(|a, b| a.0[0].total_cmp(&b.0[0]));
    let x: Vec<f64> = rows.iter().flat_map(|r| r.0.clone()).collect();
    let y: Vec<f64> = rows.iter().map(|r| r.1).collect();
    LogisticRegression::new(
        dataset(x, d, Some(y), false),
        Bernoulli,
        NormalPrior::new(10.0).unwrap(),
        true,
    )
    .unwrap()
}

/// z-test of E[ĝ] = ∇log π per coordinate over 40,000 independent estimates (4 SE, §1.6).
fn assert_unbiased(est: &mut dyn GradientEstimator, model: &dyn Model, theta: &[f64], label: &str) {
    common::assert_unbiased_estimates(est, model, theta, 40_000, 12, label);
}

/// Every estimator that takes minibatches is unbiased with blocks, on sorted rows.
#[test]
fn block_estimates_are_unbiased_on_sorted_rows() {
    let model = sorted_logistic();
    let theta = [1.2, -0.5, 0.6, 0.1];
    let centre = [1.4, -0.6, 0.5, 0.3];
    let batch = BatchSize::Count(50);
    let block = MinibatchScheme::Block;
    assert_unbiased(
        &mut Minibatch::new(&model, batch).unwrap().with_scheme(block),
        &model,
        &theta,
        "minibatch",
    );
    assert_unbiased(
        &mut ControlVariates::new(&model, batch, &centre)
            .unwrap()
            .with_scheme(block),
        &model,
        &theta,
        "control variates",
    );
    // SVRG's first call sets its centre (there, not at θ, where every estimate is exact);
    // no refresh follows within the test.
    let mut svrg = Svrg::new(&model, batch, Some(1 << 20))
        .unwrap()
        .with_scheme(block);
    svrg.estimate(&centre, &mut [0.0; 4], &mut stream(14, 0));
    assert_unbiased(&mut svrg, &model, &theta, "svrg");
}

/// The minibatch MH test's per-datum ratios with blocks: (N/n)·Σ dᵢ over a block is unbiased
/// for the full-data Σ dᵢ, on sorted rows; a growing batch continues its block.
#[test]
fn block_likelihood_ratios_are_unbiased() {
    let model = sorted_logistic();
    let (theta, proposal) = ([1.2, -0.5, 0.6, 0.1], [1.25, -0.45, 0.55, 0.12]);
    let n_data = model.num_data();
    let mut exact = LikelihoodRatios::new(&model);
    let mut rng = stream(13, 0);
    exact.begin();
    let want: f64 = exact.draw(&theta, &proposal, n_data, &mut rng).iter().sum();

    let mut ratios = LikelihoodRatios::new(&model);
    ratios.set_scheme(MinibatchScheme::Block);
    let (n, reps) = (40usize, 40_000usize);
    let estimates: Vec<f64> = (0..reps)
        .map(|_| {
            ratios.begin();
            let first: f64 = ratios.draw(&theta, &proposal, n / 2, &mut rng).iter().sum();
            let second: f64 = ratios.draw(&theta, &proposal, n / 2, &mut rng).iter().sum();
            (first + second) * n_data as f64 / n as f64
        })
        .collect();
    let (m, v) = (mean(&estimates), common::var(&estimates));
    let tol = 4.0 * (v / reps as f64).sqrt();
    assert!(v > 0.0);
    assert!((m - want).abs() <= tol, "mean {m} vs {want} (tol {tol})");
}

/// The block estimator's exact noise variance on the 1-D GTM of §2.1: over the N equally
/// likely offsets o, the estimate's likelihood part is (N/n)·Σ_{k<n} x_{(o+k) mod N} − Nθ.
fn block_noise_variance(x: &[f64], n: usize) -> f64 {
    let n_data = x.len();
    let sums: Vec<f64> = (0..n_data)
        .map(|o| (0..n).map(|k| x[(o + k) % n_data]).sum::<f64>() * n_data as f64 / n as f64)
        .collect();
    let m = mean(&sums);
    sums.iter().map(|s| (s - m).powi(2)).sum::<f64>() / n_data as f64
}

/// §2.1's closed form with blocks: SGLD θ' = θ + ε·ĝ(θ) + √(2ε)ξ on the 1-D GTM is an AR(1)
/// chain driven by independent noise of variance V (the block scheme's, computed exactly over
/// the offsets), so its stationary variance is (2 + εV)/(P(2 − εP)) and its mean m. Offsets
/// that were not independent (a sweep through the blocks, say) would change the variance.
#[test]
fn sgld_with_blocks_matches_closed_form() {
    let Section21 {
        n_data,
        n,
        p,
        m,
        eps,
        ..
    } = common::section_2_1();
    // The §2.1 data (i.i.d., so already in a random order), rebuilt to know the rows.
    let x: Vec<f64> = common::normals(41, 0, n_data)
        .iter()
        .map(|v| 1.0 + 2.0 * v)
        .collect();
    let model = GaussianModel::new(common::features(x.clone(), 1), &[1.0], 4.0).unwrap();
    assert!((model.posterior_mean()[0] - m).abs() < 1e-12);
    let v_block = block_noise_variance(&x, n);
    let var_want = (2.0 + eps * v_block) / (p * (2.0 - eps * p));
    let var_exact_gradients = 2.0 / (p * (2.0 - eps * p));

    let settings = RunSettings {
        seed: 8,
        chains: 4,
        budget: Budget::Iterations(100_000),
        burn_in: 200,
        thin: 1,
    };
    let sink = MemorySink::new(settings.chains, 1);
    let report = run(
        &settings,
        |_c, rng| {
            let mut theta0 = [0.0];
            fill_standard_normal(rng, &mut theta0);
            theta0[0] += m;
            Ok::<_, RunError>(Chain::sampler(
                Box::new(Sgld::new(StepSize::Langevin(eps), 1.0).unwrap()),
                Box::new(
                    Minibatch::new(&model, BatchSize::Count(n))
                        .unwrap()
                        .with_scheme(MinibatchScheme::Block),
                ),
                theta0.to_vec(),
            ))
        },
        &sink,
        &NoProgress,
    )
    .expect("run succeeds");
    assert!(report.diverged_chains().is_empty());
    let chains = sink.into_chains();
    common::check("mean with blocks", &chains, m, 0.0);
    let sq: Vec<Vec<f64>> = chains
        .iter()
        .map(|c| c.iter().map(|t| (t - m).powi(2)).collect())
        .collect();
    eprintln!("noise variance of the blocks V = {v_block:.1}");
    let (vh, se) = common::check("variance with blocks", &sq, var_want, 0.0);
    assert!((vh - var_exact_gradients).abs() > 8.0 * se);
}
