//! `sgmcmc experiment coreset-fig1` beyond Fig. 1 on the Gaussian location model (which the CLI
//! tests cover): each study's optimiser list, the hot-start gate reaching every run, the sparse
//! regression's Gibbs reference against NUTS on the same posterior, a short sparse-regression
//! comparison, Bradley–Terry from a games file, the burn-in traces, each trial's final weights,
//! and bad settings.
//!
//! Break-once:
//! - every run built with the hot-start test on (`enabled: true` in `settings_for`): the
//!   hot-start study's gate test failed: a run without the test started training when it
//!   passed, not at iteration 0.
//! - the Gibbs reference on the data with weight 2 instead of 1: the NUTS comparison failed
//!   (slab coefficients 0.9–1.3 sds off, sd ratios 0.67–0.79).
//! - the burn-in summary's pass taken at the first check with statistic < 0.6 instead of
//!   c = 0.5: `the_burn_in_study_finds_where_hot_dog_passes` failed (trial 2's pass at
//!   iteration 30 against Hot DoG's 60).
//! - the final weights' largest taken with `min` instead of `max`:
//!   `each_trial_reports_its_final_weights` failed (largest 0 on a trained coreset).
//! - the final z-scores recorded without their first coordinate:
//!   `each_trial_reports_its_final_weights` failed (19 z-scores against 20 coordinates).
//! - Not caught: the reference's moments from the first half of each chain instead of the
//!   second. At N = 1,000 the chains start close to the posterior (OLS + N(0, I)) and forget
//!   their start within a few sweeps of 6,000.

use flate2::Compression;
use flate2::write::GzEncoder;
use sgmcmc::data::{Features, Matrix};
use sgmcmc::model::{GaussianModel, Model, SparseRegression};
use sgmcmc::reference::{NutsSettings, run_nuts};
use sgmcmc::runner::NoProgress;
use sgmcmc_experiments::coreset_fig1::{
    self, CoresetFig1Settings, GibbsReference, OptimiserChoice, OptimiserKind, Problem,
    ProblemModel, Study,
};
use std::io::Write;
use std::sync::Arc;

fn settings(study: Study) -> CoresetFig1Settings {
    CoresetFig1Settings {
        study,
        sizes: vec![200],
        learning_rates: vec![0.1, 1.0],
        r_values: vec![1e-3, 1e-2],
        iterations: 1_500,
        trials: 1,
        ..CoresetFig1Settings::default()
    }
}

#[test]
fn each_study_lists_its_optimisers_once_with_hot_dog_first() {
    let count = |study: Study| {
        let list = study.optimisers(&settings(study));
        assert!(list[0].is_hot_dog(), "{study:?}: {:?}", list[0]);
        let mut labels: Vec<String> = list.iter().map(OptimiserChoice::label).collect();
        labels.sort();
        labels.dedup();
        assert_eq!(labels.len(), list.len(), "{study:?}: a label twice");
        list
    };
    // Hot DoG, 2 ADAM rates, untrained.
    assert_eq!(count(Study::Fig1).len(), 4);
    // Hot DoG at r = 1e-3 is the first r value's run: 2 r × 2 gates + 2 ADAM rates.
    assert_eq!(count(Study::HotStart).len(), 6);
    // Hot DoG, then twice (DoG × 2 r, DoWG × 2 r, prodigy, D-Adapt, ADAM × 2).
    let methods = count(Study::Methods);
    assert_eq!(methods.len(), 1 + 2 * 8);
    assert_eq!(methods.iter().filter(|c| c.hot_start).count(), 1 + 8);
    assert!(methods.contains(&OptimiserChoice {
        kind: OptimiserKind::Prodigy { d0: 1e-6 },
        hot_start: true
    }));
    assert_eq!("methods".parse::<Study>(), Ok(Study::Methods));
    assert!("fig7".parse::<Study>().unwrap_err().contains("hot-start"));
}

