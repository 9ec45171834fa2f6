//! Bayesian neural network classifier of the MAMBA paper (§4.3, App. C.3.1; reference §5.6):
//!
//! ```text
//! β(θ, x) = softmax( softmax(xᵀB + b)·A + a ),   log p(y | x, θ) = log β_y(θ, x),
//! ```
//!
//! with one hidden layer whose activation IS a softmax (as in the paper and its code), and a
//! N(0, σ²) prior on every weight. For MNIST, 784-100-10: 79,510 parameters.
//!
//! θ layout (row-major blocks, in this order):
//! - `B[j,k]` at `j·H + k` (inputs × hidden, H = hidden width),
//! - `b[k]` at `I·H + k` (I = inputs),
//! - `A[k,c]` at `I·H + H + k·K + c` (hidden × classes, K = classes),
//! - `a[c]` at `I·H + H + H·K + c`.
//!
//! Batched gradient of Σ_batch log β_y, per block of at most [`BNN_BLOCK`] gathered rows X:
//! Z1 = X·B + b, H = softmax rows, Z2 = H·A + a, P = softmax rows; then dZ2 = Y − P,
//! dA = Hᵀ·dZ2, da = colsum dZ2, dH = dZ2·Aᵀ, dZ1 = H ⊙ (dH − rowsum(dH ⊙ H)), dB = Xᵀ·dZ1,
//! db = colsum dZ1. The four products go through faer GEMMs (one thread: chains are the
//! parallel unit); `weight` is folded into the GEMMs' α, so the N/n scaling costs nothing.
//! Every buffer lives in the caller's [`Scratch`]: no allocation per call after the first.

use std::cell::RefCell;

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};

use super::{
    DataIndex, Model, ModelError, Predictive, PredictiveTask, Scratch, TermMoments, debug_check_dim,
};
use crate::cpu::clear_upper_vector_state;
use crate::data::{DataError, Dataset, Element, Features, Matrix};
use crate::rng::{ChainRng, fill_standard_normal};

/// Default rows per block of the batched passes: a full-data pass needs O(block·(I + H))
/// memory, and 1024 × 784 doubles (6.4 MB) is still a GEMM shape faer runs at full speed.
pub const BNN_BLOCK: usize = 1024;

/// Seed of the fixed stream behind [`Model::map_start`].
const MAP_START_SEED: u64 = 0x0042_4e4e_5f4d_4150;

/// Default hidden width (the paper's 100).
pub const BNN_DEFAULT_HIDDEN: usize = 100;

/// Largest label accepted (classes = 1 + max label ≤ 65,536).
const MAX_CLASSES: usize = 1 << 16;

thread_local! {
    /// Hidden-layer workspace of [`Bnn::predict`] (one row per call, called S·n times by the
    /// test metrics from rayon workers): grows once per thread, never per call.
    static PREDICT_HIDDEN: RefCell<Vec<f64>> = const { RefCell::new(Vec::new()) };
}

/// The 784-100-10 softmax network of reference §5.6 (any I-H-K), over a data set of feature
/// rows x (f64 or f32) and class labels y ∈ 0..K.
#[derive(Debug)]
pub struct Bnn {
    features: Features,
    labels: Vec<u32>,
    inputs: usize,
    hidden: usize,
    classes: usize,
    prior_variance: f64,
    block: usize,
}

/// Per-block views of the forward/backward buffers (all m × width, row-major).
struct Pass<'a> {
    /// Z1, then H = softmax(Z1).
    h: &'a mut [f64],
    /// Z2, then P = softmax(Z2), then dZ2 = Y − P.
    p: &'a mut [f64],
    /// dH, then dZ1.
    dh: &'a mut [f64],
    /// log β_y per row.
    ll: &'a mut [f64],
}

