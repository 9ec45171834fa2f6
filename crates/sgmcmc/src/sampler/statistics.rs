//! What a sampler reports about itself per chain ([`super::Sampler::statistics`]), as typed
//! values: the counts of a Metropolis–Hastings test.

use std::collections::BTreeMap;

/// A sampler's own counts for one chain, in the run summary (as the inner value's fields).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(untagged))]
#[non_exhaustive]
pub enum SamplerStatistics {
    /// A Metropolis–Hastings chain's accept/reject counts.
    Mh(MhStatistics),
}

/// What a chain's state was at one kept draw, for ArviZ's `sample_stats`: the step the next
/// iteration uses (a schedule changes it), the thermostat of the Nosé–Hoover schemes (SGNHT,
/// BADODAB, CCAdL), and whether an MH proposal was accepted; `None` where the method has none.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DrawStatistics {
    /// The sampler's step, in its own units ([`super::Sampler::step_size`]).
    pub step_size: Option<f64>,
    /// The thermostat ξ (or α).
    pub thermostat: Option<f64>,
    /// Whether the last MH proposal was accepted.
    pub accepted: Option<bool>,
}

impl DrawStatistics {
    /// Bytes of one record ([`DrawStatistics::to_record`]).
    pub const RECORD_BYTES: usize = 25;

    /// A fixed-size record: a byte of flags (which fields are present, and `accepted`), then
    /// `step_size` and `thermostat` as little-endian f64 bits (0 when absent) and 8 spare bytes.
    pub fn to_record(&self) -> [u8; Self::RECORD_BYTES] {
        let mut out = [0u8; Self::RECORD_BYTES];
        out[0] = u8::from(self.step_size.is_some())
            | u8::from(self.thermostat.is_some()) << 1
            | u8::from(self.accepted.is_some()) << 2
            | u8::from(self.accepted == Some(true)) << 3;
        out[1..9].copy_from_slice(&self.step_size.unwrap_or(0.0).to_le_bytes());
        out[9..17].copy_from_slice(&self.thermostat.unwrap_or(0.0).to_le_bytes());
        out
    }

    /// The statistics of a record [`DrawStatistics::to_record`] wrote (all zero bytes: none).
    pub fn from_record(record: &[u8; Self::RECORD_BYTES]) -> Self {
        let flags = record[0];
        let f64_at = |i: usize| f64::from_le_bytes(record[i..i + 8].try_into().expect("8 bytes"));
        Self {
            step_size: (flags & 1 != 0).then(|| f64_at(1)),
            thermostat: (flags & 2 != 0).then(|| f64_at(9)),
            accepted: (flags & 4 != 0).then_some(flags & 8 != 0),
        }
    }
}

/// What an MH chain did: the counts that go into the run summary.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MhStatistics {
    /// Iterations (proposals).
    pub iterations: u64,
    /// Proposals accepted.
    pub accepted: u64,
    /// Proposals rejected by the test.
    pub rejected: u64,
    /// Iterations skipped because s² ≥ σ² (Barker, `policy = "skip"`) or s ≥ the threshold
    /// (the workshop test).
    pub skipped: u64,
    /// Decisions taken by the sign of Δ* after every point was used with s² ≥ σ².
    pub exhausted_by_sign: u64,
    /// Decisions whose batch grew at least once.
    pub grown: u64,
    /// Proposals rejected without a test because ψ was not finite (e.g. outside the prior's
    /// support).
    pub rejected_by_prior: u64,
    /// Data points (likelihood-ratio evaluations) used by the tests, in total.
    pub points: u64,
    /// Decisions by the number of points they used.
    pub points_histogram: BTreeMap<usize, u64>,
    /// The likelihood temperature at the end (changes only with `policy = "raise_temperature"`).
    pub final_temperature: f64,
}

