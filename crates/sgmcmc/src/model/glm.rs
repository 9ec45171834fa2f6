//! Generalised linear models: log p(yᵢ | θ) depends on the row xᵢ only through the linear
//! predictor zᵢ = xᵢᵀw + b. One set of row kernels serves every [`Family`]
//! (logistic, linear and Poisson regression).
//!
//! Parameter layout: θ = (w₁..w_d, [b if intercept], [the family's extra parameters]).

use super::row_kernels::{self, Gathered, Isa, RowElement, RowSource, Strided};
use super::{
    CoefficientPrior, DataIndex, Model, ModelError, Scratch, TermMoments,
    add_grad_log_lik_per_draw, debug_check_dim,
};
use crate::cpu::clear_upper_vector_state;
use crate::data::{
    CsrMatrix, DataError, Dataset, Element, Features, Matrix, PREFETCH_DISTANCE,
    ROW_PREFETCH_DISTANCE, SparseRow, prefetch_element,
};
use crate::rng::ChainRng;
use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use std::cell::Cell;

/// [`Family::log_lik_tile`] element by element with [`Family::log_lik`] (its default, and the
/// fallback of families that vectorise only some of their links).
pub(crate) fn log_lik_elementwise<F: Family + ?Sized>(
    family: &F,
    ys: &[F::Target],
    z: &mut [f64],
    extra: &[f64],
) {
    for (zk, &y) in z.iter_mut().zip(ys) {
        *zk = family.log_lik(y, *zk, extra);
    }
}

/// The response distribution of a GLM, as a function of the linear predictor z.
pub trait Family: Send + Sync + 'static {
    /// Compact in-memory form of one response (e.g. `u8` for a 0/1 label: fewer cache misses).
    type Target: Copy + Send + Sync;

    /// Model name (e.g. `"logistic"`).
    fn name(&self) -> &'static str;

    /// Convert the response column, rejecting values outside the support with the row named.
    fn prepare_targets(&self, ys: &[f64], source: &str) -> Result<Vec<Self::Target>, DataError>;

    /// Names of the family's own parameters appended after the regression coefficients.
    fn extra_names(&self) -> &'static [&'static str] {
        &[]
    }

    /// log p(y | z, extra).
    fn log_lik(&self, y: Self::Target, z: f64, extra: &[f64]) -> f64;

    /// ∂ log p(y | z, extra) / ∂z.
    fn dlog_lik_dz(&self, y: Self::Target, z: f64, extra: &[f64]) -> f64;

    /// `z[k] ← log p(ys[k] | z[k], extra)` for every k: the log-likelihoods of a batch
    /// ([`Model::log_lik_each`]). The default calls [`Family::log_lik`] element by element; a
    /// family with a logarithm or an `exp` inside may override it with `vector_math::map_tile`.
    fn log_lik_tile(&self, ys: &[Self::Target], z: &mut [f64], extra: &[f64]) {
        log_lik_elementwise(self, ys, z, extra);
    }

    /// `z[i·q + p] ← ∂log p(ys[i] | z[i·q + p], extra_p)/∂z` over a tile of rows × q draws,
    /// where extra_p = `extras[p·stride..][..k]` for the family's k extra parameters: the
    /// residuals of the block-of-draws kernel ([`Model::add_grad_log_lik_draws`]). The default
    /// calls [`Family::dlog_lik_dz`] element by element; a family with an `exp` inside
    /// overrides it with the vectorised `vector_math::map_tile` (several times faster).
    fn dlog_lik_dz_tile(
        &self,
        ys: &[Self::Target],
        q: usize,
        z: &mut [f64],
        extras: &[f64],
        stride: usize,
    ) {
        let k = self.extra_names().len();
        for (row, &y) in z.chunks_exact_mut(q.max(1)).zip(ys) {
            for (p, zk) in row.iter_mut().enumerate() {
                *zk = self.dlog_lik_dz(y, *zk, &extras[p * stride..p * stride + k]);
            }
        }
    }

    /// `out += weight · ∂ log p(y | z, extra) / ∂extra` (nothing when there are no extras).
    fn add_dlog_lik_dextra(
        &self,
        _y: Self::Target,
        _z: f64,
        _extra: &[f64],
        _weight: f64,
        _out: &mut [f64],
    ) {
    }

    /// Log prior of the extra parameters (default: none).
    fn log_prior_extra(&self, _extra: &[f64]) -> f64 {
        0.0
    }

    /// `grad += ∇ log prior(extra)`.
    fn add_grad_log_prior_extra(&self, _extra: &[f64], _grad: &mut [f64]) {}

    /// Whether some extra parameters are sampled on an unconstrained scale
    /// ([`Family::constrain_extra`] is not the identity).
    fn extras_constrained(&self) -> bool {
        false
    }

    /// The extra parameters on their constrained scale (`model::constraint`); a copy by
    /// default.
    fn constrain_extra(&self, extra: &[f64], out: &mut [f64]) {
        out.copy_from_slice(extra);
    }

    /// The inverse of [`Family::constrain_extra`]; an error names a value out of range.
    fn unconstrain_extra(&self, extra: &[f64], out: &mut [f64]) -> Result<(), ModelError> {
        out.copy_from_slice(extra);
        Ok(())
    }

    /// Draw the extra parameters from their prior (on the unconstrained scale).
    fn sample_prior_extra(&self, _rng: &mut ChainRng, _out: &mut [f64]) -> Result<(), ModelError> {
        Ok(())
    }
}

