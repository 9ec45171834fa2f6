//! Limited-memory BFGS (L-BFGS) minimisation of smooth objectives.
//!
//! This module finds a local minimiser of a smooth function `f: R^D -> R`,
//! typically the potential `U(θ) = −log π(θ)` of a posterior, whose minimiser
//! is the maximum a posteriori (MAP) estimate. It is designed for `D` from 1
//! up to roughly `10^5`.
//!
//! # Algorithm
//!
//! * The search direction `d = −H ∇f` is computed with the L-BFGS *two-loop
//!   recursion* (Nocedal & Wright, *Numerical Optimization*, 2nd ed., 2006,
//!   Algorithm 7.4). The initial inverse Hessian approximation is
//!   `H₀ = γ I` with `γ = sᵀy / yᵀy` taken from the most recent pair
//!   (N&W eq. 7.20).
//! * Curvature pairs `(s, y)` are kept in a ring buffer of `memory` slots.
//!   A pair is discarded if `sᵀy ≤ ε ‖s‖ ‖y‖` (`ε = 1e-10`), which keeps
//!   `H` positive definite (N&W §7.2, §6.1).
//! * The step length satisfies the *strong Wolfe conditions* with
//!   `c₁ = 1e-4`, `c₂ = 0.9`, using the bracketing line search of N&W
//!   Algorithm 3.5 and the `zoom` of Algorithm 3.6, with safeguarded cubic
//!   interpolation (N&W eq. 3.59) inside the bracket.
//! * On the first iteration (and after any reset of the memory) the trial
//!   step is `1 / ‖∇f‖₂` along `−∇f`, i.e. a step of unit Euclidean length;
//!   afterwards the unit quasi-Newton step `α = 1` is tried first.
//! * If the line search runs out of evaluations (or its bracket collapses
//!   to machine precision), the best sufficient-decrease point found is
//!   accepted if it strictly lowers `f` (this may cost one extra
//!   evaluation to restore its gradient); otherwise the memory is cleared
//!   and steepest descent is tried once before giving up.
//!
//! # Non-finite values
//!
//! A non-finite objective value or gradient at the starting point is an
//! error ([`LbfgsError::NonFiniteStart`]). During the line search, a trial
//! point where the objective or its directional derivative is NaN or
//! infinite is treated as "too far": it becomes the upper end of the bracket
//! and the step is shrunk by bisection. This lets objectives signal
//! "outside the support" by returning `NaN` or `+∞`.
//!
//! # Stopping rules
//!
//! With `f` the current value and `g` the current gradient:
//!
//! * [`StopReason::GradientTolerance`]: `‖g‖_∞ ≤ gradient_tolerance · max(1, |f|)`.
//!   For a posterior both `U` and `∇U` grow with the number of data, so this
//!   is roughly scale-free; note that it depends on additive constants in
//!   `f` (large offsets loosen it), and that an objective unbounded below
//!   eventually satisfies it as `|f|` grows.
//! * [`StopReason::FunctionTolerance`]: the last accepted step decreased `f`
//!   by at most `function_tolerance · max(|f_old|, |f_new|)`. This is purely
//!   relative (no `max(1, ·)` floor), so it detects stagnation without
//!   stopping a slowly converging iteration whose optimal value is near 0.
//! * [`StopReason::LineSearchStalled`]: the line search failed both along the
//!   quasi-Newton direction and (after clearing the memory) along steepest
//!   descent, but `‖g‖_∞ ≤ 1e-6 · ‖g₀‖_∞` (`g₀` the gradient at `x0`). The
//!   iterate is then taken to be at the limit of floating-point resolution
//!   and is returned as converged. If the gradient is not that small, the
//!   failure is reported as [`LbfgsError::LineSearchFailed`].
//! * [`StopReason::MaxIterations`]: `max_iterations` steps were taken
//!   (returned with `converged == false`).
//!
//! # Memory
//!
//! All working vectors (`memory × D` history plus a handful of length-`D`
//! vectors) are allocated once before the main loop; iterations do not
//! allocate.

use thiserror::Error;

/// Sufficient-decrease constant `c₁` of the Wolfe conditions.
const C1: f64 = 1e-4;
/// Curvature constant `c₂` of the strong Wolfe conditions (N&W suggest 0.9
/// for quasi-Newton methods).
const C2: f64 = 0.9;
/// Pairs with `sᵀy ≤ CURVATURE_EPS · ‖s‖ ‖y‖` are not stored.
const CURVATURE_EPS: f64 = 1e-10;
/// A failed line search counts as convergence if
/// `‖g‖_∞ ≤ STALL_GRADIENT_RATIO · ‖g₀‖_∞`.
const STALL_GRADIENT_RATIO: f64 = 1e-6;
/// Growth factor of the trial step in the bracketing phase (N&W Alg. 3.5).
const EXTRAPOLATION_FACTOR: f64 = 2.0;

