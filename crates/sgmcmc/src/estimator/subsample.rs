//! Minibatches in O(n) per draw (reference §1.2): uniform without replacement (the default),
//! with replacement (compatibility option `minibatch_with_replacement`), or contiguous blocks
//! ([`MinibatchScheme::Block`]); optionally held and reused across calls
//! (`sghmc_shared_minibatch`).

use std::collections::VecDeque;

use crate::model::DataIndex;
use crate::rng::ChainRng;
use rand::{RngExt, SeedableRng};

/// How many block offsets are drawn ahead of use, so that a model over a file larger than
/// memory can start reading the blocks of the next iterations while it computes this one
/// ([`Subsampler::announce_blocks_ahead`]): several reads in flight at once instead of one.
pub const BLOCKS_AHEAD: usize = 8;

/// How the rows of a minibatch are chosen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum MinibatchScheme {
    /// n of the N rows uniformly at random (without replacement unless asked otherwise): a
    /// gather of random rows, whose cost is memory latency (one cache miss per row), or a disk
    /// seek per row for memory-mapped data larger than RAM.
    #[default]
    Uniform,
    /// n contiguous rows starting at a uniformly random offset o, wrapping around:
    /// S = {o, o + 1, …, o + n − 1} mod N. Each row is in S with probability n/N, so the
    /// N/n-scaled estimate stays unbiased whatever the row order, and the offsets of successive
    /// calls are independent. The rows are read as a stream, at memory (or disk) bandwidth.
    /// The noise depends on the order: rows in a random order (the run file's pipeline permutes
    /// them once when this scheme is chosen) give, over the permutation, exactly the uniform
    /// scheme's variance; rows sorted by anything the likelihood depends on give far more.
    Block,
}

/// Draws n of N indices uniformly without replacement, in O(n) per draw and in one of two ways:
/// - **a batch of at most N/2 (the usual minibatch):** by rejection. Each index is drawn
///   uniformly from 0..N and kept unless a bitmap of the batch's indices (N bits, 125 KB at
///   N = 1M) already holds it, so every kept index is uniform among those not yet drawn and
///   the batch, in order, is a uniform random arrangement of n distinct indices. At most N/2
///   indices are held, so each is found in fewer than 2 tries on average. The bitmap's bits
///   are cleared at the next batch, one per index. Nothing of size N is written: a partial
///   Fisher–Yates shuffle would swap n random entries of a 4N-byte buffer (4 MB at N = 1M),
///   whose cache misses and dirty lines cost a uniform SGLD iteration about a fifth of its
///   time (`docs/experiments/sgld_throughput.md`).
/// - **a larger batch:** by a partial Fisher–Yates shuffle of a persistent permutation buffer
///   (any arrangement of it is a valid starting point, so a new batch shuffles it as it is). A
///   batch that grows past N/2 ([`Subsampler::batch_more`]) moves into the buffer once: its
///   indices first, then the others.
///
/// The swap targets are drawn first and the swaps done in a second pass that prefetches the
/// permutation entries a few swaps ahead: the same random numbers and the same swaps as the
/// one-pass loop, but the random reads of the N-entry buffer overlap instead of stalling.
///
/// The estimators take their minibatches from [`Subsampler::batch`], which adds two per-call
/// options on top of [`Subsampler::draw`]: drawing with replacement
/// ([`Subsampler::set_with_replacement`]) and holding one batch for several calls
/// ([`Subsampler::reuse_batch`]).
#[derive(Debug, Clone)]
pub struct Subsampler {
    /// The permutation buffer of the Fisher–Yates draws (the first n entries are the batch
    /// when `in_perm`), and every index in its order for a batch of all N.
    perm: Vec<DataIndex>,
    /// The current batch without replacement, drawn by rejection (when not `in_perm`).
    drawn: Vec<DataIndex>,
    /// Bit i set: index i is in `drawn` (N bits, allocated at the first rejection draw).
    chosen: Vec<u64>,
    /// The current batch without replacement is `perm`'s first entries, not `drawn`.
    in_perm: bool,
    /// Swap targets of a draw without replacement; the batch itself with replacement or in
    /// blocks.
    targets: Vec<u32>,
    with_replacement: bool,
    scheme: MinibatchScheme,
    /// The offset of the current block (blocks only).
    offset: usize,
    /// The offsets of the next [`BLOCKS_AHEAD`] blocks (blocks only), oldest first.
    ahead: VecDeque<u32>,
    /// How many of `ahead` (the newest) have not been announced to the model yet.
    unannounced: usize,
    /// The stream the block offsets are drawn from, seeded by one draw from the chain's stream
    /// at the first block (so that offsets can be drawn ahead without changing the chain's
    /// other draws).
    offsets_rng: Option<ChainRng>,
    /// While set, [`Subsampler::batch`] draws once and then returns that batch.
    reuse: bool,
    /// A batch is held (valid only while `reuse`).
    held: bool,
}

