//! Hit-and-run slice sampling with the doubling procedure (reference §7.7(a)): the kernel of
//! coreset MCMC for the models without an exact kernel.
//!
//! One pass is a hit-and-run step (Bélisle, Romeijn & Smith 1993): a direction u uniform on the
//! unit sphere, then a one-dimensional slice-sampling update (Neal 2003, §4) of the scalar t in
//! θ(t) = θ + t·u, which leaves the conditional density f(θ + t·u) along the line invariant,
//! and hence f itself. The one-dimensional update uses Neal's doubling procedure (Fig. 4), the
//! shrinkage procedure (Fig. 5) and the acceptance test for doubling (Fig. 6).
//!
//! Evaluations of f are cached on the doubling grid: the interval ends that the doubling and the
//! acceptance test visit are all of the form t = L₀ + k·w for integers k (L₀ = −w·U₁ the initial
//! left end), so their log f are kept by k for the whole pass and never computed twice, and the
//! acceptance test evaluates an end only when its decision needs it (Neal 2003, §4.2 notes both
//! savings). The draws are the same as without the cache: f is deterministic.

use rand::RngExt;
use rand_distr::{Exp1, StandardNormal};

use crate::rng::ChainRng;

/// Settings of [`SliceSampler`] (reference §7.7(a), defaults from the reference code).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SliceSettings {
    /// Initial width w of the interval along the line (default 10).
    pub width: f64,
    /// At most p doublings of the interval (default 20).
    pub max_doublings: usize,
    /// Hit-and-run passes per [`SliceSampler::step`] (default 3).
    pub passes: usize,
    /// At most this many shrinkage proposals per pass, after which the step fails (default 1024).
    pub max_shrinks: usize,
}

impl Default for SliceSettings {
    fn default() -> Self {
        Self {
            width: 10.0,
            max_doublings: 20,
            passes: 3,
            max_shrinks: 1024,
        }
    }
}

impl SliceSettings {
    /// Largest accepted p: the interval then spans 2^p·w, and the grid index k stays exact in
    /// an f64.
    pub const MAX_DOUBLINGS_LIMIT: usize = 52;

    /// Checks every setting, naming the first bad one.
    pub fn validate(&self) -> Result<(), SliceError> {
        if !(self.width > 0.0 && self.width.is_finite()) {
            return Err(SliceError::InvalidWidth(self.width));
        }
        if self.max_doublings > Self::MAX_DOUBLINGS_LIMIT {
            return Err(SliceError::TooManyDoublings {
                max_doublings: self.max_doublings,
                limit: Self::MAX_DOUBLINGS_LIMIT,
            });
        }
        if self.passes == 0 {
            return Err(SliceError::ZeroSetting("passes"));
        }
        if self.max_shrinks == 0 {
            return Err(SliceError::ZeroSetting("max_shrinks"));
        }
        Ok(())
    }
}

/// Errors of the slice sampler: bad settings, a bad starting point or a bad log density.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SliceError {
    /// The initial width is not positive and finite.
    #[error("slice sampler: width must be positive and finite, got {0}")]
    InvalidWidth(f64),
    /// A count that must be at least 1.
    #[error("slice sampler: {0} must be at least 1")]
    ZeroSetting(&'static str),
    /// p so large that the interval 2^p·w leaves the exact grid.
    #[error("slice sampler: max_doublings = {max_doublings} exceeds the limit {limit}")]
    TooManyDoublings {
        /// The requested p.
        max_doublings: usize,
        /// [`SliceSettings::MAX_DOUBLINGS_LIMIT`].
        limit: usize,
    },
    /// A state with no coordinates.
    #[error("slice sampler: the state θ is empty")]
    EmptyState,
    /// The cached log f(θ) passed to `step` is NaN or ±∞ (−∞: θ is outside the support).
    #[error("slice sampler: log f at the current state must be finite, got {0}")]
    NonFiniteStart(f64),
    /// The log density returned NaN or +∞ (−∞ is allowed: outside the support).
    #[error("slice sampler: log density returned {value} at t = {t} along the line")]
    InvalidDensity {
        /// The value returned.
        value: f64,
        /// The position t on the line θ + t·u.
        t: f64,
    },
    /// No shrinkage proposal was accepted within `max_shrinks` proposals.
    #[error(
        "slice sampler: shrinkage exhausted after {max_shrinks} proposals (interval [{left}, {right}] around t = 0)"
    )]
    ShrinkageExhausted {
        /// The limit that was reached.
        max_shrinks: usize,
        /// Left end of the shrunk interval.
        left: f64,
        /// Right end of the shrunk interval.
        right: f64,
    },
}