impl Bnn {
    /// The network over `data` (targets = class labels 0..K−1, K = 1 + the largest label,
    /// at least 2), with `hidden` hidden units and prior N(0, `prior_variance`) on every weight.
    pub fn new(data: Dataset, hidden: usize, prior_variance: f64) -> Result<Self, ModelError> {
        if hidden == 0 {
            return Err(ModelError::Setting(
                "bnn: `hidden` must be at least 1".into(),
            ));
        }
        if !(prior_variance.is_finite() && prior_variance > 0.0) {
            return Err(ModelError::Setting(format!(
                "bnn: `prior_variance` must be finite and > 0, got {prior_variance}"
            )));
        }
        let source = data.features_source.clone();
        let ys = data.targets.as_ref().ok_or_else(|| {
            ModelError::Setting(format!(
                "bnn needs class labels as targets, but {source} has none"
            ))
        })?;
        if ys.len() != data.rows() {
            return Err(ModelError::Setting(format!(
                "{source} has {} rows but {} targets",
                data.rows(),
                ys.len()
            )));
        }
        let target_source = data.targets_source.as_deref().unwrap_or(&source);
        let labels = labels_of(ys, target_source, MAX_CLASSES)?;
        let classes = labels.iter().max().map_or(0, |&m| m as usize + 1);
        if classes < 2 {
            return Err(ModelError::Setting(format!(
                "bnn needs at least 2 classes, but every label in {target_source} is 0"
            )));
        }
        let inputs = data.cols();
        if inputs == 0 {
            return Err(ModelError::Setting(format!(
                "bnn needs at least one feature column, {source} has none"
            )));
        }
        Ok(Self {
            features: data.features,
            labels,
            inputs,
            hidden,
            classes,
            prior_variance,
            block: BNN_BLOCK,
        })
    }

    /// The same network processing batches in blocks of at most `rows` rows (default
    /// [`BNN_BLOCK`]); results agree to rounding for any block size.
    pub fn with_block_rows(mut self, rows: usize) -> Result<Self, ModelError> {
        if rows == 0 {
            return Err(ModelError::Setting(
                "bnn: block rows must be at least 1".into(),
            ));
        }
        self.block = rows;
        Ok(self)
    }

    /// Input width I (feature columns).
    pub fn inputs(&self) -> usize {
        self.inputs
    }

    /// Hidden width H.
    pub fn hidden(&self) -> usize {
        self.hidden
    }

    /// Number of classes K.
    pub fn classes(&self) -> usize {
        self.classes
    }

    /// Offsets of b, A and a in θ (B starts at 0).
    fn offsets(&self) -> (usize, usize, usize) {
        let ob = self.inputs * self.hidden;
        let oa_mat = ob + self.hidden;
        let oa = oa_mat + self.hidden * self.classes;
        (ob, oa_mat, oa)
    }

