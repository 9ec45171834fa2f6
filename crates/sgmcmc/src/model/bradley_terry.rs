//! The Bradley–Terry model of the coreset MCMC paper (reference §7.9): one strength θₜ per
//! team, and for game n between home team h and visitor v with y = 1 if the home team won,
//!
//! ```text
//! ℓₙ(θ) = y·log σ((θ_h − θ_v)/s) + (1 − y)·log σ((θ_v − θ_h)/s),
//! ```
//!
//! with the Elo-like scale s (400 by default) and prior θ ~ N(0, σ²I) (σ² = 1 by default).
//! log σ(a) = min(a, 0) − log1p(e^−|a|) (finite for any finite θ; the reference's −log1p(e⁻ᵃ)
//! with a cutoff at a < −300 is the same function).
//!
//! Data: a [`Dataset`] with two feature columns holding the home and visitor team ids (any
//! integers, e.g. the NBA's 1610612737..; see [`crate::data::load_nba_games`]) and the 0/1
//! target y. The ids are mapped to parameter indices 0..T−1 in increasing id order, and the
//! parameters are named `team[ID]`. Each datum touches two coordinates, so the batch
//! methods cost O(batch), not O(batch·T).

use super::logistic::{Bernoulli, sigmoid};
use super::vector_math;
use super::{DataIndex, Family, Model, ModelError, NormalPrior, Scratch, debug_check_dim};
use crate::data::Dataset;
use crate::rng::ChainRng;

/// log σ(a) = min(a, 0) − log1p(e^−|a|) ([`vector_math::log_sigmoid`], branch-free: a loop of
/// them vectorises). The reference's −log1p(e⁻ᵃ), with a in its place for a < −300 (§7.9), is
/// the same function; this form needs no cutoff, as it equals a to double precision for
/// a < −37.
#[inline(always)]
fn log_sigmoid(a: f64) -> f64 {
    vector_math::log_sigmoid(a)
}

/// [`log_sigmoid`] as an [`vector_math::ElementMap`] (inlined into the vector loop).
#[derive(Clone, Copy)]
struct LogSigmoid;

impl vector_math::ElementMap<()> for LogSigmoid {
    #[inline(always)]
    fn apply(&self, (): (), a: f64) -> f64 {
        log_sigmoid(a)
    }
}

/// One game: parameter indices of the two teams and whether the home team won.
#[derive(Debug, Clone, Copy)]
struct Game {
    home: u32,
    visitor: u32,
    home_wins: bool,
}

/// Bradley–Terry paired comparisons over T teams (see the module documentation).
pub struct BradleyTerry {
    games: Vec<Game>,
    team_ids: Vec<i64>,
    inv_scale: f64,
    prior: NormalPrior,
}

impl BradleyTerry {
    /// The paper's scale s.
    pub const DEFAULT_SCALE: f64 = 400.0;

    /// Build the model from games: feature columns (home id, visitor id), integer-valued, and
    /// targets 0/1 (or −1/+1) = home team won. `scale` must be finite and > 0. Errors name
    /// the source and the 1-based row.
    pub fn new(data: Dataset, scale: f64, prior: NormalPrior) -> Result<Self, ModelError> {
        if !(scale.is_finite() && scale > 0.0) {
            return Err(ModelError::Setting(format!(
                "Bradley-Terry scale must be finite and > 0, got {scale}"
            )));
        }
        let source = data.features_source.clone();
        if data.cols() != 2 {
            return Err(ModelError::Setting(format!(
                "Bradley-Terry needs 2 feature columns (home team id, visitor team id), but \
                 {source} has {}",
                data.cols()
            )));
        }
        let ys = data.targets.as_ref().ok_or_else(|| {
            ModelError::Setting(format!(
                "Bradley-Terry needs a target column (1 if the home team won), but {source} has none"
            ))
        })?;
        if ys.len() != data.rows() {
            return Err(ModelError::Setting(format!(
                "{source} has {} rows but {} targets",
                data.rows(),
                ys.len()
            )));
        }
        let target_source = data.targets_source.as_deref().unwrap_or(&source);
        let wins = Bernoulli.prepare_targets(ys, target_source)?;
        let value = |i: usize, j: usize| data.features.get(i, j);
        // Ids as integers (exact in f64 up to 2^53).
        let mut pairs = Vec::with_capacity(data.rows());
        for i in 0..data.rows() {
            let mut ids = [0i64; 2];
            for (j, id) in ids.iter_mut().enumerate() {
                let v = value(i, j);
                if !(v.is_finite() && v.fract() == 0.0 && v.abs() < 9.007_199_254_740_992e15) {
                    let column = data
                        .feature_names
                        .get(j)
                        .map_or_else(|| format!("column {}", j + 1), |n| format!("{n:?}"));
                    return Err(ModelError::Setting(format!(
                        "{source}: row {}: team id {v} in {column} is not an integer",
                        i + 1
                    )));
                }
                *id = v as i64;
            }
            if ids[0] == ids[1] {
                return Err(ModelError::Setting(format!(
                    "{source}: row {}: team {} plays itself",
                    i + 1,
                    ids[0]
                )));
            }
            pairs.push(ids);
        }
        let mut team_ids: Vec<i64> = pairs.iter().flatten().copied().collect();
        team_ids.sort_unstable();
        team_ids.dedup();
        if team_ids.len() > u32::MAX as usize {
            return Err(ModelError::Setting(format!("{source}: too many teams")));
        }
        let index = |id: i64| team_ids.binary_search(&id).expect("every id is listed") as u32;
        let games = pairs
            .iter()
            .zip(&wins)
            .map(|(&[h, v], &w)| Game {
                home: index(h),
                visitor: index(v),
                home_wins: w == 1,
            })
            .collect();
        Ok(Self {
            games,
            team_ids,
            inv_scale: 1.0 / scale,
            prior,
        })
    }

