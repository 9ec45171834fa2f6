//! Your own model through the library API, end to end.
//!
//! The model: observations xᵢ ~ N(μ, e^{2s}) with unknown mean μ and log standard deviation s,
//! priors μ ~ N(0, 10²) and s ~ N(0, 1). We implement the `Model` trait (prior, per-datum
//! log-likelihood and gradient; the batch methods have defaults built from those), find the MAP,
//! let MAMBA choose SGLD's step and batch size for control-variate gradients, run the winner on
//! 4 chains and print the summary. No file is involved: every setting is a typed value.
//!
//! Run with `cargo run --release --example custom_model`.

use rand::SeedableRng;
use sgmcmc::estimator::BatchSize;
use sgmcmc::io::{MemorySink, format_table, summarize_parameters};
use sgmcmc::model::{DataIndex, Model, Scratch};
use sgmcmc::optim::find_map;
use sgmcmc::optim::lbfgs::LbfgsOptions;
use sgmcmc::rng::{ChainRng, fill_standard_normal};
use sgmcmc::runner::{Budget, Chain, NoProgress, RunSettings, run};
use sgmcmc::settings::{EstimatorKind, EstimatorSettings, SamplerSettings};
use sgmcmc::tuning::{
    GridValues, MambaSettings, TuneBudget, TuneContext, TuneGrid, TuneScores, expand_grid, mamba,
};

/// xᵢ ~ N(μ, e^{2s}); θ = (μ, s).
struct NormalMeanAndScale {
    x: Vec<f64>,
}

impl Model for NormalMeanAndScale {
    fn name(&self) -> &'static str {
        "normal-mean-and-scale"
    }

    fn dim(&self) -> usize {
        2
    }

    fn num_data(&self) -> usize {
        self.x.len()
    }

    fn parameter_names(&self) -> Vec<String> {
        vec!["mu".into(), "log_sd".into()]
    }

    fn log_prior(&self, theta: &[f64]) -> f64 {
        -0.5 * theta[0] * theta[0] / 100.0 - 0.5 * theta[1] * theta[1]
    }

    fn add_grad_log_prior(&self, theta: &[f64], grad: &mut [f64]) {
        grad[0] -= theta[0] / 100.0;
        grad[1] -= theta[1];
    }

    /// log p(x | μ, s) = −s − (x − μ)²·e^{−2s}/2 − ½ log 2π.
    fn log_lik_each(&self, theta: &[f64], batch: &[DataIndex], out: &mut [f64], _: &mut Scratch) {
        let (mu, s) = (theta[0], theta[1]);
        let inv_var = (-2.0 * s).exp();
        for (o, &i) in out.iter_mut().zip(batch) {
            let r = self.x[i as usize] - mu;
            *o = -s - 0.5 * r * r * inv_var - 0.918_938_533_204_672_8;
        }
    }

    /// ∂/∂μ = (x − μ)e^{−2s},  ∂/∂s = −1 + (x − μ)²e^{−2s}.
    fn grad_log_lik_each(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        out: &mut [f64],
        _: &mut Scratch,
    ) {
        let (mu, s) = (theta[0], theta[1]);
        let inv_var = (-2.0 * s).exp();
        for (g, &i) in out.chunks_exact_mut(2).zip(batch) {
            let r = self.x[i as usize] - mu;
            g[0] = r * inv_var;
            g[1] = -1.0 + r * r * inv_var;
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 100,000 observations from N(3, 2²).
    let mut rng = ChainRng::seed_from_u64(1);
    let mut x = vec![0.0; 100_000];
    fill_standard_normal(&mut rng, &mut x);
    x.iter_mut().for_each(|v| *v = 3.0 + 2.0 * *v);
    let model = NormalMeanAndScale { x };

    // 1. The MAP: every arm of the tuner starts there, and control variates are centred there.
    let map = find_map(&model, &[0.0, 0.0], &LbfgsOptions::default())?;
    // 2. MAMBA picks SGLD's step and the batch size (14 arms), each arm charged per-datum
    //    gradient evaluations, so the choice is the same on any machine.
    let context = TuneContext::at_map(&model, &map.theta, TuneScores::ControlVariates, 1_000, 7)?;
    let grid = TuneGrid {
        log10_step_size: Some(GridValues::Range {
            from: -5.0,
            to: -8.0,
            by: 0.5,
        }),
        batch_size: Some(vec![BatchSize::Count(500), BatchSize::Count(5_000)]),
        ..TuneGrid::default()
    };
    let gradient = EstimatorSettings {
        estimator: EstimatorKind::ControlVariates,
        ..EstimatorSettings::default()
    };
    let arms = expand_grid(&SamplerSettings::sgld(1e-6), &gradient, &grid)?;
    let tuning = MambaSettings {
        budget: TuneBudget::ArmEvaluations(2e7),
        seed: 7,
        ..MambaSettings::default()
    };
    let outcome = mamba(&context, &arms, &tuning, &mut |_, _| {})?;
    let winner = &arms[outcome.winner];
    println!(
        "MAMBA's choice: {} (KSD {:.3})",
        winner.label(),
        outcome.winner_metric
    );

    // 3. The winner on 4 chains from the MAP; each chain gets its own sampler and estimator.
    //    MAMBA's KSD weighs mixing against bias within its budget: its step here (ε ≈ 3e-6)
    //    leaves SGLD's discretisation bias visible in log_sd, whose curvature H = 2N gives a
    //    stationary variance σ²/(1 − εH/2), an sd about 1.2× the posterior's (a larger budget
    //    picks the same step; a smaller step, or issue 22's preconditioned default, removes it).
    let settings = RunSettings {
        seed: 42,
        chains: 4,
        budget: Budget::Iterations(20_000),
        burn_in: 1_000,
        thin: 10,
    };
    let sink = MemorySink::new(settings.chains, model.dim());
    let report = run(
        &settings,
        |_chain, _rng| {
            Ok(Chain::sampler(
                winner.sampler.build()?,
                winner.gradient.build(&model, Some(&map.theta))?,
                map.theta.clone(),
            ))
        },
        &sink,
        &NoProgress,
    )?;

    let chains = sink.into_chains();
    let views: Vec<&[f64]> = chains.iter().map(Vec::as_slice).collect();
    let rows = summarize_parameters(&model.parameter_names(), &views);
    let n = model.x.len() as f64;
    let mean = model.x.iter().sum::<f64>() / n;
    let sd = (model.x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n).sqrt();
    print!("{}", format_table(&rows, &[("data", &[mean, sd.ln()])]));
    println!(
        "{} draws in {:.2} s ({:.0} iterations/s per chain); 'data' = sample mean and log sd, \
         around which the posterior concentrates (posterior sd of mu ~ {:.4}, of log_sd ~ {:.4})",
        report.draws(),
        report.seconds,
        report.iterations_per_second(),
        sd / n.sqrt(),
        (0.5 / n).sqrt()
    );
    Ok(())
}
