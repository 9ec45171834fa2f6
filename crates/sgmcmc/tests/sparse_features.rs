//! GLMs on sparse (CSR) features give what they give on the same rows stored densely, for
//! every model method the samplers, control variates, SVRG, CCAdL's terms, the MH test, MAP,
//! NUTS and the scores use: uniform batches, contiguous blocks and full passes, every family.
//!
//! The sparse kernels skip the zeros, so their sums add the same non-zero products in the same
//! order as the dense ones minus exact zeros: equal to rounding (≲ 1e-12 relative here; the
//! block-of-draws route regroups sums in its GEMMs), while a dropped entry, a wrong column or a
//! row taken from its neighbour is O(1).
//!
//! Broken once to see these fail (2026-11-26): `SparseRow::axpy` writing to column j + 1
//! failed `sparse_glms_equal_dense_glms` at the first gradient compared.

use crate::common;

use common::{dataset, linear_data, logistic_data, normals};
use sgmcmc::data::{CsrMatrix, Dataset, Features};
use sgmcmc::estimator::FullDataEvaluator;
use sgmcmc::model::{
    Bernoulli, CovarianceShape, DataIndex, Glm, LinearRegression, LogisticRegression, Model,
    NoiseModel, Normal, NormalPrior, Poisson, PoissonLink, PoissonRegression, Scratch, TermMoments,
};

const REL: f64 = 1e-12;

fn assert_close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    for (j, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= REL * scale,
            "{what}: entry {j}: sparse {a}, dense {b}"
        );
    }
}

/// Rows with about 80 % zeros (each entry kept with probability 0.2).
fn sparse_rows(x: &[f64], seed: u64) -> Vec<f64> {
    x.iter()
        .zip(normals(seed, 9, x.len()))
        .map(|(&v, u)| if u > 0.84 { v } else { 0.0 })
        .collect()
}

fn as_sparse(x: &[f64], cols: usize, y: Vec<f64>) -> Dataset {
    Dataset {
        features: Features::Sparse(CsrMatrix::from_dense(x, x.len() / cols, cols)),
        targets: Some(y),
        feature_names: Vec::new(),
        features_source: "sparse".into(),
        targets_source: None,
    }
}

/// Every likelihood method of the two models at `theta` (and a centre) on `batch`.
fn compare(sparse: &dyn Model, dense: &dyn Model, theta: &[f64], batch: &[DataIndex], what: &str) {
    let d = dense.dim();
    let mut s = Scratch::new();
    let centre: Vec<f64> = theta.iter().map(|t| 0.9 * t + 0.05).collect();
    let run = |m: &dyn Model, s: &mut Scratch| {
        let mut out = Vec::new();
        let mut g = vec![0.5; d];
        m.add_grad_log_lik(theta, batch, -1.5, &mut g, s);
        out.extend(g);
        let mut g = vec![0.0; d];
        out.push(m.log_lik_and_add_grad(theta, batch, 2.0, &mut g, s));
        out.extend(g);
        let mut each = vec![0.0; batch.len() * d];
        m.grad_log_lik_each(theta, batch, &mut each, s);
        out.extend(each);
        let mut ll = vec![0.0; batch.len()];
        m.log_lik_each(theta, batch, &mut ll, s);
        out.extend(ll);
        for c in [None, Some(centre.as_slice())] {
            let mut g = vec![0.0; d];
            let mut moments = TermMoments::new(CovarianceShape::Full, d);
            moments.begin();
            m.add_grad_log_lik_terms(theta, c, batch, 3.0, &mut g, &mut moments, s);
            out.extend(g);
            let mut m2 = vec![0.0; d * d];
            moments.add_centred_second_moments(1.0, &mut m2);
            out.extend(m2);
        }
        let thetas: Vec<f64> = theta.iter().chain(&centre).copied().collect();
        let mut grads = vec![0.25; 2 * d];
        m.add_grad_log_lik_draws(&thetas, batch, &mut grads, s);
        out.extend(grads);
        out
    };
    assert_close(&run(sparse, &mut s), &run(dense, &mut s), what);
}

fn batches(n: usize) -> Vec<(&'static str, Vec<DataIndex>)> {
    let n32 = n as DataIndex;
    vec![
        ("uniform", vec![n32 - 1, 3, 0, 7, 3, n32 / 2, 11]),
        ("block", (5..5 + 300).collect()),
        ("wrapped block", (n32 - 40..n32).chain(0..60).collect()),
        ("all rows", (0..n32).collect()),
    ]
}

