//! Online estimate of the gradient-noise covariance (CCAdL, reference §2.7, Eq. 18–19).
//!
//! From the n per-datum terms tₖ of each minibatch estimate (see
//! [`GradientEstimator::estimate_with_terms`](crate::estimator::GradientEstimator::estimate_with_terms)):
//!
//! V(θₜ) = (1/(n − 1))·Σₖ (tₖ − t̄)(tₖ − t̄)ᵀ,   Îₜ = (1 − κₜ)·Îₜ₋₁ + κₜ·V(θₜ),
//!
//! with κₜ = 1/t (the running mean of every V since the start) or a constant κ (an exponential
//! moving average, `ccadl_kappa_constant`). The terms reach it through a [`TermMoments`] the
//! model fills inside its row loop, so V costs one pass and no n × D buffer. The noise
//! covariance of the estimate is then Σ̂ = s·Î with s from
//! [`BatchTerms::noise_scale`](crate::estimator::BatchTerms::noise_scale). The diagonal shape
//! keeps only diag(V) and diag(Î): O(n·D) work and O(D) memory instead of O(n·D²) and O(D²).

pub use crate::model::CovarianceShape;
use crate::model::TermMoments;
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::evd::{self, ComputeEigenvectors};
use faer::{MatMut, MatRef, Par};

/// The running estimate Î of the covariance of the per-datum gradient terms.
#[derive(Debug, Clone)]
pub struct NoiseCovariance {
    kappa: Option<f64>,
    dim: usize,
    updates: usize,
    /// Î: D values (diagonal) or D² column-major (full; symmetric).
    estimate: Vec<f64>,
    /// The current batch's terms.
    moments: TermMoments,
}

/// Î, its update count and the terms' shift, restored into an estimator already sized for the
/// chain (its shape and dimension; the batch's sums are filled anew by every estimate).
impl crate::checkpoint::Persist for NoiseCovariance {
    fn save(&self, w: &mut crate::checkpoint::StateWriter) {
        w.nested(3);
        w.field("updates", &self.updates);
        w.field("estimate", &self.estimate);
        w.field("moments", &self.moments);
    }
    fn load(
        &mut self,
        r: &mut crate::checkpoint::StateReader<'_>,
    ) -> Result<(), crate::checkpoint::StateError> {
        r.nested(3)?;
        r.field("updates", &mut self.updates)?;
        let mut estimate = Vec::new();
        r.field("estimate", &mut estimate)?;
        if estimate.len() != self.estimate.len() {
            return Err(crate::checkpoint::StateError::Invalid(format!(
                "the noise covariance has {} values, this chain's {}",
                estimate.len(),
                self.estimate.len()
            )));
        }
        self.estimate = estimate;
        r.field("moments", &mut self.moments)
    }
}

impl NoiseCovariance {
    /// An estimator of the given shape; `kappa` = None gives κₜ = 1/t, Some(κ) a constant κ in
    /// (0, 1].
    pub fn new(shape: CovarianceShape, kappa: Option<f64>) -> Self {
        Self {
            kappa,
            dim: 0,
            updates: 0,
            estimate: Vec::new(),
            moments: TermMoments::new(shape, 0),
        }
    }

    /// The shape estimated.
    pub fn shape(&self) -> CovarianceShape {
        self.moments.shape()
    }

    /// Forget every update and size the estimate for dimension `dim` (Î₀ = 0).
    pub fn reset(&mut self, dim: usize) {
        let shape = self.shape();
        self.dim = dim;
        self.updates = 0;
        let len = match shape {
            CovarianceShape::Diagonal => dim,
            CovarianceShape::Full => dim * dim,
        };
        self.estimate.clear();
        self.estimate.resize(len, 0.0);
        self.moments = TermMoments::new(shape, dim);
    }

    /// Number of updates since the last reset (t).
    pub fn updates(&self) -> usize {
        self.updates
    }

    /// Î: the diagonal (D values) or the full matrix (D², column-major).
    pub fn estimate(&self) -> &[f64] {
        &self.estimate
    }

    /// Îⱼⱼ, for either shape.
    #[inline]
    pub fn diagonal_entry(&self, j: usize) -> f64 {
        match self.shape() {
            CovarianceShape::Diagonal => self.estimate[j],
            CovarianceShape::Full => self.estimate[j + self.dim * j],
        }
    }

    /// Start collecting the terms of a new estimate into [`Self::moments`].
    pub fn begin(&mut self) {
        self.moments.begin();
    }