/// The hot-start study on the Gaussian location model: every run gated by the test starts
/// training after it passes (at iteration ≥ 3·dim = 60, the earliest check), every run without
/// it at iteration 0; training helps either way.
#[test]
fn the_hot_start_gate_reaches_every_run() {
    let problems = vec![Problem::gaussian_location(5_000, 20, 3).unwrap()];
    let report = coreset_fig1::run(&problems, &settings(Study::HotStart), &|_| {}).unwrap();
    assert_eq!(report.cells.len(), 6);
    for cell in &report.cells {
        let at = cell.hot_start_iteration[0].unwrap();
        if cell.optimiser.hot_start {
            assert!(at >= 60, "{}: trained from {at}", cell.optimiser.label());
        } else {
            assert_eq!(at, 0, "{}", cell.optimiser.label());
        }
        assert!(cell.median.is_finite(), "{}", cell.optimiser.label());
    }
    let table = coreset_fig1::markdown(&report);
    assert!(table.contains("Hot DoG r = 1e-2, no hot start"), "{table}");
    assert!(table.contains("above 1 when Hot DoG is better"), "{table}");
    // Hot DoG's own row is its median over itself.
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("| Hot DoG r = 1e-3 |") && l.ends_with("| 1.000 |")),
        "{table}"
    );
}

/// Each trial's final weights: the untrained coreset keeps w = N/M (so N in all), a trained one
/// moves them, and the tables list them. Each trial's final z-scores: their mean square is its
/// final metric.
#[test]
fn each_trial_reports_its_final_weights() {
    let problems = vec![Problem::gaussian_location(5_000, 20, 3).unwrap()];
    let report = coreset_fig1::run(&problems, &settings(Study::Fig1), &|_| {}).unwrap();
    for cell in &report.cells {
        // The final z-scores: one per coordinate, and their mean square is the final metric.
        let z = cell.final_z[0].as_ref().unwrap();
        assert_eq!(z.len(), 20);
        let mean_square = z.iter().map(|z| z * z).sum::<f64>() / 20.0;
        assert!(
            (mean_square / cell.final_metric[0] - 1.0).abs() < 1e-12,
            "{}: {mean_square} vs {}",
            cell.optimiser.label(),
            cell.final_metric[0]
        );
        let w = cell.final_weights[0].unwrap();
        assert!(w.zeros <= 200 && w.largest >= w.total / 200.0, "{w:?}");
        if cell.optimiser.kind == OptimiserKind::Untrained {
            assert_eq!((w.largest, w.total, w.zeros), (25.0, 5_000.0, 0));
        } else {
            // Trained from w = 25 each: the largest weight moved.
            assert!(
                w.largest > 25.0 && w.total.is_finite(),
                "{}: {w:?}",
                cell.optimiser.label()
            );
        }
    }
    let table = coreset_fig1::markdown(&report);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("| untrained (w = N/M) |") && l.contains("2.500e1 / 5.000e3")),
        "{table}"
    );
}

/// The Gibbs reference of the sparse regression against NUTS on the same posterior (γ summed
/// out: the model's spike-and-slab mixture prior), N = 1,000: means within 0.15 NUTS sds
/// (4 chains × 3,000 Gibbs draws kept, NUTS 4 × 2,000: the two MCSEs add up to about 0.04 sd).
/// sds within 10 % for the five coefficients in the slab and σ², within 25 % for the five in
/// the spike: their posterior is a mixture of the spike (sd ≈ 0.1) and rare visits to the slab
/// (sd ≈ 0.6), whose sd estimate has a large Monte Carlo error (first run at 4 × 1,000 each:
/// 0.171 against 0.150 on β₁).
#[test]
fn the_gibbs_reference_agrees_with_nuts() {
    let model = Arc::new(SparseRegression::synthetic(1_000, 5).unwrap());
    let reference = GibbsReference {
        chains: 4,
        sweeps: 6_000,
        seed: 11,
    };
    let (mean, sd, summary) = reference.run(&model).unwrap();
    assert!(summary.contains("R-hat"), "{summary}");
    let nuts = run_nuts(
        model.as_ref(),
        &NutsSettings {
            chains: 4,
            warmup: 1_000,
            draws: 2_000,
            seed: 3,
            ..NutsSettings::default()
        },
        &NoProgress,
    )
    .unwrap();
    assert_eq!(mean.len(), model.dim());
    let mut report = String::new();
    let mut ok = true;
    for j in 0..model.dim() {
        let z = (mean[j] - nuts.moments.mean[j]) / nuts.moments.sd[j];
        let ratio = sd[j] / nuts.moments.sd[j];
        let sd_tolerance = if j < 5 { 0.25 } else { 0.10 };
        ok &= z.abs() < 0.15 && (ratio - 1.0).abs() < sd_tolerance;
        report.push_str(&format!(
            "{j}: Gibbs {:.4} ± {:.4}, NUTS {:.4} ± {:.4} (z {z:.3}, sd ratio {ratio:.3})\n",
            mean[j], sd[j], nuts.moments.mean[j], nuts.moments.sd[j]
        ));
    }
    assert!(ok, "{report}");
    eprintln!("{report}");
    let too_few = GibbsReference {
        chains: 1,
        ..reference
    };
    assert!(
        too_few
            .run(&model)
            .unwrap_err()
            .contains("at least 2 chains")
    );
}

