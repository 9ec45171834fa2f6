//! Finite-set Stein discrepancy (reference §4.4, Jitkrittum et al. 2017) and FSSD-opt (§4.5).
//!
//! Features ξ(x, v) = s(x)·k(x, v) + ∇_x k(x, v) ∈ R^d at J test locations v_j:
//! IMQ ξ = s·u^β + 2β·u^(β−1)·r (r = x − v, u = c² + ‖r‖²); Gaussian ξ = k·(s − r/σ²).
//! With ξ_aj = ξ(x_a, v_j) and K = d·J:
//!
//!   FSSD²_V = (1/K)·Σ_j ‖(1/n)·Σ_a ξ_aj‖²                          (≥ 0)
//!   FSSD²_U = (1/(K·n(n−1)))·Σ_j [‖Σ_a ξ_aj‖² − Σ_a ‖ξ_aj‖²]        (unbiased, can be < 0)
//!
//! FSSD-opt draws J independent locations from a Gaussian fitted to the draws (§4.5 step 1;
//! the MAMBA code's identical locations are not reproduced), then moves them (and, for the
//! Gaussian kernel, log σ²) by Adam ascent on the power criterion FSSD²_U/sqrt(σ²_H1 + reg) of
//! a 20 % training split, with analytic gradients, and reports FSSD_V = sqrt(FSSD²_V) on the
//! other 80 % (never negative, so a noisy arm cannot win with a negative value).
//!
//! Sums over draws run over fixed chunks of [`CHUNK`] rows in parallel and are added in chunk
//! order: values do not depend on the number of threads.

use super::{GaussianKernel, Kernel, SteinError, check_rows, check_sample};
use crate::cpu::clear_upper_vector_state;
use crate::rng::{ChainRng, fill_standard_normal};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatRef, Par};
use rand::RngExt;
use rayon::prelude::*;
use std::ops::Range;

/// Rows per parallel chunk (fixed, so the summation order never depends on the thread count).
const CHUNK: usize = 128;

/// Above this dimension (or when D > n) the initial locations are drawn without forming the
/// D × D covariance (§4.5 step 1).
const MAX_COVARIANCE_DIM: usize = 2000;

/// FSSD values at fixed locations.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Fssd {
    /// FSSD_V = sqrt(FSSD²_V): the value a tuner ranks (≥ 0; NaN when FSSD²_V is).
    pub value: f64,
    /// FSSD²_V, the plug-in of MAMBA Eq. 4.
    pub squared_v: f64,
    /// FSSD²_U, unbiased (can be negative; the MAMBA code's raw metric).
    pub squared_u: f64,
}

/// What FSSD-opt maximises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum FssdObjective {
    /// kgof's power criterion FSSD²_U / sqrt(σ²_H1 + reg) on a training split; the value is
    /// computed on the rest (the default).
    #[default]
    PowerCriterion,
    /// FSSD²_U on the whole sample, which is also where the value is computed (the MAMBA
    /// reference, no split).
    UStatistic,
}

/// FSSD-opt settings (defaults: the MAMBA experiments' J = 10 and 100 Adam steps at 10⁻³;
/// kgof's 20 % split and reg = 10⁻²).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct FssdOptSettings {
    /// Number of test locations J.
    pub num_locations: usize,
    /// Adam steps (0: the initial random locations).
    pub steps: usize,
    /// Adam learning rate.
    pub learning_rate: f64,
    /// Adam β1.
    pub beta1: f64,
    /// Adam β2.
    pub beta2: f64,
    /// Adam ε.
    pub epsilon: f64,
    /// The objective.
    pub objective: FssdObjective,
    /// Fraction of the draws the power criterion is optimised on.
    pub train_fraction: f64,
    /// reg in FSSD²_U / sqrt(σ²_H1 + reg).
    pub regularisation: f64,
    /// Also optimise the Gaussian kernel's log σ² (ignored for IMQ).
    pub optimise_width: bool,
}

impl Default for FssdOptSettings {
    fn default() -> Self {
        Self {
            num_locations: 10,
            steps: 100,
            learning_rate: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-8,
            objective: FssdObjective::PowerCriterion,
            train_fraction: 0.2,
            regularisation: 1e-2,
            optimise_width: true,
        }
    }
}

