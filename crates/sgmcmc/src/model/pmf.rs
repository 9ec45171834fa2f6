//! Bayesian probabilistic matrix factorisation (reference §5.6; MAMBA paper §4.2, App. C.2.1),
//! after Salakhutdinov & Mnih's hierarchical model, with log-precision hyperparameters.
//!
//! Ratings r of user i for item j, with d latent factors per user (Uᵢ) and per item (Vⱼ):
//!
//! ```text
//! r | U, V      ~ N(UᵢᵀVⱼ, α⁻¹)                          α = `precision` (3)
//! Uᵢ | μ_U, λ_U ~ N(μ_U, diag(λ_U)⁻¹)                    Vⱼ likewise with μ_V, λ_V
//! μ_U | λ_U     ~ N(0, diag(λ_U)⁻¹)                      (μ₀ = 0, Λ a precision)
//! λ_U,k         ~ Gamma(a₀, rate b₀), sampled as φ = log λ (a₀ = 4, b₀ = 5)
//! ```
//!
//! Per-rating log-likelihood (constants dropped): ℓ = −(α/2)(r − UᵢᵀVⱼ)². Log prior (constants
//! dropped), for W ∈ {U, V} with n rows, per latent coordinate k:
//!
//! ```text
//! ((n + 1)/2 + a₀)·φ_k − λ_k·(b₀ + ½Σᵢ(W_ik − μ_k)² + ½μ_k²),    λ_k = e^{φ_k}
//! ```
//!
//! (n/2 + 1/2 from the normal normalisers of the rows and of μ, a₀φ − b₀e^φ the Gamma density
//! of λ with the Jacobian e^φ). Its gradient: ∂/∂W_ik = −λ_k(W_ik − μ_k);
//! ∂/∂μ_k = λ_k·Σᵢ(W_ik − μ_k) − λ_k·μ_k; ∂/∂φ_k = (n + 1)/2 + a₀ − λ_k(b₀ + ½Σᵢ(W_ik − μ_k)² + ½μ_k²).
//!
//! # Layout of θ
//!
//! | block            | length    | name of θ entry       |
//! |------------------|-----------|-----------------------|
//! | U, user-major    | users × d | `U[i,k]` (Uᵢ contiguous) |
//! | V, item-major    | items × d | `V[j,k]`              |
//! | μ_U              | d         | `mu_U[k]`             |
//! | μ_V              | d         | `mu_V[k]`             |
//! | φ_U = log λ_U    | d         | `log_lambda_U[k]`     |
//! | φ_V = log λ_V    | d         | `log_lambda_V[k]`     |
//!
//! i and j are the 0-based indices of the data's feature columns (MovieLens id − 1). d = 20 on
//! MovieLens 100K (943 users, 1682 items): D = 52,580.
//!
//! # Cost per iteration (batch of n ratings, D parameters)
//!
//! | part                                              | cost       |
//! |---------------------------------------------------|------------|
//! | likelihood gradient (`add_grad_log_lik`), scatter into Uᵢ, Vⱼ | O(n·d) |
//! | log-likelihood (`log_lik_each`, `log_lik_and_add_grad`)       | O(n·d) |
//! | prior gradient (every θ entry has a prior term)   | O(D)       |
//! | the estimator zeroing its gradient buffer         | O(D)       |
//! | every sampler's noise draw and update (dense θ)   | O(D)       |
//! | `grad_log_lik_each` (dense rows, not a hot path)  | O(n·D)     |
//! | `add_grad_log_lik_terms` (CCAdL: dense terms into [`TermMoments`]) | O(n·D) |
//!
//! At n = 800 and d = 20 the likelihood touches 32,000 coordinates while the O(D) parts
//! touch 52,580 each, so per-iteration time is set by the prior and the sampler update, not
//! by the data.

use super::{
    DataIndex, Model, ModelError, Predictive, PredictiveTask, Scratch, TermMoments, debug_check_dim,
};
use crate::data::{DataError, Dataset, Features, PREFETCH_DISTANCE, prefetch_element};
use crate::rng::ChainRng;
use rand::RngExt;

/// Latent coordinates handled per pass of the prior loops: their λ, μ and sums live on the
/// stack, so the prior needs no workspace (d = 20 is one pass).
const PRIOR_CHUNK: usize = 32;

