//! Rank-normalised split R-hat (Vehtari et al. 2021, §2.1 and §3), plus the
//! shared helpers: input validation, chain splitting, rank normalisation and the inverse
//! standard normal CDF.

/// `np.finfo(float).resolution`, ArviZ's threshold for a "constant" array in `_ess`.
pub(crate) const RESOLUTION: f64 = 1e-15;

/// Checks the common precondition: at least `min_chains` chains, all of the same length
/// `n ≥ 4`, no NaN. Returns `(chains, draws)`.
pub(crate) fn validate(chains: &[&[f64]], min_chains: usize) -> Option<(usize, usize)> {
    let m = chains.len();
    if m == 0 || m < min_chains {
        return None;
    }
    let n = chains[0].len();
    if n < 4 || chains.iter().any(|c| c.len() != n) {
        return None;
    }
    if chains.iter().any(|c| c.iter().any(|v| v.is_nan())) {
        return None;
    }
    Some((m, n))
}

/// Split chain `j` of the `2m` split chains (ArviZ `_split_chains`): first halves of all
/// chains, then second halves; for odd `n` the middle draw is dropped.
pub(crate) fn split_chain<'a>(chains: &[&'a [f64]], j: usize) -> &'a [f64] {
    let m = chains.len();
    let n = chains[0].len();
    let half = n / 2;
    if j < m {
        &chains[j][..half]
    } else {
        &chains[j - m][n - half..]
    }
}

/// Copies the split chains into one contiguous buffer of `2m` rows of `n / 2` draws.
pub(crate) fn split_copy(chains: &[&[f64]]) -> Vec<f64> {
    let half = chains[0].len() / 2;
    let mut out = Vec::with_capacity(2 * chains.len() * half);
    for j in 0..2 * chains.len() {
        out.extend_from_slice(split_chain(chains, j));
    }
    out
}

/// Rank normalisation in place (Vehtari et al. 2021, §3; ArviZ `_z_scale`):
/// `z = Φ⁻¹((r − 3/8) / (S + 1/4))` with average ranks `r` for ties over all `S` values.
///
/// `pairs` is scratch; on return it holds `(value, index)` sorted by value. Returns the
/// median of the original values (numpy definition).
pub(crate) fn z_scale_in_place(values: &mut [f64], pairs: &mut Vec<(f64, usize)>) -> f64 {
    pairs.clear();
    pairs.extend(values.iter().copied().zip(0..));
    pairs.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    let s = pairs.len();
    let median = if s == 0 {
        f64::NAN
    } else if s % 2 == 1 {
        pairs[s / 2].0
    } else {
        (pairs[s / 2 - 1].0 + pairs[s / 2].0) / 2.0
    };
    assign_z(pairs, values);
    median
}

/// Writes the rank-normalised value of each entry of the value-sorted `pairs` to
/// `out[index]`, with average ranks for ties (as `scipy.stats.rankdata(method="average")`).
fn assign_z(pairs: &[(f64, usize)], out: &mut [f64]) {
    let s = pairs.len();
    let denom = s as f64 - 0.75 + 1.0;
    let mut i = 0;
    while i < s {
        let v = pairs[i].0;
        let mut j = i + 1;
        while j < s && pairs[j].0 == v {
            j += 1;
        }
        // 1-based ranks i+1 ..= j, average (i + 1 + j) / 2
        let rank = 0.5 * ((i + j + 1) as f64);
        let z = inv_std_normal_cdf((rank - 0.375) / denom);
        for p in &pairs[i..j] {
            out[p.1] = z;
        }
        i = j;
    }
}

/// Rank-normalised folded values `z(|x − median|)` written to `out`, given the value-sorted
/// `pairs` of `x`. The folded values are sorted in O(S) by merging the two monotone halves
/// (below / at-or-above the median) instead of sorting again. `folded` is scratch.
fn z_scale_folded(
    pairs: &[(f64, usize)],
    median: f64,
    folded: &mut Vec<(f64, usize)>,
    out: &mut [f64],
) {
    let split = pairs.partition_point(|p| p.0 < median);
    let fold = |p: &(f64, usize)| ((p.0 - median).abs(), p.1);
    let mut left = pairs[..split].iter().rev().map(fold).peekable();
    let mut right = pairs[split..].iter().map(fold).peekable();
    folded.clear();
    loop {
        let next = match (left.peek(), right.peek()) {
            (Some(l), Some(r)) => {
                if l.0 <= r.0 {
                    left.next()
                } else {
                    right.next()
                }
            }
            (Some(_), None) => left.next(),
            (None, _) => right.next(),
        };
        match next {
            Some(p) => folded.push(p),
            None => break,
        }
    }
    assign_z(folded, out);
}

