//! posteriordb (issue 27): posteriors with gold-standard reference draws that no one here
//! computed. Each posterior's data are prepared as its Stan model does (one converter per model,
//! written from the Stan code in `models/`), the model is built from sgmcmc's own parts (a
//! linear regression with σ learned, or the ordered normal mixture; the priors and constraints
//! of the Stan model), sampled, and compared with the reference draws on the constrained
//! scale: per parameter the mean's z-score against the combined Monte Carlo error and the sd
//! ratio, per posterior ξ = ‖σ̂ − σ_ref‖/‖σ_ref‖.
//!
//! The folder layout is that of `../shared/data/posteriordb/` (its README): `posteriors/`,
//! `models/`, `data/*.json.zip`, `reference_draws/*.json.zip`.

use serde::Serialize;
use serde_json::Value;
use sgmcmc::data::{Dataset, Features, Matrix};
use sgmcmc::diagnostics::accuracy::relative_sd_error_of;
use sgmcmc::io::summarize_parameters;
use sgmcmc::model::constraint::constrain_draws;
use sgmcmc::model::{
    Glm, Model, ModelError, NoiseModel, Normal, NormalMixture, NormalMixturePriors, ParameterPrior,
};
use sgmcmc::reference::{NutsError, NutsSettings, run_nuts};
use sgmcmc::runner::NoProgress;
use std::io::Read;
use std::path::{Path, PathBuf};

pub mod sg;

/// What can go wrong reading a posterior or sampling it.
#[derive(Debug, thiserror::Error)]
pub enum PosteriordbError {
    /// A file could not be read.
    #[error("cannot read {path}: {message}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The file does not hold what posteriordb's layout says.
    #[error("{path}: {message}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The posterior's Stan model has no converter here.
    #[error("posterior {posterior}: no converter for the Stan model `{model}`")]
    UnknownModel {
        /// The posterior.
        posterior: String,
        /// Its model.
        model: String,
    },
    /// The model rejected its data or settings.
    #[error("posterior {posterior}: {source}")]
    Model {
        /// The posterior.
        posterior: String,
        /// The error.
        source: ModelError,
    },
    /// A stochastic-gradient run failed.
    #[error("posterior {posterior}: {method}: {message}")]
    Sampler {
        /// The posterior.
        posterior: String,
        /// The method.
        method: &'static str,
        /// What went wrong.
        message: String,
    },
    /// NUTS failed.
    #[error("posterior {posterior}: NUTS: {source}")]
    Nuts {
        /// The posterior.
        posterior: String,
        /// The error.
        source: NutsError,
    },
}

/// One posterior: the model built as its Stan model states it, and the reference draws.
pub struct Posterior {
    /// posteriordb's name (`data-model`).
    pub name: String,
    /// The Stan model's name.
    pub model_name: String,
    /// The model, its parameters named as in the reference draws.
    pub model: Box<dyn Model>,
    /// Its data and priors, as the model was built from them.
    pub prepared: Prepared,
    /// The reference draws on the constrained scale, per chain, row-major in the model's
    /// parameter order.
    pub reference: Vec<Vec<f64>>,
}

/// The names of the posteriors in `dir` (its `posteriors/*.json`), sorted.
pub fn posterior_names(dir: &Path) -> Result<Vec<String>, PosteriordbError> {
    let folder = dir.join("posteriors");
    let read = |e: std::io::Error| PosteriordbError::Read {
        path: folder.clone(),
        message: e.to_string(),
    };
    let mut names: Vec<String> = std::fs::read_dir(&folder)
        .map_err(read)?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".json").map(str::to_string)
        })
        .collect();
    names.sort();
    Ok(names)
}