/// Fig. 1 and the methods study on a small sparse regression (N = 5,000, M = 200): Hot DoG ends
/// far below the untrained coreset, and every method runs to the end with a finite metric (not
/// every one improves on the untrained coreset this early: D-Adaptation SGD with the hot-start
/// test ended at 1.1e3 against 63).
#[test]
fn sparse_regression_studies_train_the_coreset() {
    let reference = GibbsReference {
        chains: 2,
        sweeps: 2_000,
        seed: 1,
    };
    let problems = vec![Problem::sparse_regression(5_000, 9, &reference).unwrap()];
    let report = coreset_fig1::run(&problems, &settings(Study::Fig1), &|_| {}).unwrap();
    let untrained = report
        .cells
        .iter()
        .find(|c| c.optimiser.kind == OptimiserKind::Untrained)
        .unwrap()
        .median;
    let hot = report.cells[0].median;
    assert!(report.cells[0].optimiser.is_hot_dog());
    assert!(
        hot * 10.0 < untrained,
        "Hot DoG {hot}, untrained {untrained}"
    );
    let methods = coreset_fig1::run(&problems, &settings(Study::Methods), &|_| {}).unwrap();
    assert_eq!(methods.cells.len(), 17);
    for cell in &methods.cells {
        assert_eq!(cell.stopped[0], None, "{}", cell.optimiser.label());
        assert!(cell.median.is_finite(), "{}", cell.optimiser.label());
    }
}

/// Bradley–Terry from a games file (3 teams, 600 games, the home team of a stronger pair
/// winning more often): the problem builds with a NUTS reference and a short run trains.
#[test]
fn bradley_terry_from_a_games_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("GAME_DATE_EST,HOME_TEAM_ID,VISITOR_TEAM_ID,HOME_TEAM_WINS\n");
    for g in 0..600 {
        let (h, v) = [(10, 20), (20, 30), (30, 10)][g % 3];
        let wins = u8::from(g % 5 != 0);
        csv.push_str(&format!("2020-01-01,{h},{v},{wins}\n"));
    }
    let mut gz = GzEncoder::new(
        std::fs::File::create(dir.path().join("games.csv.gz")).unwrap(),
        Compression::default(),
    );
    gz.write_all(csv.as_bytes()).unwrap();
    gz.finish().unwrap();
    let nuts = NutsSettings {
        chains: 2,
        warmup: 300,
        draws: 300,
        ..NutsSettings::default()
    };
    let problem = Problem::nba_bradley_terry(dir.path(), &nuts).unwrap();
    assert_eq!(problem.mean.len(), 3);
    assert!(
        problem.reference.contains("NUTS, 2 chains"),
        "{}",
        problem.reference
    );
    let s = CoresetFig1Settings {
        sizes: vec![50],
        learning_rates: vec![1.0],
        iterations: 300,
        trials: 1,
        ..CoresetFig1Settings::default()
    };
    let report = coreset_fig1::run(&[problem], &s, &|_| {}).unwrap();
    assert!(report.cells.iter().all(|c| c.median.is_finite()));
    let missing = Problem::nba_bradley_terry(&dir.path().join("nowhere"), &nuts);
    assert!(missing.err().unwrap().contains("nowhere"));
}