impl FssdOptSettings {
    fn validate(&self) -> Result<(), SteinError> {
        let bad = |m: String| Err(SteinError::BadSetting(m));
        if self.num_locations == 0 {
            return bad("FSSD needs at least one test location".into());
        }
        if !(self.learning_rate.is_finite() && self.learning_rate > 0.0) {
            return bad(format!(
                "Adam learning rate must be > 0, got {}",
                self.learning_rate
            ));
        }
        for (name, b) in [("beta1", self.beta1), ("beta2", self.beta2)] {
            if !(0.0..1.0).contains(&b) {
                return bad(format!("Adam {name} must be in [0, 1), got {b}"));
            }
        }
        if !(self.epsilon.is_finite() && self.epsilon > 0.0) {
            return bad(format!("Adam epsilon must be > 0, got {}", self.epsilon));
        }
        if !(self.train_fraction > 0.0 && self.train_fraction < 1.0) {
            return bad(format!(
                "the FSSD training fraction must be in (0, 1), got {}",
                self.train_fraction
            ));
        }
        if !(self.regularisation.is_finite() && self.regularisation > 0.0) {
            return bad(format!(
                "the power criterion's regularisation must be > 0, got {}",
                self.regularisation
            ));
        }
        Ok(())
    }
}

/// Feature constants of one kernel.
#[derive(Clone, Copy)]
enum Features {
    /// IMQ: two_beta = 2β, four_bb = 4β(β−1).
    Imq {
        c2: f64,
        beta: f64,
        two_beta: f64,
        four_bb: f64,
    },
    /// Gaussian: inv = 1/σ².
    Gauss { inv: f64 },
}

impl Features {
    fn new(kernel: &Kernel) -> Self {
        match *kernel {
            Kernel::Imq(k) => Features::Imq {
                c2: k.c() * k.c(),
                beta: k.beta(),
                two_beta: 2.0 * k.beta(),
                four_bb: 4.0 * k.beta() * (k.beta() - 1.0),
            },
            Kernel::Gaussian(k) => Features::Gauss {
                inv: 1.0 / k.sigma2(),
            },
        }
    }

    /// u^β and u^(β−1) for IMQ (one square root at β = −1/2).
    #[inline(always)]
    fn powers(c2: f64, beta: f64, r2: f64) -> (f64, f64, f64) {
        let u = c2 + r2;
        let q = 1.0 / u;
        let p0 = if beta == -0.5 { q.sqrt() } else { u.powf(beta) };
        (p0, p0 * q, q)
    }

    /// `out = ξ(x, v)`.
    #[inline]
    fn feature(&self, x: &[f64], s: &[f64], v: &[f64], out: &mut [f64]) {
        let r2: f64 = x.iter().zip(v).map(|(a, b)| (a - b) * (a - b)).sum();
        match *self {
            Features::Imq {
                c2, beta, two_beta, ..
            } => {
                let (p0, p1, _) = Self::powers(c2, beta, r2);
                let g = two_beta * p1;
                for i in 0..out.len() {
                    out[i] = s[i] * p0 + g * (x[i] - v[i]);
                }
            }
            Features::Gauss { inv } => {
                let k = (-0.5 * inv * r2).exp();
                for i in 0..out.len() {
                    out[i] = k * (s[i] - (x[i] - v[i]) * inv);
                }
            }
        }
    }

    /// `grad += J(x, v)ᵀy` with J = ∂ξ/∂v (§4.5); returns (∂ξ/∂log σ²)ᵀy (0 for IMQ).
    #[inline]
    fn add_jacobian_t(&self, x: &[f64], s: &[f64], v: &[f64], y: &[f64], grad: &mut [f64]) -> f64 {
        let (mut r2, mut sy, mut ry) = (0.0, 0.0, 0.0);
        for i in 0..x.len() {
            let r = x[i] - v[i];
            r2 += r * r;
            sy += s[i] * y[i];
            ry += r * y[i];
        }
        match *self {
            Features::Imq {
                c2,
                beta,
                two_beta,
                four_bb,
            } => {
                // Jᵀy = −2β·u^(β−1)·r·(sᵀy) − 4β(β−1)·u^(β−2)·r·(rᵀy) − 2β·u^(β−1)·y.
                let (_, p1, q) = Self::powers(c2, beta, r2);
                let cr = -two_beta * p1 * sy - four_bb * p1 * q * ry;
                let cy = -two_beta * p1;
                for i in 0..x.len() {
                    grad[i] += cr * (x[i] - v[i]) + cy * y[i];
                }
                0.0
            }
            Features::Gauss { inv } => {
                // Jᵀy = (k/σ²)·[r·((s − r/σ²)ᵀy) + y];
                // (∂ξ/∂log σ²)ᵀy = (k/σ²)·[(‖r‖²/2)·(s − r/σ²)ᵀy + rᵀy].
                let k = (-0.5 * inv * r2).exp();
                let ki = k * inv;
                let wy = sy - ry * inv;
                for i in 0..x.len() {
                    grad[i] += ki * ((x[i] - v[i]) * wy + y[i]);
                }
                ki * (0.5 * r2 * wy + ry)
            }
        }
    }
}

