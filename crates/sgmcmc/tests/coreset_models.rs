//! The coreset MCMC paper's regression models (reference §7.9) and their data: Poisson
//! regression (log and softplus links), logistic regression with a Cauchy prior,
//! Bradley–Terry; the bike-sharing and NBA loaders, the Stan reference, and the run-file
//! arms through the CLI.

use crate::common;

use common::{NBA_HEADER, dataset, games, normals, poisson_data, write};
use sgmcmc::data::{Dataset, load_bike_sharing, load_bike_sharing_reference, load_nba_games};
use sgmcmc::model::{
    Bernoulli, BradleyTerry, CauchyPrior, DataIndex, Glm, Model, NormalPrior, Poisson, PoissonLink,
    Scratch,
};
use sgmcmc::rng::stream;
use std::path::Path;

// Central differences with h = 1e-5·max(1, |θⱼ|) on these small problems (|ℓ| ≲ 1e3, third
// derivatives ≲ 1e3): truncation h²·|f'''|/6 ≲ 1e-7 and rounding ε·|f|/h ≲ 1e-8, both below
// 1e-6 relative to max(1, ‖∇‖∞); a wrong factor or sign is O(1) relative.
const FD_REL: f64 = 1e-6;
// The same sums in another order: rounding only.
const REORDER_REL: f64 = 1e-11;

fn central_diff(theta: &[f64], f: impl Fn(&[f64]) -> f64) -> Vec<f64> {
    common::central_diff_with(theta, |x| 1e-5 * x.abs().max(1.0), f)
}

fn assert_close(got: &[f64], want: &[f64], rel: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    for (j, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rel * scale,
            "{what}: coordinate {j}: got {g}, want {w}"
        );
    }
}

fn log_lik_each(model: &dyn Model, theta: &[f64], batch: &[DataIndex]) -> Vec<f64> {
    let mut out = vec![f64::NAN; batch.len()];
    model.log_lik_each(theta, batch, &mut out, &mut Scratch::new());
    out
}

/// Per-datum gradients against central differences of each datum's log-likelihood, their sum
/// against `add_grad_log_lik` (weight 1 and a weight ≠ 1 onto a non-zero buffer), the fused
/// `log_lik_and_add_grad`, and the prior's gradient against its finite difference.
fn check_gradients(model: &dyn Model, theta: &[f64], batch: &[DataIndex], label: &str) {
    let d = model.dim();
    let mut scratch = Scratch::new();
    let mut each = vec![f64::NAN; batch.len() * d];
    model.grad_log_lik_each(theta, batch, &mut each, &mut scratch);
    for (k, &i) in batch.iter().enumerate() {
        let fd = central_diff(theta, |t| log_lik_each(model, t, &[i])[0]);
        assert_close(
            &each[k * d..(k + 1) * d],
            &fd,
            FD_REL,
            &format!("{label}: datum {i}"),
        );
    }
    let summed: Vec<f64> = (0..d)
        .map(|j| each.chunks_exact(d).map(|r| r[j]).sum())
        .collect();
    let mut batch_grad = vec![0.0; d];
    model.add_grad_log_lik(theta, batch, 1.0, &mut batch_grad, &mut scratch);
    assert_close(
        &batch_grad,
        &summed,
        REORDER_REL,
        &format!("{label}: Σ = batch"),
    );

    let base: Vec<f64> = (0..d).map(|j| 0.5 - 0.25 * j as f64).collect();
    let weight = -3.5;
    let want: Vec<f64> = base
        .iter()
        .zip(&summed)
        .map(|(b, s)| b + weight * s)
        .collect();
    let mut g = base.clone();
    model.add_grad_log_lik(theta, batch, weight, &mut g, &mut scratch);
    assert_close(&g, &want, REORDER_REL, &format!("{label}: weighted batch"));
    let mut g = base.clone();
    let total = model.log_lik_and_add_grad(theta, batch, weight, &mut g, &mut scratch);
    assert_close(&g, &want, REORDER_REL, &format!("{label}: fused gradient"));
    let direct: f64 = log_lik_each(model, theta, batch).iter().sum();
    assert!(
        (total - direct).abs() <= REORDER_REL * direct.abs().max(1.0),
        "{label}: fused value {total} vs {direct}"
    );

    let mut gp = vec![0.0; d];
    model.add_grad_log_prior(theta, &mut gp);
    let fd = central_diff(theta, |t| model.log_prior(t));
    assert_close(&gp, &fd, FD_REL, &format!("{label}: prior"));
}

