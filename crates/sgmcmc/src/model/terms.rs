//! Moments of the per-datum terms of a minibatch estimate, accumulated while the terms are
//! computed (CCAdL's gradient-noise covariance, reference §2.7).
//!
//! A minibatch estimate is ĝ(θ) = c(θ) + w·Σₖ tₖ; CCAdL needs the sample covariance of the n
//! terms tₖ. [`TermMoments`] takes each term as the model's row loop produces it (see
//! [`Model::add_grad_log_lik_terms`](super::Model::add_grad_log_lik_terms)) and keeps only n,
//! Σu and Σuuᵀ (or Σu², diagonal) of u = t − s about a fixed shift s; no n × D array of terms
//! is kept.
//!
//! - Diagonal: Σu and Σu² are updated in place, in one pass over the term.
//! - Full: the centred terms wait in an L1-sized block of [`BLOCK`] rows (u, 1), which one GEMM
//!   folds into Σu·(u, 1)ᵀ = (Σuuᵀ | Σu), so the O(n·D²) runs at matrix-product speed.
//!
//! The shift is the first term ever seen and then the mean of the previous batch
//! ([`TermMoments::recentre`]): the sums stay free of cancellation because consecutive batches
//! have nearly the same mean (θ moves little per step).
//!
//! Models whose terms are a scaled data row followed by a few values (a GLM's r·(x, 1, …))
//! hand them over with [`TermMoments::add_scaled`], one fused loop per term; any other model
//! with [`TermMoments::add`].

use crate::cpu::clear_upper_vector_state;
use crate::data::Element;
use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};

/// Terms per GEMM of the full shape: 128 rows of D + 1 ≈ 11 doubles (11 KB) stay in L1.
const BLOCK: usize = 128;

/// Which part of the term covariance is kept (`"full"` or `"diagonal"` in a run file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum CovarianceShape {
    /// The diagonal only: O(D) work per term.
    Diagonal,
    /// The full D × D matrix: O(D²) work per term.
    Full,
}

/// Count, sum and second moments of a batch of D-vectors about a shift.
#[derive(Debug, Clone)]
pub struct TermMoments {
    shape: CovarianceShape,
    dim: usize,
    count: usize,
    /// s (zeros until the first term sets it).
    shift: Vec<f64>,
    shift_set: bool,
    /// Σu (diagonal; the full shape keeps it in `acc`).
    sum: Vec<f64>,
    /// Σu² (diagonal).
    squares: Vec<f64>,
    /// Full: `pending` rows (u, 1) of D + 1 values not yet in `acc` (the 1s are written once,
    /// here).
    block: Vec<f64>,
    pending: usize,
    /// Full: D × (D + 1) column-major, Σuuᵀ (exactly symmetric) then Σu.
    acc: Vec<f64>,
    /// One term, for [`Self::add_with`].
    term: Vec<f64>,
}

// What carries over from one batch to the next: the shift s (the last batch's mean, which
// keeps the sums of the next well conditioned); the sums are emptied by every `begin`.
crate::persist_fields!(TermMoments { shift, shift_set });

impl TermMoments {
    /// An empty accumulator of the given shape for dimension `dim`.
    pub fn new(shape: CovarianceShape, dim: usize) -> Self {
        let full = shape == CovarianceShape::Full;
        let diagonal_len = if full { 0 } else { dim };
        let mut block = vec![0.0; if full { BLOCK * (dim + 1) } else { 0 }];
        block
            .chunks_exact_mut(dim + 1)
            .for_each(|row| row[dim] = 1.0);
        Self {
            shape,
            dim,
            count: 0,
            shift: vec![0.0; dim],
            shift_set: false,
            sum: vec![0.0; diagonal_len],
            squares: vec![0.0; diagonal_len],
            block,
            pending: 0,
            acc: vec![0.0; if full { dim * (dim + 1) } else { 0 }],
            term: vec![0.0; dim],
        }
    }

    /// The shape kept.
    pub fn shape(&self) -> CovarianceShape {
        self.shape
    }

    /// The dimension D of a term.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Start a new batch: forget the terms, keep the shift.
    pub fn begin(&mut self) {
        self.count = 0;
        self.pending = 0;
        self.sum.fill(0.0);
        self.squares.fill(0.0);
        self.acc.fill(0.0);
    }

    /// Number of terms n since [`Self::begin`].
    pub fn count(&self) -> usize {
        self.count
    }

    /// Add one term t (D values).
    #[inline]
    pub fn add(&mut self, t: &[f64]) {
        self.add_scaled::<f64>(1.0, &[], t);
    }