/// Classic R-hat of `rows` equal-length chains stored contiguously (Gelman et al. BDA3,
/// §11.4; ArviZ `_rhat`): `sqrt((B/W + n − 1) / n)`.
pub(crate) fn rhat_basic(values: &[f64], rows: usize) -> f64 {
    let n = values.len() / rows;
    let nf = n as f64;
    let mut means = Vec::with_capacity(rows);
    let mut sum_vars = 0.0;
    for row in values.chunks_exact(n) {
        let mean = row.iter().sum::<f64>() / nf;
        sum_vars += row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (nf - 1.0);
        means.push(mean);
    }
    let between = nf * var_ddof1(&means);
    let within = sum_vars / rows as f64;
    ((between / within + nf - 1.0) / nf).sqrt()
}

/// Two-pass sample variance with divisor `len − 1` (`np.var(x, ddof=1)`).
pub(crate) fn var_ddof1(x: &[f64]) -> f64 {
    let k = x.len() as f64;
    let mean = x.iter().sum::<f64>() / k;
    x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (k - 1.0)
}

/// Python's `max(a, b)`: `b` only if `b > a` (so a NaN `b` is ignored, a NaN `a` is kept).
pub(crate) fn py_max(a: f64, b: f64) -> f64 {
    if b > a { b } else { a }
}

/// Bulk and tail rank-normalised split R-hat of the split chains in `split` (`rows` rows).
/// Returns `(rhat_bulk, rhat_tail)` and leaves the bulk z-values in `z_bulk`.
pub(crate) fn rhat_bulk_tail(split: &[f64], rows: usize, z_bulk: &mut Vec<f64>) -> (f64, f64) {
    z_bulk.clear();
    z_bulk.extend_from_slice(split);
    let mut pairs = Vec::new();
    let median = z_scale_in_place(z_bulk, &mut pairs);
    let bulk = rhat_basic(z_bulk, rows);
    // folded draws |x − median| (median of the *split* draws, as az.rhat)
    let mut z_fold = vec![0.0; split.len()];
    z_scale_folded(
        &pairs,
        median,
        &mut Vec::with_capacity(split.len()),
        &mut z_fold,
    );
    let tail = rhat_basic(&z_fold, rows);
    (bulk, tail)
}

/// Rank-normalised split R-hat, `max(R̂_bulk, R̂_tail)` (Vehtari et al. 2021, §3),
/// identical to ArviZ `az.rhat(x, method="rank")`.
///
/// `chains`: one slice per chain, all the same length. Returns NaN if there are fewer than
/// 2 chains or 4 draws per chain, lengths differ, or any draw is NaN; constant chains give
/// NaN (0/0), as in ArviZ.
pub fn rhat(chains: &[&[f64]]) -> f64 {
    let Some((m, _)) = validate(chains, 2) else {
        return f64::NAN;
    };
    let split = split_copy(chains);
    let (bulk, tail) = rhat_bulk_tail(&split, 2 * m, &mut Vec::new());
    py_max(bulk, tail)
}

