//! The Normal-Gamma model of the CCAdL paper's §4.1 (reference §2.7, "Experiment 4.1"):
//! xᵢ | μ, γ ~ N(μ, 1/γ), μ | γ ~ N(0, 1/γ), γ ~ Gamma(shape 1, rate 1), θ = (μ, γ), with the
//! posterior in closed form. γ is a precision; the model is defined for γ > 0 only: there the log
//! densities are −∞ and the gradients NaN, so a chain that leaves the support is reported as
//! diverged.

use super::{DataIndex, Model, ModelError, Scratch};
use statrs::distribution::{ContinuousCDF, Gamma, StudentsT};

/// Scalar observations under an unknown mean and precision.
#[derive(Debug, Clone)]
pub struct NormalGammaModel {
    x: Vec<f64>,
}

impl NormalGammaModel {
    /// The model for the observations `x` (finite, at least one).
    pub fn new(x: Vec<f64>) -> Result<Self, ModelError> {
        if x.is_empty() {
            return Err(ModelError::Setting(
                "the Normal-Gamma model needs data".into(),
            ));
        }
        super::mixture::check_finite(&x, "normal-gamma data")?;
        Ok(Self { x })
    }

    /// The observations.
    pub fn data(&self) -> &[f64] {
        &self.x
    }

    /// The exact posterior.
    pub fn posterior(&self) -> NormalGammaPosterior {
        let n = self.x.len() as f64;
        let mean = self.x.iter().sum::<f64>() / n;
        let ss: f64 = self.x.iter().map(|x| (x - mean) * (x - mean)).sum();
        NormalGammaPosterior {
            mu: n * mean / (n + 1.0),
            kappa: 1.0 + n,
            alpha: 1.0 + n / 2.0,
            beta: 1.0 + 0.5 * ss + n * mean * mean / (2.0 * (1.0 + n)),
        }
    }
}

/// NormalGamma(μ_N, κ_N, α_N, β_N): γ ~ Gamma(α_N, rate β_N), μ | γ ~ N(μ_N, 1/(κ_N·γ)).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NormalGammaPosterior {
    /// μ_N = N·x̄/(N + 1).
    pub mu: f64,
    /// κ_N = 1 + N.
    pub kappa: f64,
    /// α_N = 1 + N/2.
    pub alpha: f64,
    /// β_N = 1 + ½Σ(xᵢ − x̄)² + N·x̄²/(2(1 + N)).
    pub beta: f64,
}

impl NormalGammaPosterior {
    /// The marginal of μ: Student-t with 2α_N degrees of freedom, location μ_N and squared scale
    /// β_N/(α_N·κ_N).
    pub fn mu_marginal(&self) -> StudentsT {
        StudentsT::new(
            self.mu,
            (self.beta / (self.alpha * self.kappa)).sqrt(),
            2.0 * self.alpha,
        )
        .expect("valid Student-t parameters")
    }

    /// The marginal of γ: Gamma(α_N, rate β_N).
    pub fn gamma_marginal(&self) -> Gamma {
        Gamma::new(self.alpha, self.beta).expect("valid Gamma parameters")
    }

    /// (E μ, E γ).
    pub fn mean(&self) -> [f64; 2] {
        [self.mu, self.alpha / self.beta]
    }

    /// (Var μ, Var γ) = (β_N/(κ_N(α_N − 1)), α_N/β_N²).
    pub fn variance(&self) -> [f64; 2] {
        [
            self.beta / (self.kappa * (self.alpha - 1.0)),
            self.alpha / (self.beta * self.beta),
        ]
    }

    /// The marginal CDFs (μ, γ) at `value`.
    pub fn marginal_cdf(&self, coordinate: usize, value: f64) -> f64 {
        match coordinate {
            0 => self.mu_marginal().cdf(value),
            _ => self.gamma_marginal().cdf(value),
        }
    }

    /// The central interval of the marginal holding probability `mass`.
    pub fn central_interval(&self, coordinate: usize, mass: f64) -> (f64, f64) {
        let tail = 0.5 * (1.0 - mass);
        match coordinate {
            0 => {
                let m = self.mu_marginal();
                (m.inverse_cdf(tail), m.inverse_cdf(1.0 - tail))
            }
            _ => {
                let m = self.gamma_marginal();
                (m.inverse_cdf(tail), m.inverse_cdf(1.0 - tail))
            }
        }
    }
}