/// A generalised linear model over a data set held zero-copy.
pub struct Glm<F: Family> {
    features: Features,
    targets: Vec<F::Target>,
    prior: CoefficientPrior,
    /// The intercept's own prior (None: `prior`, as for the coefficients).
    intercept_prior: Option<CoefficientPrior>,
    intercept: bool,
    family: F,
    names: Vec<String>,
}

impl<F: Family> Glm<F> {
    /// Build the model from a loaded data set (which must have a target column). `prior` is
    /// the prior of the coefficients (w and b): a [`super::NormalPrior`], a
    /// [`super::CauchyPrior`] or a [`CoefficientPrior`].
    pub fn new(
        data: Dataset,
        family: F,
        prior: impl Into<CoefficientPrior>,
        intercept: bool,
    ) -> Result<Self, ModelError> {
        let prior = prior.into();
        prior.validate()?;
        let source = data
            .targets_source
            .clone()
            .unwrap_or_else(|| data.features_source.clone());
        let ys = data.targets.as_ref().ok_or_else(|| {
            ModelError::Setting(format!(
                "{} regression needs a target column, but {} has none",
                family.name(),
                data.features_source
            ))
        })?;
        if ys.len() != data.features.rows() {
            return Err(ModelError::Setting(format!(
                "{} has {} rows but the targets ({source}) have {}",
                data.features_source,
                data.features.rows(),
                ys.len()
            )));
        }
        let targets = family.prepare_targets(ys, &source)?;
        let mut names: Vec<String> = if data.feature_names.len() == data.features.cols() {
            data.feature_names.clone()
        } else {
            (0..data.features.cols())
                .map(|j| format!("beta[{j}]"))
                .collect()
        };
        if intercept {
            names.push("intercept".into());
        }
        names.extend(family.extra_names().iter().map(|s| s.to_string()));
        Ok(Self {
            features: data.features,
            targets,
            prior,
            intercept_prior: None,
            intercept,
            family,
            names,
        })
    }

    /// The model with its own prior on the intercept (the coefficients keep theirs); an error
    /// without an intercept.
    pub fn with_intercept_prior(
        mut self,
        prior: impl Into<CoefficientPrior>,
    ) -> Result<Self, ModelError> {
        if !self.intercept {
            return Err(ModelError::Setting(
                "an intercept prior needs a model with an intercept".into(),
            ));
        }
        let prior = prior.into();
        prior.validate()?;
        self.intercept_prior = Some(prior);
        Ok(self)
    }

    /// The coefficients' (and, with [`Self::with_intercept_prior`], the intercept's) part of
    /// θ: how many leading parameters `prior` covers, and the intercept's prior if it has one.
    fn prior_split(&self) -> (usize, Option<&CoefficientPrior>) {
        match (&self.intercept_prior, self.intercept) {
            (Some(p), true) => (self.features.cols(), Some(p)),
            _ => (self.features.cols() + usize::from(self.intercept), None),
        }
    }

    /// Number of feature columns d.
    pub fn num_features(&self) -> usize {
        self.features.cols()
    }

    /// The features (for benchmarks and tools that need the raw rows).
    pub fn features(&self) -> &Features {
        &self.features
    }

    /// The response family.
    pub fn family(&self) -> &F {
        &self.family
    }

    /// θ as (w, b, extra); b = 0 without an intercept.
    pub(super) fn split<'t>(&self, theta: &'t [f64]) -> (&'t [f64], f64, &'t [f64]) {
        let d = self.features.cols();
        let (w, rest) = theta.split_at(d);
        let (b, extra) = if self.intercept {
            (rest[0], &rest[1..])
        } else {
            (0.0, rest)
        };
        (w, b, extra)
    }

    /// A gradient split like [`Self::split`]: (coefficients, intercept (empty without one),
    /// the family's extras).
    fn split_grad<'g>(&self, grad: &'g mut [f64]) -> (&'g mut [f64], &'g mut [f64], &'g mut [f64]) {
        let (gw, rest) = grad.split_at_mut(self.features.cols());
        let (gb, gextra) = rest.split_at_mut(usize::from(self.intercept));
        (gw, gb, gextra)
    }
}

impl<F: Family> Glm<F> {
    /// Start loading the row and the target of `batch[k + PREFETCH_DISTANCE]`, so that the
    /// random reads of a batch loop overlap.
    #[inline(always)]
    fn prefetch<X: GlmRows>(&self, x: &X, batch: &[DataIndex], k: usize) {
        self.prefetch_at(x, batch, k + PREFETCH_DISTANCE);
    }