/// A sample (draws and scores) and the chunked-sum workspace reused across Adam steps.
struct Workspace<'a> {
    view: View<'a>,
    /// Per chunk: `width` partial sums, then 2K scratch.
    slabs: Vec<f64>,
    slab: usize,
    width: usize,
    sums: Vec<f64>,
    /// S = Σ_a ξ_a and Q = Σ_a w_a·ξ_a of the current step (K each).
    s_buf: Vec<f64>,
    q_buf: Vec<f64>,
}

impl<'a> Workspace<'a> {
    fn new(x: &'a [f64], s: &'a [f64], d: usize, k: usize) -> Self {
        let n = x.len() / d;
        let width = k + 1;
        let slab = width + 2 * k;
        Self {
            view: View { x, s, d },
            slabs: vec![0.0; n.div_ceil(CHUNK) * slab],
            slab,
            width,
            sums: vec![0.0; width],
            s_buf: vec![0.0; k],
            q_buf: vec![0.0; k],
        }
    }

    fn n(&self) -> usize {
        self.view.x.len() / self.view.d
    }

    /// `self.sums = Σ_chunks f(rows, partial, scratch)`, chunks in parallel, added in order.
    fn chunked<F>(&mut self, f: F)
    where
        F: Fn(Range<usize>, &mut [f64], &mut [f64]) + Sync,
    {
        let (n, width) = (self.n(), self.width);
        self.slabs
            .par_chunks_mut(self.slab)
            .enumerate()
            .for_each(|(c, slab)| {
                let (acc, scratch) = slab.split_at_mut(width);
                acc.fill(0.0);
                f(c * CHUNK..((c + 1) * CHUNK).min(n), acc, scratch);
            });
        self.sums.fill(0.0);
        for slab in self.slabs.chunks_exact(self.slab) {
            self.sums
                .iter_mut()
                .zip(&slab[..width])
                .for_each(|(t, p)| *t += p);
        }
    }

    /// Pass 1: (S = Σ_a ξ_a, Σ_a ‖ξ_a‖²) into `self.sums`.
    fn pass_sums(&mut self, feat: Features, locations: &[f64]) {
        let k = locations.len();
        let view = self.view;
        self.chunked(|rows, acc, scratch| {
            let xi = &mut scratch[..k];
            for a in rows {
                view.features(feat, a, locations, xi);
                let mut sq = 0.0;
                for (t, v) in acc[..k].iter_mut().zip(xi.iter()) {
                    *t += v;
                    sq += v * v;
                }
                acc[k] += sq;
            }
        });
    }
}

/// The sample alone (shared by the chunk closures).
#[derive(Clone, Copy)]
struct View<'a> {
    x: &'a [f64],
    s: &'a [f64],
    d: usize,
}

impl<'a> View<'a> {
    fn row(&self, a: usize) -> (&'a [f64], &'a [f64]) {
        let r = a * self.d..(a + 1) * self.d;
        (&self.x[r.clone()], &self.s[r])
    }

    /// Stacked features ξ_a = (ξ_a1, …, ξ_aJ) of row a into `out` (K values).
    fn features(&self, feat: Features, a: usize, locations: &[f64], out: &mut [f64]) {
        let (x, s) = self.row(a);
        for (v, o) in locations
            .chunks_exact(self.d)
            .zip(out.chunks_exact_mut(self.d))
        {
            feat.feature(x, s, v, o);
        }
    }
}