    /// Where the terms of the current estimate go (between [`Self::begin`] and
    /// [`Self::finish`]).
    pub fn moments(&mut self) -> &mut TermMoments {
        &mut self.moments
    }

    /// Fold the collected batch into the estimate: V = M₂/(n − 1), Î ← (1 − κ)Î + κV. A batch
    /// of fewer than 2 terms (e.g. an exact estimate) contributes V = 0.
    pub fn finish(&mut self) {
        self.updates += 1;
        let kappa = self.kappa.unwrap_or(1.0 / self.updates as f64);
        self.estimate.iter_mut().for_each(|e| *e *= 1.0 - kappa);
        let n = self.moments.count();
        if n >= 2 {
            self.moments
                .add_centred_second_moments(kappa / (n - 1) as f64, &mut self.estimate);
        }
        self.moments.recentre();
    }

    /// [`Self::begin`], all of the `n × D` row-major `terms` at once, [`Self::finish`].
    pub fn update(&mut self, terms: &[f64]) {
        self.begin();
        self.moments.add_rows(terms);
        self.finish();
    }

    /// `out = Î·p` (diagonal: element-wise).
    pub fn apply(&self, p: &[f64], out: &mut [f64]) {
        match self.shape() {
            CovarianceShape::Diagonal => out
                .iter_mut()
                .zip(&self.estimate)
                .zip(p)
                .for_each(|((o, e), p)| *o = e * p),
            CovarianceShape::Full => {
                let d = self.dim;
                out.fill(0.0);
                for (j, col) in self.estimate.chunks_exact(d).enumerate() {
                    let pj = p[j];
                    out.iter_mut().zip(col).for_each(|(o, c)| *o += c * pj);
                }
            }
        }
    }
}

/// Applies functions of a symmetric matrix, f(S)·x = Q·f(Λ)·Qᵀ·x, through its eigendecomposition,
/// with all workspace allocated once (so a sampler can call it every iteration). Used for the
/// matrix square root of CCAdL's SGHMC comparator and the exact friction step.
pub struct SymmetricFunction {
    dim: usize,
    eigenvalues: Vec<f64>,
    eigenvectors: Vec<f64>,
    /// f(λ) and then Qᵀx.
    work: Vec<f64>,
    buffer: MemBuffer,
}

impl std::fmt::Debug for SymmetricFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SymmetricFunction")
            .field("dim", &self.dim)
            .field("eigenvalues", &self.eigenvalues)
            .finish_non_exhaustive()
    }
}

impl SymmetricFunction {
    /// Workspace for D × D matrices.
    pub fn new(dim: usize) -> Self {
        let req = evd::self_adjoint_evd_scratch::<f64>(
            dim,
            ComputeEigenvectors::Yes,
            Par::Seq,
            Default::default(),
        );
        Self {
            dim,
            eigenvalues: vec![0.0; dim],
            eigenvectors: vec![0.0; dim * dim],
            work: vec![0.0; 2 * dim],
            buffer: MemBuffer::new(req),
        }
    }

    /// Decompose `scale·S` for the column-major symmetric `s` (D²), so that [`Self::apply`] then
    /// uses its eigenvalues λ. Returns false if the decomposition failed (non-finite input).
    pub fn decompose(&mut self, s: &[f64], scale: f64) -> bool {
        let d = self.dim;
        if s.iter().any(|v| !v.is_finite()) {
            return false;
        }
        // scale·S has the eigenvectors of S and eigenvalues scale·λ.
        let a = MatRef::from_column_major_slice(s, d, d);
        let u = MatMut::from_column_major_slice_mut(&mut self.eigenvectors, d, d);
        let diag = faer::diag::DiagMut::from_slice_mut(&mut self.eigenvalues);
        let stack = MemStack::new(&mut self.buffer);
        let ok =
            evd::self_adjoint_evd(a, diag, Some(u), Par::Seq, stack, Default::default()).is_ok();
        self.eigenvalues.iter_mut().for_each(|l| *l *= scale);
        ok
    }