impl Subsampler {
    /// A sampler over `0..n_data`.
    pub fn new(n_data: usize) -> Self {
        assert!(
            n_data <= DataIndex::MAX as usize,
            "at most 2^32 - 1 data points are supported"
        );
        Self {
            perm: (0..n_data as u64).map(|i| i as DataIndex).collect(),
            drawn: Vec::new(),
            chosen: Vec::new(),
            in_perm: false,
            targets: Vec::new(),
            with_replacement: false,
            scheme: MinibatchScheme::Uniform,
            offset: 0,
            ahead: VecDeque::with_capacity(BLOCKS_AHEAD + 1),
            unannounced: 0,
            offsets_rng: None,
            reuse: false,
            held: false,
        }
    }

    /// Draw [`Subsampler::batch`]es with replacement (n independent uniform indices, the
    /// SGMCMCJax scheme, Appendix A `minibatch_with_replacement`) instead of without. The
    /// estimate stays unbiased; its covariance loses the finite-population factor
    /// (N − n)/(N − 1): (N²/n)·C(θ) (§1.2). Discards any held batch.
    pub fn set_with_replacement(&mut self, on: bool) {
        self.with_replacement = on;
        self.held = false;
    }

    /// Whether batches are drawn with replacement.
    pub fn with_replacement(&self) -> bool {
        self.with_replacement
    }

    /// Draw [`Subsampler::batch`]es and [`Subsampler::batch_more`] increments by `scheme`
    /// (blocks take precedence over [`Subsampler::set_with_replacement`]). Discards any held
    /// batch.
    pub fn set_scheme(&mut self, scheme: MinibatchScheme) {
        self.scheme = scheme;
        self.held = false;
    }

    /// The minibatch scheme.
    pub fn scheme(&self) -> MinibatchScheme {
        self.scheme
    }

    /// While `on`, [`Subsampler::batch`] draws a fresh batch at its first call and returns
    /// that same batch at every later call (`sghmc_shared_minibatch`: one minibatch for all L
    /// inner steps). Every switch, on or off, discards the held batch, so the next window
    /// starts with a fresh draw.
    pub fn reuse_batch(&mut self, on: bool) {
        self.reuse = on;
        self.held = false;
    }

    /// The minibatch of an estimate: `n` indices drawn with [`Subsampler::draw`] (without
    /// replacement) or with replacement, or the held batch while [`Subsampler::reuse_batch`]
    /// is on. n = N gives every index in buffer order and draws nothing, under either scheme
    /// (reference §1.2: n = N is the exact gradient). Requires 1 ≤ n ≤ N, and the same n at
    /// every call of a reuse window.
    #[inline]
    pub fn batch(&mut self, n: usize, rng: &mut ChainRng) -> &[DataIndex] {
        debug_assert!(n <= self.perm.len());
        if n == self.perm.len() {
            return &self.perm;
        }
        if !(self.reuse && self.held && self.held_buffer().len() >= n) {
            // Every new batch discards a held one; this one is held while `reuse` is on.
            match (self.scheme, self.with_replacement) {
                (MinibatchScheme::Block, _) => self.draw_block(0, n, rng),
                (MinibatchScheme::Uniform, true) => self.draw_with_replacement(n, rng),
                (MinibatchScheme::Uniform, false) => self.draw_more(0, n, rng),
            };
            self.held = self.reuse;
        }
        &self.held_buffer()[..n]
    }