/// Work counters, accumulated over passes until [`SliceSampler::reset_counters`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SliceCounters {
    /// Completed passes.
    pub passes: u64,
    /// Calls of the log density.
    pub evaluations: u64,
    /// Doublings, summed over passes.
    pub doublings: u64,
    /// Largest number of doublings in one pass.
    pub max_doublings: usize,
    /// Shrinkage proposals (t₁ draws, the accepted one included), summed over passes.
    pub shrinks: u64,
    /// Largest number of shrinkage proposals in one pass.
    pub max_shrinks: usize,
    /// Proposals inside the slice that Neal's acceptance test rejected (never for a target
    /// whose restriction to every line is unimodal).
    pub rejections: u64,
}

impl SliceCounters {
    /// Mean evaluations of f per completed pass (NaN before the first pass).
    pub fn evaluations_per_pass(&self) -> f64 {
        self.evaluations as f64 / self.passes as f64
    }

    /// Mean doublings per completed pass.
    pub fn doublings_per_pass(&self) -> f64 {
        self.doublings as f64 / self.passes as f64
    }

    /// Mean shrinkage proposals per completed pass.
    pub fn shrinks_per_pass(&self) -> f64 {
        self.shrinks as f64 / self.passes as f64
    }
}

crate::persist_fields!(SliceCounters {
    passes,
    evaluations,
    doublings,
    max_doublings,
    shrinks,
    max_shrinks,
    rejections,
});

/// Hit-and-run slice sampler with doubling (reference §7.7(a)). Owns its scratch (the point
/// θ(t), the direction u and the grid cache), sized at the first step (or by
/// [`SliceSampler::with_dim`]), so steps do not allocate.
#[derive(Debug, Clone)]
pub struct SliceSampler {
    settings: SliceSettings,
    direction: Vec<f64>,
    point: Vec<f64>,
    /// log f at grid points t = L₀ + k·w of the current pass, as (k, log f).
    cache: Vec<(i64, f64)>,
    counters: SliceCounters,
}

// The direction, point and grid cache are scratch of one pass; the counters carry over.
crate::persist_fields!(SliceSampler { counters });

/// One pass's line: θ(t) = θ + t·u, and the grid t = L₀ + k·w.
struct Line<'a> {
    theta: &'a [f64],
    direction: &'a [f64],
    point: &'a mut [f64],
    cache: &'a mut Vec<(i64, f64)>,
    origin: f64,
    width: f64,
    evaluations: u64,
    rejections: u64,
}