fn read_json(path: &Path) -> Result<Value, PosteriordbError> {
    let text = std::fs::read_to_string(path).map_err(|e| PosteriordbError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    serde_json::from_str(&text).map_err(|e| PosteriordbError::Format {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// The one JSON document inside the zip file `path`.
fn read_zipped_json(path: &Path) -> Result<Value, PosteriordbError> {
    let read = |message: String| PosteriordbError::Read {
        path: path.to_path_buf(),
        message,
    };
    let file = std::fs::File::open(path).map_err(|e| read(e.to_string()))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| read(e.to_string()))?;
    if archive.len() != 1 {
        return Err(PosteriordbError::Format {
            path: path.to_path_buf(),
            message: format!("expected one file in the zip, found {}", archive.len()),
        });
    }
    let mut text = String::new();
    archive
        .by_index(0)
        .map_err(|e| read(e.to_string()))?
        .read_to_string(&mut text)
        .map_err(|e| read(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| PosteriordbError::Format {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// The data of one posterior, with the file named in errors.
struct Data<'a> {
    json: &'a Value,
    path: &'a Path,
}

impl Data<'_> {
    fn error(&self, message: String) -> PosteriordbError {
        PosteriordbError::Format {
            path: self.path.to_path_buf(),
            message,
        }
    }

    /// A numeric vector (a scalar counts as length 1).
    fn vector(&self, name: &str) -> Result<Vec<f64>, PosteriordbError> {
        let v = self
            .json
            .get(name)
            .ok_or_else(|| self.error(format!("no `{name}`")))?;
        let values: Vec<&Value> = match v {
            Value::Array(a) => a.iter().collect(),
            other => vec![other],
        };
        values
            .into_iter()
            .map(|x| {
                x.as_f64()
                    .ok_or_else(|| self.error(format!("`{name}` holds a non-number: {x}")))
            })
            .collect()
    }

    fn scalar(&self, name: &str) -> Result<f64, PosteriordbError> {
        match self.vector(name)?.as_slice() {
            [x] => Ok(*x),
            v => Err(self.error(format!("`{name}` should be one number, has {}", v.len()))),
        }
    }

    /// A matrix given as an array of rows.
    fn rows(&self, name: &str) -> Result<Vec<Vec<f64>>, PosteriordbError> {
        let v = self
            .json
            .get(name)
            .and_then(Value::as_array)
            .ok_or_else(|| self.error(format!("no matrix `{name}`")))?;
        v.iter()
            .map(|row| {
                row.as_array()
                    .ok_or_else(|| self.error(format!("`{name}`: a row is not an array")))?
                    .iter()
                    .map(|x| {
                        x.as_f64()
                            .ok_or_else(|| self.error(format!("`{name}`: a non-number")))
                    })
                    .collect()
            })
            .collect()
    }
}

/// A regression's design: the columns (each of length N, the first usually all ones: Stan's
/// `beta[1]`), the response, the parameter name of each column.
pub struct Design {
    columns: Vec<Vec<f64>>,
    y: Vec<f64>,
    names: Vec<String>,
}

impl Design {
    /// Columns named `beta[1]`, `beta[2]`, ….
    fn betas(columns: Vec<Vec<f64>>, y: Vec<f64>) -> Self {
        let names = (1..=columns.len()).map(|k| format!("beta[{k}]")).collect();
        Self { columns, y, names }
    }

    /// The linear regression y ~ N(Xβ, σ²) with `coefficients` on each β and `sigma` on σ.
    fn with_priors(self, coefficients: ParameterPrior, sigma: ParameterPrior) -> Prepared {
        Prepared::Regression {
            design: self,
            coefficients,
            sigma,
        }
    }
}

/// A posterior's data prepared as its Stan model does, with the model's priors: what builds
/// the model and what [`Prepared::export`] writes as a run file and its data.
pub enum Prepared {
    /// y ~ N(Xβ, σ²).
    Regression {
        /// The design, the response and the coefficients' names.
        design: Design,
        /// The prior of each coefficient.
        coefficients: ParameterPrior,
        /// The prior of σ.
        sigma: ParameterPrior,
    },
    /// The ordered two-component normal mixture of scalar data.
    Mixture {
        /// The observations.
        y: Vec<f64>,
        /// Its priors.
        priors: NormalMixturePriors,
    },
}

impl Prepared {
    /// The model.
    pub fn model(&self) -> Result<Box<dyn Model>, ModelError> {
        match self {
            Prepared::Regression {
                design,
                coefficients,
                sigma,
            } => {
                let (n, d) = (design.y.len(), design.columns.len());
                let mut x = vec![0.0; n * d];
                for (j, column) in design.columns.iter().enumerate() {
                    for (i, v) in column.iter().enumerate() {
                        x[i * d + j] = *v;
                    }
                }
                let data = Dataset {
                    features: Features::F64(Matrix::from_vec(x, n, d)?),
                    targets: Some(design.y.clone()),
                    feature_names: design.names.clone(),
                    features_source: "posteriordb data".into(),
                    targets_source: None,
                };
                let family = Normal::new(NoiseModel::Sigma { prior: *sigma })?;
                Ok(Box::new(Glm::new(data, family, *coefficients, false)?))
            }
            Prepared::Mixture { y, priors } => {
                Ok(Box::new(NormalMixture::new(y.clone(), *priors)?))
            }
        }
    }

    /// Write the prepared data (`data.csv`, a header of the parameters' columns and `y`) and a
    /// run file for it (`run.toml`: [`Prepared::run_toml`]) into `dir`: the posterior as a
    /// plain run a user can copy.
    pub fn export(&self, dir: &Path, name: &str, stan_model: &str) -> std::io::Result<()> {
        use std::fmt::Write;
        std::fs::create_dir_all(dir)?;
        let mut csv = String::new();
        match self {
            Prepared::Regression { design, .. } => {
                let _ = writeln!(csv, "{},y", design.names.join(","));
                for i in 0..design.y.len() {
                    for column in &design.columns {
                        let _ = write!(csv, "{},", column[i]);
                    }
                    let _ = writeln!(csv, "{}", design.y[i]);
                }
            }
            Prepared::Mixture { y, .. } => {
                csv.push_str("y\n");
                for v in y {
                    let _ = writeln!(csv, "{v}");
                }
            }
        }
        std::fs::write(dir.join("data.csv"), csv)?;
        std::fs::write(dir.join("run.toml"), self.run_toml(name, stan_model))
    }

    /// The run file of this posterior (data from `data.csv`, the model and its
    /// `[model.priors]`, 4 chains, seed 1; no `[sampler]`, so the default path).
    pub fn run_toml(&self, name: &str, stan_model: &str) -> String {
        use std::fmt::Write;
        let mut toml = format!(
            "# posteriordb's `{name}` (Stan model `{stan_model}`): its data prepared as the Stan code\n\
             # does (written by `sgmcmc experiment posteriordb DIR --export OUT`), its priors and\n\
             # constraints. Without a [sampler] table the run takes the default path.\n\n\
             [data]\ntable = \"data.csv\"\n"
        );
        match self {
            Prepared::Regression {
                coefficients,
                sigma,
                ..
            } => {
                let _ = write!(
                    toml,
                    "target = \"y\"\n\n[model]\nkind = \"linear\"\n\
                     # The Stan model's beta[1] (or alpha) is the column of ones.\n\
                     intercept = false\n\n[model.priors]\ncoefficients = {}\nsigma = {}\n",
                    inline_table(coefficients),
                    inline_table(sigma)
                );
            }
            Prepared::Mixture { priors, .. } => {
                let _ = write!(
                    toml,
                    "\n[model]\nkind = \"normal_mixture\"\n\n[model.priors]\nmu = {}\nsigma = {}\nweight = {}\n",
                    inline_table(&priors.mu),
                    inline_table(&priors.sigma),
                    inline_table(&priors.weight)
                );
            }
        }
        toml.push_str("\n[run]\nseed = 1\nchains = 4\n");
        toml
    }
}

/// A prior as an inline TOML table, e.g. `{ kind = "normal", location = 0.0, scale = 10.0 }`.
fn inline_table(prior: &ParameterPrior) -> String {
    let value = serde_json::to_value(prior).unwrap_or_default();
    let fields: Vec<String> = value
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| match v {
                    Value::Number(n) => format!("{k} = {:?}", n.as_f64().unwrap_or(f64::NAN)),
                    other => format!("{k} = {other}"),
                })
                .collect()
        })
        .unwrap_or_default();
    format!("{{ {} }}", fields.join(", "))
}

fn ones(n: usize) -> Vec<f64> {
    vec![1.0; n]
}

fn log(v: &[f64]) -> Vec<f64> {
    v.iter().map(|x| x.ln()).collect()
}

fn product(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x * y).collect()
}

/// (x − mean)/sd with the sample sd (n − 1), as Stan's `sd`.
fn standardised(v: &[f64]) -> Vec<f64> {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    v.iter().map(|x| (x - mean) / sd).collect()
}

/// The model of Stan model `model` on `data`, as the Stan code in posteriordb's `models/`
/// states it (a parameter without a prior statement has a flat prior on its constrained
/// scale; `real<lower=0> sigma` with `sigma ~ cauchy(0, s)` is a half-Cauchy).
fn build(model: &str, data: &Data<'_>) -> Result<Option<Prepared>, PosteriordbError> {
    let flat = ParameterPrior::Flat;
    let flat_positive = ParameterPrior::FlatPositive;
    let half_cauchy = ParameterPrior::HalfCauchy { scale: 2.5 };
    let normal10 = ParameterPrior::Normal {
        location: 0.0,
        scale: 10.0,
    };
    let earnings = |y: Vec<f64>, columns: Vec<Vec<f64>>| {
        Design::betas(columns, y).with_priors(flat, flat_positive)
    };
    let kidiq = |columns: Vec<Vec<f64>>| -> Result<_, PosteriordbError> {
        let y = data.vector("kid_score")?;
        Ok(Design::betas(columns, y).with_priors(flat, half_cauchy))
    };
    let built = match model {
        "earn_height"
        | "log10earn_height"
        | "logearn_height"
        | "logearn_height_male"
        | "logearn_interaction"
        | "logearn_interaction_z"
        | "logearn_logheight_male" => {
            let earn = data.vector("earn")?;
            let height = data.vector("height")?;
            let n = earn.len();
            let log_earn = log(&earn);
            match model {
                "earn_height" => earnings(earn, vec![ones(n), height]),
                "log10earn_height" => earnings(
                    earn.iter().map(|e| e.log10()).collect(),
                    vec![ones(n), height],
                ),
                "logearn_height" => earnings(log_earn, vec![ones(n), height]),
                "logearn_height_male" => {
                    earnings(log_earn, vec![ones(n), height, data.vector("male")?])
                }
                "logearn_interaction" => {
                    let male = data.vector("male")?;
                    let inter = product(&height, &male);
                    earnings(log_earn, vec![ones(n), height, male, inter])
                }
                "logearn_interaction_z" => {
                    let male = data.vector("male")?;
                    let z = standardised(&height);
                    let inter = product(&z, &male);
                    earnings(log_earn, vec![ones(n), z, male, inter])
                }
                _ => earnings(log_earn, vec![ones(n), log(&height), data.vector("male")?]),
            }
        }
        "kidscore_momhs" => {
            let hs = data.vector("mom_hs")?;
            kidiq(vec![ones(hs.len()), hs])?
        }
        "kidscore_momiq" => {
            let iq = data.vector("mom_iq")?;
            kidiq(vec![ones(iq.len()), iq])?
        }
        "kidscore_momhsiq" => {
            let (hs, iq) = (data.vector("mom_hs")?, data.vector("mom_iq")?);
            kidiq(vec![ones(hs.len()), hs, iq])?
        }
        "kidscore_interaction" => {
            let (hs, iq) = (data.vector("mom_hs")?, data.vector("mom_iq")?);
            let inter = product(&hs, &iq);
            kidiq(vec![ones(hs.len()), hs, iq, inter])?
        }
        "mesquite" | "logmesquite" | "logmesquite_logvolume" => {
            let weight = data.vector("weight")?;
            let diam1 = data.vector("diam1")?;
            let diam2 = data.vector("diam2")?;
            let canopy = data.vector("canopy_height")?;
            let n = weight.len();
            let columns = match model {
                "logmesquite_logvolume" => {
                    vec![ones(n), log(&product(&product(&diam1, &diam2), &canopy))]
                }
                _ => {
                    let mut c = vec![
                        ones(n),
                        diam1,
                        diam2,
                        canopy,
                        data.vector("total_height")?,
                        data.vector("density")?,
                    ];
                    if model == "logmesquite" {
                        c[1..].iter_mut().for_each(|v| *v = log(v));
                    }
                    c.push(data.vector("group")?);
                    c
                }
            };
            let y = if model == "mesquite" {
                weight
            } else {
                log(&weight)
            };
            Design::betas(columns, y).with_priors(flat, flat_positive)
        }
        "nes" => {
            let age = data.vector("age_discrete")?;
            let indicator = |k: f64| age.iter().map(|a| f64::from(u8::from(*a == k))).collect();
            let columns = vec![
                ones(age.len()),
                data.vector("real_ideo")?,
                data.vector("race_adj")?,
                indicator(2.0),
                indicator(3.0),
                indicator(4.0),
                data.vector("educ1")?,
                data.vector("gender")?,
                data.vector("income")?,
            ];
            Design::betas(columns, data.vector("partyid7")?).with_priors(flat, flat_positive)
        }
        "blr" => {
            let rows = data.rows("X")?;
            let d = rows.first().map_or(0, Vec::len);
            let columns = (0..d)
                .map(|j| rows.iter().map(|r| r[j]).collect())
                .collect();
            // sigma ~ normal(0, 10) on sigma > 0: a half-normal up to its constant.
            let sigma = ParameterPrior::HalfNormal { scale: 10.0 };
            Design::betas(columns, data.vector("y")?).with_priors(normal10, sigma)
        }
        "arK" => {
            let k = data.scalar("K")? as usize;
            let y = data.vector("y")?;
            if k == 0 || y.len() <= k {
                return Err(data.error(format!("K = {k} needs more than K values of y")));
            }
            let rows = k..y.len();
            let mut columns = vec![ones(rows.len())];
            for lag in 1..=k {
                columns.push(rows.clone().map(|t| y[t - lag]).collect());
            }
            let mut names = vec!["alpha".to_string()];
            names.extend((1..=k).map(|j| format!("beta[{j}]")));
            let design = Design {
                columns,
                y: rows.map(|t| y[t]).collect(),
                names,
            };
            design.with_priors(normal10, half_cauchy)
        }
        "low_dim_gauss_mix" => Prepared::Mixture {
            y: data.vector("y")?,
            priors: NormalMixturePriors::default(),
        },
        _ => return Ok(None),
    };
    Ok(Some(built))
}

/// Posterior `name` of the posteriordb folder `dir`: its model built from its data, and its
/// reference draws in the model's parameter order.
pub fn load(dir: &Path, name: &str) -> Result<Posterior, PosteriordbError> {
    let info_path = dir.join("posteriors").join(format!("{name}.json"));
    let info = read_json(&info_path)?;
    let field = |key: &str| {
        info.get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| PosteriordbError::Format {
                path: info_path.clone(),
                message: format!("no `{key}`"),
            })
    };
    let (model_name, data_name) = (field("model_name")?, field("data_name")?);
    let data_path = dir.join("data").join(format!("{data_name}.json.zip"));
    let json = read_zipped_json(&data_path)?;
    let data = Data {
        json: &json,
        path: &data_path,
    };
    let prepared = build(&model_name, &data)?.ok_or_else(|| PosteriordbError::UnknownModel {
        posterior: name.to_string(),
        model: model_name.clone(),
    })?;
    let model = prepared.model().map_err(|source| PosteriordbError::Model {
        posterior: name.to_string(),
        source,
    })?;
    let draws_path = dir.join("reference_draws").join(format!("{name}.json.zip"));
    let reference = reference_chains(&read_zipped_json(&draws_path)?, &model.parameter_names())
        .map_err(|message| PosteriordbError::Format {
            path: draws_path,
            message,
        })?;
    Ok(Posterior {
        name: name.to_string(),
        model_name,
        model,
        prepared,
        reference,
    })
}

