//! The average squared coordinate-wise z-score (reference §7.8):
//!
//! ```text
//! metric = (1/D)·Σⱼ ((μⱼ − μ̂ⱼ)/σⱼ)²
//! ```
//!
//! against reference moments μ, σ, where μ̂ is the mean of the second half of all draws so far,
//! pooled over chains, warm-up included: after t draws the window is the last ⌊t/2⌋ of them.
//! K draws arrive per iteration, so the window's left edge advances by K/2 per iteration and the
//! draws are retained. The window sum is kept with Neumaier-compensated additions and
//! subtractions, so the streaming mean agrees with a direct mean to rounding.

/// The streaming metric with its retained draws.
#[derive(Debug, Clone)]
pub struct ZScoreTracker {
    mean: Vec<f64>,
    inv_sd: Vec<f64>,
    draws: Vec<f64>,
    /// Index (in draws) of the window's first draw.
    left: usize,
    sum: Vec<f64>,
    compensation: Vec<f64>,
}

// The reference moments are the run's settings; the window and its sums carry over.
crate::persist_fields!(ZScoreTracker {
    draws,
    left,
    sum,
    compensation
});

impl ZScoreTracker {
    /// A tracker against reference means and standard deviations (D each, sds > 0).
    pub fn new(mean: Vec<f64>, sd: &[f64]) -> Result<Self, super::CoresetError> {
        if mean.len() != sd.len() || mean.is_empty() {
            return Err(super::CoresetError::Setting(format!(
                "reference has {} means and {} sds",
                mean.len(),
                sd.len()
            )));
        }
        if let Some(j) = sd.iter().position(|s| !(*s > 0.0 && s.is_finite())) {
            return Err(super::CoresetError::Setting(format!(
                "reference sd[{j}] = {} is not positive and finite",
                sd[j]
            )));
        }
        let d = mean.len();
        Ok(Self {
            inv_sd: sd.iter().map(|s| 1.0 / s).collect(),
            mean,
            draws: Vec::new(),
            left: 0,
            sum: vec![0.0; d],
            compensation: vec![0.0; d],
        })
    }

    /// Dimension D.
    pub fn dim(&self) -> usize {
        self.mean.len()
    }

    /// Number of draws pushed so far.
    pub fn len(&self) -> usize {
        self.draws.len() / self.dim()
    }

    /// `true` before the first draw.
    pub fn is_empty(&self) -> bool {
        self.draws.is_empty()
    }

    /// Append one draw (D values); call [`ZScoreTracker::metric`] after an iteration's K draws.
    pub fn push(&mut self, theta: &[f64]) {
        debug_assert_eq!(theta.len(), self.dim());
        self.draws.extend_from_slice(theta);
        add_compensated(&mut self.sum, &mut self.compensation, theta, 1.0);
        let d = self.dim();
        let target_left = self.len() - self.len() / 2;
        while self.left < target_left {
            let (old, _) = self.draws[self.left * d..].split_at(d);
            add_compensated(&mut self.sum, &mut self.compensation, old, -1.0);
            self.left += 1;
        }
    }

    /// μ̂ written into `out` (the mean of the last ⌊t/2⌋ draws; NaN before two draws).
    pub fn window_mean(&self, out: &mut [f64]) {
        let count = (self.len() - self.left) as f64;
        for ((o, s), c) in out.iter_mut().zip(&self.sum).zip(&self.compensation) {
            *o = (s + c) / count;
        }
    }

    /// The metric at the current window (NaN before two draws).
    pub fn metric(&self) -> f64 {
        let d = self.dim();
        (0..d).map(|j| self.z_score(j).powi(2)).sum::<f64>() / d as f64
    }

    /// Each coordinate's z-score at the current window, zⱼ = (μ̂ⱼ − μⱼ)/σⱼ: the metric is their
    /// mean square, and they say which coordinates carry it (NaN before two draws).
    pub fn z_scores(&self) -> Vec<f64> {
        (0..self.dim()).map(|j| self.z_score(j)).collect()
    }

    fn z_score(&self, j: usize) -> f64 {
        let count = (self.len() - self.left) as f64;
        let mu_hat = (self.sum[j] + self.compensation[j]) / count;
        (mu_hat - self.mean[j]) * self.inv_sd[j]
    }
}

/// sum += sign·x with Neumaier's compensation.
fn add_compensated(sum: &mut [f64], compensation: &mut [f64], x: &[f64], sign: f64) {
    for ((s, c), &v) in sum.iter_mut().zip(compensation.iter_mut()).zip(x) {
        let v = sign * v;
        let t = *s + v;
        if s.abs() >= v.abs() {
            *c += (*s - t) + v;
        } else {
            *c += (v - t) + *s;
        }
        *s = t;
    }
}
