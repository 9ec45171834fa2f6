//! A user's model in Python as a core `Model`: four vectorised callbacks, with the calls of
//! several chains served by one Python call.
//!
//! The Python object has `dim`, `num_data`, `names` and the methods
//! - `log_prior(theta[K, d]) -> (values[K], grads[K, d])`,
//! - `loglik_sum(theta[K, d], idx[K, b]) -> (values[K], grads[K, d])`: Σ over each row's b points
//!   (`idx` holds uint32 indices),
//! - `loglik_each(theta[K, d], idx[K, b]) -> values[K, b]`,
//! - `grad_each(theta[K, d], idx[K, b]) -> grads[K, b, d]`,
//! - `grad_estimate(theta[K, d], idx[K, b], centre[K, d] | None) -> (prior_grads[K, d],
//!   lik_grads[K, d], centre_grads[K, d] | None)`: a minibatch (or control-variate) estimate's
//!   evaluations in one call (`UserModel` implements it from the others).
//!
//! Rust chooses the indices (the chains' own streams), so seeds, control variates and SVRG
//! behave as with a built-in model. A chain's calls go through the [`Batcher`]: the chains are
//! split into [`CHAIN_GROUPS`] fixed groups, and each chain has a row of its group's [rows, ...] call,
//! made when every live chain of the group is waiting (or after [`GATHER_WAIT`], so a chain busy
//! elsewhere never blocks the others); rows of absent chains repeat a present row, so every call
//! of a kind has the same shape and a chain's results do not depend on which other chains were in
//! its call. Calls from outside a chain (the MAP search, full-data passes)
//! go to Python alone, as K = 1. A callback that raises, or returns the wrong shape, is
//! recorded (the first error wins), the run's stop flag is set, and the caller's outputs are
//! filled with NaN, so the chain stops as diverged; the run then raises the recorded error. A
//! non-finite value is passed on: the chain that receives it diverges, as one whose state
//! overflows does, and the first such value is reported with the run.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use numpy::{PyArray1, PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;
use sgmcmc::model::{DataIndex, Model, Scratch};

use crate::SgmcmcError;

/// The chains' calls are split into this many groups, whose calls can run at once (on two
/// cores where the callback releases the GIL). Fixed, not the machine's core count: the shape
/// of every call, and so the draws, must not depend on the machine.
pub const CHAIN_GROUPS: usize = 2;

/// How long a chain's request waits for the other live chains before its call goes ahead
/// without them.
const GATHER_WAIT: Duration = Duration::from_millis(2);

/// Which callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Prior,
    LikSum,
    LikEach,
    GradEach,
    /// `grad_estimate`, with a centre or not.
    Estimate(bool),
}

impl Kind {
    fn method(self) -> &'static str {
        match self {
            Kind::Prior => "log_prior",
            Kind::LikSum => "loglik_sum",
            Kind::LikEach => "loglik_each",
            Kind::GradEach => "grad_each",
            Kind::Estimate(_) => "grad_estimate",
        }
    }
}