    /// Start loading the row and the target of `batch[k]` (if k is in range).
    #[inline(always)]
    fn prefetch_at<X: GlmRows>(&self, x: &X, batch: &[DataIndex], k: usize) {
        if let Some(&ahead) = batch.get(k) {
            x.prefetch_row(ahead as usize);
            prefetch_element(&self.targets, ahead as usize);
        }
    }
}

/// What a chunk of [`Glm::grad_dense`] reads and adds to, besides its rows.
struct ChunkTerms<'g> {
    idx: &'g [DataIndex],
    weight: f64,
    w: &'g [f64],
    b: f64,
    extra: &'g [f64],
    gextra: &'g mut [f64],
    gw: &'g mut [f64],
    /// Σ r, added per run of the weighted sum, and the log-likelihood, added row by row: both
    /// summed through the batch rather than per chunk, so that the chunk size does not change
    /// their bits.
    sum_r: &'g mut f64,
    log_lik: &'g mut f64,
    isa: Isa,
}

/// Rows per chunk of the dense minibatch kernel ([`Glm::grad_dense`]) for a block of rows,
/// and of the other chunked loops: their z (then r) and targets stay in stack buffers, the
/// rows (10 KB at d = 10) in L1 between the two passes.
const CHUNK_ROWS: usize = 128;

/// Rows per chunk of [`Glm::grad_dense`] for scattered rows: the next chunk's rows, prefetched
/// through this chunk's arithmetic, are in flight sooner (uniform f64 minibatches 1.05–1.17×
/// as fast as with 128, `docs/experiments/sgld_throughput.md`).
const SCATTERED_CHUNK_ROWS: usize = 64;

// Both chunk sizes are whole runs of the weighted sum, so that its bits do not depend on them,
// and the stack buffers of `grad_dense` (CHUNK_ROWS long) hold either chunk.
const _: () = assert!(
    CHUNK_ROWS.is_multiple_of(row_kernels::SUM_RUN)
        && SCATTERED_CHUNK_ROWS.is_multiple_of(row_kernels::SUM_RUN)
        && SCATTERED_CHUNK_ROWS <= CHUNK_ROWS
);

/// Rows per tile of the block-of-draws kernel ([`Glm::grad_draws_rows`]): 256 rows of d ≈ 10
/// doubles (20 KB) stay in L1 while every draw of the block passes over them.
const TILE_ROWS: usize = 256;

/// Draws per tile of the block-of-draws kernel: the tile's Z (256 × 64 doubles, 128 KB) stays
/// in L2 between its two products.
const TILE_DRAWS: usize = 64;

/// If `batch` is `start, start + 1, …` (a block of rows), its first row. Uniform batches fail
/// the first comparison almost always, so the check costs them nothing.
#[inline]
fn contiguous_start(batch: &[DataIndex]) -> Option<usize> {
    let first = *batch.first()?;
    let consecutive = batch.len() < 2
        || (batch[1] == first.wrapping_add(1)
            && batch.iter().zip(first..).all(|(&i, want)| i == want));
    consecutive.then_some(first as usize)
}

/// The consecutive runs of a block that wraps around (at most two); `None` for any other batch.
#[inline]
fn block_runs(batch: &[DataIndex]) -> Option<[(usize, usize); 2]> {
    let first = *batch.first()?;
    if batch.len() > 1 && batch[1] != first.wrapping_add(1) && batch[1] != 0 {
        return None;
    }
    // The wrap point is where the index drops to 0.
    let split = batch
        .iter()
        .position(|&i| i == 0)
        .filter(|&k| k > 0)
        .unwrap_or(batch.len());
    let (head, tail) = batch.split_at(split);
    let a = contiguous_start(head)?;
    let b = if tail.is_empty() {
        0
    } else {
        contiguous_start(tail)?
    };
    Some([(a, head.len()), (b, tail.len())])
}