    /// A growing batch without repeats (the minibatch MH test's, reference §6.5): after
    /// `start` points of this batch, `n` more, returned alone; `start = 0` begins a new batch.
    /// Uniform: [`Subsampler::draw_more`]; blocks: the block goes on from where it ended, so
    /// the whole batch is one block from one random offset. Requires `start + n ≤ N`.
    #[inline]
    pub fn batch_more(&mut self, start: usize, n: usize, rng: &mut ChainRng) -> &[DataIndex] {
        match self.scheme {
            MinibatchScheme::Block => self.draw_block(start, n, rng),
            MinibatchScheme::Uniform => self.draw_more(start, n, rng),
        }
    }

    /// Rows o + `start` … o + `start` + n − 1 (mod N) of a block at offset o, drawn uniformly
    /// in 0..N when `start` = 0, in `targets`.
    fn draw_block(&mut self, start: usize, n: usize, rng: &mut ChainRng) -> &[DataIndex] {
        let total = self.perm.len();
        debug_assert!(start + n <= total);
        if start == 0 {
            self.held = false;
            let offsets = self
                .offsets_rng
                .get_or_insert_with(|| ChainRng::seed_from_u64(rng.random::<u64>()));
            while self.ahead.len() <= BLOCKS_AHEAD {
                self.ahead.push_back(offsets.random_range(0..total as u32));
                self.unannounced += 1;
            }
            self.offset = self.ahead.pop_front().map_or(0, |o| o as usize);
            self.unannounced = self.unannounced.min(self.ahead.len());
        }
        let first = (self.offset + start) % total;
        self.targets.clear();
        let head = n.min(total - first);
        self.targets
            .extend((first..first + head).map(|i| i as DataIndex));
        self.targets.extend((0..n - head).map(|i| i as DataIndex));
        &self.targets
    }

    /// Calls `will_read(first)` for each block drawn ahead that has not been announced yet
    /// (after the first block all [`BLOCKS_AHEAD`], then one per block), its first row: the
    /// estimators pass it on to `Model::will_read`, so that a model over a file larger than
    /// memory starts reading blocks before they are used. Nothing under the uniform scheme.
    pub fn announce_blocks_ahead(&mut self, mut will_read: impl FnMut(usize)) {
        let fresh = self.ahead.len() - self.unannounced;
        for &first in self.ahead.range(fresh..) {
            will_read(first as usize);
        }
        self.unannounced = 0;
    }

    /// The buffer whose first entries are the batch the last draw returned (from its first
    /// point).
    fn held_buffer(&self) -> &[DataIndex] {
        if self.with_replacement || self.scheme == MinibatchScheme::Block {
            &self.targets
        } else if self.in_perm {
            &self.perm
        } else {
            &self.drawn
        }
    }

    /// n independent uniform indices in 0..N (with replacement), in `targets`.
    fn draw_with_replacement(&mut self, n: usize, rng: &mut ChainRng) -> &[DataIndex] {
        let total = self.perm.len() as u32;
        self.held = false;
        self.targets.clear();
        self.targets
            .extend((0..n).map(|_| rng.random_range(0..total)));
        &self.targets
    }

    /// Number of data points N.
    pub fn len(&self) -> usize {
        self.perm.len()
    }

    /// Whether N = 0.
    pub fn is_empty(&self) -> bool {
        self.perm.is_empty()
    }

    /// A uniform random subset of size `n` (in random order), without replacement. Requires
    /// `n ≤ N`. Ignores the options of [`Subsampler::batch`], and discards a held batch.
    #[inline]
    pub fn draw(&mut self, n: usize, rng: &mut ChainRng) -> &[DataIndex] {
        self.draw_more(0, n, rng)
    }