impl Model for NormalGammaModel {
    fn name(&self) -> &'static str {
        "normal_gamma"
    }

    fn dim(&self) -> usize {
        2
    }

    fn num_data(&self) -> usize {
        self.x.len()
    }

    fn parameter_names(&self) -> Vec<String> {
        vec!["mu".into(), "gamma".into()]
    }

    /// log p(μ, γ) = ½·log γ − γμ²/2 − γ (+ const), −∞ for γ ≤ 0.
    fn log_prior(&self, theta: &[f64]) -> f64 {
        let (mu, gamma) = (theta[0], theta[1]);
        if gamma <= 0.0 {
            return f64::NEG_INFINITY;
        }
        0.5 * gamma.ln() - 0.5 * gamma * mu * mu - gamma
    }

    /// ∇ = (−γμ, 1/(2γ) − μ²/2 − 1); NaN for γ ≤ 0.
    fn add_grad_log_prior(&self, theta: &[f64], grad: &mut [f64]) {
        let (mu, gamma) = (theta[0], theta[1]);
        if gamma <= 0.0 {
            grad.fill(f64::NAN);
            return;
        }
        grad[0] += -gamma * mu;
        grad[1] += 0.5 / gamma - 0.5 * mu * mu - 1.0;
    }

    /// log N(xᵢ; μ, 1/γ) = ½·log γ − γ(xᵢ − μ)²/2 (+ const).
    fn log_lik_each(&self, theta: &[f64], batch: &[DataIndex], out: &mut [f64], _: &mut Scratch) {
        let (mu, gamma) = (theta[0], theta[1]);
        let half_log = if gamma > 0.0 {
            0.5 * gamma.ln()
        } else {
            f64::NAN
        };
        for (o, &i) in out.iter_mut().zip(batch) {
            let r = self.x[i as usize] - mu;
            *o = half_log - 0.5 * gamma * r * r;
        }
    }

    /// (γ(xᵢ − μ), 1/(2γ) − (xᵢ − μ)²/2) per datum; NaN for γ ≤ 0.
    fn grad_log_lik_each(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        out: &mut [f64],
        _: &mut Scratch,
    ) {
        let (mu, gamma) = (theta[0], theta[1]);
        let half_inv = if gamma > 0.0 { 0.5 / gamma } else { f64::NAN };
        for (row, &i) in out.chunks_exact_mut(2).zip(batch) {
            let r = self.x[i as usize] - mu;
            row[0] = gamma * r;
            row[1] = half_inv - 0.5 * r * r;
        }
    }

    fn add_grad_log_lik(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
        _: &mut Scratch,
    ) {
        let (mu, gamma) = (theta[0], theta[1]);
        let half_inv = if gamma > 0.0 { 0.5 / gamma } else { f64::NAN };
        let (mut sum_r, mut sum_r2) = (0.0, 0.0);
        for &i in batch {
            let r = self.x[i as usize] - mu;
            sum_r += r;
            sum_r2 += r * r;
        }
        let n = batch.len() as f64;
        grad[0] += weight * gamma * sum_r;
        grad[1] += weight * (n * half_inv - 0.5 * sum_r2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gradients_match_finite_differences_and_posterior_moments_are_consistent() {
        let x: Vec<f64> = (0..20)
            .map(|i| ((i * 37 % 11) as f64 - 5.0) / 3.0)
            .collect();
        let model = NormalGammaModel::new(x).unwrap();
        let theta = [0.3, 1.7];
        let all: Vec<DataIndex> = (0..20).collect();
        let log_post = |t: &[f64]| {
            let mut each = vec![0.0; 20];
            model.log_lik_each(t, &all, &mut each, &mut Scratch::new());
            model.log_prior(t) + each.iter().sum::<f64>()
        };
        let mut grad = [0.0; 2];
        model.add_grad_log_prior(&theta, &mut grad);
        model.add_grad_log_lik(&theta, &all, 1.0, &mut grad, &mut Scratch::new());
        let mut rows = vec![0.0; 40];
        model.grad_log_lik_each(&theta, &all, &mut rows, &mut Scratch::new());
        for j in 0..2 {
            let step = 1e-6;
            let mut up = theta;
            let mut down = theta;
            up[j] += step;
            down[j] -= step;
            let fd = (log_post(&up) - log_post(&down)) / (2.0 * step);
            assert!(
                (grad[j] - fd).abs() < 1e-6 * (1.0 + fd.abs()),
                "{j}: {} vs {fd}",
                grad[j]
            );
            let mut prior = [0.0; 2];
            model.add_grad_log_prior(&theta, &mut prior);
            let summed: f64 = rows.chunks_exact(2).map(|r| r[j]).sum::<f64>() + prior[j];
            assert!((summed - grad[j]).abs() < 1e-10);
        }
        // The mode of the log posterior in γ at μ = μ_N is (α_N − 1/2)/β_N (the joint density
        // is γ^{α_N − 1/2}·exp(−β_N γ) there): check the gradient vanishes.
        let post = model.posterior();
        let mode = [post.mu, (post.alpha - 0.5) / post.beta];
        let mut g = [0.0; 2];
        model.add_grad_log_prior(&mode, &mut g);
        model.add_grad_log_lik(&mode, &all, 1.0, &mut g, &mut Scratch::new());
        assert!(g[0].abs() < 1e-9 && g[1].abs() < 1e-9, "{g:?}");
        // Marginal CDFs are centred where they should be.
        assert!((post.marginal_cdf(0, post.mu) - 0.5).abs() < 1e-12);
        let (lo, hi) = post.central_interval(1, 0.999);
        assert!((post.marginal_cdf(1, lo) - 0.0005).abs() < 1e-9);
        assert!((post.marginal_cdf(1, hi) - 0.9995).abs() < 1e-9);
    }

    #[test]
    fn leaving_the_support_gives_nan_gradients() {
        let model = NormalGammaModel::new(vec![0.0, 1.0]).unwrap();
        let mut g = [0.0; 2];
        model.add_grad_log_prior(&[0.0, -0.1], &mut g);
        assert!(g.iter().all(|v| v.is_nan()));
        assert_eq!(model.log_prior(&[0.0, 0.0]), f64::NEG_INFINITY);
        assert!(NormalGammaModel::new(vec![f64::NAN]).is_err());
    }
}