/// xᵀw for a stored row; four accumulators break the add dependency chain.
#[inline(always)]
fn dot<T: Element>(row: &[T], w: &[f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    let chunks = row.len() / 4;
    for c in 0..chunks {
        for l in 0..4 {
            acc[l] += row[4 * c + l].to_f64() * w[4 * c + l];
        }
    }
    let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for j in 4 * chunks..row.len() {
        s += row[j].to_f64() * w[j];
    }
    s
}

/// `g += a·row`.
#[inline(always)]
fn axpy<T: Element>(a: f64, row: &[T], g: &mut [f64]) {
    for (gj, &xj) in g.iter_mut().zip(row) {
        *gj += a * xj.to_f64();
    }
}

/// Stored rows as the GLM kernels read them: dense rows of either precision, or sparse rows.
trait GlmRows: Sync {
    /// One row.
    type Row<'a>: GlmRow
    where
        Self: 'a;
    /// Row `i`.
    fn row(&self, i: usize) -> Self::Row<'_>;
    /// Start loading row `i`.
    fn prefetch_row(&self, i: usize);
}

/// What the kernels do with a row x.
trait GlmRow: Copy {
    /// xᵀw.
    fn dot(self, w: &[f64]) -> f64;
    /// `g += a·x`.
    fn axpy(self, a: f64, g: &mut [f64]);
    /// `out = a·x`, dense.
    fn write_scaled(self, a: f64, out: &mut [f64]);
    /// `moments.add_scaled(a, x, tail)`; `buf` (length d) holds a sparse row written out.
    fn add_term(self, a: f64, tail: &[f64], moments: &mut TermMoments, buf: &mut [f64]);
}

impl<T: Element> GlmRows for Matrix<T> {
    type Row<'a> = &'a [T];

    #[inline(always)]
    fn row(&self, i: usize) -> &[T] {
        Matrix::row(self, i)
    }

    #[inline(always)]
    fn prefetch_row(&self, i: usize) {
        Matrix::prefetch_row(self, i);
    }
}

impl<T: Element> GlmRow for &[T] {
    #[inline(always)]
    fn dot(self, w: &[f64]) -> f64 {
        dot(self, w)
    }

    #[inline(always)]
    fn axpy(self, a: f64, g: &mut [f64]) {
        axpy(a, self, g);
    }

    #[inline(always)]
    fn write_scaled(self, a: f64, out: &mut [f64]) {
        for (o, &x) in out.iter_mut().zip(self) {
            *o = a * x.to_f64();
        }
    }

    #[inline(always)]
    fn add_term(self, a: f64, tail: &[f64], moments: &mut TermMoments, _buf: &mut [f64]) {
        moments.add_scaled(a, self, tail);
    }
}

impl GlmRows for CsrMatrix {
    type Row<'a> = SparseRow<'a>;

    #[inline(always)]
    fn row(&self, i: usize) -> SparseRow<'_> {
        CsrMatrix::row(self, i)
    }

    #[inline(always)]
    fn prefetch_row(&self, i: usize) {
        CsrMatrix::prefetch_row(self, i);
    }
}

impl GlmRow for SparseRow<'_> {
    #[inline(always)]
    fn dot(self, w: &[f64]) -> f64 {
        SparseRow::dot(self, w)
    }

    #[inline(always)]
    fn axpy(self, a: f64, g: &mut [f64]) {
        SparseRow::axpy(self, a, g);
    }

    #[inline(always)]
    fn write_scaled(self, a: f64, out: &mut [f64]) {
        SparseRow::write_scaled(self, a, out);
    }

    #[inline(always)]
    fn add_term(self, a: f64, tail: &[f64], moments: &mut TermMoments, buf: &mut [f64]) {
        self.write_scaled(1.0, buf);
        moments.add_scaled(a, buf, tail);
    }
}

impl<F: Family> Glm<F> {
    /// [`Self::grad_kernel`] for dense rows, per chunk of [`CHUNK_ROWS`] rows when the batch's
    /// second index follows its first (a block of rows, which may wrap around the last row) or
    /// [`SCATTERED_CHUNK_ROWS`] otherwise: the linear predictors z
    /// ([`row_kernels::dots`]), the residuals r = weight·∂log p/∂z (with the family's
    /// vectorised [`Family::dlog_lik_dz_tile`]), then g += Σ r·x
    /// ([`row_kernels::add_weighted_rows`], in runs of 64 rows of the batch; the rows are still
    /// in L1). The same bits on every CPU, and for a block of consecutive rows as for the same
    /// indices scattered. A chunk of consecutive rows is read by address, and prefetches the
    /// next chunk's rows; any other chunk prefetches the next chunk of `batch`, paced through
    /// its own two passes.
    fn grad_dense<T: RowElement, const LOG_LIK: bool>(
        &self,
        x: &Matrix<T>,
        theta: &[f64],
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
    ) -> f64 {
        let Some(&first) = batch.first() else {
            return 0.0;
        };
        let d = x.cols();
        let (w, b, extra) = self.split(theta);
        let (gw, gb, gextra) = self.split_grad(grad);
        let isa = Isa::detect();
        // Scattered rows of a file larger than memory: all their reads in flight at once.
        x.advise_will_read_rows(batch);
        let rows = x.as_slice();
        let mut z = [0.0f64; CHUNK_ROWS];
        let mut ys = [self.targets[first as usize]; CHUNK_ROWS];
        // (A uniform batch whose first two indices happen to be consecutive also gets 128: only
        // the speed differs, not the bits.)
        let chunk_rows = if batch.get(1) == Some(&first.wrapping_add(1)) {
            CHUNK_ROWS
        } else {
            SCATTERED_CHUNK_ROWS
        };
        // Scattered rows: positions in `batch` prefetched so far.
        let prefetched = Cell::new(0);
        let (mut sum_r, mut total) = (0.0, 0.0);
        for (c, idx) in batch.chunks(chunk_rows).enumerate() {
            let (z, ys) = (&mut z[..idx.len()], &mut ys[..idx.len()]);
            let i0 = idx[0] as usize;
            // Consecutive rows? (An OR over the chunk, no early exit, so that it vectorises.)
            let contiguous = idx.iter().enumerate().fold(0, |acc, (k, &i)| {
                acc | (i ^ idx[0].wrapping_add(k as DataIndex))
            }) == 0;
            let chunk = ChunkTerms {
                idx,
                weight,
                w,
                b,
                extra,
                gextra: &mut *gextra,
                gw: &mut *gw,
                sum_r: &mut sum_r,
                log_lik: &mut total,
                isa,
            };
            if contiguous {
                // Consecutive rows (a block minibatch, a full pass): addressed without the
                // indices. The next chunk's rows start loading while this one is computed (the
                // hardware prefetcher alone stops when the loads pause).
                let block = &rows[i0 * d..(i0 + idx.len()) * d];
                // Prefetch only rows this batch reads next: not past its end, nor past the matrix's
                // last row (where a wrapping block goes on at row 0).
                let rest = (batch.len() - c * chunk_rows).min(x.rows() - i0);
                let block = Strided::new(block, idx.len(), d).prefetch_ahead(chunk_rows, rest);
                ys.copy_from_slice(&self.targets[i0..i0 + idx.len()]);
                self.grad_chunk::<T, _, LOG_LIK>(chunk, &block, z, ys, false);
            } else {
                // Scattered rows: this chunk's rows first, if no earlier chunk prefetched them
                // (the batch's first chunk, or the first after consecutive ones)...
                let (base, end) = (
                    c * chunk_rows,
                    (c * chunk_rows + idx.len()).min(batch.len()),
                );
                for j in prefetched.get().max(base)..end {
                    self.prefetch_at(x, batch, j);
                }
                prefetched.set(prefetched.get().max(end));
                // ... then one row of the next chunk for every two rows read, in either pass
                // over this chunk (its dot products, then its weighted sum): the next rows
                // load evenly through this chunk's arithmetic.
                let last = (base + 2 * chunk_rows).min(batch.len());
                let hint = |_: usize, count: usize| {
                    let from = prefetched.get();
                    let to = (from + count.div_ceil(2)).min(last);
                    for j in from..to {
                        self.prefetch_at(x, batch, j);
                    }
                    prefetched.set(to.max(from));
                };
                let picked = Gathered::new(rows, d, idx, hint);
                self.grad_chunk::<T, _, LOG_LIK>(chunk, &picked, z, ys, true);
            }
        }
        if let Some(g) = gb.first_mut() {
            *g += sum_r;
        }
        x.advise_done_reading(batch);
        total
    }

