//! Checkpoints of running chains, and resuming from them (issue 25).
//!
//! A chain's checkpoint is its progress (iterations, draws kept, seconds run), its random
//! stream and its kernel's whole state ([`ChainKernel::save_state`]). The runner takes one
//! whenever the chain's writer has just put every draw where it outlives the process (a chunk
//! filled), at least every [`Checkpoints::interval`] (flushing the partial chunk first), and
//! when the chain stops early (Ctrl-C, SIGTERM); so after a kill -9 the last checkpoint
//! matches the draws on disk, and a resumed chain ([`ChainStart::Resume`]) continues with
//! exactly the draws an uninterrupted run would have made.

use crate::checkpoint::{StateError, StateReader, StateWriter};
use crate::io::SinkError;
use crate::rng::ChainRng;
use crate::sampler::{ChainKernel, DrawStatistics};
use std::time::{Duration, Instant};

use super::ChainProgress;

/// Where checkpoints go (one per chain, each replacing the last: write it atomically).
pub trait CheckpointStore: Sync {
    /// Saves chain `chain`'s checkpoint.
    fn save(&self, chain: usize, checkpoint: &[u8]) -> Result<(), SinkError>;

    /// Keeps chain `chain`'s per-draw statistics from its draw `from` on (those since its last
    /// checkpoint; anything kept beyond `from` is stale and replaced), before the checkpoint
    /// that covers them is saved, so that a resumed chain has its earlier draws' statistics.
    /// Default: not kept (a resumed chain's earlier draws then have none).
    fn save_statistics(
        &self,
        _chain: usize,
        _from: usize,
        _statistics: &[DrawStatistics],
    ) -> Result<(), SinkError> {
        Ok(())
    }
}

/// Checkpointing of a run: where, and how often at least.
pub struct Checkpoints<'a> {
    /// Where the checkpoints go.
    pub store: &'a dyn CheckpointStore,
    /// The longest time between two checkpoints of a chain (besides one per chunk of draws).
    pub interval: Duration,
}

/// How a chain begins: at its starting point, or from a checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub enum ChainStart {
    /// A fresh start at the chain's θ₀.
    Fresh,
    /// The bytes of the chain's last checkpoint.
    Resume(Vec<u8>),
    /// The chain runs elsewhere (another process, task or machine): it is not built, has no
    /// writer and no report here. Every chain is a function of (settings, seed, chain number)
    /// alone, so the chains a process runs are those of the whole run, bit for bit.
    Elsewhere,
}

/// Version of the checkpoint layout (a checkpoint of another version is refused).
const FORMAT: u64 = 1;

/// What a checkpoint says about a chain besides its kernel's state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CheckpointHeader {
    /// The chain.
    pub chain: usize,
    /// The run's seed.
    pub seed: u64,
    /// Iterations done and draws kept.
    pub progress: ChainProgress,
    /// Seconds the chain had run (wall-clock and CPU budgets go on with what is left).
    pub seconds: f64,
}

/// The checkpoint of `kernel` with stream `rng` after `header.progress`.
pub(super) fn encode(
    header: &CheckpointHeader,
    kernel: &dyn ChainKernel,
    rng: &ChainRng,
) -> Result<Vec<u8>, StateError> {
    let mut w = StateWriter::new();
    w.field("format", &FORMAT);
    w.field("chain", &header.chain);
    w.field("seed", &header.seed);
    w.field("iterations", &header.progress.iterations);
    w.field("draws", &header.progress.draws);
    w.field("seconds", &header.seconds);
    w.field("rng", rng);
    w.field_with("kernel", |w| kernel.save_state(w));
    w.finish()
}

/// The header of a checkpoint (what chain, how far), without restoring anything.
pub fn checkpoint_header(bytes: &[u8]) -> Result<CheckpointHeader, StateError> {
    read_header(&mut StateReader::new(bytes))
}

/// Reads the fields [`encode`] writes before the stream.
fn read_header(r: &mut StateReader<'_>) -> Result<CheckpointHeader, StateError> {
    let mut format = 0u64;
    r.field("format", &mut format)?;
    if format != FORMAT {
        return Err(StateError::Invalid(format!(
            "format {format}, this version reads format {FORMAT}"
        )));
    }
    let mut header = CheckpointHeader {
        chain: 0,
        seed: 0,
        progress: ChainProgress::default(),
        seconds: 0.0,
    };
    r.field("chain", &mut header.chain)?;
    r.field("seed", &mut header.seed)?;
    r.field("iterations", &mut header.progress.iterations)?;
    r.field("draws", &mut header.progress.draws)?;
    r.field("seconds", &mut header.seconds)?;
    Ok(header)
}

/// Restores `kernel` and `rng` from `bytes` (see [`encode`]), checking that the checkpoint is
/// chain `chain`'s of a run with `seed`.
pub(super) fn decode(
    bytes: &[u8],
    chain: usize,
    seed: u64,
    kernel: &mut dyn ChainKernel,
    rng: &mut ChainRng,
) -> Result<CheckpointHeader, StateError> {
    let mut r = StateReader::new(bytes);
    let header = read_header(&mut r)?;
    if (header.chain, header.seed) != (chain, seed) {
        return Err(StateError::Invalid(format!(
            "of chain {} of a run with seed {}, not chain {chain} of a run with seed {seed}",
            header.chain, header.seed
        )));
    }
    r.field("rng", rng)?;
    r.field_with("kernel", |r| kernel.load_state(r))?;
    r.finish()?;
    Ok(header)
}

/// When a chain takes its next checkpoint.
pub(crate) struct Schedule {
    interval: Duration,
    last: Instant,
    /// Iterations until the clock is read again.
    countdown: u32,
}

/// Iterations between two readings of the clock (a reading costs tens of nanoseconds).
const CLOCK_EVERY: u32 = 64;

impl Schedule {
    pub(crate) fn new(interval: Duration) -> Self {
        Self {
            interval,
            last: Instant::now(),
            countdown: CLOCK_EVERY,
        }
    }

    /// Whether the interval has passed (the clock read every [`CLOCK_EVERY`] calls).
    pub(crate) fn due(&mut self) -> bool {
        self.countdown -= 1;
        if self.countdown > 0 {
            return false;
        }
        self.countdown = CLOCK_EVERY;
        self.last.elapsed() >= self.interval
    }

    /// A checkpoint was just taken.
    pub(crate) fn taken(&mut self) {
        self.last = Instant::now();
        self.countdown = CLOCK_EVERY;
    }
}