/// The counts, the histogram as its (points, decisions) pairs, and the temperature.
impl crate::checkpoint::Persist for MhStatistics {
    fn save(&self, w: &mut crate::checkpoint::StateWriter) {
        w.nested(3);
        w.field_with("counts", |w| {
            w.u64s(
                [
                    self.iterations,
                    self.accepted,
                    self.rejected,
                    self.skipped,
                    self.exhausted_by_sign,
                    self.grown,
                    self.rejected_by_prior,
                    self.points,
                ]
                .into_iter(),
            )
        });
        w.field_with("points_histogram", |w| {
            let pairs: Vec<u64> = self
                .points_histogram
                .iter()
                .flat_map(|(&points, &n)| [points as u64, n])
                .collect();
            w.u64s(pairs.into_iter())
        });
        w.field("final_temperature", &self.final_temperature);
    }
    fn load(
        &mut self,
        r: &mut crate::checkpoint::StateReader<'_>,
    ) -> Result<(), crate::checkpoint::StateError> {
        r.nested(3)?;
        r.field_with("counts", |r| {
            let counts: Vec<u64> = r.u64s()?.collect();
            let [a, b, c, d, e, f, g, h] = counts[..] else {
                return Err(crate::checkpoint::StateError::Invalid(format!(
                    "MH counts: {} values, not 8",
                    counts.len()
                )));
            };
            (self.iterations, self.accepted, self.rejected, self.skipped) = (a, b, c, d);
            (
                self.exhausted_by_sign,
                self.grown,
                self.rejected_by_prior,
                self.points,
            ) = (e, f, g, h);
            Ok(())
        })?;
        r.field_with("points_histogram", |r| {
            let pairs: Vec<u64> = r.u64s()?.collect();
            if !pairs.len().is_multiple_of(2) {
                return Err(crate::checkpoint::StateError::Invalid(
                    "MH points histogram: an odd number of values".into(),
                ));
            }
            self.points_histogram = pairs
                .chunks_exact(2)
                .map(|p| (p[0] as usize, p[1]))
                .collect();
            Ok(())
        })?;
        r.field("final_temperature", &mut self.final_temperature)
    }
}

impl MhStatistics {
    /// Fraction of iterations accepted.
    pub fn acceptance_rate(&self) -> f64 {
        self.accepted as f64 / self.iterations.max(1) as f64
    }

    /// Mean points per decision.
    pub fn mean_points(&self) -> f64 {
        self.points as f64 / (self.iterations - self.rejected_by_prior).max(1) as f64
    }

    /// One line for the CLI: acceptance, skips, growth, data per decision, temperature.
    pub fn describe(&self) -> String {
        format!(
            "MH: {} proposals, acceptance {:.3}, {} skipped, {} grew their batch, {} decided by \
             sign, {} rejected by the prior/proposal; {:.1} data points per test; T = {}",
            self.iterations,
            self.acceptance_rate(),
            self.skipped,
            self.grown,
            self.exhausted_by_sign,
            self.rejected_by_prior,
            self.mean_points(),
            self.final_temperature
        )
    }

    /// Add another chain's counts.
    pub fn merge(&mut self, other: &MhStatistics) {
        self.iterations += other.iterations;
        self.accepted += other.accepted;
        self.rejected += other.rejected;
        self.skipped += other.skipped;
        self.exhausted_by_sign += other.exhausted_by_sign;
        self.grown += other.grown;
        self.rejected_by_prior += other.rejected_by_prior;
        self.points += other.points;
        for (k, v) in &other.points_histogram {
            *self.points_histogram.entry(*k).or_insert(0) += v;
        }
        self.final_temperature = self.final_temperature.max(other.final_temperature);
    }
}

#[cfg(test)]
mod tests {
    use super::DrawStatistics;

    /// Every combination of present and absent fields (NaN and negative values included)
    /// comes back from its record as it went in; an all-zero record (a gap) has none.
    #[test]
    fn draw_statistics_round_trip_through_their_records() {
        for step_size in [None, Some(1e-3), Some(f64::NAN)] {
            for thermostat in [None, Some(-0.25), Some(0.0)] {
                for accepted in [None, Some(false), Some(true)] {
                    let s = DrawStatistics {
                        step_size,
                        thermostat,
                        accepted,
                    };
                    let back = DrawStatistics::from_record(&s.to_record());
                    let bits = |v: Option<f64>| v.map(f64::to_bits);
                    assert_eq!(
                        (bits(back.step_size), bits(back.thermostat), back.accepted),
                        (bits(s.step_size), bits(s.thermostat), s.accepted),
                        "{s:?}"
                    );
                }
            }
        }
        let none = DrawStatistics::from_record(&[0; DrawStatistics::RECORD_BYTES]);
        assert_eq!(none, DrawStatistics::default());
    }
}