/// Options for [`minimize`].
#[derive(Debug, Clone, PartialEq)]
pub struct LbfgsOptions {
    /// Number of `(s, y)` pairs kept (the `m` of N&W §7.2). Must be ≥ 1.
    /// Default: 10.
    pub memory: usize,
    /// Maximum number of accepted steps. Default: 500.
    pub max_iterations: usize,
    /// Stop when `‖∇f‖_∞ ≤ gradient_tolerance · max(1, |f|)`. Must be
    /// finite and ≥ 0. Default: `1e-8`.
    pub gradient_tolerance: f64,
    /// Stop when a step decreases `f` by at most
    /// `function_tolerance · max(|f_old|, |f_new|)`. Must be finite and
    /// ≥ 0; `0.0` disables the test (except for a step with no decrease
    /// from `f = 0`). Default: `1e-12`.
    pub function_tolerance: f64,
    /// Maximum number of objective evaluations per line search. Must be
    /// ≥ 1. Default: 20.
    pub max_line_search_steps: usize,
}

impl Default for LbfgsOptions {
    fn default() -> Self {
        Self {
            memory: 10,
            max_iterations: 500,
            gradient_tolerance: 1e-8,
            function_tolerance: 1e-12,
            max_line_search_steps: 20,
        }
    }
}

impl LbfgsOptions {
    fn validate(&self) -> Result<(), LbfgsError> {
        let reason = if self.memory == 0 {
            "memory must be at least 1"
        } else if self.max_line_search_steps == 0 {
            "max_line_search_steps must be at least 1"
        } else if !(self.gradient_tolerance.is_finite() && self.gradient_tolerance >= 0.0) {
            "gradient_tolerance must be finite and non-negative"
        } else if !(self.function_tolerance.is_finite() && self.function_tolerance >= 0.0) {
            "function_tolerance must be finite and non-negative"
        } else {
            return Ok(());
        };
        Err(LbfgsError::InvalidOptions { reason })
    }
}

/// Why [`minimize`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StopReason {
    /// `‖∇f‖_∞ ≤ gradient_tolerance · max(1, |f|)`.
    GradientTolerance,
    /// The relative decrease of `f` over the last step was below
    /// `function_tolerance`.
    FunctionTolerance,
    /// The line search could not make progress, but the gradient had already
    /// shrunk by a factor `1e-6` relative to the start (see module docs).
    LineSearchStalled,
    /// `max_iterations` was reached; the result is not converged.
    MaxIterations,
}

impl StopReason {
    /// Whether this stop reason counts as convergence.
    pub fn is_converged(self) -> bool {
        !matches!(self, StopReason::MaxIterations)
    }
}

/// Outcome of a successful call to [`minimize`].
#[derive(Debug, Clone, PartialEq)]
pub struct LbfgsResult {
    /// Final iterate.
    pub x: Vec<f64>,
    /// Objective value at `x`.
    pub value: f64,
    /// `‖∇f(x)‖_∞`.
    pub gradient_norm: f64,
    /// Number of accepted steps.
    pub iterations: usize,
    /// Number of objective/gradient evaluations, including the one at `x0`.
    pub evaluations: usize,
    /// `true` unless the iteration limit was hit.
    pub converged: bool,
    /// Why the iteration stopped.
    pub reason: StopReason,
}

/// Errors returned by [`minimize`].
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum LbfgsError {
    /// An option is out of range.
    #[error("invalid L-BFGS options: {reason}")]
    InvalidOptions {
        /// Which option is invalid.
        reason: &'static str,
    },
    /// The objective value or gradient at the starting point is NaN or infinite.
    #[error("objective or gradient is not finite at the starting point (f = {value})")]
    NonFiniteStart {
        /// Objective value at `x0` (may itself be finite if only the gradient is not).
        value: f64,
    },
    /// No step satisfying the Wolfe conditions was found along either the
    /// quasi-Newton or the steepest-descent direction, and the gradient was
    /// not small enough to declare convergence.
    #[error(
        "line search failed after {iteration} iterations (f = {value:e}, |grad|_inf = {gradient_norm:e})"
    )]
    LineSearchFailed {
        /// Number of steps accepted before the failure.
        iteration: usize,
        /// Objective value at the last accepted iterate.
        value: f64,
        /// `‖∇f‖_∞` at the last accepted iterate.
        gradient_norm: f64,
    },
}