    /// One chunk of [`Self::grad_dense`], its rows from `rows` and its targets in `ys`
    /// (gathered here when `gather_targets`): adds to the chunk's gradient, Σ r and (when
    /// `LOG_LIK`) log-likelihood.
    #[inline(always)]
    fn grad_chunk<T: RowElement, R: RowSource<T>, const LOG_LIK: bool>(
        &self,
        chunk: ChunkTerms<'_>,
        rows: &R,
        z: &mut [f64],
        ys: &mut [F::Target],
        gather_targets: bool,
    ) {
        let ChunkTerms {
            idx,
            weight,
            w,
            b,
            extra,
            gextra,
            gw,
            sum_r,
            log_lik,
            isa,
        } = chunk;
        row_kernels::dots(isa, rows, w, b, z);
        if gather_targets {
            for (y, &i) in ys.iter_mut().zip(idx) {
                *y = self.targets[i as usize];
            }
        }
        if LOG_LIK || !gextra.is_empty() {
            for (&zk, &y) in z.iter().zip(ys.iter()) {
                if LOG_LIK {
                    *log_lik += self.family.log_lik(y, zk, extra);
                }
                self.family
                    .add_dlog_lik_dextra(y, zk, extra, weight, gextra);
            }
        }
        self.family.dlog_lik_dz_tile(ys, 1, z, extra, 0);
        for r in z.iter_mut() {
            *r *= weight;
        }
        row_kernels::add_weighted_rows(isa, rows, z, gw, sum_r);
    }

    /// `grad += weight·Σ ∇log p(yᵢ | xᵢ, θ)` over `batch`, and (when `LOG_LIK`) the sum of the
    /// log-likelihoods, in one pass over the rows: the hot loop of every minibatch estimate.
    fn grad_kernel<X: GlmRows, const LOG_LIK: bool>(
        &self,
        x: &X,
        theta: &[f64],
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
    ) -> f64 {
        let (w, b, extra) = self.split(theta);
        let (gw, gb, gextra) = self.split_grad(grad);
        let mut sum_r = 0.0;
        let mut total = 0.0;
        for (k, &i) in batch.iter().enumerate() {
            self.prefetch(x, batch, k);
            let i = i as usize;
            let row = x.row(i);
            let z = row.dot(w) + b;
            let y = self.targets[i];
            if LOG_LIK {
                total += self.family.log_lik(y, z, extra);
            }
            let r = weight * self.family.dlog_lik_dz(y, z, extra);
            row.axpy(r, gw);
            sum_r += r;
            self.family.add_dlog_lik_dextra(y, z, extra, weight, gextra);
        }
        if let Some(g) = gb.first_mut() {
            *g += sum_r;
        }
        total
    }