/// The reference draws (a list of chains, each `{"param[i]": [draws]}`) as row-major chains
/// in the order of `names`.
fn reference_chains(json: &Value, names: &[String]) -> Result<Vec<Vec<f64>>, String> {
    let chains = json
        .as_array()
        .ok_or("the reference draws are not a list of chains")?;
    chains
        .iter()
        .enumerate()
        .map(|(c, chain)| {
            let columns: Vec<Vec<f64>> = names
                .iter()
                .map(|name| {
                    let values = chain
                        .get(name)
                        .and_then(Value::as_array)
                        .ok_or_else(|| format!("chain {c} has no draws of `{name}`"))?;
                    values
                        .iter()
                        .map(|v| v.as_f64().ok_or_else(|| format!("`{name}`: a non-number")))
                        .collect()
                })
                .collect::<Result<_, String>>()?;
            let n = columns.first().map_or(0, Vec::len);
            if columns.iter().any(|c| c.len() != n) {
                return Err(format!(
                    "chain {c}: parameters with different numbers of draws"
                ));
            }
            Ok((0..n)
                .flat_map(|i| columns.iter().map(move |col| col[i]))
                .collect())
        })
        .collect()
}

/// One parameter compared with the reference.
#[derive(Debug, Clone, Serialize)]
pub struct ParameterComparison {
    /// Its name.
    pub name: String,
    /// Our mean and its Monte Carlo standard error.
    pub mean: f64,
    /// MCSE of our mean.
    pub mcse: f64,
    /// The reference mean.
    pub reference_mean: f64,
    /// MCSE of the reference mean.
    pub reference_mcse: f64,
    /// (mean − reference mean)/√(mcse² + reference mcse²).
    pub z: f64,
    /// Our sd.
    pub sd: f64,
    /// The reference sd.
    pub reference_sd: f64,
    /// sd / reference sd.
    pub sd_ratio: f64,
}