fn all(n: usize) -> Vec<DataIndex> {
    (0..n as DataIndex).collect()
}

/// Break-once check: replacing `s * (y / softplus(z) - 1.0)` by `s * (y / softplus(z))` in
/// `Poisson::dlog_lik_dz` made the softplus cases fail at "datum 0".
#[test]
fn poisson_gradients_match_finite_differences() {
    let w = [0.4, -0.3, 0.2];
    for (link, as_f32, intercept) in [
        (PoissonLink::Log, false, true),
        (PoissonLink::Log, true, false),
        (PoissonLink::Softplus, false, true),
        (PoissonLink::Softplus, true, true),
    ] {
        let (x, y) = poisson_data(11, 40, &w, 1.0, link);
        let model = Glm::new(
            dataset(x, 3, Some(y), as_f32),
            Poisson::new(link),
            NormalPrior::new(2.0).unwrap(),
            intercept,
        )
        .unwrap();
        let theta = normals(12, 0, model.dim());
        let theta: Vec<f64> = theta.iter().map(|t| 0.5 * t).collect();
        let batch: Vec<DataIndex> = vec![0, 7, 7, 39, 12, 3];
        check_gradients(
            &model,
            &theta,
            &batch,
            &format!("poisson {link:?} f32={as_f32}"),
        );
    }
}

/// log_lik_each against the direct formulas y·log λ − λ (log link: λ = eᶻ; softplus link:
/// λ = ln(1 + eᶻ)), computed independently here, over 300 rows in a scattered order (more than
/// two chunks of the kernel), with the features stored as f64 and as f32. Break-once checks:
/// dropping `y *` from `Poisson::log_lik` failed this test; so did gathering the targets of
/// the first chunk only in `Glm::log_lik_of_predictors`.
#[test]
fn poisson_log_lik_agrees_with_the_direct_formula() {
    let w = [0.4, -0.3];
    let n = 300;
    // A scattered batch: every row once, in the order 7k mod 300.
    let batch: Vec<DataIndex> = (0..n).map(|k| ((7 * k) % n) as DataIndex).collect();
    for link in [PoissonLink::Log, PoissonLink::Softplus] {
        for as_f32 in [false, true] {
            let (x, y) = poisson_data(21, n, &w, 0.5, link);
            let x: Vec<f64> = if as_f32 {
                x.iter().map(|&v| f64::from(v as f32)).collect()
            } else {
                x
            };
            let model = Glm::new(
                dataset(x.clone(), 2, Some(y.clone()), as_f32),
                Poisson::new(link),
                NormalPrior::new(1.0).unwrap(),
                true,
            )
            .unwrap();
            let theta = [0.35, -0.2, 0.7];
            let got = log_lik_each(&model, &theta, &batch);
            for (k, &i) in batch.iter().enumerate() {
                let i = i as usize;
                let z = x[2 * i] * theta[0] + x[2 * i + 1] * theta[1] + theta[2];
                let lambda = match link {
                    PoissonLink::Log => z.exp(),
                    PoissonLink::Softplus => (1.0 + z.exp()).ln(),
                };
                let want = y[i] * lambda.ln() - lambda;
                assert!(
                    (got[k] - want).abs() <= 1e-12 * want.abs().max(1.0),
                    "{link:?} f32={as_f32} row {i}: {} vs {want}",
                    got[k]
                );
            }
        }
    }
}

/// The softplus link at η = ±800 through the model: finite log-likelihoods and gradients with
/// the asymptotic values (η = −800: log λ = η, ℓ = y·η, ∂ℓ/∂η = y; η = 800: λ = 800,
/// ∂ℓ/∂η = y/800 − 1). Break-once check: log λ = ln(softplus(z)) for every z (no z < −700
/// branch) gave ℓ = [−∞, NaN] at η = −800.
#[test]
fn softplus_link_is_finite_at_plus_minus_800() {
    // One feature equal to 1, θ = η: z = η exactly.
    let model = Glm::new(
        dataset(vec![1.0, 1.0], 1, Some(vec![3.0, 0.0]), false),
        Poisson::new(PoissonLink::Softplus),
        NormalPrior::new(1.0).unwrap(),
        false,
    )
    .unwrap();
    let mut scratch = Scratch::new();
    for eta in [-800.0, 800.0] {
        let l = log_lik_each(&model, &[eta], &[0, 1]);
        let mut g = [f64::NAN; 2];
        model.grad_log_lik_each(&[eta], &[0, 1], &mut g, &mut scratch);
        let (want_l, want_g) = if eta < 0.0 {
            ([3.0 * eta, 0.0], [3.0, 0.0])
        } else {
            (
                [3.0 * 800f64.ln() - 800.0, -800.0],
                [3.0 / 800.0 - 1.0, -1.0],
            )
        };
        for k in 0..2 {
            assert!(
                l[k].is_finite() && g[k].is_finite(),
                "η = {eta}: {l:?} {g:?}"
            );
            assert!(
                (l[k] - want_l[k]).abs() <= 1e-12 * want_l[k].abs().max(1.0),
                "{eta} {l:?}"
            );
            assert!((g[k] - want_g[k]).abs() <= 1e-12, "{eta} {g:?}");
        }
    }
}