    /// [`Model::add_grad_log_lik_draws`] over the consecutive rows `start..start + len`: per
    /// tile of [`TILE_ROWS`] rows (converted to f64 once, then kept in L1) and
    /// [`TILE_DRAWS`] draws, Z = X·Wᵀ (+ b), the extras' gradients, R = ∂log p/∂Z
    /// ([`Family::dlog_lik_dz_tile`]), the intercepts' Σᵢ R, and G_w += Rᵀ·X. Each row is
    /// read from memory once for the whole block of draws.
    fn grad_draws_rows<X: GlmRows>(
        &self,
        x: &X,
        thetas: &[f64],
        start: usize,
        len: usize,
        grads: &mut [f64],
        scratch: &mut Scratch,
    ) {
        let d = self.features.cols();
        let dim = self.dim();
        let draws = thetas.len() / dim;
        let e0 = d + usize::from(self.intercept);
        let has_extra = e0 < dim;
        let ys = &self.targets[start..start + len];
        let (xs, z) = scratch
            .get(TILE_ROWS * d + TILE_ROWS * TILE_DRAWS)
            .split_at_mut(TILE_ROWS * d);
        for (t, ys) in ys.chunks(TILE_ROWS).enumerate() {
            let m = ys.len();
            let xs = &mut xs[..m * d];
            let first = start + t * TILE_ROWS;
            for (k, out) in xs.chunks_exact_mut(d).enumerate() {
                x.row(first + k).write_scaled(1.0, out);
            }
            let x_tile = MatRef::from_row_major_slice(xs, m, d);
            for p0 in (0..draws).step_by(TILE_DRAWS) {
                let q = TILE_DRAWS.min(draws - p0);
                let th = &thetas[p0 * dim..(p0 + q) * dim];
                let g = &mut grads[p0 * dim..(p0 + q) * dim];
                let z = &mut z[..m * q];
                matmul(
                    MatMut::from_row_major_slice_mut(z, m, q),
                    Accum::Replace,
                    x_tile,
                    MatRef::from_row_major_slice(th, q, dim)
                        .subcols(0, d)
                        .transpose(),
                    1.0,
                    Par::Seq,
                );
                clear_upper_vector_state();
                if self.intercept {
                    for row in z.chunks_exact_mut(q) {
                        for (zk, theta) in row.iter_mut().zip(th.chunks_exact(dim)) {
                            *zk += theta[d];
                        }
                    }
                }
                if has_extra {
                    for (row, &y) in z.chunks_exact(q).zip(ys) {
                        for ((&zk, theta), gp) in row
                            .iter()
                            .zip(th.chunks_exact(dim))
                            .zip(g.chunks_exact_mut(dim))
                        {
                            self.family.add_dlog_lik_dextra(
                                y,
                                zk,
                                &theta[e0..],
                                1.0,
                                &mut gp[e0..],
                            );
                        }
                    }
                }
                self.family.dlog_lik_dz_tile(ys, q, z, &th[e0..], dim);
                if self.intercept {
                    for row in z.chunks_exact(q) {
                        for (&r, gp) in row.iter().zip(g.chunks_exact_mut(dim)) {
                            gp[d] += r;
                        }
                    }
                }
                matmul(
                    MatMut::from_row_major_slice_mut(g, q, dim).subcols_mut(0, d),
                    Accum::Add,
                    MatRef::from_row_major_slice(z, m, q).transpose(),
                    x_tile,
                    1.0,
                    Par::Seq,
                );
                clear_upper_vector_state();
            }
        }
    }

    /// Per-datum log-likelihoods (`out[k]`) over `batch`: `predictors(w, b, z)` writes the
    /// linear predictors (z[k] of row `batch[k]`), then the family's log-likelihood runs over
    /// each chunk of them at once ([`Family::log_lik_tile`]).
    fn log_lik_with(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        out: &mut [f64],
        predictors: impl FnOnce(&[f64], f64, &mut [f64]),
    ) {
        let Some(&first) = batch.first() else {
            return;
        };
        let (w, b, extra) = self.split(theta);
        let out = &mut out[..batch.len()];
        predictors(w, b, out);
        let mut ys = [self.targets[first as usize]; CHUNK_ROWS];
        for (idx, z) in batch.chunks(CHUNK_ROWS).zip(out.chunks_mut(CHUNK_ROWS)) {
            for (y, &i) in ys.iter_mut().zip(idx) {
                *y = self.targets[i as usize];
            }
            self.family.log_lik_tile(&ys[..idx.len()], z, extra);
        }
    }

    /// z[k] = x_{batch[k]}ᵀw + b for any rows, one row at a time.
    fn predictors<X: GlmRows>(&self, x: &X, batch: &[DataIndex], w: &[f64], b: f64, z: &mut [f64]) {
        for (k, &i) in batch.iter().enumerate() {
            self.prefetch(x, batch, k);
            z[k] = x.row(i as usize).dot(w) + b;
        }
    }