/// Draws compared with a posterior's reference.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// Per parameter.
    pub parameters: Vec<ParameterComparison>,
    /// ξ = ‖σ̂ − σ_ref‖₂/‖σ_ref‖₂.
    pub xi: f64,
}

/// The heading and header of the per-parameter table whose rows
/// [`Comparison::parameter_rows`] writes, with the `leading` columns first.
pub fn parameter_header(leading: &[&str]) -> String {
    let columns = [
        "parameter",
        "mean",
        "MCSE",
        "reference mean",
        "reference MCSE",
        "z",
        "sd",
        "reference sd",
        "sd ratio",
    ];
    let all: Vec<&str> = leading.iter().copied().chain(columns).collect();
    format!(
        "\n### Every parameter\n\n| {} |\n|{}\n",
        all.join(" | "),
        "---|".repeat(all.len())
    )
}

impl Comparison {
    /// One Markdown row per parameter, the `leading` cells first (see [`parameter_header`]).
    pub fn parameter_rows(&self, leading: &[&str]) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        for p in &self.parameters {
            let _ = writeln!(
                s,
                "| {} | {} | {:.5} | {:.5} | {:.5} | {:.5} | {:.2} | {:.5} | {:.5} | {:.4} |",
                leading.join(" | "),
                p.name,
                p.mean,
                p.mcse,
                p.reference_mean,
                p.reference_mcse,
                p.z,
                p.sd,
                p.reference_sd,
                p.sd_ratio
            );
        }
        s
    }

    /// The largest |z| over the parameters.
    pub fn max_abs_z(&self) -> f64 {
        self.parameters
            .iter()
            .map(|p| p.z.abs())
            .fold(0.0, f64::max)
    }

    /// The largest |sd ratio − 1|.
    pub fn max_sd_error(&self) -> f64 {
        self.parameters
            .iter()
            .map(|p| (p.sd_ratio - 1.0).abs())
            .fold(0.0, f64::max)
    }
}