    /// Grow a draw: after a draw of `start` points (`start` = 0: a new batch), `n` more,
    /// uniform without replacement among the other N − `start` (the minibatch MH test's
    /// growing batch, reference §6.5). Returns only the new points. Requires `start + n ≤ N`,
    /// and `start` the size of the batch so far. A new batch discards a held one.
    #[inline]
    pub fn draw_more(&mut self, start: usize, n: usize, rng: &mut ChainRng) -> &[DataIndex] {
        let total = self.perm.len();
        assert!(start + n <= total, "{start} + {n} of {total} indices");
        if start == 0 {
            self.held = false;
            self.forget_drawn();
            // A new batch of more than N/2 is shuffled from the buffer as it is: any
            // arrangement of it is a valid start.
            self.in_perm = n > total / 2;
        }
        assert!(
            self.in_perm || self.drawn.len() == start,
            "a batch of {} points goes on at {start}",
            self.drawn.len()
        );
        if !self.in_perm && start + n <= total / 2 {
            self.draw_rejecting(n, rng);
            return &self.drawn[start..];
        }
        if !self.in_perm {
            // The batch so far first, then the indices not in it: any arrangement of those is
            // a valid start for the shuffle of the rest.
            let (head, rest) = self.perm.split_at_mut(start);
            head.copy_from_slice(&self.drawn);
            let chosen = &self.chosen;
            let others = (0..total as DataIndex).filter(|&i| !is_set(chosen, i));
            for (slot, i) in rest.iter_mut().zip(others) {
                *slot = i;
            }
            self.forget_drawn();
            self.in_perm = true;
        }
        self.shuffle_more(start, n, rng)
    }

    /// n more indices by rejection against `chosen`, appended to `drawn`.
    fn draw_rejecting(&mut self, n: usize, rng: &mut ChainRng) {
        let total = self.perm.len() as u32;
        if self.chosen.is_empty() {
            self.chosen = vec![0; (total as usize).div_ceil(64)];
        }
        self.drawn.reserve(n);
        for _ in 0..n {
            loop {
                let i = rng.random_range(0..total);
                if set_once(&mut self.chosen, i) {
                    self.drawn.push(i);
                    break;
                }
            }
        }
    }

    /// Empties `drawn` and clears its bits.
    fn forget_drawn(&mut self) {
        for &i in &self.drawn {
            self.chosen[(i / 64) as usize] &= !(1u64 << (i % 64));
        }
        self.drawn.clear();
    }

    /// The partial Fisher–Yates shuffle: entries `start..start + n` of `perm` become n indices
    /// drawn uniformly from those at `start..`.
    fn shuffle_more(&mut self, start: usize, n: usize, rng: &mut ChainRng) -> &[DataIndex] {
        const AHEAD: usize = 16;
        let total = self.perm.len();
        self.targets.clear();
        self.targets
            .extend((start..start + n).map(|k| rng.random_range(k as u32..total as u32)));
        for k in 0..n {
            if let Some(&ahead) = self.targets.get(k + AHEAD) {
                prefetch(&self.perm, ahead as usize);
            }
            self.perm.swap(start + k, self.targets[k] as usize);
        }
        &self.perm[start..start + n]
    }

    /// All indices, in the buffer's current order.
    pub fn all(&self) -> &[DataIndex] {
        &self.perm
    }
}