/// Logistic regression with the Cauchy prior: gradients (prior included) against finite
/// differences, the prior against its closed form, and the normal prior unchanged through
/// `Glm::new`'s conversion. Break-once check: a Cauchy `add_grad` without the factor 2 failed
/// at "logistic cauchy: prior".
#[test]
fn logistic_with_a_cauchy_prior() {
    let (x, y) = common::logistic_data(31, 50, &[1.0, -0.5, 0.25], 0.3);
    let theta = [0.8, -3.0, 12.0, 0.1];
    let cauchy = Glm::new(
        dataset(x.clone(), 3, Some(y.clone()), false),
        Bernoulli,
        CauchyPrior::new(2.0).unwrap(),
        true,
    )
    .unwrap();
    check_gradients(&cauchy, &theta, &[0, 5, 9, 49], "logistic cauchy");
    let want: f64 = theta.iter().map(|t| -(1.0 + (t / 2.0).powi(2)).ln()).sum();
    assert!((cauchy.log_prior(&theta) - want).abs() < 1e-13);
    let normal = Glm::new(
        dataset(x, 3, Some(y), false),
        Bernoulli,
        NormalPrior::new(4.0).unwrap(),
        true,
    )
    .unwrap();
    let want: f64 = -theta.iter().map(|t| t * t).sum::<f64>() / 8.0;
    assert_eq!(normal.log_prior(&theta), want);
    // The heavy tail: a prior draw of 4000 coordinates has some beyond 100·s (P ≈ 0.0064 each,
    // so ≈ 25 expected; a normal prior of any moderate variance gives none).
    let mut draws = vec![0.0; 4000];
    CauchyPrior::new(1.0)
        .unwrap()
        .sample(&mut stream(5, 0), &mut draws);
    let far = draws.iter().filter(|v| v.abs() > 100.0).count();
    assert!((8..=50).contains(&far), "{far} draws beyond 100");
}

fn bt_dataset(x: Vec<f64>, y: Vec<f64>) -> Dataset {
    let mut ds = dataset(x, 2, Some(y), false);
    ds.feature_names = vec!["HOME_TEAM_ID".into(), "VISITOR_TEAM_ID".into()];
    ds
}

/// Bradley–Terry: team ids map to parameters in increasing id order, `team[ID]` names; the
/// O(batch) overrides agree with the per-datum rows; gradients match finite differences at
/// s = 400 and s = 1; log_lik_each is y·log σ(a) + (1 − y)·log σ(−a).
/// Break-once check: swapping the sign of the visitor's entry in `add_grad_log_lik`
/// (`+= r`) failed at "Σ = batch".
#[test]
fn bradley_terry_gradients_and_log_lik() {
    // 300 games: more than two chunks of the vectorised log σ.
    let (x, y, ids) = games(41, 300);
    for scale in [BradleyTerry::DEFAULT_SCALE, 1.0] {
        let model = BradleyTerry::new(
            bt_dataset(x.clone(), y.clone()),
            scale,
            NormalPrior::new(1.0).unwrap(),
        )
        .unwrap();
        assert_eq!(model.dim(), 5);
        assert_eq!(model.team_ids(), &ids[..]);
        assert_eq!(model.parameter_names()[0], "team[7]");
        assert_eq!(model.parameter_names()[4], "team[1610612760]");
        let theta: Vec<f64> = normals(42, 0, 5).iter().map(|t| 2.0 * t).collect();
        check_gradients(
            &model,
            &theta,
            &[0, 3, 3, 17, 299],
            &format!("bt s={scale}"),
        );
        let got = log_lik_each(&model, &theta, &all(300));
        for i in 0..300 {
            let idx = |id: f64| ids.iter().position(|&t| t as f64 == id).unwrap();
            let a = (theta[idx(x[2 * i])] - theta[idx(x[2 * i + 1])]) / scale;
            let sig = |u: f64| 1.0 / (1.0 + (-u).exp());
            let want = y[i] * sig(a).ln() + (1.0 - y[i]) * sig(-a).ln();
            assert!(
                (got[i] - want).abs() < 1e-13,
                "game {i}: {} vs {want}",
                got[i]
            );
        }
    }
}