    /// (B, b, A, a) views of θ.
    fn split<'a>(&self, theta: &'a [f64]) -> (&'a [f64], &'a [f64], &'a [f64], &'a [f64]) {
        let (ob, oam, oa) = self.offsets();
        (
            &theta[..ob],
            &theta[ob..oam],
            &theta[oam..oa],
            &theta[oa..oa + self.classes],
        )
    }

    /// Scratch length per block row: X, Z1/H, Z2/P, dH/dZ1, log-lik, plus a second
    /// H, P, dH, log-lik set at a control-variate centre when `centre`.
    fn scratch_per_row(&self, centre: bool) -> usize {
        let set = 2 * self.hidden + self.classes + 1;
        self.inputs + set * (1 + usize::from(centre))
    }

    /// Copy the rows `rows` into `x` (m × I, f64), whatever the stored precision.
    fn gather(&self, rows: &[DataIndex], x: &mut [f64]) {
        fn copy<T: Element>(m: &Matrix<T>, rows: &[DataIndex], x: &mut [f64], width: usize) {
            for (&i, dst) in rows.iter().zip(x.chunks_exact_mut(width)) {
                dst.iter_mut()
                    .zip(m.row(i as usize))
                    .for_each(|(d, s)| *d = s.to_f64());
            }
        }
        match &self.features {
            Features::F64(m) => copy(m, rows, x, self.inputs),
            Features::F32(m) => copy(m, rows, x, self.inputs),
            Features::Sparse(m) => {
                for (&i, dst) in rows.iter().zip(x.chunks_exact_mut(self.inputs)) {
                    m.row_into(i as usize, dst);
                }
            }
        }
    }

    /// Forward pass over the gathered block `x` (m rows): H = softmax(X·B + b) into `pass.h`,
    /// P = softmax(H·A + a) into `pass.p`, log β_y into `pass.ll` (labels of `rows`).
    fn forward(&self, theta: &[f64], rows: &[DataIndex], x: &[f64], pass: &mut Pass<'_>) {
        let labels = rows.iter().map(|&i| self.labels[i as usize] as usize);
        self.forward_block(theta, x, labels, pass.h, pass.p, pass.ll);
    }

    /// The network on m = `ll.len()` rows `x` with class labels `labels`: H = softmax(X·B + b)
    /// into `h` (m × hidden), P = softmax(H·A + a) into `p` (m × classes) and log β_y into
    /// `ll`; two GEMMs on one thread.
    fn forward_block(
        &self,
        theta: &[f64],
        x: &[f64],
        labels: impl Iterator<Item = usize>,
        h: &mut [f64],
        p: &mut [f64],
        ll: &mut [f64],
    ) {
        let (m, ni, nh, nk) = (ll.len(), self.inputs, self.hidden, self.classes);
        let (bm, bv, am, av) = self.split(theta);
        let (h, p) = (&mut h[..m * nh], &mut p[..m * nk]);
        matmul(
            MatMut::from_row_major_slice_mut(h, m, nh),
            Accum::Replace,
            MatRef::from_row_major_slice(&x[..m * ni], m, ni),
            MatRef::from_row_major_slice(bm, ni, nh),
            1.0,
            Par::Seq,
        );
        clear_upper_vector_state();
        for row in h.chunks_exact_mut(nh) {
            row.iter_mut().zip(bv).for_each(|(z, b)| *z += b);
            softmax_in_place(row);
        }
        matmul(
            MatMut::from_row_major_slice_mut(p, m, nk),
            Accum::Replace,
            MatRef::from_row_major_slice(h, m, nh),
            MatRef::from_row_major_slice(am, nh, nk),
            1.0,
            Par::Seq,
        );
        clear_upper_vector_state();
        for ((row, ll), y) in p.chunks_exact_mut(nk).zip(ll.iter_mut()).zip(labels) {
            row.iter_mut().zip(av).for_each(|(z, a)| *z += a);
            *ll = log_softmax_at_then_softmax(row, y);
        }
    }

    /// Backward pass after [`Self::forward`]: `pass.p` becomes dZ2 = Y − P and `pass.dh`
    /// becomes dZ1 = H ⊙ (dH − rowsum(dH ⊙ H)) with dH = dZ2·Aᵀ.
    fn backward(&self, theta: &[f64], rows: &[DataIndex], pass: &mut Pass<'_>) {
        let (m, nh, nk) = (rows.len(), self.hidden, self.classes);
        let (_, _, am, _) = self.split(theta);
        for (row, &i) in pass.p.chunks_exact_mut(nk).zip(rows) {
            row.iter_mut().for_each(|v| *v = -*v);
            row[self.labels[i as usize] as usize] += 1.0;
        }
        matmul(
            MatMut::from_row_major_slice_mut(pass.dh, m, nh),
            Accum::Replace,
            MatRef::from_row_major_slice(pass.p, m, nk),
            MatRef::from_row_major_slice(am, nh, nk).transpose(),
            1.0,
            Par::Seq,
        );
        clear_upper_vector_state();
        for (dh, h) in pass.dh.chunks_exact_mut(nh).zip(pass.h.chunks_exact(nh)) {
            let s: f64 = dh.iter().zip(h.iter()).map(|(d, h)| d * h).sum();
            dh.iter_mut().zip(h).for_each(|(d, h)| *d = h * (*d - s));
        }
    }

    /// `grad += weight · Σ_rows ∇log β_y` from a block's X, H, dZ1 (`dz1`) and dZ2 (`dz2`).
    fn accumulate(
        &self,
        x: &[f64],
        h: &[f64],
        dz1: &[f64],
        dz2: &[f64],
        weight: f64,
        grad: &mut [f64],
    ) {
        let (ni, nh, nk) = (self.inputs, self.hidden, self.classes);
        let m = x.len() / ni;
        let (ob, oam, oa) = self.offsets();
        let (g_bm, rest) = grad.split_at_mut(ob);
        let (g_bv, rest) = rest.split_at_mut(oam - ob);
        let (g_am, g_av) = rest.split_at_mut(oa - oam);
        matmul(
            MatMut::from_row_major_slice_mut(g_bm, ni, nh),
            Accum::Add,
            MatRef::from_row_major_slice(x, m, ni).transpose(),
            MatRef::from_row_major_slice(dz1, m, nh),
            weight,
            Par::Seq,
        );
        matmul(
            MatMut::from_row_major_slice_mut(g_am, nh, nk),
            Accum::Add,
            MatRef::from_row_major_slice(h, m, nh).transpose(),
            MatRef::from_row_major_slice(dz2, m, nk),
            weight,
            Par::Seq,
        );
        clear_upper_vector_state();
        add_column_sums(dz1, nh, weight, g_bv);
        add_column_sums(dz2, nk, weight, &mut g_av[..nk]);
    }

    /// Split a scratch slice for blocks of `m` rows into X and one [`Pass`] (and a second
    /// [`Pass`] at a centre when `centre`).
    fn carve<'a>(&self, buf: &'a mut [f64], m: usize, centre: bool) -> Carved<'a> {
        let (x, rest) = buf.split_at_mut(m * self.inputs);
        let (a, rest) = self.carve_pass(rest, m);
        let b = if centre {
            Some(self.carve_pass(rest, m).0)
        } else {
            None
        };
        Carved { x, a, b }
    }

    fn carve_pass<'a>(&self, buf: &'a mut [f64], m: usize) -> (Pass<'a>, &'a mut [f64]) {
        let (h, rest) = buf.split_at_mut(m * self.hidden);
        let (p, rest) = rest.split_at_mut(m * self.classes);
        let (dh, rest) = rest.split_at_mut(m * self.hidden);
        let (ll, rest) = rest.split_at_mut(m);
        (Pass { h, p, dh, ll }, rest)
    }

    /// Run `f` on every block of `batch` after gathering its rows: the scratch is sized once
    /// for the largest block.
    fn for_blocks(
        &self,
        batch: &[DataIndex],
        centre: bool,
        scratch: &mut Scratch,
        mut f: impl FnMut(usize, &[DataIndex], &mut Carved<'_>),
    ) {
        let m_max = self.block.min(batch.len());
        if m_max == 0 {
            return;
        }
        let buf = scratch.get(m_max * self.scratch_per_row(centre));
        for (k, rows) in batch.chunks(self.block).enumerate() {
            let mut c = self.carve(&mut buf[..], rows.len(), centre);
            self.gather(rows, c.x);
            f(k * self.block, rows, &mut c);
        }
    }

    /// Write the per-datum gradient of row r of a block (after forward + backward) into `out`
    /// (D values): ∇_B = x ⊗ dz1, ∇_b = dz1, ∇_A = h ⊗ dz2, ∇_a = dz2.
    fn write_term(&self, x: &[f64], pass: &Pass<'_>, r: usize, out: &mut [f64]) {
        let (ni, nh, nk) = (self.inputs, self.hidden, self.classes);
        let (ob, oam, oa) = self.offsets();
        let dz1 = &pass.dh[r * nh..(r + 1) * nh];
        let dz2 = &pass.p[r * nk..(r + 1) * nk];
        let h = &pass.h[r * nh..(r + 1) * nh];
        let xr = &x[r * ni..(r + 1) * ni];
        for (&xj, o) in xr.iter().zip(out[..ob].chunks_exact_mut(nh)) {
            o.iter_mut().zip(dz1).for_each(|(o, d)| *o = xj * d);
        }
        out[ob..oam].copy_from_slice(dz1);
        for (&hk, o) in h.iter().zip(out[oam..oa].chunks_exact_mut(nk)) {
            o.iter_mut().zip(dz2).for_each(|(o, d)| *o = hk * d);
        }
        out[oa..oa + nk].copy_from_slice(dz2);
    }
}