    /// [`Self::predictors`] for dense rows by [`row_kernels::dots`] (the same z, to the bit, as
    /// the minibatch gradient's), chunk by chunk.
    fn predictors_dense<T: RowElement>(
        &self,
        x: &Matrix<T>,
        batch: &[DataIndex],
        w: &[f64],
        b: f64,
        z: &mut [f64],
    ) {
        let isa = Isa::detect();
        for (c, (idx, z)) in batch
            .chunks(CHUNK_ROWS)
            .zip(z.chunks_mut(CHUNK_ROWS))
            .enumerate()
        {
            let ahead = ROW_PREFETCH_DISTANCE;
            let hint = |k: usize, count: usize| {
                for j in k..k + count {
                    self.prefetch_at(x, batch, c * CHUNK_ROWS + j + ahead);
                }
            };
            let picked = Gathered::new(x.as_slice(), x.cols(), idx, hint);
            row_kernels::dots(isa, &picked, w, b, z);
        }
    }

    /// Per-datum gradients over `batch`: row k of `out` (batch.len() × D) is
    /// ∇log p(y_{batch[k]} | x, θ) = r·(x, 1, ∂extra) with r = ∂log p/∂z, written directly (no
    /// zero fill), one pass over the rows.
    fn grads_kernel<X: GlmRows>(&self, x: &X, theta: &[f64], batch: &[DataIndex], out: &mut [f64]) {
        let d = self.features.cols();
        let dim = theta.len();
        let (w, b, extra) = self.split(theta);
        let e0 = d + usize::from(self.intercept);
        for ((k, &i), g) in batch.iter().enumerate().zip(out.chunks_exact_mut(dim)) {
            self.prefetch(x, batch, k);
            let i = i as usize;
            let row = x.row(i);
            let z = row.dot(w) + b;
            let y = self.targets[i];
            let r = self.family.dlog_lik_dz(y, z, extra);
            let (gw, rest) = g.split_at_mut(d);
            row.write_scaled(r, gw);
            if self.intercept {
                rest[0] = r;
            }
            let ge = &mut g[e0..];
            if !ge.is_empty() {
                ge.fill(0.0);
                self.family.add_dlog_lik_dextra(y, z, extra, 1.0, ge);
            }
        }
    }
}

impl<F: Family> Glm<F> {
    /// The fused pass of [`Model::add_grad_log_lik_terms`]: per row, r = ∂log p/∂z at θ (minus
    /// r̂ at the centre θ̂ when `CENTRED`) and the term r·(x, 1) plus the extras' gradient goes
    /// straight into `moments`' block; the batch gradient is then the moments' sum of terms,
    /// so no row is accumulated twice.
    #[allow(clippy::too_many_arguments)]
    fn terms_kernel<X: GlmRows, const CENTRED: bool>(
        &self,
        x: &X,
        theta: &[f64],
        centre: &[f64],
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
        moments: &mut TermMoments,
        scratch: &mut Scratch,
    ) {
        let d = self.features.cols();
        let (w, b, extra) = self.split(theta);
        let (w_c, b_c, extra_c) = self.split(centre);
        let e0 = d + usize::from(self.intercept);
        let has_extra = e0 < theta.len();
        // `before` (D) and the term's tail after the features: the intercept's r and the
        // extras' gradient.
        let (before, rest) = scratch.get(2 * theta.len() + d).split_at_mut(theta.len());
        let (tail, dense_row) = rest.split_at_mut(theta.len() - d);
        let dense_row = &mut dense_row[..d];
        moments.sum_of_terms(before);
        for (k, &i) in batch.iter().enumerate() {
            self.prefetch(x, batch, k);
            let i = i as usize;
            let row = x.row(i);
            let y = self.targets[i];
            let z = row.dot(w) + b;
            let z_c = if CENTRED { row.dot(w_c) + b_c } else { 0.0 };
            let mut r = self.family.dlog_lik_dz(y, z, extra);
            if CENTRED {
                r -= self.family.dlog_lik_dz(y, z_c, extra_c);
            }
            if self.intercept {
                tail[0] = r;
            }
            if has_extra {
                let te = &mut tail[e0 - d..];
                te.fill(0.0);
                self.family.add_dlog_lik_dextra(y, z, extra, 1.0, te);
                if CENTRED {
                    self.family.add_dlog_lik_dextra(y, z_c, extra_c, -1.0, te);
                }
            }
            row.add_term(r, tail, moments, dense_row);
        }
        moments.add_weighted_sum_since(before, weight, grad);
    }
}

/// Dispatch once per batch on the stored precision, so the row loops are monomorphic.
macro_rules! with_features {
    ($self:ident, $x:ident => $body:expr) => {
        match &$self.features {
            Features::F64($x) => $body,
            Features::F32($x) => $body,
            Features::Sparse($x) => $body,
        }
    };
}

