//! Destinations for a run's draws: the [`DrawSink`] / [`ChainWriter`] traits, the in-memory
//! [`MemorySink`], [`Tee`], [`Constrained`] (draws mapped to a model's constrained scale) and
//! [`TimingSink`] (when each draw was produced).

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

/// Where a run's draws go. One `ChainWriter` per chain; writers of different chains are used from different threads at the same time.
pub trait DrawSink: Send + Sync {
    /// A writer for `chain` (0-based). Called once per chain before sampling.
    fn chain_writer(&self, chain: usize) -> Result<Box<dyn ChainWriter + '_>, SinkError>;
}

/// Receives one chain's kept draws in order.
pub trait ChainWriter: Send {
    /// Append one draw (length = the model's dimension).
    fn push(&mut self, draw: &[f64]) -> Result<(), SinkError>;
    /// Draws pushed but not yet written where they outlive the process (0 for a writer that
    /// keeps nothing back). A checkpoint is taken when this falls back to 0.
    fn pending(&self) -> usize {
        0
    }
    /// Write every pushed draw where it outlives the process (a partial chunk included);
    /// later pushes go on from there. Default: nothing to do.
    fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
    /// Flush what is buffered; returns the number of draws this chain wrote. Called once at the end (also after a divergence).
    fn finish(self: Box<Self>) -> Result<usize, SinkError>;
}

/// Errors of a [`DrawSink`] or [`ChainWriter`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SinkError {
    /// An I/O operation on `path` failed.
    #[error("I/O error at {path}: {source}")]
    Io {
        /// File or directory involved.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The Zarr library rejected an operation on `path`.
    #[error("zarr error at {path}: {message}")]
    Zarr {
        /// Store or node involved.
        path: PathBuf,
        /// Description from the Zarr library.
        message: String,
    },
    /// The output path exists, is not empty and is not a store written by this library.
    #[error(
        "{0} exists and is not an empty directory or an sgmcmc zarr store; refusing to overwrite"
    )]
    PathExists(PathBuf),
    /// A draw of the wrong length was pushed.
    #[error("draw has length {got}, expected {expected}")]
    WrongDimension {
        /// Model dimension.
        expected: usize,
        /// Length of the pushed draw.
        got: usize,
    },
    /// A writer was requested for a chain index outside `0..chains`.
    #[error("chain {chain} out of range (sink has {chains} chains)")]
    ChainOutOfRange {
        /// Requested chain.
        chain: usize,
        /// Number of chains of the sink.
        chains: usize,
    },
    /// A writer for this chain was already handed out.
    #[error("a writer for chain {0} was already created")]
    ChainTaken(usize),
    /// Invalid configuration (zero chains, zero dimension, wrong number of names, ...).
    #[error("invalid sink configuration: {0}")]
    InvalidConfig(String),
}

/// Keeps every chain's draws in memory, flat row-major (`draws × dim`) per chain.
#[derive(Debug)]
pub struct MemorySink {
    dim: usize,
    chains: ChainSlots,
}

impl MemorySink {
    /// An empty sink for `chains` chains of dimension `dim`.
    pub fn new(chains: usize, dim: usize) -> Self {
        Self {
            dim,
            chains: Mutex::new(vec![None; chains]),
        }
    }

    /// Dimension of one draw.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of chains.
    pub fn num_chains(&self) -> usize {
        self.chains
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Each chain's draws, flat row-major (`draws × dim`); empty for a chain that never wrote.
    pub fn into_chains(self) -> Vec<Vec<f64>> {
        unwrap_slots(self.chains)
    }
}

/// Per-chain slots of an in-memory sink: `None` until a writer claims the chain.
type ChainSlots = Mutex<Vec<Option<Vec<f64>>>>;

/// Mark chain `chain` as taken (an empty slot the writer fills when done); errors for a chain
/// out of range or already taken.
fn claim_slot(slots: &ChainSlots, chain: usize) -> Result<(), SinkError> {
    let mut slots = slots.lock().unwrap_or_else(PoisonError::into_inner);
    let chains = slots.len();
    let slot = slots
        .get_mut(chain)
        .ok_or(SinkError::ChainOutOfRange { chain, chains })?;
    if slot.is_some() {
        return Err(SinkError::ChainTaken(chain));
    }
    *slot = Some(Vec::new());
    Ok(())
}

/// Each chain's values; empty for a chain that never wrote.
fn unwrap_slots(slots: ChainSlots) -> Vec<Vec<f64>> {
    slots
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner)
        .into_iter()
        .map(Option::unwrap_or_default)
        .collect()
}

impl DrawSink for MemorySink {
    fn chain_writer(&self, chain: usize) -> Result<Box<dyn ChainWriter + '_>, SinkError> {
        claim_slot(&self.chains, chain)?;
        Ok(Box::new(MemoryChainWriter {
            sink: self,
            chain,
            draws: Vec::new(),
            handed_over: false,
        }))
    }
}