    /// `out = Q·diag(f(λ))·Qᵀ·x` with the eigenpairs of the last [`Self::decompose`].
    pub fn apply(&mut self, f: impl Fn(f64) -> f64, x: &[f64], out: &mut [f64]) {
        let d = self.dim;
        let (fl, qtx) = self.work.split_at_mut(d);
        for (k, col) in self.eigenvectors.chunks_exact(d).enumerate() {
            fl[k] = f(self.eigenvalues[k]);
            qtx[k] = col.iter().zip(x).map(|(q, x)| q * x).sum::<f64>() * fl[k];
        }
        out.fill(0.0);
        for (k, col) in self.eigenvectors.chunks_exact(d).enumerate() {
            let c = qtx[k];
            out.iter_mut().zip(col).for_each(|(o, q)| *o += q * c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute_force_v(rows: &[Vec<f64>]) -> Vec<f64> {
        let n = rows.len();
        let d = rows[0].len();
        let mean: Vec<f64> = (0..d)
            .map(|j| rows.iter().map(|r| r[j]).sum::<f64>() / n as f64)
            .collect();
        let mut v = vec![0.0; d * d];
        for r in rows {
            for j in 0..d {
                for i in 0..d {
                    v[i + d * j] += (r[i] - mean[i]) * (r[j] - mean[j]) / (n - 1) as f64;
                }
            }
        }
        v
    }

    /// Reference §2.7 test 2: Î is the running mean of the V(θₛ), s ≤ t, computed by brute
    /// force, and the diagonal variant agrees with the diagonal of the full one.
    #[test]
    fn estimate_is_the_running_mean_of_batch_covariances() {
        let d = 3;
        let n = 7;
        let mut full = NoiseCovariance::new(CovarianceShape::Full, None);
        let mut diag = NoiseCovariance::new(CovarianceShape::Diagonal, None);
        full.reset(d);
        diag.reset(d);
        let mut sum = vec![0.0; d * d];
        for t in 1..=5 {
            let rows: Vec<Vec<f64>> = (0..n)
                .map(|k| {
                    (0..d)
                        .map(|j| ((k * 7 + j * 3 + t * 11) as f64).sin() * (1.0 + j as f64))
                        .collect()
                })
                .collect();
            let v = brute_force_v(&rows);
            sum.iter_mut().zip(&v).for_each(|(s, v)| *s += v);
            let flat: Vec<f64> = rows.concat();
            // The full shape term by term, the diagonal all at once.
            full.begin();
            for t in flat.chunks_exact(d) {
                full.moments().add(t);
            }
            full.finish();
            diag.update(&flat);
            for (e, s) in full.estimate().iter().zip(&sum) {
                assert!(
                    (e - s / t as f64).abs() < 1e-12,
                    "t = {t}: {e} vs {}",
                    s / t as f64
                );
            }
            for j in 0..d {
                assert!((diag.estimate()[j] - full.estimate()[j + d * j]).abs() < 1e-12);
            }
        }
        // Matrix-vector product against the explicit matrix.
        let p = [0.3, -1.2, 2.0];
        let mut out = [0.0; 3];
        full.apply(&p, &mut out);
        for (i, o) in out.iter().enumerate() {
            let want: f64 = (0..d).map(|j| full.estimate()[i + d * j] * p[j]).sum();
            assert!((o - want).abs() < 1e-12);
        }
    }

    #[test]
    fn constant_kappa_is_an_exponential_moving_average_and_small_batches_add_zero() {
        let mut c = NoiseCovariance::new(CovarianceShape::Diagonal, Some(0.25));
        c.reset(1);
        c.update(&[0.0, 2.0]); // V = 2
        assert!((c.estimate()[0] - 0.5).abs() < 1e-15);
        c.update(&[]); // V = 0
        assert!((c.estimate()[0] - 0.375).abs() < 1e-15);
    }

    #[test]
    fn symmetric_function_gives_the_matrix_square_root() {
        let s = [4.0, 1.0, 1.0, 3.0]; // column-major, symmetric positive definite
        let mut f = SymmetricFunction::new(2);
        assert!(f.decompose(&s, 2.0));
        // (2S)^{1/2} applied twice to x is 2S·x.
        let x = [0.7, -0.4];
        let mut y = [0.0; 2];
        let mut z = [0.0; 2];
        f.apply(f64::sqrt, &x, &mut y);
        f.apply(f64::sqrt, &y, &mut z);
        let want = [2.0 * (4.0 * 0.7 - 0.4), 2.0 * (0.7 - 3.0 * 0.4)];
        for k in 0..2 {
            assert!((z[k] - want[k]).abs() < 1e-12, "{z:?} vs {want:?}");
        }
        assert!(!f.decompose(&[f64::NAN, 0.0, 0.0, 1.0], 1.0));
    }
}