/// FSSD²_V and FSSD²_U from S = Σ_a ξ_a and Σ_a ‖ξ_a‖².
fn statistics(sum: &[f64], sq: f64, n: usize) -> Fssd {
    let k = sum.len() as f64;
    let nf = n as f64;
    let s2: f64 = sum.iter().map(|v| v * v).sum();
    let squared_v = s2 / (k * nf * nf);
    let squared_u = (s2 - sq) / (k * nf * (nf - 1.0));
    Fssd {
        // s2 ≥ 0; not `max(0.0)`, which would map NaN (overflowing scores) to a perfect 0.
        value: squared_v.sqrt(),
        squared_v,
        squared_u,
    }
}

/// Checks locations (J × D, finite, J ≥ 1); returns J.
fn check_locations(locations: &[f64], dim: usize) -> Result<usize, SteinError> {
    let j = check_rows("locations", locations, dim)?;
    if j == 0 {
        return Err(SteinError::BadSetting(
            "FSSD needs at least one test location".into(),
        ));
    }
    Ok(j)
}

fn need_two(n: usize, what: &'static str) -> Result<(), SteinError> {
    if n < 2 {
        return Err(SteinError::TooFewPoints {
            what,
            needed: 2,
            got: n,
        });
    }
    Ok(())
}

/// FSSD of `draws` with `scores` (P × D each, P ≥ 2) at the test `locations` (J × D), all
/// row-major (reference §4.4).
pub fn fssd(
    draws: &[f64],
    scores: &[f64],
    dim: usize,
    kernel: &Kernel,
    locations: &[f64],
) -> Result<Fssd, SteinError> {
    let n = check_sample(draws, scores, dim)?;
    check_locations(locations, dim)?;
    kernel.validate()?;
    need_two(n, "FSSD²_U")?;
    let k = locations.len();
    let mut ws = Workspace::new(draws, scores, dim, k);
    ws.pass_sums(Features::new(kernel), locations);
    Ok(statistics(&ws.sums[..k], ws.sums[k], n))
}

/// An objective of FSSD-opt and its gradient.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectiveGradient {
    /// The objective's value.
    pub value: f64,
    /// ∂/∂ locations (J × D row-major).
    pub locations: Vec<f64>,
    /// ∂/∂ log σ² for the Gaussian kernel, `None` for IMQ.
    pub log_sigma2: Option<f64>,
}

/// The objective of FSSD-opt at `locations` on this sample, with its analytic gradient
/// (reference §4.5). For the power criterion, with τ_a = ξ_a/sqrt(dJ), τ̄ = mean τ_a and
/// w_a = τ_aᵀτ̄: σ²_H1 = 4·mean w_a² − 4‖τ̄‖⁴ and the value is FSSD²_U/sqrt(σ²_H1 + reg).
pub fn objective_and_gradient(
    draws: &[f64],
    scores: &[f64],
    dim: usize,
    kernel: &Kernel,
    locations: &[f64],
    objective: FssdObjective,
    regularisation: f64,
) -> Result<ObjectiveGradient, SteinError> {
    let n = check_sample(draws, scores, dim)?;
    check_locations(locations, dim)?;
    kernel.validate()?;
    need_two(n, "the FSSD-opt objective")?;
    let mut ws = Workspace::new(draws, scores, dim, locations.len());
    let mut grad = vec![0.0; locations.len()];
    let (value, log_sigma2) = objective_grad(
        &mut ws,
        kernel,
        locations,
        objective,
        regularisation,
        &mut grad,
    );
    Ok(ObjectiveGradient {
        value,
        locations: grad,
        log_sigma2: matches!(kernel, Kernel::Gaussian(_)).then_some(log_sigma2),
    })
}