/// A scratch slice split for one block.
struct Carved<'a> {
    x: &'a mut [f64],
    a: Pass<'a>,
    b: Option<Pass<'a>>,
}

/// Labels as class indices: finite non-negative integers below `max_classes`; errors name
/// `source` and the 1-based row.
fn labels_of(ys: &[f64], source: &str, max_classes: usize) -> Result<Vec<u32>, ModelError> {
    ys.iter()
        .enumerate()
        .map(|(i, &y)| {
            if y.is_finite() && y >= 0.0 && y.fract() == 0.0 && y < max_classes as f64 {
                Ok(y as u32)
            } else {
                Err(DataError::LabelOutOfSupport {
                    source_name: source.to_string(),
                    row: i + 1,
                    value: y,
                    expected: format!("a class index in 0..{}", max_classes - 1),
                }
                .into())
            }
        })
        .collect()
}

/// Stable softmax of one row in place: exp(z − max z) / Σ.
#[inline]
fn softmax_in_place(row: &mut [f64]) {
    let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut sum = 0.0;
    row.iter_mut().for_each(|z| {
        *z = (*z - max).exp();
        sum += *z;
    });
    let inv = 1.0 / sum;
    row.iter_mut().for_each(|z| *z *= inv);
}

/// log softmax(z)_y = z_y − max − ln Σ exp(z − max) (stable), and the row becomes softmax(z).
#[inline]
fn log_softmax_at_then_softmax(row: &mut [f64], y: usize) -> f64 {
    let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let zy = row[y] - max;
    let mut sum = 0.0;
    row.iter_mut().for_each(|z| {
        *z = (*z - max).exp();
        sum += *z;
    });
    let inv = 1.0 / sum;
    row.iter_mut().for_each(|z| *z *= inv);
    zy - sum.ln()
}