/// Minimise `f` with L-BFGS starting from `x0`.
///
/// `f(x, grad)` returns `f(x)` and writes `∇f(x)` into `grad` (which has the
/// length of `x0`). It may return NaN or `+∞` to reject a point; see the
/// module documentation for how such points are handled and for the
/// stopping rules.
///
/// # Errors
///
/// * [`LbfgsError::InvalidOptions`] if `options` is out of range.
/// * [`LbfgsError::NonFiniteStart`] if `f` or `∇f` is not finite at `x0`.
/// * [`LbfgsError::LineSearchFailed`] if no acceptable step can be found
///   away from a (near-)stationary point.
pub fn minimize<F>(mut f: F, x0: &[f64], options: &LbfgsOptions) -> Result<LbfgsResult, LbfgsError>
where
    F: FnMut(&[f64], &mut [f64]) -> f64,
{
    options.validate()?;
    let n = x0.len();
    let mut x = x0.to_vec();
    let mut g = vec![0.0; n];
    let mut value = f(&x, &mut g);
    let mut evaluations = 1;
    if !value.is_finite() || !g.iter().all(|v| v.is_finite()) {
        return Err(LbfgsError::NonFiniteStart { value });
    }
    let initial_gradient_norm = norm_inf(&g);

    // All per-iteration storage is allocated here, once.
    let mut d = vec![0.0; n];
    let mut x_trial = vec![0.0; n];
    let mut g_trial = vec![0.0; n];
    let mut history = History::new(options.memory, n);

    let mut iterations = 0;
    let mut small_decrease = false;
    loop {
        let gradient_norm = norm_inf(&g);
        let reason = if gradient_norm <= options.gradient_tolerance * value.abs().max(1.0) {
            Some(StopReason::GradientTolerance)
        } else if small_decrease {
            Some(StopReason::FunctionTolerance)
        } else if iterations >= options.max_iterations {
            Some(StopReason::MaxIterations)
        } else {
            None
        };
        if let Some(reason) = reason {
            return Ok(LbfgsResult {
                x,
                value,
                gradient_norm,
                iterations,
                evaluations,
                converged: reason.is_converged(),
                reason,
            });
        }

        // Search direction d = −H g (two-loop recursion), falling back to
        // steepest descent if the memory is empty or d is not a descent
        // direction.
        let mut dphi0 = f64::NAN;
        if history.len > 0 {
            history.direction(&g, &mut d);
            dphi0 = dot(&g, &d);
        }
        let is_descent = dphi0.is_finite() && dphi0 < 0.0;
        if !is_descent {
            history.clear();
            for (di, &gi) in d.iter_mut().zip(&g) {
                *di = -gi;
            }
            dphi0 = -dot(&g, &g);
        }
        let alpha_init = if history.len == 0 {
            1.0 / norm2(&g)
        } else {
            1.0
        };

        let mut search = LineSearch {
            x: &x,
            d: &d,
            x_trial: &mut x_trial,
            g_trial: &mut g_trial,
            phi0: value,
            dphi0,
            budget: options.max_line_search_steps,
            evaluations: 0,
            last_alpha: f64::NAN,
        };
        let outcome = search.run(&mut f, alpha_init);
        evaluations += search.evaluations;

        match outcome {
            Some(new_value) => {
                history.push(&x_trial, &x, &g_trial, &g);
                std::mem::swap(&mut x, &mut x_trial);
                std::mem::swap(&mut g, &mut g_trial);
                let scale = value.abs().max(new_value.abs());
                small_decrease = value - new_value <= options.function_tolerance * scale;
                value = new_value;
                iterations += 1;
            }
            None if history.len > 0 => {
                // Retry once along steepest descent with a fresh memory.
                history.clear();
            }
            None if gradient_norm <= STALL_GRADIENT_RATIO * initial_gradient_norm => {
                let reason = StopReason::LineSearchStalled;
                return Ok(LbfgsResult {
                    x,
                    value,
                    gradient_norm,
                    iterations,
                    evaluations,
                    converged: reason.is_converged(),
                    reason,
                });
            }
            None => {
                return Err(LbfgsError::LineSearchFailed {
                    iteration: iterations,
                    value,
                    gradient_norm,
                });
            }
        }
    }
}

/// Ring buffer of curvature pairs and the two-loop recursion.
struct History {
    m: usize,
    n: usize,
    /// `m × n`, slot `i` occupies `[i*n, (i+1)*n)`.
    s: Vec<f64>,
    y: Vec<f64>,
    rho: Vec<f64>,
    alpha: Vec<f64>,
    /// Slot of the oldest pair.
    start: usize,
    len: usize,
    /// `H₀ = γ I` scaling from the newest stored pair.
    gamma: f64,
}

impl History {
    fn new(m: usize, n: usize) -> Self {
        Self {
            m,
            n,
            s: vec![0.0; m * n],
            y: vec![0.0; m * n],
            rho: vec![0.0; m],
            alpha: vec![0.0; m],
            start: 0,
            len: 0,
            gamma: 1.0,
        }
    }

    fn clear(&mut self) {
        self.start = 0;
        self.len = 0;
        self.gamma = 1.0;
    }

    fn slot(&self, k: usize) -> usize {
        (self.start + k) % self.m
    }

    /// Store `s = x_new − x_old`, `y = g_new − g_old` unless the curvature
    /// condition `sᵀy > ε ‖s‖ ‖y‖` fails.
    fn push(&mut self, x_new: &[f64], x_old: &[f64], g_new: &[f64], g_old: &[f64]) {
        let (mut sy, mut ss, mut yy) = (0.0, 0.0, 0.0);
        for i in 0..self.n {
            let si = x_new[i] - x_old[i];
            let yi = g_new[i] - g_old[i];
            sy += si * yi;
            ss += si * si;
            yy += yi * yi;
        }
        let accept = sy.is_finite() && yy.is_finite() && sy > CURVATURE_EPS * ss.sqrt() * yy.sqrt();
        if !accept {
            return;
        }
        let slot = if self.len < self.m {
            self.len += 1;
            self.slot(self.len - 1)
        } else {
            let oldest = self.start;
            self.start = (self.start + 1) % self.m;
            oldest
        };
        let range = slot * self.n..(slot + 1) * self.n;
        for (((s, y), (xn, xo)), (gn, go)) in self.s[range.clone()]
            .iter_mut()
            .zip(&mut self.y[range])
            .zip(x_new.iter().zip(x_old))
            .zip(g_new.iter().zip(g_old))
        {
            *s = xn - xo;
            *y = gn - go;
        }
        self.rho[slot] = 1.0 / sy;
        self.gamma = sy / yy;
    }