/// Value, `grad` = ∂/∂ locations and the returned ∂/∂ log σ² (0 for IMQ). No allocation.
fn objective_grad(
    ws: &mut Workspace<'_>,
    kernel: &Kernel,
    locations: &[f64],
    objective: FssdObjective,
    reg: f64,
    grad: &mut [f64],
) -> (f64, f64) {
    let feat = Features::new(kernel);
    let (n, d, k) = (ws.n(), ws.view.d, locations.len());
    let (nf, kf) = (n as f64, k as f64);
    ws.pass_sums(feat, locations);
    let mut s_buf = std::mem::take(&mut ws.s_buf);
    let mut q_buf = std::mem::take(&mut ws.q_buf);
    s_buf.copy_from_slice(&ws.sums[..k]);
    let sq = ws.sums[k];
    let s2: f64 = s_buf.iter().map(|v| v * v).sum();
    let u = (s2 - sq) / (kf * nf * (nf - 1.0));
    let view = ws.view;
    // y_a = (1/K)·[α·(S − ξ_a) + (γ/n)·((w_a − 2‖τ̄‖²)·S + Q)], with Q = Σ_b w_b ξ_b (in units of
    // ξ: w_a = ξ_aᵀS/(K n), ‖τ̄‖² = ‖S‖²/(K n²)); for FSSD²_U alone α = 2/(n(n−1)), γ = 0.
    let m2 = s2 / (kf * nf * nf);
    let (value, alpha, gamma, power) = match objective {
        FssdObjective::UStatistic => (u, 2.0 / (nf * (nf - 1.0)), 0.0, false),
        FssdObjective::PowerCriterion => {
            let s_ref = &s_buf[..];
            ws.chunked(|rows, acc, scratch| {
                let xi = &mut scratch[..k];
                for a in rows {
                    view.features(feat, a, locations, xi);
                    let w: f64 = xi.iter().zip(s_ref).map(|(p, q)| p * q).sum::<f64>() / (kf * nf);
                    for (t, v) in acc[..k].iter_mut().zip(xi.iter()) {
                        *t += w * v;
                    }
                    acc[k] += w * w;
                }
            });
            let var = (4.0 * ws.sums[k] / nf - 4.0 * m2 * m2).max(0.0);
            let denom = var + reg;
            let value = u / denom.sqrt();
            let alpha = 2.0 / (nf * (nf - 1.0) * denom.sqrt());
            let gamma = -4.0 * u / (nf * denom * denom.sqrt());
            q_buf.copy_from_slice(&ws.sums[..k]);
            (value, alpha, gamma, true)
        }
    };
    let s_ref = &s_buf[..];
    let q_ref = power.then_some(&q_buf[..]);
    ws.chunked(|rows, acc, scratch| {
        let (xi, y) = scratch.split_at_mut(k);
        for a in rows {
            view.features(feat, a, locations, xi);
            let w = match q_ref {
                Some(_) => xi.iter().zip(s_ref).map(|(p, q)| p * q).sum::<f64>() / (kf * nf),
                None => 0.0,
            };
            for i in 0..k {
                let mut yi = alpha * (s_ref[i] - xi[i]);
                if let Some(q) = q_ref {
                    yi += gamma / nf * ((w - 2.0 * m2) * s_ref[i] + q[i]);
                }
                y[i] = yi / kf;
            }
            let (x, s) = view.row(a);
            let mut width_grad = 0.0;
            for (j, v) in locations.chunks_exact(d).enumerate() {
                let cols = j * d..(j + 1) * d;
                width_grad += feat.add_jacobian_t(x, s, v, &y[cols.clone()], &mut acc[cols]);
            }
            acc[k] += width_grad;
        }
    });
    grad.copy_from_slice(&ws.sums[..k]);
    ws.s_buf = s_buf;
    ws.q_buf = q_buf;
    (value, ws.sums[k])
}

/// J = `count` initial test locations (J × D row-major), drawn independently from the Gaussian
/// fitted to `draws` (reference §4.5 step 1): mean x̄ and covariance C = sample covariance
/// (divisor n − 1) + 10⁻¹⁰·I. When D ≤ n and D ≤ 2000, v = x̄ + L·z with C = LLᵀ (faer
/// Cholesky). Otherwise (or if the Cholesky factorisation fails) no D × D matrix is formed:
/// v = x̄ + X_cᵀz/sqrt(n − 1) + 10⁻⁵·ζ with z ~ N(0, I_n), ζ ~ N(0, I_D), which has covariance
/// exactly C.
pub fn initial_locations(
    draws: &[f64],
    dim: usize,
    count: usize,
    rng: &mut ChainRng,
) -> Result<Vec<f64>, SteinError> {
    let n = check_rows("draws", draws, dim)?;
    need_two(n, "fitting a Gaussian to the draws")?;
    if count == 0 {
        return Err(SteinError::BadSetting(
            "FSSD needs at least one test location".into(),
        ));
    }
    let d = dim;
    let mut mean = vec![0.0; d];
    for row in draws.chunks_exact(d) {
        mean.iter_mut().zip(row).for_each(|(m, x)| *m += x);
    }
    mean.iter_mut().for_each(|m| *m /= n as f64);
    let centred: Vec<f64> = draws
        .chunks_exact(d)
        .flat_map(|row| row.iter().zip(&mean).map(|(x, m)| x - m))
        .collect();
    let mut out = Vec::with_capacity(count * d);
    let factor = if d <= n && d <= MAX_COVARIANCE_DIM {
        cholesky_of_covariance(&centred, n, d)
    } else {
        None
    };
    match factor {
        Some(l) => {
            let mut z = vec![0.0; d];
            for _ in 0..count {
                fill_standard_normal(rng, &mut z);
                for i in 0..d {
                    let lz: f64 = (0..=i).map(|c| l[(i, c)] * z[c]).sum();
                    out.push(mean[i] + lz);
                }
            }
        }
        None => {
            let mut z = vec![0.0; n];
            let mut zeta = vec![0.0; d];
            let scale = 1.0 / ((n - 1) as f64).sqrt();
            for _ in 0..count {
                fill_standard_normal(rng, &mut z);
                fill_standard_normal(rng, &mut zeta);
                let start = out.len();
                out.extend(mean.iter().zip(&zeta).map(|(m, e)| m + 1e-5 * e));
                let v = &mut out[start..];
                for (row, za) in centred.chunks_exact(d).zip(&z) {
                    let w = za * scale;
                    v.iter_mut().zip(row).for_each(|(o, x)| *o += w * x);
                }
            }
        }
    }
    Ok(out)
}