/// Inverse standard normal CDF Φ⁻¹(p): Wichura's algorithm AS 241 (PPND16, Applied
/// Statistics 37(3), 1988), relative accuracy about 1e-16. `±∞` at 0 and 1, NaN outside.
// Coefficients exactly as published (more digits than f64 holds).
#[allow(clippy::excessive_precision)]
pub(crate) fn inv_std_normal_cdf(p: f64) -> f64 {
    const A: [f64; 8] = [
        3.387_132_872_796_366_608,
        1.331_416_678_917_843_774_5e2,
        1.971_590_950_306_551_442_7e3,
        1.373_169_376_550_946_112_5e4,
        4.592_195_393_154_987_145_7e4,
        6.726_577_092_700_870_085_3e4,
        3.343_057_558_358_812_810_5e4,
        2.509_080_928_730_122_672_7e3,
    ];
    const B: [f64; 8] = [
        1.0,
        4.231_333_070_160_091_125_2e1,
        6.871_870_074_920_579_083e2,
        5.394_196_021_424_751_107_7e3,
        2.121_379_430_158_659_586_7e4,
        3.930_789_580_009_271_061e4,
        2.872_908_573_572_194_267_4e4,
        5.226_495_278_852_854_561e3,
    ];
    const C: [f64; 8] = [
        1.423_437_110_749_683_577_34,
        4.630_337_846_156_545_295_9,
        5.769_497_221_460_691_405_5,
        3.647_848_324_763_204_605_04,
        1.270_458_252_452_368_382_58,
        2.417_807_251_774_506_117_7e-1,
        2.272_384_498_926_918_458_33e-2,
        7.745_450_142_783_414_076_4e-4,
    ];
    const D: [f64; 8] = [
        1.0,
        2.053_191_626_637_758_821_87,
        1.676_384_830_183_803_849_4,
        6.897_673_349_851_000_045_5e-1,
        1.481_039_764_274_800_745_9e-1,
        1.519_866_656_361_645_719_66e-2,
        5.475_938_084_995_344_946e-4,
        1.050_750_071_644_416_843_24e-9,
    ];
    const E: [f64; 8] = [
        6.657_904_643_501_103_777_2,
        5.463_784_911_164_114_369_9,
        1.784_826_539_917_291_335_8,
        2.965_605_718_285_048_912_3e-1,
        2.653_218_952_657_612_309_3e-2,
        1.242_660_947_388_078_438_6e-3,
        2.711_555_568_743_487_578_15e-5,
        2.010_334_399_292_288_132_65e-7,
    ];
    const F: [f64; 8] = [
        1.0,
        5.998_322_065_558_879_376_9e-1,
        1.369_298_809_227_358_053_1e-1,
        1.487_536_129_085_061_485_25e-2,
        7.868_691_311_456_132_591e-4,
        1.846_318_317_510_054_681_8e-5,
        1.421_511_758_316_445_888_7e-7,
        2.044_263_103_389_939_785_64e-15,
    ];
    fn poly(c: &[f64; 8], x: f64) -> f64 {
        c.iter().rev().fold(0.0, |acc, &k| acc * x + k)
    }
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    let q = p - 0.5;
    if q.abs() <= 0.425 {
        let r = 0.180_625 - q * q;
        return q * poly(&A, r) / poly(&B, r);
    }
    let r = if q < 0.0 { p } else { 1.0 - p };
    let r = (-r.ln()).sqrt();
    let x = if r <= 5.0 {
        let r = r - 1.6;
        poly(&C, r) / poly(&D, r)
    } else {
        let r = r - 5.0;
        poly(&E, r) / poly(&F, r)
    };
    if q < 0.0 { -x } else { x }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_normal_matches_scipy_ndtri() {
        // (p, scipy.special.ndtri(p)) from scipy 1.17.1
        let cases: [(f64, f64); 14] = [
            (0.5, 0.0),
            (0.975, 1.959963984540054),
            (0.05, -1.6448536269514729),
            (0.3, -0.5244005127080409),
            (0.075, -1.4395314709384563),
            (0.925, 1.4395314709384563),
            (0.0749, -1.4402382675279635),
            (0.9, 1.2815515655446004),
            (0.001, -3.090232306167813),
            (1e-10, -6.361340902404056),
            (1e-300, -37.0470962993612),
            (0.999999, 4.753424308817087),
            (0.999999999999, 7.0344869100478356),
            (0.6, 0.2533471031357997),
        ];
        for (p, want) in cases {
            let got = inv_std_normal_cdf(p);
            let tol = 1e-15 * f64::max(1.0, want.abs());
            // 1 − p loses digits near 1; scipy's ndtri has the same conditioning
            let tol = if p > 0.99 { 1e-10 * want.abs() } else { tol };
            assert!((got - want).abs() <= tol, "p={p}: {got} vs {want}");
        }
        assert_eq!(inv_std_normal_cdf(0.0), f64::NEG_INFINITY);
        assert_eq!(inv_std_normal_cdf(1.0), f64::INFINITY);
        assert!(inv_std_normal_cdf(1.5).is_nan());
    }

    #[test]
    fn ranks_average_ties() {
        let mut v = [3.0, 1.0, 3.0, 2.0];
        let mut pairs = Vec::new();
        let med = z_scale_in_place(&mut v, &mut pairs);
        assert_eq!(med, 2.5);
        // folding via merge equals rank-normalising the folded values directly
        let x = [3.0, 1.0, 3.0, 2.0, -0.5, 4.0, 2.5, 2.5];
        let mut direct = x.map(|v| (v - 2.5f64).abs());
        z_scale_in_place(&mut direct, &mut Vec::new());
        let mut sorted = Vec::new();
        let mut y = x;
        let med_x = z_scale_in_place(&mut y, &mut sorted);
        assert_eq!(med_x, 2.5);
        let mut merged = [0.0; 8];
        z_scale_folded(&sorted, med_x, &mut Vec::new(), &mut merged);
        assert_eq!(merged, direct);
        // ranks 3.5, 1, 3.5, 2 → Φ⁻¹((r − 3/8)/(4 + 1/4))
        let z = |r: f64| inv_std_normal_cdf((r - 0.375) / 4.25);
        assert_eq!(v, [z(3.5), z(1.0), z(3.5), z(2.0)]);
    }

    #[test]
    fn rhat_degenerate_inputs() {
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert!(rhat(&[]).is_nan());
        assert!(rhat(&[&a]).is_nan(), "one chain");
        assert!(rhat(&[&a[..3], &a[..3]]).is_nan(), "3 draws");
        assert!(rhat(&[&a, &a[..4]]).is_nan(), "ragged");
        assert!(rhat(&[&[2.0; 10], &[2.0; 10]]).is_nan(), "constant");
        // az.rhat([[1,-1,1,-1,1,-1],[-1,1,-1,1,-1,1]]): tail R-hat is NaN, bulk wins
        let x = [1.0, -1.0, 1.0, -1.0, 1.0, -1.0];
        let y = [-1.0, 1.0, -1.0, 1.0, -1.0, 1.0];
        let r = rhat(&[&x, &y]);
        assert!((r - 0.8819171036881969).abs() < 1e-14, "{r}");
    }
}
