//! MAMBA's progress after a complete round, as bytes (issue 25): what a killed or interrupted
//! tuning run resumes from ([`super::mamba_resumable`]).
//!
//! A round ends with its arms ranked and the losers pruned; what the next rounds need is then
//! the rounds' records (the ranking and the metrics the report shows) and, for each surviving
//! arm, its position and random stream (a round restarts the sampler's auxiliary state and the
//! estimator anyway, §5.2) and the draws it has kept (the winner's are the tuner's output).
//! With budgets in gradient evaluations, a resumed run therefore picks the same winner with the
//! same draws as an uninterrupted one; with CPU-second budgets, as any two runs, it may not.
//! The encoding is [`crate::checkpoint`]'s (f64 as bits, every field named and checked).

use super::arm::Arm;
use super::grid::ArmSettings;
use super::mamba::{ArmRound, ArmRoundResult};
use crate::checkpoint::{StateError, StateReader, StateWriter};
use crate::rng::ChainRng;
use rand::SeedableRng;

/// Version of the layout (another version is refused).
const FORMAT: u64 = 1;

/// What MAMBA has done after its last complete round.
#[derive(Debug, Clone)]
pub struct MambaProgress {
    /// Every complete round's records, each in ranking order (best first).
    pub rounds: Vec<Vec<ArmRound>>,
    /// The arms still in the race after the last of them.
    pub arms: Vec<ArmProgress>,
}

/// A surviving arm: where it stands and what it has kept.
#[derive(Debug, Clone)]
pub struct ArmProgress {
    /// Its index in grid order.
    pub arm: usize,
    /// Its position and random stream.
    pub state: Arm,
    /// Its kept draws over all rounds so far (row-major, D per row).
    pub draws: Vec<f64>,
}

impl MambaProgress {
    /// The bytes of this progress.
    pub fn encode(&self) -> Result<Vec<u8>, StateError> {
        let mut w = StateWriter::new();
        w.field("format", &FORMAT);
        w.field("rounds", &self.rounds.len());
        for round in &self.rounds {
            w.field("records", &round.len());
            for r in round {
                save_record(&mut w, r);
            }
        }
        w.field("survivors", &self.arms.len());
        for a in &self.arms {
            w.field("arm", &a.arm);
            w.field("state", &a.state);
            w.field("draws", &a.draws);
        }
        w.finish()
    }

    /// Reads the bytes [`MambaProgress::encode`] wrote, for a run over `arms` in dimension
    /// `dim`: a record of an arm the grid does not have, or a position of another length, is
    /// an error (the progress of another run file).
    pub fn decode(bytes: &[u8], arms: &[ArmSettings], dim: usize) -> Result<Self, StateError> {
        let mut r = StateReader::new(bytes);
        let mut format = 0u64;
        r.field("format", &mut format)?;
        if format != FORMAT {
            return Err(StateError::Invalid(format!(
                "tuning progress of format {format}, this version reads format {FORMAT}"
            )));
        }
        let arm_index = |a: usize| {
            if a < arms.len() {
                Ok(a)
            } else {
                Err(StateError::Invalid(format!(
                    "arm {a} of a grid of {} arms (the progress of another run file?)",
                    arms.len()
                )))
            }
        };
        let mut count = 0usize;
        r.field("rounds", &mut count)?;
        let mut rounds = Vec::new();
        for round in 0..count {
            let mut records = 0usize;
            r.field("records", &mut records)?;
            let mut list = Vec::new();
            for _ in 0..records {
                let mut record = load_record(&mut r)?;
                if record.round != round {
                    return Err(StateError::Invalid(format!(
                        "a record of round {} among round {round}'s",
                        record.round
                    )));
                }
                record.label = arms[arm_index(record.arm)?].label();
                list.push(record);
            }
            rounds.push(list);
        }
        r.field("survivors", &mut count)?;
        let mut survivors = Vec::new();
        for _ in 0..count {
            let mut arm = 0usize;
            r.field("arm", &mut arm)?;
            let mut state = Arm::new(&[], ChainRng::seed_from_u64(0));
            r.field("state", &mut state)?;
            let mut draws = Vec::new();
            r.field("draws", &mut draws)?;
            if state.position().len() != dim || draws.len() % dim.max(1) != 0 {
                return Err(StateError::Invalid(format!(
                    "arm {arm}'s position has {} values and its draws {}, not a multiple of \
                     the model's {dim} parameters",
                    state.position().len(),
                    draws.len()
                )));
            }
            survivors.push(ArmProgress {
                arm: arm_index(arm)?,
                state,
                draws,
            });
        }
        r.finish()?;
        Ok(Self {
            rounds,
            arms: survivors,
        })
    }
}