/// Compare `chains` (constrained, row-major) with `posterior`'s reference draws.
pub fn compare(posterior: &Posterior, chains: &[Vec<f64>]) -> Comparison {
    let names = posterior.model.parameter_names();
    let view = |c: &[Vec<f64>]| -> Vec<_> {
        let slices: Vec<&[f64]> = c.iter().map(Vec::as_slice).collect();
        summarize_parameters(&names, &slices)
    };
    let ours = view(chains);
    let reference = view(&posterior.reference);
    let parameters: Vec<ParameterComparison> = ours
        .iter()
        .zip(&reference)
        .map(|(row, r)| {
            let (o, r) = (&row.stats, &r.stats);
            ParameterComparison {
                name: row.name.clone(),
                mean: o.mean,
                mcse: o.mcse_mean,
                reference_mean: r.mean,
                reference_mcse: r.mcse_mean,
                z: (o.mean - r.mean) / (o.mcse_mean.powi(2) + r.mcse_mean.powi(2)).sqrt(),
                sd: o.sd,
                reference_sd: r.sd,
                sd_ratio: o.sd / r.sd,
            }
        })
        .collect();
    let sd: Vec<f64> = parameters.iter().map(|p| p.sd).collect();
    let reference_sd: Vec<f64> = parameters.iter().map(|p| p.reference_sd).collect();
    Comparison {
        xi: relative_sd_error_of(&sd, &reference_sd).unwrap_or(f64::NAN),
        parameters,
    }
}