/// The lower Cholesky factor of X_cᵀX_c/(n − 1) + 10⁻¹⁰·I, or `None` if it is not positive
/// definite in floating point.
fn cholesky_of_covariance(centred: &[f64], n: usize, d: usize) -> Option<Mat<f64>> {
    let xc = MatRef::from_row_major_slice(centred, n, d);
    let mut c = Mat::<f64>::zeros(d, d);
    matmul(
        c.as_mut(),
        Accum::Replace,
        xc.transpose(),
        xc,
        1.0 / (n - 1) as f64,
        Par::Seq,
    );
    clear_upper_vector_state();
    for i in 0..d {
        c[(i, i)] += 1e-10;
    }
    let llt = c.llt(faer::Side::Lower).ok()?;
    let l = llt.L().to_owned();
    clear_upper_vector_state();
    Some(l)
}

/// The training and evaluation parts (draws, scores, draws, scores) of a seeded random split
/// with round(`fraction`·n) training points (at least 2 in each part), each in draw order.
fn split_sample(
    draws: &[f64],
    scores: &[f64],
    d: usize,
    fraction: f64,
    rng: &mut ChainRng,
) -> Result<[Vec<f64>; 4], SteinError> {
    let n = draws.len() / d;
    if n < 4 {
        return Err(SteinError::TooFewPoints {
            what: "FSSD-opt with a training/evaluation split",
            needed: 4,
            got: n,
        });
    }
    let n_train = ((fraction * n as f64).round() as usize).clamp(2, n - 2);
    // Partial Fisher–Yates: the first n_train entries are a uniform subset.
    let mut perm: Vec<usize> = (0..n).collect();
    for i in 0..n_train {
        let j = rng.random_range(i..n);
        perm.swap(i, j);
    }
    let (tr, te) = perm.split_at_mut(n_train);
    tr.sort_unstable();
    te.sort_unstable();
    let gather = |rows: &[usize], src: &[f64]| -> Vec<f64> {
        rows.iter()
            .flat_map(|&a| src[a * d..(a + 1) * d].iter().copied())
            .collect()
    };
    Ok([
        gather(tr, draws),
        gather(tr, scores),
        gather(te, draws),
        gather(te, scores),
    ])
}

/// Result of [`fssd_opt`].
#[derive(Debug, Clone, PartialEq)]
pub struct FssdOpt {
    /// FSSD at the returned locations on the evaluation points (the 80 % split, or the whole
    /// sample for [`FssdObjective::UStatistic`]).
    pub value: Fssd,
    /// The optimised locations (J × D row-major).
    pub locations: Vec<f64>,
    /// The initial locations.
    pub initial_locations: Vec<f64>,
    /// The kernel at the optimum (the Gaussian σ² may have moved).
    pub kernel: Kernel,
    /// Objective on the training points at the initial locations.
    pub initial_objective: f64,
    /// Objective at the returned locations (≥ `initial_objective`).
    pub final_objective: f64,
    /// Points optimised on.
    pub train_points: usize,
    /// Points evaluated on.
    pub test_points: usize,
}