/// The state between draws: the index buffer (each batch of more than N/2 permutes it
/// further, so the next such batch depends on it: N indices, 4N bytes), the batch drawn by
/// rejection (its bitmap is rebuilt on load), the block offsets drawn ahead and their stream,
/// the held batch. The options (scheme, replacement, reuse) are settings and are not saved.
impl crate::checkpoint::Persist for Subsampler {
    fn save(&self, w: &mut crate::checkpoint::StateWriter) {
        w.nested(9);
        w.field("perm", &self.perm);
        w.field("drawn", &self.drawn);
        w.field("in_perm", &self.in_perm);
        w.field("targets", &self.targets);
        w.field("offset", &self.offset);
        w.field("ahead", &self.ahead);
        w.field("unannounced", &self.unannounced);
        w.field(
            "offsets_rng",
            &self.offsets_rng.iter().cloned().collect::<Vec<_>>(),
        );
        w.field("held", &self.held);
    }
    fn load(
        &mut self,
        r: &mut crate::checkpoint::StateReader<'_>,
    ) -> Result<(), crate::checkpoint::StateError> {
        use crate::checkpoint::StateError::Invalid;
        r.nested(9)?;
        // Everything is read and checked before any of it replaces this subsampler's state.
        let total = self.perm.len();
        let mut perm: Vec<DataIndex> = Vec::new();
        r.field("perm", &mut perm)?;
        if perm.len() != total {
            return Err(Invalid(format!(
                "a subsampler over {} data points, this chain's has {total}",
                perm.len()
            )));
        }
        let mut seen = vec![0u64; total.div_ceil(64)];
        if !perm.iter().all(|&i| set_once(&mut seen, i)) {
            return Err(Invalid(format!(
                "the index buffer is not a permutation of 0..{total}"
            )));
        }
        let (mut drawn, mut in_perm) = (Vec::<DataIndex>::new(), false);
        r.field("drawn", &mut drawn)?;
        r.field("in_perm", &mut in_perm)?;
        let mut chosen = vec![
            0u64;
            if drawn.is_empty() {
                0
            } else {
                total.div_ceil(64)
            }
        ];
        if drawn.len() > total / 2
            || (in_perm && !drawn.is_empty())
            || !drawn.iter().all(|&i| set_once(&mut chosen, i))
        {
            return Err(Invalid(format!(
                "a batch of {} distinct indices below {total}, at most half of them, is drawn \
                 by rejection",
                drawn.len()
            )));
        }
        let (mut targets, mut offset, mut ahead, mut unannounced) =
            (Vec::new(), 0, VecDeque::new(), 0);
        r.field("targets", &mut targets)?;
        r.field("offset", &mut offset)?;
        r.field("ahead", &mut ahead)?;
        r.field("unannounced", &mut unannounced)?;
        let mut rng: Vec<ChainRng> = Vec::new();
        r.field("offsets_rng", &mut rng)?;
        let mut held = false;
        r.field("held", &mut held)?;
        *self = Subsampler {
            perm,
            drawn,
            chosen,
            in_perm,
            targets,
            offset,
            ahead,
            unannounced,
            offsets_rng: rng.pop(),
            held,
            with_replacement: self.with_replacement,
            scheme: self.scheme,
            reuse: self.reuse,
        };
        Ok(())
    }
}

/// Sets bit i of the bitmap; false if it was set already or lies outside it.
#[inline]
fn set_once(bits: &mut [u64], i: DataIndex) -> bool {
    let bit = 1u64 << (i % 64);
    match bits.get_mut((i / 64) as usize) {
        Some(word) if *word & bit == 0 => {
            *word |= bit;
            true
        }
        _ => false,
    }
}

/// Whether bit i of the bitmap is set.
#[inline]
fn is_set(bits: &[u64], i: DataIndex) -> bool {
    bits.get((i / 64) as usize)
        .is_some_and(|w| w & (1u64 << (i % 64)) != 0)
}