/// NUTS on one posterior.
#[derive(Debug, Clone, Serialize)]
pub struct NutsRow {
    /// The posterior.
    pub posterior: String,
    /// The comparison with the reference.
    pub comparison: Comparison,
    /// Divergent transitions after warm-up.
    pub divergences: usize,
    /// Largest R-hat.
    pub max_rhat: f64,
    /// Smallest bulk ESS.
    pub min_ess_bulk: f64,
    /// Seconds of sampling.
    pub seconds: f64,
}

/// Run NUTS on `posterior` and compare its constrained draws with the reference.
pub fn nuts_row(
    posterior: &Posterior,
    settings: &NutsSettings,
) -> Result<NutsRow, PosteriordbError> {
    let model = posterior.model.as_ref();
    let r = run_nuts(model, settings, &NoProgress).map_err(|source| PosteriordbError::Nuts {
        posterior: posterior.name.clone(),
        source,
    })?;
    let chains: Vec<Vec<f64>> = r.draws.iter().map(|c| constrain_draws(model, c)).collect();
    Ok(NutsRow {
        posterior: posterior.name.clone(),
        comparison: compare(posterior, &chains),
        divergences: r.divergences(),
        max_rhat: r.max_rhat(),
        min_ess_bulk: r.min_ess_bulk(),
        seconds: r.seconds,
    })
}