    /// The team ids, in parameter order (increasing).
    pub fn team_ids(&self) -> &[i64] {
        &self.team_ids
    }

    /// The scale s.
    pub fn scale(&self) -> f64 {
        1.0 / self.inv_scale
    }

    /// (a = (θ_h − θ_v)/s, game) for datum i.
    #[inline(always)]
    fn game(&self, theta: &[f64], i: DataIndex) -> (f64, Game) {
        let g = self.games[i as usize];
        let a = (theta[g.home as usize] - theta[g.visitor as usize]) * self.inv_scale;
        (a, g)
    }

    /// ℓ = log σ(±a), the sign + when the home team won.
    #[inline(always)]
    fn log_lik_at(a: f64, home_wins: bool) -> f64 {
        log_sigmoid(Self::signed(a, home_wins))
    }

    /// The argument of log σ in ℓ: a when the home team won, −a when it lost.
    #[inline(always)]
    fn signed(a: f64, home_wins: bool) -> f64 {
        if home_wins { a } else { -a }
    }

    /// ∂ℓ/∂θ_h = (y − σ(a))/s (and ∂ℓ/∂θ_v is its negative).
    #[inline(always)]
    fn dlog_lik_dhome(&self, a: f64, home_wins: bool) -> f64 {
        (f64::from(u8::from(home_wins)) - sigmoid(a)) * self.inv_scale
    }
}

impl Model for BradleyTerry {
    fn name(&self) -> &'static str {
        "bradley_terry"
    }

    fn dim(&self) -> usize {
        self.team_ids.len()
    }

    fn num_data(&self) -> usize {
        self.games.len()
    }

    fn parameter_names(&self) -> Vec<String> {
        self.team_ids
            .iter()
            .map(|id| format!("team[{id}]"))
            .collect()
    }

    fn log_prior(&self, theta: &[f64]) -> f64 {
        debug_check_dim(self, theta);
        self.prior.log_density(theta)
    }

    fn add_grad_log_prior(&self, theta: &[f64], grad: &mut [f64]) {
        self.prior.add_grad(theta, grad);
    }

    fn log_lik_each(&self, theta: &[f64], batch: &[DataIndex], out: &mut [f64], _s: &mut Scratch) {
        debug_check_dim(self, theta);
        // The signed arguments first, then log σ over all of them in vector registers.
        for (o, &i) in out.iter_mut().zip(batch) {
            let (a, g) = self.game(theta, i);
            *o = Self::signed(a, g.home_wins);
        }
        vector_math::map(&mut out[..batch.len()], LogSigmoid);
    }

    /// Row k is zero except ±(y − σ(a))/s at the two teams of game `batch[k]` (the trait asks
    /// for full rows; the batch methods below never write them).
    fn grad_log_lik_each(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        out: &mut [f64],
        _s: &mut Scratch,
    ) {
        debug_check_dim(self, theta);
        let d = theta.len();
        for (row, &i) in out.chunks_exact_mut(d).zip(batch) {
            let (a, g) = self.game(theta, i);
            let r = self.dlog_lik_dhome(a, g.home_wins);
            row.fill(0.0);
            row[g.home as usize] = r;
            row[g.visitor as usize] = -r;
        }
    }

    fn add_grad_log_lik(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
        _s: &mut Scratch,
    ) {
        debug_check_dim(self, theta);
        for &i in batch {
            let (a, g) = self.game(theta, i);
            let r = weight * self.dlog_lik_dhome(a, g.home_wins);
            grad[g.home as usize] += r;
            grad[g.visitor as usize] -= r;
        }
    }

    fn log_lik_and_add_grad(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
        _s: &mut Scratch,
    ) -> f64 {
        debug_check_dim(self, theta);
        let mut total = 0.0;
        for &i in batch {
            let (a, g) = self.game(theta, i);
            total += Self::log_lik_at(a, g.home_wins);
            let r = weight * self.dlog_lik_dhome(a, g.home_wins);
            grad[g.home as usize] += r;
            grad[g.visitor as usize] -= r;
        }
        total
    }

    fn sample_prior(&self, rng: &mut ChainRng, out: &mut [f64]) -> Result<(), ModelError> {
        self.prior.sample(rng, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Break-once check: with the a < −300 branch removed, log σ(−2500) = −∞ and this fails.
    #[test]
    fn log_sigmoid_is_finite_in_both_tails() {
        assert_eq!(log_sigmoid(-2500.0), -2500.0);
        assert_eq!(log_sigmoid(2500.0), 0.0);
        let a = 1.3f64;
        assert!((log_sigmoid(a) - (1.0 / (1.0 + (-a).exp())).ln()).abs() < 1e-15);
        assert!((log_sigmoid(-299.999) - log_sigmoid(-300.001) - 0.002).abs() < 1e-9);
    }
}