/// Seed of the fixed stream behind [`Model::map_start`].
const MAP_START_SEED: u64 = 0x0050_4d46_5f4d_4150;

/// Settings of [`Pmf`] (defaults: the paper's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PmfSettings {
    /// Latent dimension d.
    pub latent_dim: usize,
    /// Likelihood precision α.
    pub precision: f64,
    /// Gamma shape a₀ of each λ.
    pub hyper_shape: f64,
    /// Gamma rate b₀ of each λ.
    pub hyper_rate: f64,
    /// Number of users (rows of U); `None`: 1 + the largest user index in the data.
    pub users: Option<usize>,
    /// Number of items (rows of V); `None`: 1 + the largest item index in the data.
    pub items: Option<usize>,
}

impl Default for PmfSettings {
    fn default() -> Self {
        Self {
            latent_dim: 20,
            precision: 3.0,
            hyper_shape: 4.0,
            hyper_rate: 5.0,
            users: None,
            items: None,
        }
    }
}

/// One rating: 0-based user and item indices and the value.
#[derive(Debug, Clone, Copy)]
struct Rating {
    user: u32,
    item: u32,
    value: f64,
}

/// Bayesian PMF (see the module documentation for the model and the layout of θ).
#[derive(Debug, Clone)]
pub struct Pmf {
    ratings: Vec<Rating>,
    users: usize,
    items: usize,
    d: usize,
    alpha: f64,
    a0: f64,
    b0: f64,
    /// Offset of V.
    v0: usize,
    /// Offset of the hyperparameters (μ_U).
    h0: usize,
}