    /// Add one term written by `fill` into a D-length buffer the accumulator owns.
    #[inline]
    pub fn add_with(&mut self, fill: impl FnOnce(&mut [f64])) {
        let mut term = std::mem::take(&mut self.term);
        fill(&mut term);
        self.add(&term);
        self.term = term;
    }

    /// Add the term t = (a·x, tail), a scaled row of `x.len()` values followed by `tail`
    /// (x.len() + tail.len() = D), in one pass over it.
    #[inline(always)]
    pub fn add_scaled<T: Element>(&mut self, a: f64, x: &[T], tail: &[f64]) {
        let d = self.dim;
        let dx = x.len();
        debug_assert_eq!(dx + tail.len(), d);
        if !self.shift_set {
            self.set_shift(a, x, tail);
        }
        let (s_x, s_tail) = self.shift.split_at(dx);
        match self.shape {
            CovarianceShape::Diagonal => {
                let (sum_x, sum_tail) = self.sum.split_at_mut(dx);
                let (sq_x, sq_tail) = self.squares.split_at_mut(dx);
                for (((&x, s), sum), sq) in x.iter().zip(s_x).zip(sum_x).zip(sq_x) {
                    let u = a * x.to_f64() - s;
                    *sum += u;
                    *sq += u * u;
                }
                for (((&t, s), sum), sq) in tail.iter().zip(s_tail).zip(sum_tail).zip(sq_tail) {
                    let u = t - s;
                    *sum += u;
                    *sq += u * u;
                }
            }
            CovarianceShape::Full => {
                let start = self.pending * (d + 1);
                let (u_x, u_tail) = self.block[start..start + d].split_at_mut(dx);
                for ((u, &x), s) in u_x.iter_mut().zip(x).zip(s_x) {
                    *u = a * x.to_f64() - s;
                }
                for ((u, &t), s) in u_tail.iter_mut().zip(tail).zip(s_tail) {
                    *u = t - s;
                }
                self.pending += 1;
                if self.pending == BLOCK {
                    self.flush();
                }
            }
        }
        self.count += 1;
    }

    /// s = the first term ever seen.
    #[cold]
    fn set_shift<T: Element>(&mut self, a: f64, x: &[T], tail: &[f64]) {
        let (s_x, s_tail) = self.shift.split_at_mut(x.len());
        s_x.iter_mut()
            .zip(x)
            .for_each(|(s, &x)| *s = a * x.to_f64());
        s_tail.copy_from_slice(tail);
        self.shift_set = true;
    }

    /// Full shape: fold the pending rows into `acc`, Σ u·(u, 1)ᵀ as one (D × k)·(k × (D + 1))
    /// product of two views of the row-major block.
    fn flush(&mut self) {
        let (d, k) = (self.dim, self.pending);
        if self.shape == CovarianceShape::Full && k > 0 {
            let block = &self.block[..k * (d + 1)];
            let u_t = MatRef::from_column_major_slice_with_stride(block, d, k, d + 1);
            let u1 = MatRef::from_row_major_slice(block, k, d + 1);
            let acc = MatMut::from_column_major_slice_mut(&mut self.acc, d, d + 1);
            matmul(acc, Accum::Add, u_t, u1, 1.0, Par::Seq);
            clear_upper_vector_state();
        }
        self.pending = 0;
    }

    /// Add every term of an `n × D` row-major block.
    pub fn add_rows(&mut self, rows: &[f64]) {
        for t in rows.chunks_exact(self.dim) {
            self.add(t);
        }
    }

    /// Σu (after a flush).
    fn sum_u(&self) -> &[f64] {
        match self.shape {
            CovarianceShape::Full => &self.acc[self.dim * self.dim..],
            CovarianceShape::Diagonal => &self.sum,
        }
    }

    /// `out = Σₖ tₖ` (= Σu + n·s) over the terms since [`Self::begin`].
    pub fn sum_of_terms(&mut self, out: &mut [f64]) {
        self.flush();
        let n = self.count as f64;
        out.iter_mut()
            .zip(self.sum_u())
            .zip(&self.shift)
            .for_each(|((o, u), s)| *o = u + n * s);
    }

    /// `grad += weight·(Σₖ tₖ − before)`, with `before` an earlier [`Self::sum_of_terms`] of
    /// this batch: the weighted sum of the terms added since.
    pub fn add_weighted_sum_since(&mut self, before: &[f64], weight: f64, grad: &mut [f64]) {
        self.flush();
        let n = self.count as f64;
        for (((g, u), s), b) in grad
            .iter_mut()
            .zip(self.sum_u())
            .zip(&self.shift)
            .zip(before)
        {
            *g += weight * ((u + n * s) - b);
        }
    }