/// Prefetch hint for `v[i]` (a no-op off x86-64).
#[inline(always)]
fn prefetch(v: &[DataIndex], i: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint and never faults.
    unsafe {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(v.as_ptr().wrapping_add(i).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (v, i);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With replacement: n independent uniform indices (repeats occur; each cell of the
    /// per-position counts is binomial(reps, 1/N), 5 sds), drawn into its own buffer.
    #[test]
    fn with_replacement_draws_independent_uniform_indices() {
        let (n_data, n, reps) = (8usize, 6usize, 100_000usize);
        let mut s = Subsampler::new(n_data);
        s.set_with_replacement(true);
        assert!(s.with_replacement());
        let mut rng = crate::rng::stream(4, 0);
        let mut counts = vec![0usize; n * n_data];
        let mut with_repeats = 0usize;
        for _ in 0..reps {
            let b = s.batch(n, &mut rng).to_vec();
            assert_eq!(b.len(), n);
            for (k, &i) in b.iter().enumerate() {
                counts[k * n_data + i as usize] += 1;
            }
            let mut sorted = b.clone();
            sorted.sort_unstable();
            sorted.dedup();
            with_repeats += usize::from(sorted.len() < n);
        }
        let p = 1.0 / n_data as f64;
        let sd = (reps as f64 * p * (1.0 - p)).sqrt();
        for &c in &counts {
            assert!((c as f64 - reps as f64 * p).abs() < 5.0 * sd, "count {c}");
        }
        // P(no repeat) = 8!/(2!·8⁶) ≈ 0.077.
        assert!(with_repeats > reps * 9 / 10, "{with_repeats}");
        // n = N is every index, in buffer order, with no draw.
        let before = rng.clone();
        let all = s.all().to_vec();
        assert_eq!(s.batch(n_data, &mut rng), all.as_slice());
        assert_eq!(rng, before);
    }

    /// While reuse is on the first call draws and later calls return the same batch without
    /// touching the stream; each switch starts a fresh window.
    #[test]
    fn reuse_holds_one_batch_per_window() {
        for replace in [false, true] {
            let mut s = Subsampler::new(1_000);
            s.set_with_replacement(replace);
            let mut rng = crate::rng::stream(5, 0);
            let a = s.batch(10, &mut rng).to_vec();
            let b = s.batch(10, &mut rng).to_vec();
            assert_ne!(a, b, "fresh batches by default");
            s.reuse_batch(true);
            let first = s.batch(10, &mut rng).to_vec();
            assert_ne!(first, b, "a window starts with a fresh draw");
            let before = rng.clone();
            for _ in 0..5 {
                assert_eq!(s.batch(10, &mut rng), first.as_slice());
            }
            assert_eq!(rng, before, "a held batch draws nothing");
            s.reuse_batch(true);
            let second = s.batch(10, &mut rng).to_vec();
            assert_ne!(second, first, "switching on again starts a new window");
            assert_eq!(s.batch(10, &mut rng), second.as_slice());
            s.reuse_batch(false);
            let c = s.batch(10, &mut rng).to_vec();
            let d = s.batch(10, &mut rng).to_vec();
            assert!(c != second && c != d, "off again: fresh every call");
        }
    }

    /// Blocks: n consecutive indices from a uniform offset, wrapping around (so every index is
    /// in a block with probability n/N: binomial counts, 5 sds); a growing batch continues the
    /// block; reuse holds it; n = N is every index.
    #[test]
    fn blocks_are_contiguous_and_cover_every_index_alike() {
        let (n_data, n, reps) = (10usize, 4usize, 100_000usize);
        let mut s = Subsampler::new(n_data);
        s.set_scheme(MinibatchScheme::Block);
        assert_eq!(s.scheme(), MinibatchScheme::Block);
        let mut rng = crate::rng::stream(6, 0);
        let mut counts = vec![0usize; n_data];
        let mut wrapped = 0usize;
        for _ in 0..reps {
            let b = s.batch(n, &mut rng).to_vec();
            for w in b.windows(2) {
                assert_eq!(w[1] as usize, (w[0] as usize + 1) % n_data, "{b:?}");
            }
            wrapped += usize::from(b[0] as usize + n > n_data);
            b.iter().for_each(|&i| counts[i as usize] += 1);
        }
        let p = n as f64 / n_data as f64;
        let sd = (reps as f64 * p * (1.0 - p)).sqrt();
        for &c in &counts {
            assert!((c as f64 - reps as f64 * p).abs() < 5.0 * sd, "{counts:?}");
        }
        assert!(wrapped > 0, "no block wrapped around");
        let first = s.batch_more(0, 3, &mut rng).to_vec();
        let more = s.batch_more(3, 5, &mut rng).to_vec();
        assert_eq!(more[0] as usize, (first[2] as usize + 1) % n_data);
        s.reuse_batch(true);
        let held = s.batch(n, &mut rng).to_vec();
        let before = rng.clone();
        assert_eq!(s.batch(n, &mut rng), held.as_slice());
        assert_eq!(rng, before);
        s.reuse_batch(false);
        let all: Vec<DataIndex> = s.all().to_vec();
        assert_eq!(s.batch(n_data, &mut rng), all.as_slice());
    }

    /// The blocks announced ahead are exactly the blocks later drawn, in order, each announced
    /// once: BLOCKS_AHEAD after the first draw, then one per draw (the newest). Uniform
    /// batches announce nothing, and the chain's stream gives one draw to the offsets' stream.
    #[test]
    fn announced_blocks_are_the_blocks_drawn_later() {
        let (n_data, n, draws) = (1000usize, 10usize, 50usize);
        let mut s = Subsampler::new(n_data);
        s.set_scheme(MinibatchScheme::Block);
        let mut rng = crate::rng::stream(8, 0);
        let (mut announced, mut firsts) = (Vec::new(), Vec::new());
        for t in 0..draws {
            firsts.push(s.batch(n, &mut rng)[0] as usize);
            let before = announced.len();
            s.announce_blocks_ahead(|first| announced.push(first));
            let expected = if t == 0 { BLOCKS_AHEAD } else { 1 };
            assert_eq!(announced.len() - before, expected, "draw {t}");
            s.announce_blocks_ahead(|_| panic!("announced twice"));
        }
        assert_eq!(announced.len(), draws - 1 + BLOCKS_AHEAD);
        assert_eq!(
            announced[..draws - 1],
            firsts[1..],
            "{announced:?} {firsts:?}"
        );
        let mut one_draw = crate::rng::stream(8, 0);
        let _: u64 = one_draw.random();
        assert_eq!(rng, one_draw, "the chain's stream gave more than one draw");

        let mut u = Subsampler::new(n_data);
        u.batch(n, &mut rng);
        u.announce_blocks_ahead(|_| panic!("a uniform batch announced a block"));
    }

    /// Each index appears in a draw with probability n/N; each pair with n(n−1)/(N(N−1)).
    /// Counts are binomial, so 5 standard deviations bound every cell.
    #[test]
    fn inclusion_probabilities_are_uniform() {
        let (n_data, n, reps) = (10usize, 3usize, 200_000usize);
        let mut s = Subsampler::new(n_data);
        let mut rng = crate::rng::stream(3, 0);
        let mut single = vec![0usize; n_data];
        let mut pair = vec![0usize; n_data * n_data];
        for _ in 0..reps {
            let b = s.draw(n, &mut rng).to_vec();
            let mut sorted = b.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), n, "draw has repeated indices: {b:?}");
            for &i in &b {
                single[i as usize] += 1;
                for &j in &b {
                    if i != j {
                        pair[i as usize * n_data + j as usize] += 1;
                    }
                }
            }
        }
        let p1 = n as f64 / n_data as f64;
        let p2 = p1 * (n - 1) as f64 / (n_data - 1) as f64;
        for &c in &single {
            let sd = (reps as f64 * p1 * (1.0 - p1)).sqrt();
            assert!(
                (c as f64 - reps as f64 * p1).abs() < 5.0 * sd,
                "single count {c}"
            );
        }
        for i in 0..n_data {
            for j in 0..n_data {
                if i != j {
                    let c = pair[i * n_data + j] as f64;
                    let sd = (reps as f64 * p2 * (1.0 - p2)).sqrt();
                    assert!(
                        (c - reps as f64 * p2).abs() < 5.0 * sd,
                        "pair ({i},{j}) count {c}"
                    );
                }
            }
        }
    }

    /// Counts of each index over `reps` draws from `draw`, each within 5 binomial standard
    /// deviations of reps·p; every draw is checked for repeats.
    fn assert_each_index_drawn_with(
        p: f64,
        n_data: usize,
        reps: usize,
        mut draw: impl FnMut() -> Vec<DataIndex>,
    ) {
        let mut count = vec![0usize; n_data];
        for _ in 0..reps {
            let b = draw();
            let mut sorted = b.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), b.len(), "draw has repeated indices: {b:?}");
            for &i in &b {
                count[i as usize] += 1;
            }
        }
        let sd = (reps as f64 * p * (1.0 - p)).sqrt();
        for (i, &c) in count.iter().enumerate() {
            assert!(
                (c as f64 - reps as f64 * p).abs() < 5.0 * sd,
                "index {i}: {c} of {reps} draws, expected {}",
                reps as f64 * p
            );
        }
    }

    /// A batch of more than N/2 (the Fisher–Yates path) and a growing batch that crosses N/2
    /// (rejection, then the move into the permutation buffer): no repeats, and each increment
    /// holds every index with the same probability.
    #[test]
    fn large_and_growing_batches_are_uniform_without_repeats() {
        let (n_data, reps) = (10usize, 100_000usize);
        let mut s = Subsampler::new(n_data);
        let mut rng = crate::rng::stream(5, 0);
        assert_each_index_drawn_with(0.7, n_data, reps, || s.draw(7, &mut rng).to_vec());
        // 3 by rejection, then 4 more (crossing N/2 = 5), then the last 3.
        let mut third = vec![0usize; n_data];
        assert_each_index_drawn_with(0.4, n_data, reps, || {
            let mut batch = s.batch_more(0, 3, &mut rng).to_vec();
            let more = s.batch_more(3, 4, &mut rng).to_vec();
            batch.extend(&more);
            let last = s.batch_more(7, 3, &mut rng);
            batch.extend(last);
            for &i in last {
                third[i as usize] += 1;
            }
            let mut all = batch.clone();
            all.sort_unstable();
            assert_eq!(
                all,
                (0..n_data as DataIndex).collect::<Vec<_>>(),
                "{batch:?}"
            );
            more
        });
        let sd = (reps as f64 * 0.3 * 0.7).sqrt();
        for &c in &third {
            assert!((c as f64 - reps as f64 * 0.3).abs() < 5.0 * sd, "{third:?}");
        }
        // After a batch that moved into the buffer, a small batch is drawn by rejection again.
        assert_each_index_drawn_with(0.2, n_data, reps, || s.draw(2, &mut rng).to_vec());
    }

    /// A subsampler restored from a checkpoint goes on with the same indices as the original:
    /// in the middle of a batch drawn by rejection, after a growing batch moved into the
    /// (shuffled) index buffer, and with a batch held for reuse.
    #[test]
    fn a_restored_subsampler_draws_the_same_indices() {
        let n_data = 1000;
        let restored = |s: &Subsampler| {
            let mut r = Subsampler::new(n_data);
            r.reuse_batch(s.reuse);
            crate::checkpoint::from_bytes(&mut r, &crate::checkpoint::to_bytes(s).unwrap())
                .unwrap();
            r
        };
        let mut s = Subsampler::new(n_data);
        let mut rng = crate::rng::stream(6, 0);
        s.draw(700, &mut rng); // more than N/2: the buffer is shuffled
        s.batch_more(0, 100, &mut rng); // by rejection
        for steps in [&[(100, 300), (400, 200)][..], &[(600, 100), (0, 50)][..]] {
            let (mut r, mut rng2) = (restored(&s), rng.clone());
            for &(start, n) in steps {
                assert_eq!(
                    s.batch_more(start, n, &mut rng).to_vec(),
                    r.batch_more(start, n, &mut rng2).to_vec(),
                    "start {start}, n {n}"
                );
            }
        }
        s.reuse_batch(true);
        let held = s.batch(30, &mut rng).to_vec();
        let (mut r, mut rng2) = (restored(&s), rng.clone());
        assert_eq!(r.batch(30, &mut rng2), &held[..], "the held batch");
        assert_eq!(rng2, rng, "a held batch draws nothing");
    }

    /// A checkpoint whose batch repeats an index, or whose buffer is not a permutation, is
    /// refused with an error.
    #[test]
    fn a_corrupt_checkpoint_is_refused() {
        let mut s = Subsampler::new(10);
        s.draw(3, &mut crate::rng::stream(7, 0));
        let mut bad = s.clone();
        bad.drawn[1] = bad.drawn[0];
        let mut r = Subsampler::new(10);
        let e = crate::checkpoint::from_bytes(&mut r, &crate::checkpoint::to_bytes(&bad).unwrap());
        assert!(format!("{e:?}").contains("distinct"), "{e:?}");
        let mut bad = s.clone();
        bad.perm[1] = bad.perm[0];
        let e = crate::checkpoint::from_bytes(&mut r, &crate::checkpoint::to_bytes(&bad).unwrap());
        assert!(format!("{e:?}").contains("permutation"), "{e:?}");
        assert_eq!(
            r.drawn.len(),
            0,
            "a refused checkpoint leaves the state as it was"
        );
    }
}