/// [`ChainWriter`] of a [`MemorySink`]: collects locally, hands over on `finish` (or drop).
struct MemoryChainWriter<'a> {
    sink: &'a MemorySink,
    chain: usize,
    draws: Vec<f64>,
    handed_over: bool,
}

impl MemoryChainWriter<'_> {
    fn hand_over(&mut self) -> usize {
        let n = self.draws.len() / self.sink.dim.max(1);
        if !self.handed_over {
            self.handed_over = true;
            let draws = std::mem::take(&mut self.draws);
            let mut slots = self
                .sink
                .chains
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            slots[self.chain] = Some(draws);
        }
        n
    }
}

impl ChainWriter for MemoryChainWriter<'_> {
    fn push(&mut self, draw: &[f64]) -> Result<(), SinkError> {
        if draw.len() != self.sink.dim {
            return Err(SinkError::WrongDimension {
                expected: self.sink.dim,
                got: draw.len(),
            });
        }
        self.draws.extend_from_slice(draw);
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<usize, SinkError> {
        Ok(self.hand_over())
    }
}

impl Drop for MemoryChainWriter<'_> {
    fn drop(&mut self) {
        self.hand_over();
    }
}

/// Sends every draw to two sinks (e.g. a Zarr store and memory for the summary).
pub struct Tee<'a> {
    first: &'a dyn DrawSink,
    second: &'a dyn DrawSink,
}

impl<'a> Tee<'a> {
    /// Draws go to `first` and `second`.
    pub fn new(first: &'a dyn DrawSink, second: &'a dyn DrawSink) -> Self {
        Self { first, second }
    }
}

struct TeeWriter<'s> {
    first: Box<dyn ChainWriter + 's>,
    second: Box<dyn ChainWriter + 's>,
}

impl DrawSink for Tee<'_> {
    fn chain_writer(&self, chain: usize) -> Result<Box<dyn ChainWriter + '_>, SinkError> {
        Ok(Box::new(TeeWriter {
            first: self.first.chain_writer(chain)?,
            second: self.second.chain_writer(chain)?,
        }))
    }
}

impl ChainWriter for TeeWriter<'_> {
    fn push(&mut self, draw: &[f64]) -> Result<(), SinkError> {
        self.first.push(draw)?;
        self.second.push(draw)
    }
    fn pending(&self) -> usize {
        self.first.pending().max(self.second.pending())
    }
    fn flush(&mut self) -> Result<(), SinkError> {
        self.first.flush()?;
        self.second.flush()
    }

    fn finish(self: Box<Self>) -> Result<usize, SinkError> {
        let a = self.first.finish()?;
        self.second.finish()?;
        Ok(a)
    }
}

/// Sends every draw to `inner` on the model's constrained scale ([`crate::model::Model::constrain`]):
/// a store of σ rather than log σ. Each writer maps into one buffer of its own (no allocation
/// per draw).
pub struct Constrained<'a> {
    model: &'a dyn crate::model::Model,
    inner: &'a dyn DrawSink,
}

impl<'a> Constrained<'a> {
    /// Draws of `model`'s unconstrained θ go to `inner` as `model.constrain(θ)`.
    pub fn new(model: &'a dyn crate::model::Model, inner: &'a dyn DrawSink) -> Self {
        Self { model, inner }
    }
}

struct ConstrainedWriter<'s> {
    model: &'s dyn crate::model::Model,
    inner: Box<dyn ChainWriter + 's>,
    buffer: Vec<f64>,
}

impl DrawSink for Constrained<'_> {
    fn chain_writer(&self, chain: usize) -> Result<Box<dyn ChainWriter + '_>, SinkError> {
        Ok(Box::new(ConstrainedWriter {
            model: self.model,
            inner: self.inner.chain_writer(chain)?,
            buffer: vec![0.0; self.model.dim()],
        }))
    }
}

impl ChainWriter for ConstrainedWriter<'_> {
    fn push(&mut self, draw: &[f64]) -> Result<(), SinkError> {
        if draw.len() != self.buffer.len() {
            return Err(SinkError::WrongDimension {
                expected: self.buffer.len(),
                got: draw.len(),
            });
        }
        self.model.constrain(draw, &mut self.buffer);
        self.inner.push(&self.buffer)
    }
    fn pending(&self) -> usize {
        self.inner.pending()
    }
    fn flush(&mut self) -> Result<(), SinkError> {
        self.inner.flush()
    }
    fn finish(self: Box<Self>) -> Result<usize, SinkError> {
        self.inner.finish()
    }
}