/// x·y with four partial sums (the compiler does not reorder a floating-point fold).
#[inline(always)]
fn dot(x: &[f64], y: &[f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    let (xc, xr) = x.split_at(x.len() & !3);
    let (yc, yr) = y.split_at(xc.len());
    for (a, b) in xc.chunks_exact(4).zip(yc.chunks_exact(4)) {
        for l in 0..4 {
            acc[l] += a[l] * b[l];
        }
    }
    let tail: f64 = xr.iter().zip(yr).map(|(a, b)| a * b).sum();
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// `y += a·x`.
#[inline(always)]
fn axpy(a: f64, x: &[f64], y: &mut [f64]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y += a * x;
    }
}

/// A feature value as a 0-based index below `count`, or `None`.
fn as_index(v: f64, count: usize) -> Option<u32> {
    (v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < count.min(u32::MAX as usize) as f64)
        .then_some(v as u32)
}

impl Pmf {
    /// Build the model from ratings: feature columns (user index, item index), 0-based
    /// integers (as [`crate::data::load_movielens`] writes them), targets = the ratings.
    /// Errors: bad settings, a wrong column count, missing or non-finite ratings, an index
    /// that is not a non-negative integer or is beyond the given `users`/`items` (naming
    /// the source and the 1-based row).
    pub fn new(data: Dataset, settings: PmfSettings) -> Result<Self, ModelError> {
        let PmfSettings {
            latent_dim: d,
            precision: alpha,
            hyper_shape: a0,
            hyper_rate: b0,
            users,
            items,
        } = settings;
        if d == 0 {
            return Err(ModelError::Setting(
                "PMF latent_dim must be at least 1".into(),
            ));
        }
        for (name, v) in [
            ("precision", alpha),
            ("hyper_shape", a0),
            ("hyper_rate", b0),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(ModelError::Setting(format!(
                    "PMF {name} must be finite and > 0, got {v}"
                )));
            }
        }
        for (name, v) in [("users", users), ("items", items)] {
            if v == Some(0) || v.is_some_and(|n| n > u32::MAX as usize) {
                return Err(ModelError::Setting(format!(
                    "PMF {name} must be in 1..=2^32 - 1, got {}",
                    v.unwrap_or(0)
                )));
            }
        }
        let source = data.features_source.clone();
        if data.cols() != 2 {
            return Err(ModelError::Setting(format!(
                "PMF needs 2 feature columns (user index, item index), but {source} has {}",
                data.cols()
            )));
        }
        let ys = data.targets.as_ref().ok_or_else(|| {
            ModelError::Setting(format!(
                "PMF needs the ratings as targets, but {source} has none"
            ))
        })?;
        let target_source = data.targets_source.as_deref().unwrap_or(&source);
        check_ratings(ys, target_source)?;
        let value = |i: usize, j: usize| data.features.get(i, j);
        let limit = [
            users.unwrap_or(u32::MAX as usize),
            items.unwrap_or(u32::MAX as usize),
        ];
        let mut ratings = Vec::with_capacity(data.rows());
        let mut max = [0u32; 2];
        for (row, &r) in ys.iter().enumerate() {
            let mut idx = [0u32; 2];
            for c in 0..2 {
                let v = value(row, c);
                idx[c] = as_index(v, limit[c])
                    .ok_or_else(|| index_error(&source, row, c, v, [users, items][c]))?;
                max[c] = max[c].max(idx[c]);
            }
            ratings.push(Rating {
                user: idx[0],
                item: idx[1],
                value: r,
            });
        }
        let users = users.unwrap_or(max[0] as usize + 1);
        let items = items.unwrap_or(max[1] as usize + 1);
        let v0 = users * d;
        let h0 = v0 + items * d;
        Ok(Self {
            ratings,
            users,
            items,
            d,
            alpha,
            a0,
            b0,
            v0,
            h0,
        })
    }

    /// Number of users (rows of U).
    pub fn users(&self) -> usize {
        self.users
    }

    /// Number of items (rows of V).
    pub fn items(&self) -> usize {
        self.items
    }

    /// Latent dimension d.
    pub fn latent_dim(&self) -> usize {
        self.d
    }

    /// Likelihood precision α.
    pub fn precision(&self) -> f64 {
        self.alpha
    }

    /// θ range of Uᵢ (0-based user index).
    pub fn user_factor(&self, i: usize) -> std::ops::Range<usize> {
        i * self.d..(i + 1) * self.d
    }

    /// θ range of Vⱼ (0-based item index).
    pub fn item_factor(&self, j: usize) -> std::ops::Range<usize> {
        self.v0 + j * self.d..self.v0 + (j + 1) * self.d
    }

    /// θ ranges of (μ_U, μ_V, φ_U, φ_V).
    pub fn hyper_blocks(&self) -> [std::ops::Range<usize>; 4] {
        let d = self.d;
        std::array::from_fn(|b| self.h0 + b * d..self.h0 + (b + 1) * d)
    }

    /// The W blocks: (offset, rows, μ offset, φ offset) of U and of V.
    fn blocks(&self) -> [(usize, usize, usize, usize); 2] {
        let [mu_u, mu_v, phi_u, phi_v] = self.hyper_blocks();
        [
            (0, self.users, mu_u.start, phi_u.start),
            (self.v0, self.items, mu_v.start, phi_v.start),
        ]
    }

    /// e = r − UᵢᵀVⱼ and the θ offsets of Uᵢ and Vⱼ for datum `n`.
    #[inline(always)]
    fn residual(&self, theta: &[f64], n: DataIndex) -> (f64, usize, usize) {
        let r = self.ratings[n as usize];
        let d = self.d;
        let u = r.user as usize * d;
        let v = self.v0 + r.item as usize * d;
        (r.value - dot(&theta[u..u + d], &theta[v..v + d]), u, v)
    }

    /// Prefetch for `batch[k]`'s successors: the record `2·PREFETCH_DISTANCE` places on, and
    /// the first and last elements of the θ and gradient rows of the one `PREFETCH_DISTANCE`
    /// on (records 1.3 MB, θ and the gradient 420 KB each on MovieLens 100K: random rows miss
    /// L1). Hints only: results are bitwise those without it.
    #[inline(always)]
    fn prefetch(&self, theta: &[f64], grad: &[f64], batch: &[DataIndex], k: usize) {
        if let Some(&n) = batch.get(k + 2 * PREFETCH_DISTANCE) {
            prefetch_element(&self.ratings, n as usize);
        }
        if let Some(&n) = batch.get(k + PREFETCH_DISTANCE) {
            let r = self.ratings[n as usize];
            let d = self.d;
            let u = r.user as usize * d;
            let v = self.v0 + r.item as usize * d;
            for at in [u, u + d - 1, v, v + d - 1] {
                prefetch_element(theta, at);
                prefetch_element(grad, at);
            }
        }
    }

    /// log p of one W block (rows `n` at `w0`, μ at `m0`, φ at `p0`), constants dropped.
    fn log_prior_block(&self, theta: &[f64], (w0, n, m0, p0): (usize, usize, usize, usize)) -> f64 {
        let d = self.d;
        let half_count = 0.5 * (n as f64 + 1.0) + self.a0;
        let w = &theta[w0..w0 + n * d];
        let mut total = 0.0;
        for c0 in (0..d).step_by(PRIOR_CHUNK) {
            let c = PRIOR_CHUNK.min(d - c0);
            let mu = &theta[m0 + c0..m0 + c0 + c];
            let mut ss = [0.0f64; PRIOR_CHUNK];
            for row in w.chunks_exact(d) {
                for ((s, &x), &m) in ss.iter_mut().zip(&row[c0..c0 + c]).zip(mu) {
                    let z = x - m;
                    *s += z * z;
                }
            }
            for k in 0..c {
                let phi = theta[p0 + c0 + k];
                let lam = phi.exp();
                total += half_count * phi - lam * (self.b0 + 0.5 * ss[k] + 0.5 * mu[k] * mu[k]);
            }
        }
        total
    }

    /// `grad += ∇ log p` of one W block (see [`Self::log_prior_block`]).
    fn add_grad_prior_block(
        &self,
        theta: &[f64],
        grad: &mut [f64],
        (w0, n, m0, p0): (usize, usize, usize, usize),
    ) {
        let d = self.d;
        let half_count = 0.5 * (n as f64 + 1.0) + self.a0;
        let w = &theta[w0..w0 + n * d];
        for c0 in (0..d).step_by(PRIOR_CHUNK) {
            let c = PRIOR_CHUNK.min(d - c0);
            let mu = &theta[m0 + c0..m0 + c0 + c];
            let mut lam = [0.0f64; PRIOR_CHUNK];
            for (l, &phi) in lam.iter_mut().zip(&theta[p0 + c0..p0 + c0 + c]) {
                *l = phi.exp();
            }
            let lam = &lam[..c];
            // s1 = Σᵢ(W_ik − μ_k), s2 = Σᵢ(W_ik − μ_k)².
            let mut s1 = [0.0f64; PRIOR_CHUNK];
            let mut s2 = [0.0f64; PRIOR_CHUNK];
            let gw = &mut grad[w0..w0 + n * d];
            let (s1, s2) = (&mut s1[..c], &mut s2[..c]);
            for (row, grow) in w.chunks_exact(d).zip(gw.chunks_exact_mut(d)) {
                let (row, grow) = (&row[c0..c0 + c], &mut grow[c0..c0 + c]);
                for k in 0..c {
                    let z = row[k] - mu[k];
                    grow[k] -= lam[k] * z;
                    s1[k] += z;
                    s2[k] += z * z;
                }
            }
            for k in 0..c {
                let (m, l) = (mu[k], lam[k]);
                grad[m0 + c0 + k] += l * (s1[k] - m);
                grad[p0 + c0 + k] += half_count - l * (self.b0 + 0.5 * s2[k] + 0.5 * m * m);
            }
        }
    }
}