/// Strength differences of ±10⁶ (a = ±2500 at s = 400): finite, ℓ = 0 for the expected
/// winner and ℓ = a for the upset, gradients finite (0 or ±1/s). Break-once check: log σ as
/// the reference's −log1p(e⁻ᵃ) without its a < −300 branch gave ℓ = −∞ for the upset at +10⁶
/// (with the vectorised functions, 2026-11-29; before, with libm's, the same).
#[test]
fn bradley_terry_is_finite_at_extreme_differences() {
    // Game 0: team 1 hosts team 2 and wins; game 1: same teams, the host loses.
    let model = BradleyTerry::new(
        bt_dataset(vec![1.0, 2.0, 1.0, 2.0], vec![1.0, 0.0]),
        400.0,
        NormalPrior::new(1.0).unwrap(),
    )
    .unwrap();
    let mut scratch = Scratch::new();
    for diff in [1e6, -1e6] {
        let theta = [diff / 2.0, -diff / 2.0];
        let l = log_lik_each(&model, &theta, &[0, 1]);
        let a = diff / 400.0;
        let want = if diff > 0.0 { [0.0, -a] } else { [a, 0.0] };
        assert_eq!(l, want, "difference {diff}");
        let mut g = [f64::NAN; 4];
        model.grad_log_lik_each(&theta, &[0, 1], &mut g, &mut scratch);
        assert!(g.iter().all(|v| v.is_finite()), "{g:?}");
        let mut total = [0.0; 2];
        let value = model.log_lik_and_add_grad(&theta, &[0, 1], 1.0, &mut total, &mut scratch);
        assert!(value.is_finite() && total.iter().all(|v| v.is_finite()));
        assert!((total[0] - (if diff > 0.0 { -1.0 } else { 1.0 }) / 400.0).abs() < 1e-15);
    }
}

/// Break-once check: with the plays-itself check disabled the first case built a model.
#[test]
fn bradley_terry_rejects_bad_games() {
    let prior = NormalPrior::new(1.0).unwrap();
    let e = BradleyTerry::new(
        bt_dataset(vec![1.0, 2.0, 3.0, 3.0], vec![1.0, 0.0]),
        400.0,
        prior,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("row 2") && e.contains("plays itself"), "{e}");
    let e = BradleyTerry::new(bt_dataset(vec![1.0, 2.5], vec![1.0]), 400.0, prior)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("row 1") && e.contains("VISITOR_TEAM_ID"), "{e}");
    let e = BradleyTerry::new(bt_dataset(vec![1.0, 2.0], vec![2.0]), 400.0, prior)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("row 1") && e.contains("label 2"), "{e}");
    let e = BradleyTerry::new(bt_dataset(vec![1.0, 2.0], vec![1.0]), 0.0, prior)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("scale"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Loaders.
// ---------------------------------------------------------------------------------------------

const BIKE_ROW: &str = "0.1,-0.2,0.3,-0.4,0.5,-0.6,0.7,-0.8,1.0,12\n";

/// Break-once check: with the intercept-column check disabled the "must be 1.0" case loaded.
#[test]
fn bike_sharing_loader_reads_rows_and_names_problems() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "poisson_reg.csv",
        &format!("{BIKE_ROW}{}", BIKE_ROW.replace(",12", ",0")),
    );
    let ds = load_bike_sharing(dir.path()).unwrap(); // the directory finds poisson_reg.csv
    assert_eq!((ds.rows(), ds.cols()), (2, 9));
    assert_eq!(ds.targets.as_deref(), Some(&[12.0, 0.0][..]));
    assert_eq!(ds.feature_names[8], "intercept");
    assert_eq!(ds.feature_names[0], "x1");
    let sgmcmc::data::Features::F64(m) = &ds.features else {
        panic!()
    };
    assert_eq!(m.row(1), &[0.1, -0.2, 0.3, -0.4, 0.5, -0.6, 0.7, -0.8, 1.0]);
    assert_eq!(load_bike_sharing(&p).unwrap().rows(), 2);

    let err = |text: &str| {
        let p = write(dir.path(), "bad.csv", text);
        load_bike_sharing(&p).unwrap_err().to_string()
    };
    let e = err(&format!("{BIKE_ROW}0.1,0.2,1.0,5\n"));
    assert!(e.contains("row 2") && e.contains("4 fields but 10"), "{e}");
    let e = err(&format!("{BIKE_ROW}{}", BIKE_ROW.replace("0.5", "abc")));
    assert!(
        e.contains("row 2") && e.contains("column 5") && e.contains("\"abc\""),
        "{e}"
    );
    let e = err(&BIKE_ROW.replace("1.0,12", "0.0,12"));
    assert!(
        e.contains("row 1") && e.contains("intercept column must be 1.0"),
        "{e}"
    );
    let e = err("");
    assert!(e.contains("0 rows"), "{e}");
    // A count that is not a non-negative integer is the model's error, naming the row.
    let p = write(
        dir.path(),
        "c.csv",
        &format!("{BIKE_ROW}{}", BIKE_ROW.replace(",12", ",2.5")),
    );
    let e = Glm::new(
        load_bike_sharing(&p).unwrap(),
        Poisson::new(PoissonLink::Softplus),
        NormalPrior::new(1.0).unwrap(),
        false,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        e.contains("row 2") && e.contains("non-negative integer"),
        "{e}"
    );
}