/// `out[c] += weight · Σ_rows m[r, c]` over a row-major matrix of `width` columns.
fn add_column_sums(m: &[f64], width: usize, weight: f64, out: &mut [f64]) {
    let mut acc = [0.0f64; 16];
    for start in (0..width).step_by(acc.len()) {
        let w = acc.len().min(width - start);
        let acc = &mut acc[..w];
        acc.fill(0.0);
        for row in m.chunks_exact(width) {
            acc.iter_mut()
                .zip(&row[start..start + w])
                .for_each(|(a, v)| *a += v);
        }
        out[start..start + w]
            .iter_mut()
            .zip(acc.iter())
            .for_each(|(o, a)| *o += weight * a);
    }
}

impl Model for Bnn {
    fn name(&self) -> &'static str {
        "bnn"
    }

    /// D = I·H + H + H·K + K.
    fn dim(&self) -> usize {
        self.offsets().2 + self.classes
    }

    fn num_data(&self) -> usize {
        self.labels.len()
    }

    /// `B[j,k]`, `b[k]`, `A[k,c]`, `a[c]` (0-based), in θ order.
    fn parameter_names(&self) -> Vec<String> {
        let (ni, nh, nk) = (self.inputs, self.hidden, self.classes);
        let mut names = Vec::with_capacity(self.dim());
        (0..ni).for_each(|j| (0..nh).for_each(|k| names.push(format!("B[{j},{k}]"))));
        (0..nh).for_each(|k| names.push(format!("b[{k}]")));
        (0..nh).for_each(|k| (0..nk).for_each(|c| names.push(format!("A[{k},{c}]"))));
        (0..nk).for_each(|c| names.push(format!("a[{c}]")));
        names
    }

    /// −‖θ‖²/(2σ²).
    fn log_prior(&self, theta: &[f64]) -> f64 {
        debug_check_dim(self, theta);
        -0.5 * theta.iter().map(|t| t * t).sum::<f64>() / self.prior_variance
    }

    /// −θ/σ².
    fn add_grad_log_prior(&self, theta: &[f64], grad: &mut [f64]) {
        debug_check_dim(self, theta);
        let inv = 1.0 / self.prior_variance;
        grad.iter_mut().zip(theta).for_each(|(g, t)| *g -= inv * t);
    }

    /// Forward pass only, in blocks.
    fn log_lik_each(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        out: &mut [f64],
        scratch: &mut Scratch,
    ) {
        debug_check_dim(self, theta);
        self.for_blocks(batch, false, scratch, |start, rows, c| {
            self.forward(theta, rows, c.x, &mut c.a);
            out[start..start + rows.len()].copy_from_slice(c.a.ll);
        });
    }

    /// Forward and backward per block, then the outer products row by row (not a hot path).
    fn grad_log_lik_each(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        out: &mut [f64],
        scratch: &mut Scratch,
    ) {
        debug_check_dim(self, theta);
        let d = self.dim();
        self.for_blocks(batch, false, scratch, |start, rows, c| {
            self.forward(theta, rows, c.x, &mut c.a);
            self.backward(theta, rows, &mut c.a);
            for r in 0..rows.len() {
                let k = start + r;
                self.write_term(c.x, &c.a, r, &mut out[k * d..(k + 1) * d]);
            }
        });
    }

    /// The batched GEMM pass (module docs).
    fn add_grad_log_lik(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
        scratch: &mut Scratch,
    ) {
        self.log_lik_and_add_grad(theta, batch, weight, grad, scratch);
    }

    fn log_lik_and_add_grad(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
        scratch: &mut Scratch,
    ) -> f64 {
        debug_check_dim(self, theta);
        let mut total = 0.0;
        self.for_blocks(batch, false, scratch, |_, rows, c| {
            self.forward(theta, rows, c.x, &mut c.a);
            total += c.a.ll.iter().sum::<f64>();
            self.backward(theta, rows, &mut c.a);
            self.accumulate(c.x, c.a.h, c.a.dh, c.a.p, weight, grad);
        });
        total
    }

    /// The batch gradient by GEMMs (of the differences dZ at θ and θ̂ for dB: X is shared),
    /// and each term handed to `moments` one at a time through its own D-length buffer: no
    /// dense block of terms is ever held (the default would hold 2·512·D doubles).
    fn add_grad_log_lik_terms(
        &self,
        theta: &[f64],
        centre: Option<&[f64]>,
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
        moments: &mut TermMoments,
        scratch: &mut Scratch,
    ) {
        debug_check_dim(self, theta);
        let (ob, oam, oa) = self.offsets();
        let nk = self.classes;
        self.for_blocks(batch, centre.is_some(), scratch, |_, rows, c| {
            self.forward(theta, rows, c.x, &mut c.a);
            self.backward(theta, rows, &mut c.a);
            match (centre, c.b.as_mut()) {
                (Some(centre), Some(pc)) => {
                    self.forward(centre, rows, c.x, pc);
                    self.backward(centre, rows, pc);
                    self.accumulate(c.x, c.a.h, c.a.dh, c.a.p, weight, grad);
                    self.accumulate(c.x, pc.h, pc.dh, pc.p, -weight, grad);
                    for r in 0..rows.len() {
                        let pa = &c.a;
                        let x = &*c.x;
                        moments.add_with(|t| {
                            self.write_term(x, pa, r, t);
                            // Minus the centre's term, written block by block.
                            let (nh, ni) = (self.hidden, self.inputs);
                            let dz1c = &pc.dh[r * nh..(r + 1) * nh];
                            let dz2c = &pc.p[r * nk..(r + 1) * nk];
                            let hc = &pc.h[r * nh..(r + 1) * nh];
                            for (&xj, o) in x[r * ni..(r + 1) * ni]
                                .iter()
                                .zip(t[..ob].chunks_exact_mut(nh))
                            {
                                o.iter_mut().zip(dz1c).for_each(|(o, d)| *o -= xj * d);
                            }
                            t[ob..oam].iter_mut().zip(dz1c).for_each(|(o, d)| *o -= d);
                            for (&hk, o) in hc.iter().zip(t[oam..oa].chunks_exact_mut(nk)) {
                                o.iter_mut().zip(dz2c).for_each(|(o, d)| *o -= hk * d);
                            }
                            t[oa..oa + nk]
                                .iter_mut()
                                .zip(dz2c)
                                .for_each(|(o, d)| *o -= d);
                        });
                    }
                }
                _ => {
                    self.accumulate(c.x, c.a.h, c.a.dh, c.a.p, weight, grad);
                    for r in 0..rows.len() {
                        moments.add_with(|t| self.write_term(c.x, &c.a, r, t));
                    }
                }
            }
        });
    }

    /// At θ = 0 every hidden unit has the same weights, so their gradients are equal too and
    /// L-BFGS would never tell them apart (a one-unit network). The MAP search starts instead
    /// from weights drawn i.i.d. N(0, 0.1²) from a fixed stream (the same point for every run).
    fn map_start(&self) -> Vec<f64> {
        let mut theta = vec![0.0; self.dim()];
        fill_standard_normal(&mut crate::rng::stream(MAP_START_SEED, 0), &mut theta);
        theta.iter_mut().for_each(|v| *v *= 0.1);
        theta
    }

    /// θ ~ N(0, σ²·I).
    fn sample_prior(&self, rng: &mut ChainRng, out: &mut [f64]) -> Result<(), ModelError> {
        fill_standard_normal(rng, out);
        let sd = self.prior_variance.sqrt();
        out.iter_mut().for_each(|v| *v *= sd);
        Ok(())
    }
}