/// Ratings must be finite; an error naming the source and the 1-based row.
fn check_ratings(ys: &[f64], source: &str) -> Result<(), ModelError> {
    match ys.iter().position(|y| !y.is_finite()) {
        None => Ok(()),
        Some(i) => Err(ModelError::Data(DataError::NonFinite {
            source_name: source.to_string(),
            row: i + 1,
            column: None,
            kind: if ys[i].is_nan() {
                "NaN"
            } else if ys[i] > 0.0 {
                "inf"
            } else {
                "-inf"
            },
        })),
    }
}

/// "row R: user index v is not an integer in 0..n" for a bad index in column `c` of 0-based
/// `row` (n = the model's count, when known).
fn index_error(source: &str, row: usize, c: usize, v: f64, count: Option<usize>) -> ModelError {
    let what = ["user", "item"][c];
    let range = match count {
        Some(n) => format!("0..{n} (the model has {n} {what}s; ids are index + 1)"),
        None => "0..2^32 - 1".to_string(),
    };
    ModelError::Setting(format!(
        "{source}: row {}: {what} index {v} is not an integer in {range}",
        row + 1
    ))
}

impl Model for Pmf {
    fn name(&self) -> &'static str {
        "pmf"
    }

    fn dim(&self) -> usize {
        self.h0 + 4 * self.d
    }

    fn num_data(&self) -> usize {
        self.ratings.len()
    }

    fn parameter_names(&self) -> Vec<String> {
        let d = self.d;
        let mut names = Vec::with_capacity(self.dim());
        for (w, n) in [("U", self.users), ("V", self.items)] {
            for i in 0..n {
                names.extend((0..d).map(|k| format!("{w}[{i},{k}]")));
            }
        }
        for block in ["mu_U", "mu_V", "log_lambda_U", "log_lambda_V"] {
            names.extend((0..d).map(|k| format!("{block}[{k}]")));
        }
        names
    }

    fn log_prior(&self, theta: &[f64]) -> f64 {
        debug_check_dim(self, theta);
        self.blocks()
            .into_iter()
            .map(|b| self.log_prior_block(theta, b))
            .sum()
    }

    fn add_grad_log_prior(&self, theta: &[f64], grad: &mut [f64]) {
        debug_check_dim(self, theta);
        for b in self.blocks() {
            self.add_grad_prior_block(theta, grad, b);
        }
    }

    fn log_lik_each(&self, theta: &[f64], batch: &[DataIndex], out: &mut [f64], _s: &mut Scratch) {
        debug_check_dim(self, theta);
        let half_alpha = 0.5 * self.alpha;
        for (o, &n) in out.iter_mut().zip(batch) {
            let (e, _, _) = self.residual(theta, n);
            *o = -half_alpha * e * e;
        }
    }

    /// Row k is zero except α·e·Vⱼ at Uᵢ and α·e·Uᵢ at Vⱼ (not a hot path: the batch methods
    /// never write dense rows).
    fn grad_log_lik_each(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        out: &mut [f64],
        _s: &mut Scratch,
    ) {
        debug_check_dim(self, theta);
        let (dim, d) = (theta.len(), self.d);
        for (row, &n) in out.chunks_exact_mut(dim).zip(batch) {
            let (e, u, v) = self.residual(theta, n);
            let c = self.alpha * e;
            row.fill(0.0);
            axpy(c, &theta[v..v + d], &mut row[u..u + d]);
            axpy(c, &theta[u..u + d], &mut row[v..v + d]);
        }
    }

    /// Scatters w·α·e·Vⱼ into Uᵢ and w·α·e·Uᵢ into Vⱼ: O(batch·d), no other coordinate read
    /// or written.
    fn add_grad_log_lik(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
        _s: &mut Scratch,
    ) {
        debug_check_dim(self, theta);
        let d = self.d;
        let wa = weight * self.alpha;
        for (k, &n) in batch.iter().enumerate() {
            self.prefetch(theta, grad, batch, k);
            let (e, u, v) = self.residual(theta, n);
            let c = wa * e;
            axpy(c, &theta[v..v + d], &mut grad[u..u + d]);
            axpy(c, &theta[u..u + d], &mut grad[v..v + d]);
        }
    }

    fn log_lik_and_add_grad(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
        _s: &mut Scratch,
    ) -> f64 {
        debug_check_dim(self, theta);
        let d = self.d;
        let wa = weight * self.alpha;
        let mut sse = 0.0;
        for (k, &n) in batch.iter().enumerate() {
            self.prefetch(theta, grad, batch, k);
            let (e, u, v) = self.residual(theta, n);
            sse += e * e;
            let c = wa * e;
            axpy(c, &theta[v..v + d], &mut grad[u..u + d]);
            axpy(c, &theta[u..u + d], &mut grad[v..v + d]);
        }
        -0.5 * self.alpha * sse
    }

    /// One dense term at a time, written straight into the accumulator's own row
    /// ([`TermMoments::add_with`]): nothing of size batch × D is materialised. The
    /// accumulator's O(D) per term dominates (it keeps dense moments); the gradient itself is
    /// scattered as in [`Model::add_grad_log_lik`].
    fn add_grad_log_lik_terms(
        &self,
        theta: &[f64],
        centre: Option<&[f64]>,
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
        moments: &mut TermMoments,
        _s: &mut Scratch,
    ) {
        debug_check_dim(self, theta);
        let (d, alpha) = (self.d, self.alpha);
        for &n in batch {
            let (e, u, v) = self.residual(theta, n);
            let at_centre = centre.map(|c| (self.residual(c, n).0, c));
            moments.add_with(|t| {
                t.fill(0.0);
                axpy(alpha * e, &theta[v..v + d], &mut t[u..u + d]);
                axpy(alpha * e, &theta[u..u + d], &mut t[v..v + d]);
                if let Some((ec, c)) = at_centre {
                    axpy(-alpha * ec, &c[v..v + d], &mut t[u..u + d]);
                    axpy(-alpha * ec, &c[u..u + d], &mut t[v..v + d]);
                }
                axpy(weight, &t[u..u + d], &mut grad[u..u + d]);
                axpy(weight, &t[v..v + d], &mut grad[v..v + d]);
            });
        }
    }

    /// φ_k = log λ_k with λ_k ~ Gamma(a₀, rate b₀), then μ ~ N(0, diag(λ)⁻¹), then each row
    /// ~ N(μ, diag(λ)⁻¹); U's block first, then V's.
    /// U = V = 0 is a stationary point of the likelihood (∇_U vanishes at V = 0), so L-BFGS
    /// from zeros would fit only the hyperparameters. The MAP search starts instead from factors
    /// drawn i.i.d. N(0, 0.1²) from a fixed stream (the same point for every run), μ = 0 and
    /// λ = 1 (φ = 0).
    fn map_start(&self) -> Vec<f64> {
        let mut theta = vec![0.0; self.dim()];
        let mut rng = crate::rng::stream(MAP_START_SEED, 0);
        let factors = (self.users + self.items) * self.d;
        for v in &mut theta[..factors] {
            *v = 0.1 * rng.sample::<f64, _>(rand_distr::StandardNormal);
        }
        theta
    }

    fn sample_prior(&self, rng: &mut ChainRng, out: &mut [f64]) -> Result<(), ModelError> {
        if out.len() != self.dim() {
            return Err(ModelError::Setting(format!(
                "PMF prior draw needs a buffer of {} values, got {}",
                self.dim(),
                out.len()
            )));
        }
        let gamma = rand_distr::Gamma::new(self.a0, 1.0 / self.b0)
            .map_err(|e| ModelError::Setting(format!("PMF hyperprior: {e}")))?;
        let d = self.d;
        for (w0, n, m0, p0) in self.blocks() {
            for k in 0..d {
                let lam: f64 = rng.sample(gamma);
                let sd = lam.sqrt().recip();
                out[p0 + k] = lam.ln();
                let mu = sd * rng.sample::<f64, _>(rand_distr::StandardNormal);
                out[m0 + k] = mu;
                for i in 0..n {
                    out[w0 + i * d + k] =
                        mu + sd * rng.sample::<f64, _>(rand_distr::StandardNormal);
                }
            }
        }
        Ok(())
    }
}