    /// `out += c·M₂`, the centred second moments M₂ = Σ(t − t̄)(t − t̄)ᵀ = Σuuᵀ − n·ūūᵀ
    /// (diagonal or full, as the shape; nothing for an empty batch).
    pub fn add_centred_second_moments(&mut self, c: f64, out: &mut [f64]) {
        if self.count == 0 {
            return;
        }
        self.flush();
        let d = self.dim;
        let inv_n = 1.0 / self.count as f64;
        match self.shape {
            CovarianceShape::Diagonal => {
                for ((o, m), u) in out.iter_mut().zip(&self.squares).zip(&self.sum) {
                    *o += c * (m - u * u * inv_n);
                }
            }
            CovarianceShape::Full => {
                let (second, sum) = self.acc.split_at(d * d);
                for ((ocol, mcol), uj) in
                    out.chunks_exact_mut(d).zip(second.chunks_exact(d)).zip(sum)
                {
                    let cj = uj * inv_n;
                    for ((o, m), ui) in ocol.iter_mut().zip(mcol).zip(sum) {
                        *o += c * (m - ui * cj);
                    }
                }
            }
        }
    }

    /// Move the shift to this batch's mean, for the next batch (no-op for an empty batch).
    pub fn recentre(&mut self) {
        if self.count == 0 {
            return;
        }
        self.flush();
        let n = self.count as f64;
        let mut shift = std::mem::take(&mut self.shift);
        shift
            .iter_mut()
            .zip(self.sum_u())
            .for_each(|(s, u)| *s += u / n);
        self.shift = shift;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute_force(rows: &[Vec<f64>]) -> (Vec<f64>, Vec<f64>) {
        let n = rows.len() as f64;
        let d = rows[0].len();
        let mean: Vec<f64> = (0..d)
            .map(|j| rows.iter().map(|r| r[j]).sum::<f64>() / n)
            .collect();
        let mut m2 = vec![0.0; d * d];
        for r in rows {
            for j in 0..d {
                for i in 0..d {
                    m2[i + d * j] += (r[i] - mean[i]) * (r[j] - mean[j]);
                }
            }
        }
        (mean, m2)
    }

    /// Centred moments and sums against a two-pass brute force, over several batches with the
    /// shift carried between them, on terms with a large common offset (1e6 against a spread of
    /// 1), where one-pass raw moments would lose every digit.
    #[test]
    fn moments_match_a_two_pass_computation_despite_a_large_offset() {
        let d = 3;
        let mut full = TermMoments::new(CovarianceShape::Full, d);
        let mut diag = TermMoments::new(CovarianceShape::Diagonal, d);
        // Batch sizes around the GEMM block of the full shape.
        for (batch, n) in [9, 300, BLOCK, 2 * BLOCK + 1].into_iter().enumerate() {
            let rows: Vec<Vec<f64>> = (0..n)
                .map(|k| {
                    (0..d)
                        .map(|j| {
                            1e6 * (1.0 + j as f64)
                                + ((k * 7 + j * 3 + batch * 11) as f64).sin()
                                + 0.01 * batch as f64
                        })
                        .collect()
                })
                .collect();
            let (mean, m2) = brute_force(&rows);
            full.begin();
            diag.begin();
            for (k, r) in rows.iter().enumerate() {
                if k % 2 == 0 {
                    full.add(r);
                } else {
                    full.add_with(|t| t.copy_from_slice(r));
                }
            }
            diag.add_rows(&rows.concat());
            assert_eq!(full.count(), n);
            let mut got = vec![0.0; d * d];
            full.add_centred_second_moments(1.0, &mut got);
            let mut got_diag = vec![0.0; d];
            diag.add_centred_second_moments(1.0, &mut got_diag);
            for j in 0..d {
                for i in 0..d {
                    let (g, w) = (got[i + d * j], m2[i + d * j]);
                    assert!((g - w).abs() < 1e-8 * (1.0 + w.abs()), "{g} vs {w}");
                    assert_eq!(got[i + d * j], got[j + d * i], "symmetric");
                }
                assert!((got_diag[j] - m2[j + d * j]).abs() < 1e-8 * (1.0 + m2[j + d * j]));
            }
            let mut sum = vec![0.0; d];
            full.sum_of_terms(&mut sum);
            for j in 0..d {
                assert!((sum[j] / n as f64 - mean[j]).abs() < 1e-9 * mean[j].abs());
            }
            full.recentre();
            diag.recentre();
        }
    }
}