fn check_pair<F: sgmcmc::model::Family>(
    sparse: &Glm<F>,
    dense: &Glm<F>,
    theta: &[f64],
    what: &str,
) {
    assert!(sparse.features().is_sparse() && !dense.features().is_sparse());
    for (name, batch) in batches(dense.num_data()) {
        compare(sparse, dense, theta, &batch, &format!("{what}, {name}"));
    }
    // Full-batch scores at a block of draws and the exact gradient (MAP, NUTS).
    let thetas: Vec<f64> = (0..5)
        .flat_map(|k| theta.iter().map(move |t| t * (1.0 + 0.1 * k as f64)))
        .collect();
    let scores = |m: &dyn Model| {
        let mut out = vec![0.0; thetas.len()];
        FullDataEvaluator::new(m).grad_log_posterior_draws(&thetas, &mut out);
        let mut g = vec![0.0; theta.len()];
        out.push(FullDataEvaluator::new(m).log_posterior_and_grad(theta, &mut g));
        out.extend(g);
        out
    };
    assert_close(
        &scores(sparse),
        &scores(dense),
        &format!("{what}, full passes"),
    );
}

#[test]
fn sparse_glms_equal_dense_glms() {
    let cols = 12;
    let n = 2_000;
    let w: Vec<f64> = (0..cols).map(|j| 0.3 * (j as f64 - 5.5) / 5.5).collect();
    let (x, y) = logistic_data(31, n, &w, 0.2);
    let x = sparse_rows(&x, 32);
    for intercept in [false, true] {
        let make = |data| {
            LogisticRegression::new(data, Bernoulli, NormalPrior::new(3.0).unwrap(), intercept)
                .unwrap()
        };
        let sparse = make(as_sparse(&x, cols, y.clone()));
        let dense = make(dataset(x.clone(), cols, Some(y.clone()), false));
        let theta: Vec<f64> = normals(33, 1, dense.dim())
            .iter()
            .map(|v| 0.5 * v)
            .collect();
        check_pair(
            &sparse,
            &dense,
            &theta,
            &format!("logistic, intercept {intercept}"),
        );
    }

    let (x, y) = linear_data(34, n, &w, -0.4, 0.7);
    let x = sparse_rows(&x, 35);
    let noise = NoiseModel::Learned {
        prior_variance: 2.0,
    };
    let make = |data| {
        LinearRegression::new(
            data,
            Normal::new(noise).unwrap(),
            NormalPrior::new(4.0).unwrap(),
            true,
        )
        .unwrap()
    };
    let sparse = make(as_sparse(&x, cols, y.clone()));
    let dense = make(dataset(x.clone(), cols, Some(y), false));
    let theta: Vec<f64> = normals(36, 1, dense.dim())
        .iter()
        .map(|v| 0.3 * v)
        .collect();
    check_pair(&sparse, &dense, &theta, "linear, learned noise");

    let counts: Vec<f64> = normals(37, 1, n)
        .iter()
        .map(|e| (2.0 + e).round().max(0.0))
        .collect();
    for link in [PoissonLink::Log, PoissonLink::Softplus] {
        let make = |data| {
            PoissonRegression::new(
                data,
                Poisson::new(link),
                NormalPrior::new(2.0).unwrap(),
                true,
            )
            .unwrap()
        };
        let sparse = make(as_sparse(&x, cols, counts.clone()));
        let dense = make(dataset(x.clone(), cols, Some(counts.clone()), false));
        let theta: Vec<f64> = normals(38, 1, dense.dim())
            .iter()
            .map(|v| 0.2 * v)
            .collect();
        check_pair(&sparse, &dense, &theta, &format!("poisson {link:?}"));
    }
}

/// Shuffling and splitting keep sparse rows sparse and move each row whole.
#[test]
fn sparse_rows_shuffle_and_select_whole() {
    let cols = 7;
    let x = sparse_rows(&normals(39, 1, 50 * cols), 40);
    let y: Vec<f64> = (0..50).map(|i| i as f64).collect();
    let data = as_sparse(&x, cols, y);
    let shuffled = data.shuffled(3);
    let Features::Sparse(m) = &shuffled.features else {
        panic!("shuffled rows are still sparse")
    };
    let targets = shuffled.targets.as_ref().unwrap();
    let mut row = vec![0.0; cols];
    for (k, &t) in targets.iter().enumerate() {
        m.row_into(k, &mut row);
        let i = t as usize;
        assert_eq!(
            row,
            x[i * cols..(i + 1) * cols],
            "row {k} is source row {i}"
        );
    }
}