    /// Two-loop recursion (N&W Algorithm 7.4): `d = −H g`.
    fn direction(&mut self, g: &[f64], d: &mut [f64]) {
        let n = self.n;
        d.copy_from_slice(g);
        for k in (0..self.len).rev() {
            let i = self.slot(k);
            let a = self.rho[i] * dot(&self.s[i * n..(i + 1) * n], d);
            self.alpha[i] = a;
            axpy(-a, &self.y[i * n..(i + 1) * n], d);
        }
        for di in d.iter_mut() {
            *di *= self.gamma;
        }
        for k in 0..self.len {
            let i = self.slot(k);
            let b = self.rho[i] * dot(&self.y[i * n..(i + 1) * n], d);
            axpy(self.alpha[i] - b, &self.s[i * n..(i + 1) * n], d);
        }
        for di in d.iter_mut() {
            *di = -*di;
        }
    }
}

/// A point on the line `φ(α) = f(x + α d)` with finite value and slope.
#[derive(Debug, Clone, Copy)]
struct Point {
    alpha: f64,
    phi: f64,
    dphi: f64,
}

/// Upper end of the zoom bracket: either a finite point or a step at which
/// the objective was not finite.
#[derive(Debug, Clone, Copy)]
enum High {
    Finite(Point),
    NonFinite(f64),
}

impl High {
    fn alpha(self) -> f64 {
        match self {
            High::Finite(p) => p.alpha,
            High::NonFinite(a) => a,
        }
    }
}

/// Strong-Wolfe line search (N&W Algorithms 3.5 and 3.6).
///
/// On success, `x_trial`/`g_trial` hold the accepted point and its gradient.
struct LineSearch<'a> {
    x: &'a [f64],
    d: &'a [f64],
    x_trial: &'a mut [f64],
    g_trial: &'a mut [f64],
    phi0: f64,
    dphi0: f64,
    /// Remaining evaluations in the search budget.
    budget: usize,
    evaluations: usize,
    /// Step whose point currently sits in `x_trial`/`g_trial`.
    last_alpha: f64,
}

impl LineSearch<'_> {
    /// Evaluate `φ(α)` and `φ'(α)`; `None` if either is not finite.
    fn eval<F>(&mut self, f: &mut F, alpha: f64) -> Option<Point>
    where
        F: FnMut(&[f64], &mut [f64]) -> f64,
    {
        for ((xt, &xi), &di) in self.x_trial.iter_mut().zip(self.x).zip(self.d) {
            *xt = xi + alpha * di;
        }
        let phi = f(self.x_trial, self.g_trial);
        self.evaluations += 1;
        self.last_alpha = alpha;
        // A non-finite gradient entry always makes the dot product non-finite.
        let dphi = dot(self.g_trial, self.d);
        (phi.is_finite() && dphi.is_finite()).then_some(Point { alpha, phi, dphi })
    }

    fn armijo_violated(&self, p: Point) -> bool {
        p.phi > self.phi0 + C1 * p.alpha * self.dphi0
    }

    fn curvature_ok(&self, p: Point) -> bool {
        p.dphi.abs() <= -C2 * self.dphi0
    }

    /// Bracketing phase (N&W Algorithm 3.5). Returns the accepted value.
    fn run<F>(&mut self, f: &mut F, alpha_init: f64) -> Option<f64>
    where
        F: FnMut(&[f64], &mut [f64]) -> f64,
    {
        let mut prev = Point {
            alpha: 0.0,
            phi: self.phi0,
            dphi: self.dphi0,
        };
        let mut alpha = alpha_init;
        if !(alpha.is_finite() && alpha > 0.0) {
            alpha = 1.0;
        }
        loop {
            if self.budget == 0 || !alpha.is_finite() {
                return self.fallback(f, prev);
            }
            self.budget -= 1;
            let Some(cur) = self.eval(f, alpha) else {
                return self.zoom(f, prev, High::NonFinite(alpha));
            };
            if self.armijo_violated(cur) || (prev.alpha > 0.0 && cur.phi >= prev.phi) {
                return self.zoom(f, prev, High::Finite(cur));
            }
            if self.curvature_ok(cur) {
                return Some(cur.phi);
            }
            if cur.dphi >= 0.0 {
                return self.zoom(f, cur, High::Finite(prev));
            }
            prev = cur;
            alpha *= EXTRAPOLATION_FACTOR;
        }
    }

    /// Zoom phase (N&W Algorithm 3.6). `lo` satisfies sufficient decrease
    /// and has the lowest value seen so far; the bracket contains a
    /// strong-Wolfe point (or, for a non-finite `hi`, the step is shrunk).
    fn zoom<F>(&mut self, f: &mut F, mut lo: Point, mut hi: High) -> Option<f64>
    where
        F: FnMut(&[f64], &mut [f64]) -> f64,
    {
        loop {
            let a_hi = hi.alpha();
            let width = (a_hi - lo.alpha).abs();
            if self.budget == 0 || width <= f64::EPSILON * lo.alpha.abs().max(a_hi.abs()) {
                return self.fallback(f, lo);
            }
            self.budget -= 1;
            let alpha = match hi {
                High::Finite(h) => cubic_step(lo, h),
                High::NonFinite(a) => 0.5 * (lo.alpha + a),
            };
            let Some(cur) = self.eval(f, alpha) else {
                hi = High::NonFinite(alpha);
                continue;
            };
            if self.armijo_violated(cur) || cur.phi >= lo.phi {
                hi = High::Finite(cur);
            } else {
                if self.curvature_ok(cur) {
                    return Some(cur.phi);
                }
                if cur.dphi * (a_hi - lo.alpha) >= 0.0 {
                    hi = High::Finite(lo);
                }
                lo = cur;
            }
        }
    }

    /// Out of budget or bracket collapsed: accept `lo` if it is a strict
    /// decrease (it satisfies the sufficient-decrease condition by
    /// construction, possibly not the curvature condition).
    fn fallback<F>(&mut self, f: &mut F, lo: Point) -> Option<f64>
    where
        F: FnMut(&[f64], &mut [f64]) -> f64,
    {
        if !(lo.alpha > 0.0 && lo.phi < self.phi0) {
            return None;
        }
        if self.last_alpha == lo.alpha {
            return Some(lo.phi);
        }
        // Restore the point into the trial buffers (one extra evaluation).
        self.eval(f, lo.alpha).map(|p| p.phi)
    }
}