#[test]
fn bad_settings_are_errors_before_any_run() {
    let problems = vec![Problem::gaussian_location(500, 2, 1).unwrap()];
    let bad = [
        (
            CoresetFig1Settings {
                r_values: vec![],
                ..settings(Study::HotStart)
            },
            "at least one r value",
        ),
        (
            CoresetFig1Settings {
                d0: 0.0,
                ..settings(Study::Methods)
            },
            "d0 must be finite and > 0",
        ),
        (
            CoresetFig1Settings {
                learning_rates: vec![f64::NAN],
                ..settings(Study::Fig1)
            },
            "learning rate",
        ),
        (
            CoresetFig1Settings {
                sizes: vec![0],
                ..settings(Study::Fig1)
            },
            "positive sizes",
        ),
        (
            CoresetFig1Settings {
                sizes: vec![501],
                ..settings(Study::Fig1)
            },
            "exceeds N",
        ),
    ];
    for (s, expected) in bad {
        let e = coreset_fig1::run(&problems, &s, &|_| {}).unwrap_err();
        assert!(e.contains(expected), "{e}");
    }
}

/// The burn-in study on a slice-sampled Gaussian location model whose data sit at 5 (chains
/// start at N(0, I), far out): one trace point per iteration, the statistic every 30 from
/// 3·dim, ‖ĝ‖ falling from the start to its plateau, and the test's first pass where Hot DoG's
/// own run (Fig. 1 study, same seeds) ends warm-up.
#[test]
fn the_burn_in_study_finds_where_hot_dog_passes() {
    let (n, d) = (2_000, 2);
    let x: Vec<f64> = (0..n * d)
        .map(|i| 5.0 + ((i * 7919) % 1000) as f64 / 1000.0 - 0.5)
        .collect();
    let identity = [1.0, 0.0, 0.0, 1.0];
    let model = GaussianModel::new(
        Features::F64(Matrix::from_vec(x, n, d).unwrap()),
        &identity,
        1.0,
    )
    .unwrap();
    let problem = Problem {
        name: "shifted location".into(),
        model: ProblemModel::Slice(Box::new(model)),
        mean: vec![5.0; d],
        sd: vec![(1.0 / (1.0 + n as f64)).sqrt(); d],
        reference: "approximate".into(),
    };
    let burn_in = CoresetFig1Settings {
        sizes: vec![100],
        iterations: 900,
        trials: 2,
        ..settings(Study::BurnIn)
    };
    let report = coreset_fig1::run(std::slice::from_ref(&problem), &burn_in, &|_| {}).unwrap();
    assert_eq!(report.cells.len(), 1);
    let cell = &report.cells[0];
    assert_eq!(cell.burn_in.len(), 2);
    let t = &cell.burn_in_trace;
    assert_eq!(
        t.iter().map(|p| p.iteration).collect::<Vec<_>>(),
        (0..=900).collect::<Vec<_>>()
    );
    for p in t {
        let checked = p.iteration >= 6 && p.iteration % 30 == 0;
        assert_eq!(p.statistic.is_some(), checked, "iteration {}", p.iteration);
    }
    for s in &cell.burn_in {
        assert!(s.norm_start.is_finite() && s.plateau > 0.0, "{s:?}");
        assert!(s.norm_at_pass.is_some_and(f64::is_finite), "{s:?}");
    }
    // The chains start far out: the first ‖ĝ‖ is far above the plateau.
    assert!(
        t[0].gradient_norm > 10.0 * cell.burn_in[0].plateau,
        "{:?}",
        t[0]
    );
    // Hot DoG's own runs end warm-up at the same iterations.
    let fig1 = CoresetFig1Settings {
        study: Study::Fig1,
        learning_rates: vec![1.0],
        ..burn_in.clone()
    };
    let hot = coreset_fig1::run(std::slice::from_ref(&problem), &fig1, &|_| {}).unwrap();
    let hot_dog = hot.cells.iter().find(|c| c.optimiser.is_hot_dog()).unwrap();
    let passes: Vec<Option<usize>> = cell.burn_in.iter().map(|s| s.test_passes).collect();
    assert!(passes.iter().all(Option::is_some), "{passes:?}");
    assert_eq!(passes, hot_dog.hot_start_iteration);
    let figure = coreset_fig1::burn_in_figure(&report).unwrap();
    assert_eq!(figure.panels.len(), 1);
    sgmcmc_experiments::plot::render_svg(&figure).unwrap();
}