/// FSSD-opt (reference §4.5): J independent initial locations from a Gaussian fitted to the
/// training draws, Adam ascent on the objective of `settings` (analytic gradients, over the
/// locations and, for the Gaussian kernel with `optimise_width`, log σ²), then the FSSD at the
/// best iterate (the objective is evaluated at every Adam iterate; the best one, never worse
/// than the start, is kept) on the evaluation points. `rng` draws the split and the locations.
pub fn fssd_opt(
    draws: &[f64],
    scores: &[f64],
    dim: usize,
    kernel: &Kernel,
    settings: &FssdOptSettings,
    rng: &mut ChainRng,
) -> Result<FssdOpt, SteinError> {
    let n = check_sample(draws, scores, dim)?;
    kernel.validate()?;
    settings.validate()?;
    let d = dim;
    // The split: a seeded random permutation, each part kept in draw order.
    let split = match settings.objective {
        FssdObjective::UStatistic => {
            need_two(n, "FSSD-opt")?;
            None
        }
        FssdObjective::PowerCriterion => Some(split_sample(
            draws,
            scores,
            d,
            settings.train_fraction,
            rng,
        )?),
    };
    let [train_x, train_s, test_x, test_s] = match &split {
        Some([a, b, c, e]) => [a.as_slice(), b, c, e],
        None => [draws, scores, draws, scores],
    };
    let initial = initial_locations(train_x, d, settings.num_locations, rng)?;
    let k = initial.len();
    let width = match kernel {
        Kernel::Gaussian(g) if settings.optimise_width => Some(g.sigma2().ln()),
        _ => None,
    };

    // Parameters: the locations, then log σ² if it is optimised.
    let mut params = initial.clone();
    params.extend(width);
    let p = params.len();
    let (mut m, mut v, mut grad) = (vec![0.0; p], vec![0.0; p], vec![0.0; p]);
    let mut ws = Workspace::new(train_x, train_s, d, k);
    let kernel_at = |params: &[f64]| -> Option<Kernel> {
        match (kernel, width) {
            (Kernel::Gaussian(_), Some(_)) => GaussianKernel::new(params[k].exp())
                .ok()
                .map(Kernel::Gaussian),
            _ => Some(*kernel),
        }
    };
    let mut best_params = params.clone();
    let mut best = f64::NEG_INFINITY;
    let mut initial_objective = f64::NAN;
    for t in 0..=settings.steps {
        let Some(kern) = kernel_at(&params) else {
            break;
        };
        let (value, width_grad) = objective_grad(
            &mut ws,
            &kern,
            &params[..k],
            settings.objective,
            settings.regularisation,
            &mut grad[..k],
        );
        if width.is_some() {
            grad[k] = width_grad;
        }
        if t == 0 {
            initial_objective = value;
        }
        if !(value.is_finite() && grad.iter().all(|g| g.is_finite())) {
            break;
        }
        if value > best {
            best = value;
            best_params.copy_from_slice(&params);
        }
        if t == settings.steps {
            break;
        }
        // Adam ascent step (Kingma & Ba 2015), bias-corrected.
        let step = (t + 1) as i32;
        let c1 = 1.0 - settings.beta1.powi(step);
        let c2 = 1.0 - settings.beta2.powi(step);
        for i in 0..p {
            m[i] = settings.beta1 * m[i] + (1.0 - settings.beta1) * grad[i];
            v[i] = settings.beta2 * v[i] + (1.0 - settings.beta2) * grad[i] * grad[i];
            params[i] +=
                settings.learning_rate * (m[i] / c1) / ((v[i] / c2).sqrt() + settings.epsilon);
        }
    }
    if !initial_objective.is_finite() {
        return Err(SteinError::Degenerate(
            "the FSSD-opt objective is not finite at the initial locations".into(),
        ));
    }
    let final_objective = best;
    let final_kernel =
        kernel_at(&best_params).expect("kernel was valid when this iterate was kept");
    let locations = best_params[..k].to_vec();
    let value = fssd(test_x, test_s, d, &final_kernel, &locations)?;
    Ok(FssdOpt {
        value,
        locations,
        initial_locations: initial,
        kernel: final_kernel,
        initial_objective,
        final_objective,
        train_points: train_x.len() / d,
        test_points: test_x.len() / d,
    })
}