/// Break-once check: accepting "2" as a home win made the HOME_TEAM_WINS case load.
#[test]
fn nba_loader_finds_columns_by_name_and_names_problems() {
    let dir = tempfile::tempdir().unwrap();
    // Gzipped, with an empty box-score field (ignored) and columns in the file's own order.
    let text = format!("{NBA_HEADER}\n2022-12-22,1,30,20,126,1\n2022-12-21,2,10,30,,0\n");
    let p = dir.path().join("games.csv.gz");
    {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&p).unwrap(),
            flate2::Compression::default(),
        );
        gz.write_all(text.as_bytes()).unwrap();
        gz.finish().unwrap();
    }
    let ds = load_nba_games(dir.path()).unwrap();
    assert_eq!((ds.rows(), ds.cols()), (2, 2));
    assert_eq!(ds.targets.as_deref(), Some(&[1.0, 0.0][..]));
    let model = BradleyTerry::new(ds, 400.0, NormalPrior::new(1.0).unwrap()).unwrap();
    assert_eq!(
        model.parameter_names(),
        ["team[10]", "team[20]", "team[30]"]
    );

    let err = |text: &str| {
        let p = write(dir.path(), "g.csv", text);
        load_nba_games(&p).unwrap_err().to_string()
    };
    let e = err("GAME_ID,HOME_TEAM_ID,HOME_TEAM_WINS\n1,2,1\n");
    assert!(
        e.contains("\"VISITOR_TEAM_ID\" not found") && e.contains("\"GAME_ID\""),
        "{e}"
    );
    let e = err(&format!("{NBA_HEADER}\nd,1,30,20,1,1\nd,2,30,x20,1,0\n"));
    assert!(
        e.contains("row 2") && e.contains("VISITOR_TEAM_ID") && e.contains("x20"),
        "{e}"
    );
    let e = err(&format!("{NBA_HEADER}\nd,1,30,20,1,2\n"));
    assert!(
        e.contains("row 1") && e.contains("HOME_TEAM_WINS") && e.contains("0 or 1"),
        "{e}"
    );
    let e = err(&format!("{NBA_HEADER}\nd,1,30\n"));
    assert!(e.contains("row 1") && e.contains("3 fields"), "{e}");
    let e = err("");
    assert!(e.contains("empty"), "{e}");
    let e = err(&format!("{NBA_HEADER}\n"));
    assert!(e.contains("0 rows"), "{e}");
}

