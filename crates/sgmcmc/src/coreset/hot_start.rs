//! The hot-start test (Chen, Huggins & Campbell 2024, Algorithm 3; reference §7.5): the weights
//! start to move only once the chains' log-likelihood traces look stationary.
//!
//! For each chain's trace y of length L, two end-aligned blocks of s = ⌈L/3⌉ values, A (the
//! second-to-last block) and B (the last), give
//!
//! ```text
//! u = |mean(A) − mean(B)| / max(s_A, s_B)
//! ```
//!
//! with s_X the residual standard error √(RSS/(s − 2)) of the least-squares line through block
//! X (its detrended spread). The test passes iff the median of u over the chains is < c = 0.5.

/// u for one trace (`None` when the blocks have fewer than 3 values: s − 2 must be positive).
/// When both residual errors are 0, u is 0 for equal means and +∞ otherwise.
pub fn hot_start_statistic(trace: &[f64]) -> Option<f64> {
    let len = trace.len();
    let s = len.div_ceil(3);
    if s < 3 || 2 * s > len {
        return None;
    }
    let a = &trace[len - 2 * s..len - s];
    let b = &trace[len - s..];
    let (mean_a, se_a) = mean_and_residual_se(a);
    let (mean_b, se_b) = mean_and_residual_se(b);
    let gap = (mean_a - mean_b).abs();
    let scale = se_a.max(se_b);
    Some(if scale > 0.0 {
        gap / scale
    } else if gap == 0.0 {
        0.0
    } else {
        f64::INFINITY
    })
}

/// The median over chains of [`hot_start_statistic`] (the test's statistic median(u₁, …, u_K));
/// `None` while any trace is too short, or without traces.
pub fn hot_start_median(traces: &[&[f64]]) -> Option<f64> {
    let mut u: Vec<f64> = Vec::with_capacity(traces.len());
    for trace in traces {
        u.push(hot_start_statistic(trace)?);
    }
    if u.is_empty() {
        return None;
    }
    u.sort_by(f64::total_cmp);
    let k = u.len();
    Some(if k % 2 == 1 {
        u[k / 2]
    } else {
        0.5 * (u[k / 2 - 1] + u[k / 2])
    })
}

/// Whether [`hot_start_median`] is below `threshold` (the paper's c = 0.5). False while any
/// trace is too short.
pub fn hot_start_passes(traces: &[&[f64]], threshold: f64) -> bool {
    hot_start_median(traces).is_some_and(|median| median < threshold)
}

/// The block's mean and the residual standard error of y on (1, j), j = 1..s, by centred
/// two-pass sums (log-likelihoods near −10⁵ cancel badly in one-pass sums).
fn mean_and_residual_se(y: &[f64]) -> (f64, f64) {
    let n = y.len() as f64;
    let mean_y = y.iter().sum::<f64>() / n;
    let mean_j = (n + 1.0) / 2.0;
    let (mut sjj, mut sjy) = (0.0, 0.0);
    for (i, &v) in y.iter().enumerate() {
        let dj = (i + 1) as f64 - mean_j;
        sjj += dj * dj;
        sjy += dj * (v - mean_y);
    }
    let slope = sjy / sjj;
    let rss: f64 = y
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let fitted = mean_y + slope * ((i + 1) as f64 - mean_j);
            (v - fitted).powi(2)
        })
        .sum();
    (mean_y, (rss / (n - 2.0)).sqrt())
}