impl<F: Family> Model for Glm<F> {
    fn name(&self) -> &'static str {
        self.family.name()
    }

    fn dim(&self) -> usize {
        self.features.cols() + usize::from(self.intercept) + self.family.extra_names().len()
    }

    fn num_data(&self) -> usize {
        self.targets.len()
    }

    fn parameter_names(&self) -> Vec<String> {
        self.names.clone()
    }

    fn will_read(&self, first: usize, n: usize) {
        match &self.features {
            Features::F64(x) => x.advise_will_read_block(first, n),
            Features::F32(x) => x.advise_will_read_block(first, n),
            Features::Sparse(_) => {}
        }
    }

    fn is_constrained(&self) -> bool {
        self.family.extras_constrained()
    }

    fn constrain(&self, theta: &[f64], out: &mut [f64]) {
        let k = self.family.extra_names().len();
        let split = theta.len() - k;
        out[..split].copy_from_slice(&theta[..split]);
        self.family
            .constrain_extra(&theta[split..], &mut out[split..]);
    }

    fn unconstrain(&self, x: &[f64], out: &mut [f64]) -> Result<(), ModelError> {
        let split = x.len() - self.family.extra_names().len();
        out[..split].copy_from_slice(&x[..split]);
        self.family
            .unconstrain_extra(&x[split..], &mut out[split..])
    }

    fn log_prior(&self, theta: &[f64]) -> f64 {
        debug_check_dim(self, theta);
        let k = self.family.extra_names().len();
        let (coef, extra) = theta.split_at(theta.len() - k);
        let (n, intercept_prior) = self.prior_split();
        self.prior.log_density(&coef[..n])
            + intercept_prior.map_or(0.0, |p| p.log_density(&coef[n..]))
            + self.family.log_prior_extra(extra)
    }

    fn add_grad_log_prior(&self, theta: &[f64], grad: &mut [f64]) {
        let k = self.family.extra_names().len();
        let split = theta.len() - k;
        let (coef, extra) = theta.split_at(split);
        let (gc, ge) = grad.split_at_mut(split);
        let (n, intercept_prior) = self.prior_split();
        self.prior.add_grad(&coef[..n], &mut gc[..n]);
        if let Some(p) = intercept_prior {
            p.add_grad(&coef[n..], &mut gc[n..]);
        }
        self.family.add_grad_log_prior_extra(extra, ge);
    }

    fn log_lik_each(&self, theta: &[f64], batch: &[DataIndex], out: &mut [f64], _s: &mut Scratch) {
        debug_check_dim(self, theta);
        self.log_lik_with(theta, batch, out, |w, b, z| match &self.features {
            Features::F64(x) => self.predictors_dense(x, batch, w, b, z),
            Features::F32(x) => self.predictors_dense(x, batch, w, b, z),
            Features::Sparse(x) => self.predictors(x, batch, w, b, z),
        });
    }

    fn grad_log_lik_each(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        out: &mut [f64],
        _s: &mut Scratch,
    ) {
        debug_check_dim(self, theta);
        with_features!(self, x => self.grads_kernel(x, theta, batch, out));
    }

    fn add_grad_log_lik_terms(
        &self,
        theta: &[f64],
        centre: Option<&[f64]>,
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
        moments: &mut TermMoments,
        s: &mut Scratch,
    ) {
        debug_check_dim(self, theta);
        match centre {
            Some(c) => with_features!(self, x => {
                self.terms_kernel::<_, true>(x, theta, c, batch, weight, grad, moments, s)
            }),
            None => with_features!(self, x => {
                self.terms_kernel::<_, false>(x, theta, theta, batch, weight, grad, moments, s)
            }),
        }
    }

    fn add_grad_log_lik(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
        _s: &mut Scratch,
    ) {
        debug_check_dim(self, theta);
        match &self.features {
            Features::F64(x) => self.grad_dense::<_, false>(x, theta, batch, weight, grad),
            Features::F32(x) => self.grad_dense::<_, false>(x, theta, batch, weight, grad),
            Features::Sparse(x) => self.grad_kernel::<_, false>(x, theta, batch, weight, grad),
        };
    }

    /// Blocks of consecutive rows (a full pass's chunks) through two GEMMs per tile
    /// ([`Glm::grad_draws_rows`]); any other batch one draw at a time.
    fn add_grad_log_lik_draws(
        &self,
        thetas: &[f64],
        batch: &[DataIndex],
        grads: &mut [f64],
        scratch: &mut Scratch,
    ) {
        let dim = self.dim();
        debug_assert_eq!(thetas.len() % dim.max(1), 0);
        debug_assert_eq!(thetas.len(), grads.len());
        match block_runs(batch) {
            Some(runs) => with_features!(self, x => {
                for (start, len) in runs {
                    self.grad_draws_rows(x, thetas, start, len, grads, scratch);
                }
            }),
            None => add_grad_log_lik_per_draw(self, thetas, batch, grads, scratch),
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
        match &self.features {
            Features::F64(x) => self.grad_dense::<_, true>(x, theta, batch, weight, grad),
            Features::F32(x) => self.grad_dense::<_, true>(x, theta, batch, weight, grad),
            Features::Sparse(x) => self.grad_kernel::<_, true>(x, theta, batch, weight, grad),
        }
    }

    fn sample_prior(&self, rng: &mut ChainRng, out: &mut [f64]) -> Result<(), ModelError> {
        let k = self.family.extra_names().len();
        let split = out.len() - k;
        let (coef, extra) = out.split_at_mut(split);
        let (n, intercept_prior) = self.prior_split();
        self.prior.sample(rng, &mut coef[..n])?;
        if let Some(p) = intercept_prior {
            p.sample(rng, &mut coef[n..])?;
        }
        self.family.sample_prior_extra(rng, extra)
    }
}