/// Records when each draw arrives, not the draw: seconds since the chain's writer was created
/// (the runner creates it just before the chain starts, after the chain is built, so the times
/// are on the clock of a wall-clock budget). Combine with another sink through [`Tee`]; e.g.
/// the KSD of a run's prefix up to time t (the MAMBA paper's Figures 1–3).
#[derive(Debug)]
pub struct TimingSink {
    chains: ChainSlots,
}

impl TimingSink {
    /// An empty recorder for `chains` chains.
    pub fn new(chains: usize) -> Self {
        Self {
            chains: Mutex::new(vec![None; chains]),
        }
    }

    /// Each chain's draw times in seconds, in draw order (non-decreasing); empty for a chain
    /// that never wrote.
    pub fn into_times(self) -> Vec<Vec<f64>> {
        unwrap_slots(self.chains)
    }
}

impl DrawSink for TimingSink {
    fn chain_writer(&self, chain: usize) -> Result<Box<dyn ChainWriter + '_>, SinkError> {
        claim_slot(&self.chains, chain)?;
        Ok(Box::new(TimingChainWriter {
            sink: self,
            chain,
            start: Instant::now(),
            times: Vec::new(),
            handed_over: false,
        }))
    }
}

/// [`ChainWriter`] of a [`TimingSink`]: one `Instant::now()` per draw (tens of ns).
struct TimingChainWriter<'a> {
    sink: &'a TimingSink,
    chain: usize,
    start: Instant,
    times: Vec<f64>,
    handed_over: bool,
}

impl TimingChainWriter<'_> {
    fn hand_over(&mut self) -> usize {
        let n = self.times.len();
        if !self.handed_over {
            self.handed_over = true;
            let times = std::mem::take(&mut self.times);
            let mut slots = self
                .sink
                .chains
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            slots[self.chain] = Some(times);
        }
        n
    }
}

impl ChainWriter for TimingChainWriter<'_> {
    fn push(&mut self, _draw: &[f64]) -> Result<(), SinkError> {
        self.times.push(self.start.elapsed().as_secs_f64());
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<usize, SinkError> {
        Ok(self.hand_over())
    }
}

impl Drop for TimingChainWriter<'_> {
    fn drop(&mut self) {
        self.hand_over();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sink_collects_uneven_chains_in_parallel() {
        let sink = MemorySink::new(3, 2);
        std::thread::scope(|s| {
            for c in 0..3 {
                let sink = &sink;
                s.spawn(move || {
                    let mut w = sink.chain_writer(c).unwrap();
                    for j in 0..(5 + c) {
                        w.push(&[c as f64, j as f64]).unwrap();
                    }
                    assert_eq!(w.finish().unwrap(), 5 + c);
                });
            }
        });
        assert_eq!(sink.num_chains(), 3);
        let chains = sink.into_chains();
        for (c, draws) in chains.iter().enumerate() {
            assert_eq!(draws.len(), 2 * (5 + c));
            assert_eq!(draws[2 * 4], c as f64);
            assert_eq!(draws[2 * 4 + 1], 4.0);
        }
    }

    #[test]
    fn memory_sink_errors() {
        let sink = MemorySink::new(1, 2);
        assert!(matches!(
            sink.chain_writer(1).err(),
            Some(SinkError::ChainOutOfRange {
                chain: 1,
                chains: 1
            })
        ));
        let mut w = sink.chain_writer(0).unwrap();
        assert!(matches!(
            sink.chain_writer(0).err(),
            Some(SinkError::ChainTaken(0))
        ));
        assert!(matches!(
            w.push(&[1.0]),
            Err(SinkError::WrongDimension {
                expected: 2,
                got: 1
            })
        ));
        w.push(&[1.0, 2.0]).unwrap();
        // Dropped without finish: draws are still kept.
        drop(w);
        assert_eq!(sink.into_chains(), vec![vec![1.0, 2.0]]);
    }

    /// Checked once by breaking the code: pushing `0.0` instead of the elapsed time made this
    /// test fail (restored).
    #[test]
    fn timing_sink_records_non_decreasing_times_per_chain() {
        let sink = TimingSink::new(2);
        let mut w = sink.chain_writer(0).unwrap();
        w.push(&[1.0]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        w.push(&[2.0]).unwrap();
        assert_eq!(w.finish().unwrap(), 2);
        assert!(matches!(
            sink.chain_writer(0).err(),
            Some(SinkError::ChainTaken(0))
        ));
        let times = sink.into_times();
        assert_eq!(times[0].len(), 2);
        assert!(times[1].is_empty());
        // The sleep lies between the two pushes: at least 20 ms apart.
        assert!(times[0][0] >= 0.0, "{:?}", times[0]);
        assert!(times[0][1] - times[0][0] >= 0.02, "{:?}", times[0]);
    }
}