/// The tolerances of a NUTS row: every mean within 4 combined MCSE, every sd within 5 %.
pub const Z_TOLERANCE: f64 = 4.0;
/// See [`Z_TOLERANCE`].
pub const SD_TOLERANCE: f64 = 0.05;

impl NutsRow {
    /// Every mean within [`Z_TOLERANCE`] combined MCSE and every sd within [`SD_TOLERANCE`].
    pub fn passes(&self) -> bool {
        self.comparison.max_abs_z() <= Z_TOLERANCE && self.comparison.max_sd_error() <= SD_TOLERANCE
    }
}

/// NUTS on every posterior of a folder.
#[derive(Debug, Clone, Serialize)]
pub struct NutsReport {
    /// The settings of every run.
    pub settings: NutsSettings,
    /// One row per posterior.
    pub rows: Vec<NutsRow>,
}

/// NUTS on the posteriors `names` of `dir` (one after the other; each run's chains in
/// parallel), `settings.seed` for every posterior.
pub fn nuts_report(
    dir: &Path,
    names: &[String],
    settings: &NutsSettings,
    mut each: impl FnMut(&NutsRow),
) -> Result<NutsReport, PosteriordbError> {
    let mut rows = Vec::with_capacity(names.len());
    for name in names {
        let posterior = load(dir, name)?;
        let row = nuts_row(&posterior, settings)?;
        each(&row);
        rows.push(row);
    }
    Ok(NutsReport {
        settings: settings.clone(),
        rows,
    })
}

impl NutsReport {
    /// The summary table (one row per posterior) and, below it, every parameter's row, in
    /// Markdown.
    pub fn markdown(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "| posterior | D | max \\|z\\| of the means | max \\|sd/sd_ref − 1\\| | ξ | divergences | max R-hat | min bulk ESS | seconds | within tolerance |\n|---|---|---|---|---|---|---|---|---|---|"
        );
        for r in &self.rows {
            let c = &r.comparison;
            let _ = writeln!(
                s,
                "| {} | {} | {:.2} | {:.1} % | {:.1} % | {} | {:.3} | {:.0} | {:.1} | {} |",
                r.posterior,
                c.parameters.len(),
                c.max_abs_z(),
                100.0 * c.max_sd_error(),
                100.0 * c.xi,
                r.divergences,
                r.max_rhat,
                r.min_ess_bulk,
                r.seconds,
                if r.passes() { "yes" } else { "**no**" }
            );
        }
        s.push_str(&parameter_header(&["posterior"]));
        for r in &self.rows {
            s.push_str(&r.comparison.parameter_rows(&[&r.posterior]));
        }
        s
    }
}