impl Arm {
    /// The bytes of this arm's state (to send it where its next round runs).
    pub fn encode(&self) -> Result<Vec<u8>, StateError> {
        let mut w = StateWriter::new();
        w.field("format", &FORMAT);
        w.field("state", self);
        w.finish()
    }

    /// Reads the bytes [`Arm::encode`] wrote, for a model with `dim` parameters.
    pub fn decode(bytes: &[u8], dim: usize) -> Result<Self, StateError> {
        let mut r = StateReader::new(bytes);
        let state = read_arm(&mut r, dim)?;
        r.finish()?;
        Ok(state)
    }
}

fn read_arm(r: &mut StateReader<'_>, dim: usize) -> Result<Arm, StateError> {
    let mut format = 0u64;
    r.field("format", &mut format)?;
    if format != FORMAT {
        return Err(StateError::Invalid(format!(
            "an arm of format {format}, this version reads format {FORMAT}"
        )));
    }
    let mut state = Arm::new(&[], ChainRng::seed_from_u64(0));
    r.field("state", &mut state)?;
    if state.position().len() != dim {
        return Err(StateError::Invalid(format!(
            "an arm's position of {} values, the model has {dim} parameters",
            state.position().len()
        )));
    }
    Ok(state)
}

impl ArmRoundResult {
    /// The bytes of an arm's round (to send it back to where the halving runs).
    pub fn encode(&self) -> Result<Vec<u8>, StateError> {
        let mut w = StateWriter::new();
        w.field("format", &FORMAT);
        w.field("state", &self.state);
        save_record(&mut w, &self.record);
        w.field("draws", &self.draws);
        w.finish()
    }

    /// Reads the bytes [`ArmRoundResult::encode`] wrote, for a model with `dim` parameters
    /// (the record's label is left empty: the grid gives it).
    pub fn decode(bytes: &[u8], dim: usize) -> Result<Self, StateError> {
        let mut r = StateReader::new(bytes);
        let state = read_arm(&mut r, dim)?;
        let record = load_record(&mut r)?;
        let mut draws = Vec::new();
        r.field("draws", &mut draws)?;
        r.finish()?;
        if draws.len() != record.draws * dim {
            return Err(StateError::Invalid(format!(
                "{} values for {} draws of {dim} parameters",
                draws.len(),
                record.draws
            )));
        }
        Ok(Self {
            record,
            state,
            draws,
        })
    }
}

/// An [`ArmRound`]'s numbers (its label comes from the grid when read back).
fn save_record(w: &mut StateWriter, r: &ArmRound) {
    w.field("round", &r.round);
    w.field("arm", &r.arm);
    w.field("metric", &r.metric);
    w.field("audited", &r.full_batch_ksd.is_some());
    w.field("full_batch_ksd", &r.full_batch_ksd.unwrap_or(f64::NAN));
    w.field("draws", &r.draws);
    w.field("scored_draws", &r.scored_draws);
    w.field("iterations", &r.iterations);
    w.field("gradient_evaluations", &r.gradient_evaluations);
    w.field("sampling_seconds", &r.sampling_seconds);
    w.field("overhead_seconds", &r.overhead_seconds);
    w.field("diverged", &r.diverged);
    w.field("kept", &r.kept);
}

fn load_record(r: &mut StateReader<'_>) -> Result<ArmRound, StateError> {
    let mut rec = ArmRound {
        round: 0,
        arm: 0,
        label: String::new(),
        metric: 0.0,
        full_batch_ksd: None,
        draws: 0,
        scored_draws: 0,
        iterations: 0,
        gradient_evaluations: 0,
        sampling_seconds: 0.0,
        overhead_seconds: 0.0,
        diverged: false,
        kept: false,
    };
    let (mut audited, mut ksd) = (false, 0.0);
    r.field("round", &mut rec.round)?;
    r.field("arm", &mut rec.arm)?;
    r.field("metric", &mut rec.metric)?;
    r.field("audited", &mut audited)?;
    r.field("full_batch_ksd", &mut ksd)?;
    rec.full_batch_ksd = audited.then_some(ksd);
    r.field("draws", &mut rec.draws)?;
    r.field("scored_draws", &mut rec.scored_draws)?;
    r.field("iterations", &mut rec.iterations)?;
    r.field("gradient_evaluations", &mut rec.gradient_evaluations)?;
    r.field("sampling_seconds", &mut rec.sampling_seconds)?;
    r.field("overhead_seconds", &mut rec.overhead_seconds)?;
    r.field("diverged", &mut rec.diverged)?;
    r.field("kept", &mut rec.kept)?;
    Ok(rec)
}