impl Predictive for Pmf {
    fn task(&self) -> PredictiveTask {
        PredictiveTask::Regression
    }

    fn input_columns(&self) -> usize {
        2
    }

    fn prepare_held_out_targets(&self, ys: &[f64], source: &str) -> Result<Vec<f64>, ModelError> {
        check_ratings(ys, source)?;
        Ok(ys.to_vec())
    }

    fn check_held_out_features(&self, features: &Features, source: &str) -> Result<(), ModelError> {
        let counts = [self.users, self.items];
        for row in 0..features.rows() {
            for (c, &count) in counts.iter().enumerate() {
                let v = features.get(row, c);
                if as_index(v, count).is_none() {
                    return Err(index_error(source, row, c, v, Some(count)));
                }
            }
        }
        Ok(())
    }

    /// E[r] = UᵢᵀVⱼ and log p(r) = ½log(α/2π) − (α/2)(r − UᵢᵀVⱼ)², for x = (i, j); NaN for
    /// an index outside the model (which [`Predictive::check_held_out_features`] rejects).
    fn predict(&self, theta: &[f64], x: &[f64], y: f64, out: &mut [f64]) -> f64 {
        let (Some(i), Some(j)) = (as_index(x[0], self.users), as_index(x[1], self.items)) else {
            out[0] = f64::NAN;
            return f64::NAN;
        };
        let d = self.d;
        let (u, v) = (i as usize * d, self.v0 + j as usize * d);
        let z = dot(&theta[u..u + d], &theta[v..v + d]);
        out[0] = z;
        let e = y - z;
        0.5 * (self.alpha / std::f64::consts::TAU).ln() - 0.5 * self.alpha * e * e
    }
}