thread_local! {
    /// The chains running on this thread, innermost last (a chain's thread may run another
    /// chain's task while it waits inside a parallel full pass).
    static CHAIN: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// What the callbacks share with the run: the first error and the stop flag.
pub struct CallbackShared {
    /// The first callback error.
    pub error: Mutex<Option<PyErr>>,
    /// The run's stop flag.
    pub stop: Arc<AtomicBool>,
    /// The first non-finite value a callback returned, and where: the chain that received it
    /// diverges (as a chain whose state overflows does), and the run's messages name it.
    pub non_finite: Mutex<Option<String>>,
}

impl CallbackShared {
    fn fail(&self, err: PyErr) {
        let mut slot = self.error.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some(err);
        }
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[derive(Default)]
enum SlotState {
    #[default]
    Idle,
    Pending,
    InFlight,
    Done(bool),
}

#[derive(Default)]
struct Slot {
    state: SlotState,
    kind: Option<Kind>,
    theta: Vec<f64>,
    /// The control variates' centre (`Kind::Estimate(true)`).
    centre: Vec<f64>,
    batch: Vec<DataIndex>,
    /// The result row (values and/or gradients, by kind).
    out: Vec<f64>,
}

struct Gather {
    slots: Vec<Slot>,
    live: usize,
    pending: usize,
    first_pending: Option<Instant>,
}

/// Gathers the requests of a group of chains into calls of shape [rows, ...].
struct Group {
    rows: usize,
    gather: Mutex<Gather>,
    ready: Condvar,
}

impl Group {
    fn new(rows: usize) -> Self {
        Self {
            rows,
            gather: Mutex::new(Gather {
                slots: (0..rows).map(|_| Slot::default()).collect(),
                live: 0,
                pending: 0,
                first_pending: None,
            }),
            ready: Condvar::new(),
        }
    }
}

/// The chains in fixed groups (chain c in group c / per_group, at row c % per_group): each
/// group's calls are one Python call, and the groups' calls run at the same time where the
/// callback releases the GIL (JAX does while it computes).
pub struct Batcher {
    chains: usize,
    per_group: usize,
    groups: Vec<Group>,
}

impl Batcher {
    /// A batcher for `chains` chains in at most `groups` groups.
    pub fn new(chains: usize, groups: usize) -> Self {
        let per_group = chains.div_ceil(groups.clamp(1, chains.max(1))).max(1);
        let groups = (0..chains.div_ceil(per_group))
            .map(|g| Group::new(per_group.min(chains - g * per_group)))
            .collect();
        Self {
            chains,
            per_group,
            groups,
        }
    }

    /// Chain c's group and row.
    fn locate(&self, c: usize) -> (&Group, usize) {
        (&self.groups[c / self.per_group], c % self.per_group)
    }

    /// Chain `c` starts on this thread.
    pub fn enter(&self, c: usize) {
        CHAIN.with(|s| s.borrow_mut().push(c));
        if c < self.chains {
            let (group, _) = self.locate(c);
            group.gather.lock().unwrap_or_else(|e| e.into_inner()).live += 1;
        }
    }

    /// Chain `c` ended on this thread.
    pub fn leave(&self, c: usize) {
        CHAIN.with(|s| {
            let mut s = s.borrow_mut();
            if let Some(pos) = s.iter().rposition(|&x| x == c) {
                s.remove(pos);
            }
        });
        if c < self.chains {
            let (group, _) = self.locate(c);
            let mut g = group.gather.lock().unwrap_or_else(|e| e.into_inner());
            g.live = g.live.saturating_sub(1);
            drop(g);
            group.ready.notify_all();
        }
    }
}

/// The user's model.
pub struct CallbackModel {
    object: Py<PyAny>,
    dim: usize,
    num_data: usize,
    names: Vec<String>,
    batcher: Arc<Batcher>,
    shared: Arc<CallbackShared>,
}

impl CallbackModel {
    /// The model of the Python object `object` (attributes `dim`, `num_data`, `names`).
    pub fn new(
        object: &Bound<'_, PyAny>,
        batcher: Arc<Batcher>,
        shared: Arc<CallbackShared>,
    ) -> PyResult<Self> {
        let dim: usize = object.getattr("dim")?.extract()?;
        let num_data: usize = object.getattr("num_data")?.extract()?;
        if dim == 0 || num_data == 0 {
            return Err(SgmcmcError::new_err(format!(
                "model: dim = {dim} and num_data = {num_data}; both must be at least 1"
            )));
        }
        if num_data > u32::MAX as usize {
            return Err(SgmcmcError::new_err(format!(
                "model: num_data = {num_data} is more than the {} points a model can index",
                u32::MAX
            )));
        }
        let names: Option<Vec<String>> = object.getattr("names")?.extract()?;
        let names = names.unwrap_or_else(|| (0..dim).map(|j| j.to_string()).collect());
        if names.len() != dim {
            return Err(SgmcmcError::new_err(format!(
                "model: {} names for dim = {dim} parameters",
                names.len()
            )));
        }
        for method in [
            Kind::Prior,
            Kind::LikSum,
            Kind::LikEach,
            Kind::GradEach,
            Kind::Estimate(false),
        ] {
            if !object.hasattr(method.method())? {
                return Err(SgmcmcError::new_err(format!(
                    "model: no method `{}`",
                    method.method()
                )));
            }
        }
        Ok(Self {
            object: object.clone().unbind(),
            dim,
            num_data,
            names,
            batcher,
            shared,
        })
    }

    /// Length of one row's result.
    fn row_len(&self, kind: Kind, b: usize) -> usize {
        match kind {
            Kind::Prior | Kind::LikSum => 1 + self.dim,
            Kind::LikEach => b,
            Kind::GradEach => b * self.dim,
            Kind::Estimate(false) => 2 * self.dim,
            Kind::Estimate(true) => 3 * self.dim,
        }
    }

    /// The callback `kind` at θ (and `batch`), its row written to `out` (length `row_len`);
    /// false (and NaN in `out`) if it failed.
    fn call(
        &self,
        kind: Kind,
        theta: &[f64],
        centre: &[f64],
        batch: &[DataIndex],
        out: &mut [f64],
    ) -> bool {
        if self.shared.stop.load(Ordering::Relaxed) && self.has_failed() {
            out.fill(f64::NAN);
            return false;
        }
        let chain = CHAIN.with(|s| s.borrow().last().copied());
        let ok = match chain {
            Some(c) if c < self.batcher.chains => {
                self.call_batched(c, kind, theta, centre, batch, out)
            }
            _ => {
                let rows = vec![Some(Row {
                    theta,
                    centre,
                    batch,
                    out: &mut *out,
                })];
                self.python_call_rows(kind, batch.len(), rows)
            }
        };
        if !ok {
            out.fill(f64::NAN);
        }
        ok
    }

    fn has_failed(&self) -> bool {
        self.shared
            .error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    fn call_batched(
        &self,
        c: usize,
        kind: Kind,
        theta: &[f64],
        centre: &[f64],
        batch: &[DataIndex],
        out: &mut [f64],
    ) -> bool {
        let (group, c) = self.batcher.locate(c);
        let mut g = group.gather.lock().unwrap_or_else(|e| e.into_inner());
        {
            let slot = &mut g.slots[c];
            slot.kind = Some(kind);
            slot.theta.clear();
            slot.theta.extend_from_slice(theta);
            slot.centre.clear();
            slot.centre.extend_from_slice(centre);
            slot.batch.clear();
            slot.batch.extend_from_slice(batch);
            slot.state = SlotState::Pending;
        }
        g.pending += 1;
        g.first_pending.get_or_insert_with(Instant::now);
        loop {
            if let SlotState::Done(ok) = g.slots[c].state {
                out.copy_from_slice(&g.slots[c].out[..out.len()]);
                g.slots[c].state = SlotState::Idle;
                return ok;
            }
            let waited = g.first_pending.map_or(Duration::ZERO, |t| t.elapsed());
            if g.pending > 0 && (g.pending >= g.live || waited >= GATHER_WAIT) {
                g = self.lead(group, g);
                continue;
            }
            let wait = GATHER_WAIT
                .saturating_sub(waited)
                .max(Duration::from_micros(50));
            g = group
                .ready
                .wait_timeout(g, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Take every pending request, call Python once per (kind, batch size), hand the rows back.
    fn lead<'g>(
        &self,
        group: &'g Group,
        mut g: std::sync::MutexGuard<'g, Gather>,
    ) -> std::sync::MutexGuard<'g, Gather> {
        let mut taken: Vec<Slot> = Vec::new();
        let mut owners = Vec::new();
        for (c, slot) in g.slots.iter_mut().enumerate() {
            if matches!(slot.state, SlotState::Pending) {
                slot.state = SlotState::InFlight;
                owners.push(c);
                taken.push(std::mem::take(slot));
            }
        }
        g.pending = 0;
        g.first_pending = None;
        drop(g);
        // Group by (kind, batch size); each group is one call of K rows.
        let mut done = vec![false; taken.len()];
        let mut i = 0;
        while i < taken.len() {
            if done[i] {
                i += 1;
                continue;
            }
            let kind = taken[i].kind.expect("a pending slot has a kind");
            let n = taken[i].batch.len();
            let members: Vec<usize> = (i..taken.len())
                .filter(|&j| !done[j] && taken[j].kind == Some(kind) && taken[j].batch.len() == n)
                .collect();
            let len = self.row_len(kind, n);
            let mut outs: Vec<Vec<f64>> = members.iter().map(|_| vec![0.0; len]).collect();
            let ok = {
                let mut rows: Vec<Option<Row<'_>>> = (0..group.rows).map(|_| None).collect();
                for (m, out) in members.iter().zip(outs.iter_mut()) {
                    rows[owners[*m]] = Some(Row {
                        theta: &taken[*m].theta,
                        centre: &taken[*m].centre,
                        batch: &taken[*m].batch,
                        out,
                    });
                }
                self.python_call_rows(kind, n, rows)
            };
            for (m, out) in members.iter().zip(outs) {
                taken[*m].out = out;
                taken[*m].state = SlotState::Done(ok);
                done[*m] = true;
            }
            i += 1;
        }
        let mut g = group.gather.lock().unwrap_or_else(|e| e.into_inner());
        for (c, slot) in owners.into_iter().zip(taken) {
            g.slots[c] = slot;
        }
        group.ready.notify_all();
        g
    }

    /// One call with the chains' rows at their own positions; absent rows repeat a present one.
    fn python_call_rows(&self, kind: Kind, b: usize, rows: Vec<Option<Row<'_>>>) -> bool {
        let Some(fill) = rows.iter().position(Option::is_some) else {
            return true;
        };
        let k = rows.len();
        let (d, len) = (self.dim, self.row_len(kind, b));
        let mut theta = Vec::with_capacity(k * d);
        let mut centre = Vec::new();
        let mut idx = Vec::with_capacity(k * b);
        for r in &rows {
            let r = r
                .as_ref()
                .or(rows[fill].as_ref())
                .expect("fill row is present");
            theta.extend_from_slice(r.theta);
            centre.extend_from_slice(r.centre);
            idx.extend_from_slice(r.batch);
        }
        let mut result = vec![0.0; k * len];
        if !self.invoke(kind, k, b, &theta, &centre, &idx, &mut result) {
            return false;
        }
        for (c, r) in rows.into_iter().enumerate() {
            if let Some(r) = r {
                r.out.copy_from_slice(&result[c * len..(c + 1) * len]);
            }
        }
        true
    }

    /// The Python call itself: inputs θ[k, d] and idx[k, b], the rows' results into `result`
    /// (k × row_len); errors are recorded.
    #[allow(clippy::too_many_arguments)]
    fn invoke(
        &self,
        kind: Kind,
        k: usize,
        b: usize,
        theta: &[f64],
        centre: &[f64],
        idx: &[DataIndex],
        result: &mut [f64],
    ) -> bool {
        let d = self.dim;
        let outcome = Python::attach(|py| -> PyResult<()> {
            let th = PyArray1::from_slice(py, theta).reshape([k, d])?;
            let object = self.object.bind(py);
            let value = match kind {
                Kind::Prior => object.call_method1(kind.method(), (th,))?,
                Kind::Estimate(with_centre) => {
                    let ix = PyArray1::from_slice(py, idx).reshape([k, b])?;
                    let c = if with_centre {
                        Some(PyArray1::from_slice(py, centre).reshape([k, d])?)
                    } else {
                        None
                    };
                    object.call_method1(kind.method(), (th, ix, c))?
                }
                _ => {
                    let ix = PyArray1::from_slice(py, idx).reshape([k, b])?;
                    object.call_method1(kind.method(), (th, ix))?
                }
            };
            let len = self.row_len(kind, b);
            match kind {
                Kind::Prior | Kind::LikSum => {
                    let (values, grads): (Bound<'_, PyAny>, Bound<'_, PyAny>) =
                        value.extract().map_err(|_| {
                            SgmcmcError::new_err(format!(
                                "model.{}: expected a pair (values[K], grads[K, d]), got {}",
                                kind.method(),
                                type_name(&value)
                            ))
                        })?;
                    let values = array(kind, "values", &values, &[k])?;
                    let grads = array(kind, "grads", &grads, &[k, d])?;
                    for c in 0..k {
                        result[c * len] = values[c];
                        result[c * len + 1..(c + 1) * len]
                            .copy_from_slice(&grads[c * d..(c + 1) * d]);
                    }
                }
                Kind::LikEach => result.copy_from_slice(&array(kind, "values", &value, &[k, b])?),
                Kind::GradEach => {
                    result.copy_from_slice(&array(kind, "grads", &value, &[k, b, d])?)
                }
                Kind::Estimate(with_centre) => {
                    let parts: Vec<Bound<'_, PyAny>> = value.extract().map_err(|_| {
                        SgmcmcError::new_err(format!(
                            "model.grad_estimate: expected a triple (prior_grads, lik_grads, \
                             centre_grads or None), got {}",
                            type_name(&value)
                        ))
                    })?;
                    let names = ["prior_grads", "lik_grads", "centre_grads"];
                    let used = if with_centre { 3 } else { 2 };
                    if parts.len() < used {
                        return Err(SgmcmcError::new_err(format!(
                            "model.grad_estimate: expected {used} arrays, got {}",
                            parts.len()
                        )));
                    }
                    for (p, part) in parts.iter().take(used).enumerate() {
                        let g = array(kind, names[p], part, &[k, d])?;
                        for c in 0..k {
                            result[c * len + p * d..c * len + (p + 1) * d]
                                .copy_from_slice(&g[c * d..(c + 1) * d]);
                        }
                    }
                }
            }
            if let Some(pos) = result.iter().position(|v| !v.is_finite()) {
                let row = pos / len;
                let at: Vec<String> = theta[row * d..(row + 1) * d]
                    .iter()
                    .take(8)
                    .map(|v| format!("{v:.4e}"))
                    .collect();
                let note = format!(
                    "model.{} returned {} at θ = [{}{}]",
                    kind.method(),
                    result[pos],
                    at.join(", "),
                    if d > 8 { ", ..." } else { "" }
                );
                let mut first = self
                    .shared
                    .non_finite
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                first.get_or_insert(note);
            }
            Ok(())
        });
        match outcome {
            Ok(()) => true,
            Err(e) => {
                self.shared.fail(e);
                false
            }
        }
    }
}

/// One chain's part of a call.
struct Row<'a> {
    theta: &'a [f64],
    centre: &'a [f64],
    batch: &'a [DataIndex],
    out: &'a mut [f64],
}

fn type_name(x: &Bound<'_, PyAny>) -> String {
    x.get_type()
        .name()
        .map_or_else(|_| "an object".into(), |n| n.to_string())
}

/// A callback's returned array as f64 values of exactly `shape`.
fn array(kind: Kind, what: &str, x: &Bound<'_, PyAny>, shape: &[usize]) -> PyResult<Vec<f64>> {
    let bad = |got: String| {
        SgmcmcError::new_err(format!(
            "model.{}: {what} must be a float64 array of shape {shape:?}, got {got}",
            kind.method()
        ))
    };
    let a = x.cast::<PyArrayDyn<f64>>().map_err(|_| bad(type_name(x)))?;
    if a.shape() != shape {
        return Err(bad(format!("shape {:?}", a.shape())));
    }
    Ok(match a.to_vec() {
        Ok(v) => v,
        Err(_) => a.to_owned_array().iter().copied().collect(),
    })
}

impl Model for CallbackModel {
    fn name(&self) -> &'static str {
        "python"
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn num_data(&self) -> usize {
        self.num_data
    }
    fn parameter_names(&self) -> Vec<String> {
        self.names.clone()
    }
    fn log_prior(&self, theta: &[f64]) -> f64 {
        let mut out = vec![0.0; 1 + self.dim];
        self.call(Kind::Prior, theta, &[], &[], &mut out);
        out[0]
    }
    fn add_grad_log_prior(&self, theta: &[f64], grad: &mut [f64]) {
        let mut out = vec![0.0; 1 + self.dim];
        self.call(Kind::Prior, theta, &[], &[], &mut out);
        grad.iter_mut().zip(&out[1..]).for_each(|(g, v)| *g += v);
    }
    fn log_lik_each(&self, theta: &[f64], batch: &[DataIndex], out: &mut [f64], _: &mut Scratch) {
        self.call(Kind::LikEach, theta, &[], batch, out);
    }
    fn grad_log_lik_each(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        out: &mut [f64],
        _: &mut Scratch,
    ) {
        self.call(Kind::GradEach, theta, &[], batch, out);
    }
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
        let out = scratch.get(1 + self.dim);
        self.call(Kind::LikSum, theta, &[], batch, out);
        grad.iter_mut()
            .zip(&out[1..])
            .for_each(|(g, v)| *g += weight * v);
        out[0]
    }

    fn add_grad_estimate(
        &self,
        theta: &[f64],
        centre: Option<&[f64]>,
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
        scratch: &mut Scratch,
    ) {
        let d = self.dim;
        let kind = Kind::Estimate(centre.is_some());
        let out = scratch.get(self.row_len(kind, 0));
        self.call(kind, theta, centre.unwrap_or(&[]), batch, out);
        // In the default's order: the prior, the likelihood at θ, minus at the centre.
        grad.iter_mut().zip(&out[..d]).for_each(|(g, v)| *g += v);
        grad.iter_mut()
            .zip(&out[d..2 * d])
            .for_each(|(g, v)| *g += weight * v);
        if centre.is_some() {
            grad.iter_mut()
                .zip(&out[2 * d..3 * d])
                .for_each(|(g, v)| *g -= weight * v);
        }
    }
}