impl Line<'_> {
    /// log f(θ + t·u).
    fn eval(
        &mut self,
        t: f64,
        log_density: &mut dyn FnMut(&[f64]) -> f64,
    ) -> Result<f64, SliceError> {
        for ((p, &x), &u) in self.point.iter_mut().zip(self.theta).zip(self.direction) {
            *p = x + t * u;
        }
        self.evaluations += 1;
        let value = log_density(self.point);
        if value.is_nan() || value == f64::INFINITY {
            return Err(SliceError::InvalidDensity { value, t });
        }
        Ok(value)
    }

    /// The grid point t = L₀ + k·w (always computed by this expression, so a cached k is the
    /// same float).
    fn grid(&self, k: i64) -> f64 {
        self.origin + k as f64 * self.width
    }

    /// log f at the grid point k, from the cache or evaluated and cached (while the cache,
    /// reserved in `SliceSampler`, has room; a full cache only costs re-evaluations).
    fn at_grid(
        &mut self,
        k: i64,
        log_density: &mut dyn FnMut(&[f64]) -> f64,
    ) -> Result<f64, SliceError> {
        if let Some(&(_, f)) = self.cache.iter().find(|&&(j, _)| j == k) {
            return Ok(f);
        }
        let f = self.eval(self.grid(k), log_density)?;
        if self.cache.len() < self.cache.capacity() {
            self.cache.push((k, f));
        }
        Ok(f)
    }

    /// Neal (2003), Fig. 6: may t₁ (inside the slice) be accepted, given that the doubling from
    /// t = 0 produced the grid interval [k_left, k_right]? Halving the interval towards t₁, reject
    /// once a half that holds t₁ but not 0 (D) has both ends outside the slice, because the
    /// doubling from t₁ would have stopped there. Ends are evaluated only when D holds.
    fn accept(
        &mut self,
        t1: f64,
        z: f64,
        (mut k_left, mut k_right): (i64, i64),
        log_density: &mut dyn FnMut(&[f64]) -> f64,
    ) -> Result<bool, SliceError> {
        let mut differs = false;
        // R̂ − L̂ > 1.1·w on the grid: the integer width (a power of two) is at least 2.
        while k_right - k_left > 1 {
            let k_mid = k_left + (k_right - k_left) / 2;
            let mid = self.grid(k_mid);
            if (mid > 0.0 && t1 >= mid) || (mid <= 0.0 && t1 < mid) {
                differs = true;
            }
            if t1 < mid {
                k_right = k_mid;
            } else {
                k_left = k_mid;
            }
            if differs
                && z >= self.at_grid(k_left, log_density)?
                && z >= self.at_grid(k_right, log_density)?
            {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

impl SliceSampler {
    /// A sampler with the given settings, validated.
    pub fn new(settings: SliceSettings) -> Result<Self, SliceError> {
        settings.validate()?;
        Ok(Self {
            settings,
            direction: Vec::new(),
            point: Vec::new(),
            cache: Vec::with_capacity(Self::cache_size(&settings)),
            counters: SliceCounters::default(),
        })
    }

    /// Room of the grid cache: the doubling visits at most p + 2 grid points; the rest is for
    /// the acceptance test's midpoints, which repeat across a pass's shrinkage proposals.
    fn cache_size(settings: &SliceSettings) -> usize {
        4 * (settings.max_doublings + 2)
    }

    /// A sampler whose scratch is sized for states of dimension `dim` up front.
    pub fn with_dim(settings: SliceSettings, dim: usize) -> Result<Self, SliceError> {
        let mut sampler = Self::new(settings)?;
        sampler.resize(dim);
        Ok(sampler)
    }

    /// The settings.
    pub fn settings(&self) -> &SliceSettings {
        &self.settings
    }

    /// The work counters since construction or the last [`Self::reset_counters`].
    pub fn counters(&self) -> &SliceCounters {
        &self.counters
    }

    /// Zeroes the work counters.
    pub fn reset_counters(&mut self) {
        self.counters = SliceCounters::default();
    }

    fn resize(&mut self, dim: usize) {
        self.direction.resize(dim, 0.0);
        self.point.resize(dim, 0.0);
        // A cloned Vec keeps only its length's capacity: restore the cache's room.
        let size = Self::cache_size(&self.settings);
        self.cache
            .reserve_exact(size.saturating_sub(self.cache.len()));
    }

    /// `passes` hit-and-run slice-sampling passes from θ, whose log density `log_f0` the
    /// caller has cached; θ is updated in place and log f at the new θ is returned (for the
    /// caller to cache). Each pass draws a level z = log f(θ) − E, E ~ Exp(1), and a direction
    /// u = ξ/‖ξ‖, ξ ~ N(0, I), then updates t in θ + t·u by doubling, shrinkage and Neal's
    /// acceptance test (reference §7.7(a)). `log_density` may return −∞ outside the support.
    ///
    /// On error θ holds the state reached by the completed passes (the failing pass leaves it
    /// untouched).
    pub fn step(
        &mut self,
        theta: &mut [f64],
        log_f0: f64,
        log_density: &mut dyn FnMut(&[f64]) -> f64,
        rng: &mut ChainRng,
    ) -> Result<f64, SliceError> {
        if theta.is_empty() {
            return Err(SliceError::EmptyState);
        }
        if !log_f0.is_finite() {
            return Err(SliceError::NonFiniteStart(log_f0));
        }
        if self.direction.len() != theta.len()
            || self.cache.capacity() < Self::cache_size(&self.settings)
        {
            self.resize(theta.len());
        }
        let mut log_f = log_f0;
        for _ in 0..self.settings.passes {
            log_f = self.pass(theta, log_f, log_density, rng)?;
        }
        Ok(log_f)
    }

    /// One pass (reference §7.7(a)).
    fn pass(
        &mut self,
        theta: &mut [f64],
        f0: f64,
        log_density: &mut dyn FnMut(&[f64]) -> f64,
        rng: &mut ChainRng,
    ) -> Result<f64, SliceError> {
        let SliceSettings {
            width,
            max_doublings,
            max_shrinks,
            ..
        } = self.settings;
        let z = f0 - rng.sample::<f64, _>(Exp1);
        random_direction(&mut self.direction, rng);

        self.cache.clear();
        let mut line = Line {
            theta,
            direction: &self.direction,
            point: &mut self.point,
            cache: &mut self.cache,
            origin: -width * rng.random::<f64>(),
            width,
            evaluations: 0,
            rejections: 0,
        };
        let outcome = (|| {
            // Doubling (Neal 2003, Fig. 4) on the grid: L = L₀ + k_left·w, R = L₀ + k_right·w.
            let (mut k_left, mut k_right) = (0_i64, 1_i64);
            let mut doublings = 0;
            while doublings < max_doublings
                && (z < line.at_grid(k_left, log_density)?
                    || z < line.at_grid(k_right, log_density)?)
            {
                let span = k_right - k_left;
                if rng.random::<f64>() <= 0.5 {
                    k_left -= span;
                } else {
                    k_right += span;
                }
                doublings += 1;
            }

            // Shrinkage (Fig. 5) with the acceptance test (Fig. 6) on [L, R].
            let (mut left, mut right) = (line.grid(k_left), line.grid(k_right));
            for shrinks in 1..=max_shrinks {
                let t1 = left + rng.random::<f64>() * (right - left);
                let f1 = line.eval(t1, log_density)?;
                if z < f1 {
                    if line.accept(t1, z, (k_left, k_right), log_density)? {
                        return Ok((t1, f1, doublings, shrinks));
                    }
                    line.rejections += 1;
                }
                if t1 < 0.0 {
                    left = t1;
                } else {
                    right = t1;
                }
            }
            Err(SliceError::ShrinkageExhausted {
                max_shrinks,
                left,
                right,
            })
        })();
        let (evaluations, rejections) = (line.evaluations, line.rejections);

        let counters = &mut self.counters;
        counters.evaluations += evaluations;
        counters.rejections += rejections;
        let (t1, f1, doublings, shrinks) = outcome?;
        counters.passes += 1;
        counters.doublings += doublings as u64;
        counters.max_doublings = counters.max_doublings.max(doublings);
        counters.shrinks += shrinks as u64;
        counters.max_shrinks = counters.max_shrinks.max(shrinks);
        // The same expression as `Line::eval`, so θ is exactly the point where f1 was computed.
        for (x, &u) in theta.iter_mut().zip(&self.direction) {
            *x += t1 * u;
        }
        Ok(f1)
    }
}

/// u = ξ/‖ξ‖ with ξ ~ N(0, I): uniform on the unit sphere (redrawn in the probability-zero
/// event ξ = 0).
fn random_direction(u: &mut [f64], rng: &mut ChainRng) {
    loop {
        let mut norm2 = 0.0;
        for v in u.iter_mut() {
            *v = rng.sample(StandardNormal);
            norm2 += *v * *v;
        }
        if norm2 > 0.0 {
            let scale = norm2.sqrt().recip();
            u.iter_mut().for_each(|v| *v *= scale);
            return;
        }
    }
}
