//! Minibatch Metropolis–Hastings test (Seita, Pan, Chen & Canny; reference §6): the Barker
//! test decides with Δ* + X_nc + X_c > 0, where the minibatch noise plus X_nc ~ N(0, σ² − s²)
//! plays a Gaussian N(0, σ²) and X_c is drawn from the correction distribution C_σ that turns
//! that Gaussian into a standard logistic variable; [`correction`] builds C_σ (ridge least
//! squares §6.3(a), the workshop's FFT bank §6.3(b)) and samples it by inverse CDF (§6.4).

pub mod correction;
