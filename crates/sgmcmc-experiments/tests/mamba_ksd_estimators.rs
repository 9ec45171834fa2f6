//! The KSD-estimator study of the MAMBA paper's App. B.2 (Figs. 4–5; issue 28, missing
//! experiment 5) on a small logistic regression: at a full batch the stochastic score is the
//! exact one; MAMBA's control-variate surrogate ranks the step sizes as the full-batch KSD
//! does and picks the same arm; the stochastic score's noise inflates the KSD of the
//! smallest step, where the chain is nearest the posterior. Budgets in gradient evaluations,
//! so the draws are the same on any machine.
//!
//! Broken once: the surrogate column computed from the minibatch scores instead of the
//! surrogate's; the test failed with "surrogate rho 0.741".

use sgmcmc_experiments::mamba::ksd_estimators::{self, ESTIMATES, KsdEstimatorSettings};
use sgmcmc_experiments::mamba_logreg::MambaLogregSettings;

/// 20,000 rows (16,000 for training), log10 steps −2 … −7.5 at batch 1 %, batches 100, 10, 1
/// and 0.1 % at 10^−4.5; 200 iterations at a 1 % batch per arm, at most 200 draws scored;
/// surrogate on m = 2,000 points.
#[test]
fn the_surrogate_ranks_steps_like_the_full_batch_ksd_and_minibatch_noise_inflates_it() {
    let logreg = MambaLogregSettings {
        rows: 20_000,
        score_subsample: 2_000,
        threads: 1,
        ..MambaLogregSettings::default()
    };
    let settings = KsdEstimatorSettings {
        problem: "logistic regression".into(),
        spec: logreg.spec(),
        harness: logreg.harness(),
        log10_steps: (0..12).map(|k| -2.0 - 0.5 * k as f64).collect(),
        step_batch_percent: 1.0,
        batch_percents: vec![100.0, 10.0, 1.0, 0.1],
        batch_log10_step: -4.5,
        iterations: 200,
        max_draws: 200,
    };
    let report = ksd_estimators::run(&settings, &mut |_| {}).expect("the study runs");
    assert_eq!(report.surrogate_points, 2_000);
    let [steps, batches] = &report.panels[..] else {
        panic!("two panels, got {}", report.panels.len());
    };
    assert_eq!(steps.arms.len(), 12);
    assert_eq!(batches.arms.len(), 4);
    for a in steps.arms.iter().chain(&batches.arms) {
        assert!(!a.diverged && a.ksd.len() == ESTIMATES.len(), "{}", a.label);
        assert!(
            a.ksd.iter().all(|k| k.is_finite() && *k > 0.0),
            "{}: {:?}",
            a.label,
            a.ksd
        );
        assert!(
            a.draws <= 200 && a.draws >= a.kept.min(100),
            "{}: {} of {}",
            a.label,
            a.draws,
            a.kept
        );
    }
    // At batch 100 % the minibatch estimate is the exact score.
    let full = &batches.arms[0];
    assert!((full.batch_percent - 100.0).abs() < 1e-9);
    assert!(
        (full.ksd[2] - full.ksd[0]).abs() <= 1e-9 * full.ksd[0],
        "stochastic {} against full batch {}",
        full.ksd[2],
        full.ksd[0]
    );
    let rho = |k: usize| steps.summaries[k].rho;
    let surrogate = ESTIMATES.len() - 1;
    assert!(rho(surrogate) > 0.95, "surrogate rho {}", rho(surrogate));
    assert_eq!(steps.summaries[surrogate].pick, steps.summaries[0].pick);
    assert!(rho(1) > 0.8, "thinned full-batch rho {}", rho(1));
    // The smallest step: the stochastic KSD at least twice the full-batch one.
    let smallest = steps.arms.last().expect("arms");
    assert!(
        smallest.ksd[2] > 2.0 * smallest.ksd[0],
        "{}: stochastic {} against full batch {}",
        smallest.label,
        smallest.ksd[2],
        smallest.ksd[0]
    );
    let md = ksd_estimators::markdown(&report);
    assert!(md.contains("Varying the step size") && md.contains("Varying the batch size"));
    // The MAP every arm starts from is reported (L-BFGS converges here in a few dozen iterations).
    assert!(
        (1..200).contains(&report.map_iterations),
        "{}",
        report.map_iterations
    );
    let map = format!(
        "from the MAP ({} iterations of its search)",
        report.map_iterations
    );
    assert!(md.contains(&map), "{md}");
}