/// Break-once check: the files' order kept (no reordering) put 100 first and failed.
#[test]
fn stan_reference_is_reordered_to_the_model_order() {
    let dir = tempfile::tempdir().unwrap();
    // Intercept first in the files: mean (100, 1..8), cov diagonal (0.5, 1..8) with one
    // intercept covariance 0.25 with x3.
    let mean = (0..9)
        .map(|k| if k == 0 { 100.0 } else { k as f64 })
        .map(|v| v.to_string());
    write(
        dir.path(),
        "stan_posterior_mean.csv",
        &(mean.collect::<Vec<_>>().join(",") + "\n"),
    );
    let mut cov = vec![vec![0.0; 9]; 9];
    for (k, row) in cov.iter_mut().enumerate() {
        row[k] = if k == 0 { 0.5 } else { k as f64 };
    }
    cov[0][3] = 0.25;
    cov[3][0] = 0.25;
    let text: String = cov
        .iter()
        .map(|r| {
            r.iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(",")
                + "\n"
        })
        .collect();
    write(dir.path(), "stan_posterior_cov.csv", &text);
    let r = load_bike_sharing_reference(dir.path()).unwrap();
    r.validate().unwrap();
    assert_eq!(r.mean, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 100.0]);
    assert_eq!(r.parameter_names[8], "intercept");
    assert_eq!(r.sd[8], 0.5f64.sqrt());
    assert_eq!(r.sd[2], 3f64.sqrt());
    // x3 is model index 2, the intercept index 8.
    assert_eq!(r.covariance[2 * 9 + 8], 0.25);
    assert_eq!(r.covariance[8 * 9 + 2], 0.25);
    assert_eq!(r.covariance[8 * 9 + 3], 0.0);

    cov[1][2] = 9.0;
    let text: String = cov
        .iter()
        .map(|r| {
            r.iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(",")
                + "\n"
        })
        .collect();
    write(dir.path(), "stan_posterior_cov.csv", &text);
    let e = load_bike_sharing_reference(dir.path())
        .unwrap_err()
        .to_string();
    assert!(e.contains("not finite and symmetric"), "{e}");
    write(dir.path(), "stan_posterior_mean.csv", "1,2,3\n");
    let e = load_bike_sharing_reference(dir.path())
        .unwrap_err()
        .to_string();
    assert!(e.contains("expected 9 values"), "{e}");
}

/// The shipped files, when present: 15,641 bike-sharing rows, the Stan reference in model
/// order with positive variances, and the reference mean within 0.2 posterior sd of the
/// posterior mode in every coordinate (one Newton step Σ·∇log π at the mean; with the
/// intercept misplaced the step is thousands of sd), which checks the order and the link; the
/// NBA file's 26,651 games, 30 teams, 15,645 home wins. Break-once check: the files' order
/// kept made the reference mean 116,438 sd from the mode. Note the intercept's mean is the
/// FIRST value of `stan_posterior_mean.csv` (186.05, as the data README says), not the last
/// (0.6119, the coefficient of x8).
#[test]
fn shipped_coreset_data_load() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    let bike = root.join("bike-sharing-poisson");
    if !bike.is_dir() {
        eprintln!("skipped: {} not found", bike.display());
        return;
    }
    let ds = load_bike_sharing(&bike).unwrap();
    assert_eq!((ds.rows(), ds.cols()), (15_641, 9));
    let r = load_bike_sharing_reference(&bike).unwrap();
    assert_eq!(r.mean.len(), 9);
    assert!(r.sd.iter().all(|s| *s > 0.0));
    let model = Glm::new(
        ds,
        Poisson::new(PoissonLink::Softplus),
        NormalPrior::new(1.0).unwrap(),
        false,
    )
    .unwrap();
    assert_eq!(model.parameter_names(), r.parameter_names);
    let newton_step_in_sd = |theta: &[f64]| -> f64 {
        let mut g = vec![0.0; 9];
        model.add_grad_log_prior(theta, &mut g);
        model.add_grad_log_lik(
            theta,
            &all(model.num_data()),
            1.0,
            &mut g,
            &mut Scratch::new(),
        );
        (0..9)
            .map(|k| {
                (0..9)
                    .map(|l| r.covariance[k * 9 + l] * g[l])
                    .sum::<f64>()
                    .abs()
                    / r.sd[k]
            })
            .fold(0.0, f64::max)
    };
    let step = newton_step_in_sd(&r.mean);
    assert!(step < 0.2, "reference mean is {step} sd from the mode");
    let mut swapped = r.mean.clone();
    swapped.swap(0, 8);
    assert!(newton_step_in_sd(&swapped) > 100.0);

    let nba = root.join("nba-games");
    if !nba.is_dir() {
        eprintln!("skipped: {} not found", nba.display());
        return;
    }
    let games = load_nba_games(&nba).unwrap();
    assert_eq!(games.rows(), 26_651);
    let wins: f64 = games.targets.as_ref().unwrap().iter().sum();
    assert_eq!(wins, 15_645.0);
    let model = BradleyTerry::new(games, 400.0, NormalPrior::new(1.0).unwrap()).unwrap();
    assert_eq!(model.dim(), 30);
}

// ---------------------------------------------------------------------------------------------
// Run files through the CLI.
// ---------------------------------------------------------------------------------------------