/// Minimiser of the cubic interpolating `φ` and `φ'` at both ends
/// (N&W eq. 3.59), kept at least 10% of the bracket width away from either
/// end; bisection if the cubic has no minimiser.
fn cubic_step(lo: Point, hi: Point) -> f64 {
    let (a, b) = (lo.alpha, hi.alpha);
    let d1 = lo.dphi + hi.dphi - 3.0 * (lo.phi - hi.phi) / (a - b);
    let disc = d1 * d1 - lo.dphi * hi.dphi;
    let left = a.min(b);
    let right = a.max(b);
    let margin = 0.1 * (right - left);
    if disc >= 0.0 {
        let d2 = (b - a).signum() * disc.sqrt();
        let t = b - (b - a) * (hi.dphi + d2 - d1) / (hi.dphi - lo.dphi + 2.0 * d2);
        if t.is_finite() {
            return t.clamp(left + margin, right - margin);
        }
    }
    0.5 * (a + b)
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `y += a x`.
fn axpy(a: f64, x: &[f64], y: &mut [f64]) {
    for (yi, &xi) in y.iter_mut().zip(x) {
        *yi += a * xi;
    }
}

fn norm_inf(v: &[f64]) -> f64 {
    v.iter().fold(0.0, |m: f64, x| m.max(x.abs()))
}

/// Euclidean norm, scaled to avoid overflow.
fn norm2(v: &[f64]) -> f64 {
    let scale = norm_inf(v);
    if scale == 0.0 || !scale.is_finite() {
        return scale;
    }
    scale * v.iter().map(|x| (x / scale).powi(2)).sum::<f64>().sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Apply the Householder reflection `H = I − 2 v vᵀ / vᵀv` in place.
    fn reflect(v: &[f64], vv: f64, x: &mut [f64]) {
        let c = 2.0 * dot(v, x) / vv;
        axpy(-c, v, x);
    }

    #[test]
    fn ill_conditioned_quadratic() {
        // f(x) = ½ (x − x*)ᵀ A (x − x*), A = H Λ H, eigenvalues 1 … 1e4.
        let n = 50;
        let lambda: Vec<f64> = (0..n)
            .map(|i| 10f64.powf(4.0 * i as f64 / (n - 1) as f64))
            .collect();
        let v: Vec<f64> = (0..n).map(|i| 1.0 + (i as f64 * 0.7).cos()).collect();
        let vv = dot(&v, &v);
        let x_star: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin() + 0.5).collect();
        let mut r = vec![0.0; n];
        let objective = |x: &[f64], g: &mut [f64]| {
            for i in 0..n {
                r[i] = x[i] - x_star[i];
            }
            g.copy_from_slice(&r);
            reflect(&v, vv, g);
            for (gi, l) in g.iter_mut().zip(&lambda) {
                *gi *= l;
            }
            reflect(&v, vv, g);
            0.5 * dot(&r, g)
        };
        // With m = 10, L-BFGS needs ~1200 iterations on this spectrum (50
        // log-spaced eigenvalues in [1, 1e4]); f* = 0, so the gradient test
        // is absolute and 1e-10 gives ‖x − x*‖_∞ ≲ 1e-10 / λ_min.
        let options = LbfgsOptions {
            gradient_tolerance: 1e-10,
            max_iterations: 5000,
            ..LbfgsOptions::default()
        };
        let res = minimize(objective, &vec![0.0; n], &options).unwrap();
        assert!(res.converged, "{res:?}");
        let err = res
            .x
            .iter()
            .zip(&x_star)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(err <= 1e-8, "error {err:e}, {:?}", res.reason);
    }

    fn rosenbrock(x: &[f64], g: &mut [f64]) -> f64 {
        g.fill(0.0);
        let mut f = 0.0;
        for i in 0..x.len() - 1 {
            let a = x[i + 1] - x[i] * x[i];
            let b = 1.0 - x[i];
            f += 100.0 * a * a + b * b;
            g[i] += -400.0 * x[i] * a - 2.0 * b;
            g[i + 1] += 200.0 * a;
        }
        f
    }

    fn check_rosenbrock(n: usize, memory: usize) -> LbfgsResult {
        let x0: Vec<f64> = (0..n)
            .map(|i| if i % 2 == 0 { -1.2 } else { 1.0 })
            .collect();
        let options = LbfgsOptions {
            memory,
            ..LbfgsOptions::default()
        };
        let res = minimize(rosenbrock, &x0, &options).unwrap();
        assert!(res.converged, "{res:?}");
        for xi in &res.x {
            assert!((xi - 1.0).abs() <= 1e-6, "{res:?}");
        }
        res
    }

    #[test]
    fn rosenbrock_2d() {
        // Bounds on the iteration count (observed: 37) catch a degraded
        // direction that the steepest-descent fallback would otherwise hide.
        let res = check_rosenbrock(2, 10);
        assert!(res.iterations <= 60, "{res:?}");
    }

    #[test]
    fn rosenbrock_10d() {
        // Observed: 81 iterations.
        let res = check_rosenbrock(10, 10);
        assert!(res.iterations <= 150, "{res:?}");
    }

    #[test]
    fn rosenbrock_10d_small_memory_wraps_ring_buffer() {
        let res = check_rosenbrock(10, 3);
        assert!(res.iterations > 3);
    }

    /// SplitMix64 pseudo-random generator.
    struct Rng(u64);

    impl Rng {
        fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        /// Uniform on (0, 1).
        fn uniform(&mut self) -> f64 {
            ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }
        fn normal(&mut self) -> f64 {
            let (u1, u2) = (self.uniform(), self.uniform());
            (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        }
    }

    fn sigmoid(t: f64) -> f64 {
        if t >= 0.0 {
            1.0 / (1.0 + (-t).exp())
        } else {
            let e = t.exp();
            e / (1.0 + e)
        }
    }

    /// `log(1 + eᵗ)`, stable for large |t|.
    fn softplus(t: f64) -> f64 {
        t.max(0.0) + (-t.abs()).exp().ln_1p()
    }

    /// Solve `a x = b` (row-major `n × n`) by Gaussian elimination with
    /// partial pivoting; `a` and `b` are overwritten.
    fn solve(a: &mut [f64], b: &mut [f64]) {
        let n = b.len();
        for k in 0..n {
            let p = (k..n)
                .max_by(|&i, &j| a[i * n + k].abs().total_cmp(&a[j * n + k].abs()))
                .unwrap();
            for j in 0..n {
                a.swap(k * n + j, p * n + j);
            }
            b.swap(k, p);
            for i in k + 1..n {
                let factor = a[i * n + k] / a[k * n + k];
                for j in k..n {
                    a[i * n + j] -= factor * a[k * n + j];
                }
                b[i] -= factor * b[k];
            }
        }
        for k in (0..n).rev() {
            let s: f64 = (k + 1..n).map(|j| a[k * n + j] * b[j]).sum();
            b[k] = (b[k] - s) / a[k * n + k];
        }
    }

    #[test]
    fn bayesian_logistic_regression_matches_newton() {
        const N: usize = 2000;
        const D: usize = 5;
        const PRIOR_VARIANCE: f64 = 10.0;
        let beta_true = [0.5, -1.0, 2.0, 0.3, -0.7];
        let mut rng = Rng(42);
        let mut xs = vec![0.0; N * D];
        let mut ys = vec![0.0; N];
        for i in 0..N {
            xs[i * D] = 1.0;
            for j in 1..D {
                xs[i * D + j] = rng.normal();
            }
            let eta = dot(&xs[i * D..(i + 1) * D], &beta_true);
            ys[i] = if rng.uniform() < sigmoid(eta) {
                1.0
            } else {
                0.0
            };
        }
        // U(β) = Σ [log(1 + e^η) − y η] + βᵀβ / (2 σ²).
        let potential = |beta: &[f64], g: &mut [f64]| {
            let mut u = dot(beta, beta) / (2.0 * PRIOR_VARIANCE);
            for (gj, bj) in g.iter_mut().zip(beta) {
                *gj = bj / PRIOR_VARIANCE;
            }
            for i in 0..N {
                let row = &xs[i * D..(i + 1) * D];
                let eta = dot(row, beta);
                u += softplus(eta) - ys[i] * eta;
                axpy(sigmoid(eta) - ys[i], row, g);
            }
            u
        };
        let res = minimize(potential, &[0.0; D], &LbfgsOptions::default()).unwrap();
        assert!(res.converged, "{res:?}");

        // Reference: Newton's method from zero.
        let mut beta = [0.0; D];
        for _ in 0..30 {
            let mut hess = [0.0; D * D];
            let mut grad = [0.0; D];
            for j in 0..D {
                hess[j * D + j] = 1.0 / PRIOR_VARIANCE;
                grad[j] = beta[j] / PRIOR_VARIANCE;
            }
            for i in 0..N {
                let row = &xs[i * D..(i + 1) * D];
                let p = sigmoid(dot(row, &beta));
                for j in 0..D {
                    grad[j] += (p - ys[i]) * row[j];
                    for k in 0..D {
                        hess[j * D + k] += p * (1.0 - p) * row[j] * row[k];
                    }
                }
            }
            solve(&mut hess, &mut grad);
            for j in 0..D {
                beta[j] -= grad[j];
            }
            if norm_inf(&grad) < 1e-14 {
                break;
            }
        }
        for j in 0..D {
            assert!(
                (res.x[j] - beta[j]).abs() <= 1e-6,
                "lbfgs {:?} vs newton {beta:?}",
                res.x
            );
            // Sanity: the MAP is near the generating parameters.
            assert!((beta[j] - beta_true[j]).abs() < 0.3, "{beta:?}");
        }
    }

    #[test]
    fn nan_region_makes_line_search_back_off() {
        // Minimum at 0.5 in every coordinate; NaN as soon as any x_i > 1.
        // From x0 the first trial step (unit length along −g) lands at x > 1.
        let mut nan_hits = 0;
        let mut objective = |x: &[f64], g: &mut [f64]| {
            if x.iter().any(|&xi| xi > 1.0) {
                nan_hits += 1;
                g.fill(f64::NAN);
                return f64::NAN;
            }
            let mut f = 0.0;
            for (gi, &xi) in g.iter_mut().zip(x) {
                let t = xi - 0.5;
                f += t * t + t.powi(4);
                *gi = 2.0 * t + 4.0 * t.powi(3);
            }
            f
        };
        let res = minimize(&mut objective, &[0.3], &LbfgsOptions::default()).unwrap();
        assert!(res.converged, "{res:?}");
        assert!((res.x[0] - 0.5).abs() <= 1e-8, "{res:?}");

        let res = minimize(&mut objective, &[0.3, 0.45, 0.2], &LbfgsOptions::default()).unwrap();
        assert!(res.converged, "{res:?}");
        for xi in &res.x {
            assert!((xi - 0.5).abs() <= 1e-8, "{res:?}");
        }
        assert!(nan_hits >= 2, "NaN region never probed ({nan_hits})");
    }

    #[test]
    fn infinite_value_is_treated_as_too_far() {
        // −log x + x: support x > 0, minimum at 1; +∞ outside the support.
        let objective = |x: &[f64], g: &mut [f64]| {
            if x[0] <= 0.0 {
                g[0] = 0.0;
                return f64::INFINITY;
            }
            g[0] = 1.0 - 1.0 / x[0];
            x[0] - x[0].ln()
        };
        let res = minimize(objective, &[5.0], &LbfgsOptions::default()).unwrap();
        assert!(res.converged, "{res:?}");
        assert!((res.x[0] - 1.0).abs() <= 1e-6, "{res:?}");
    }

    #[test]
    fn non_finite_start_is_an_error() {
        let nan_value = |_: &[f64], g: &mut [f64]| {
            g.fill(0.0);
            f64::NAN
        };
        let err = minimize(nan_value, &[1.0, 2.0], &LbfgsOptions::default()).unwrap_err();
        assert!(matches!(err, LbfgsError::NonFiniteStart { .. }), "{err}");

        let inf_gradient = |_: &[f64], g: &mut [f64]| {
            g.fill(f64::INFINITY);
            0.0
        };
        let err = minimize(inf_gradient, &[1.0], &LbfgsOptions::default()).unwrap_err();
        assert_eq!(err, LbfgsError::NonFiniteStart { value: 0.0 });
        assert!(!err.to_string().contains('\n'));
    }

    #[test]
    fn invalid_options_are_rejected() {
        let options = LbfgsOptions {
            memory: 0,
            ..LbfgsOptions::default()
        };
        let err = minimize(rosenbrock, &[0.0, 0.0], &options).unwrap_err();
        assert!(matches!(err, LbfgsError::InvalidOptions { .. }));
    }

    #[test]
    fn stationary_start_returns_immediately() {
        let mut calls = 0;
        let res = minimize(
            |x: &[f64], g: &mut [f64]| {
                calls += 1;
                rosenbrock(x, g)
            },
            &[1.0, 1.0],
            &LbfgsOptions::default(),
        )
        .unwrap();
        assert_eq!(calls, 1);
        assert_eq!(res.iterations, 0);
        assert_eq!(res.evaluations, 1);
        assert_eq!(res.reason, StopReason::GradientTolerance);
    }

    #[test]
    fn iteration_limit_is_not_converged() {
        let options = LbfgsOptions {
            max_iterations: 3,
            ..LbfgsOptions::default()
        };
        let res = minimize(rosenbrock, &[-1.2, 1.0], &options).unwrap();
        assert_eq!(res.iterations, 3);
        assert!(!res.converged);
        assert_eq!(res.reason, StopReason::MaxIterations);
    }

    #[test]
    fn inconsistent_gradient_is_a_line_search_error() {
        // The reported gradient has the wrong sign, so −g is an ascent
        // direction and no step can satisfy sufficient decrease.
        let wrong = |x: &[f64], g: &mut [f64]| {
            g[0] = -2.0 * x[0];
            x[0] * x[0]
        };
        let err = minimize(wrong, &[1.0], &LbfgsOptions::default()).unwrap_err();
        assert!(
            matches!(err, LbfgsError::LineSearchFailed { iteration: 0, .. }),
            "{err}"
        );
    }

    #[test]
    fn stalled_line_search_near_optimum_counts_as_converged() {
        // A gradient with a small bias (as from a slightly inaccurate
        // gradient): with all tolerances disabled the iteration can only end
        // when no decrease is found, which happens with ‖g‖ ≈ 1e-9 ≪ 1e-6 ‖g₀‖.
        let biased = |x: &[f64], g: &mut [f64]| {
            g[0] = 2.0 * x[0] + 1e-9;
            g[1] = 20.0 * x[1] - 1e-9;
            x[0] * x[0] + 10.0 * x[1] * x[1]
        };
        let options = LbfgsOptions {
            gradient_tolerance: 0.0,
            function_tolerance: 0.0,
            ..LbfgsOptions::default()
        };
        let res = minimize(biased, &[3.0, -2.0], &options).unwrap();
        assert_eq!(res.reason, StopReason::LineSearchStalled, "{res:?}");
        assert!(res.converged);
        assert!(res.x.iter().all(|xi| xi.abs() < 1e-8), "{res:?}");
    }

    #[test]
    fn large_separable_problem() {
        // D = 100_000, diagonal quadratic with condition number 10.
        let n = 100_000;
        let objective = |x: &[f64], g: &mut [f64]| {
            let mut f = 0.0;
            for (i, (gi, &xi)) in g.iter_mut().zip(x).enumerate() {
                let c = 1.0 + 9.0 * (i % 97) as f64 / 96.0;
                let t = xi - 1.0;
                f += 0.5 * c * t * t;
                *gi = c * t;
            }
            f
        };
        let res = minimize(objective, &vec![0.0; n], &LbfgsOptions::default()).unwrap();
        assert!(res.converged, "{:?}", res.reason);
        assert!(res.x.iter().all(|xi| (xi - 1.0).abs() <= 1e-6));
    }
    #[test]
    fn two_loop_matches_dense_bfgs() {
        let n = 4;
        let m = 3;
        let mut h = History::new(m, n);
        // SPD matrix A; pairs y = A s.
        let a = [
            4.0, 1.0, 0.5, 0.0, 1.0, 3.0, 0.2, 0.1, 0.5, 0.2, 2.0, 0.3, 0.0, 0.1, 0.3, 1.0,
        ];
        let mut pairs = Vec::new();
        for k in 0..5 {
            let s: Vec<f64> = (0..n).map(|i| ((k * 7 + i * 3) as f64).sin()).collect();
            let y: Vec<f64> = (0..n)
                .map(|i| (0..n).map(|j| a[i * n + j] * s[j]).sum())
                .collect();
            let zeros = vec![0.0; n];
            h.push(&s, &zeros, &y, &zeros);
            pairs.push((s, y));
        }
        let g = [1.0, -2.0, 0.5, 3.0];
        let mut d = vec![0.0; n];
        h.direction(&g, &mut d);
        // Dense: last m pairs, H0 = gamma I.
        let used = &pairs[pairs.len() - m..];
        let (s_last, y_last) = used.last().unwrap();
        let gamma = dot(s_last, y_last) / dot(y_last, y_last);
        let mut hm = vec![0.0; n * n];
        for i in 0..n {
            hm[i * n + i] = gamma;
        }
        for (s, y) in used {
            let rho = 1.0 / dot(s, y);
            // V = I - rho y s^T ; H = V^T H V + rho s s^T
            let mut v = vec![0.0; n * n];
            for i in 0..n {
                for j in 0..n {
                    v[i * n + j] = f64::from(u8::from(i == j)) - rho * y[i] * s[j];
                }
            }
            let mut tmp = vec![0.0; n * n];
            for i in 0..n {
                for j in 0..n {
                    tmp[i * n + j] = (0..n).map(|k| hm[i * n + k] * v[k * n + j]).sum();
                }
            }
            for i in 0..n {
                for j in 0..n {
                    hm[i * n + j] = (0..n).map(|k| v[k * n + i] * tmp[k * n + j]).sum::<f64>()
                        + rho * s[i] * s[j];
                }
            }
        }
        for i in 0..n {
            let expect: f64 = -(0..n).map(|j| hm[i * n + j] * g[j]).sum::<f64>();
            assert!((d[i] - expect).abs() < 1e-10, "{d:?} vs {expect}");
        }
    }
}