impl Predictive for Bnn {
    fn task(&self) -> PredictiveTask {
        PredictiveTask::Classification {
            classes: self.classes,
        }
    }

    fn input_columns(&self) -> usize {
        self.inputs
    }

    fn prepare_held_out_targets(&self, ys: &[f64], source: &str) -> Result<Vec<f64>, ModelError> {
        Ok(labels_of(ys, source, self.classes)?
            .into_iter()
            .map(f64::from)
            .collect())
    }

    /// One row: z1 = xᵀB + b accumulated over the non-zero inputs only (MNIST pixels are ~80 %
    /// zeros, and B's rows are contiguous), then the two softmaxes; `out` = β(θ, x).
    fn predict(&self, theta: &[f64], x: &[f64], y: f64, out: &mut [f64]) -> f64 {
        let (nh, nk) = (self.hidden, self.classes);
        let (bm, bv, am, av) = self.split(theta);
        PREDICT_HIDDEN.with_borrow_mut(|h| {
            h.resize(nh, 0.0);
            h.copy_from_slice(bv);
            for (&xj, row) in x.iter().zip(bm.chunks_exact(nh)) {
                if xj != 0.0 {
                    h.iter_mut().zip(row).for_each(|(z, w)| *z += xj * w);
                }
            }
            softmax_in_place(h);
            let out = &mut out[..nk];
            out.copy_from_slice(av);
            for (&hk, row) in h.iter().zip(am.chunks_exact(nk)) {
                out.iter_mut().zip(row).for_each(|(z, w)| *z += hk * w);
            }
            log_softmax_at_then_softmax(out, y as usize)
        })
    }

    /// A block of rows through the two GEMMs (X·B, then H·A) on one thread, the same network
    /// as [`Predictive::predict`] row by row.
    fn predict_rows(
        &self,
        theta: &[f64],
        x: &[f64],
        ys: &[f64],
        log_lik: &mut [f64],
        out: &mut [f64],
    ) {
        PREDICT_HIDDEN.with_borrow_mut(|h| {
            h.resize(ys.len() * self.hidden, 0.0);
            let labels = ys.iter().map(|&y| y as usize);
            self.forward_block(theta, x, labels, h, out, log_lik);
        });
    }
}
