//! # sgmcmc-runfile
//!
//! The `sgmcmc` run file and what turns it into draws. [`config`] is the TOML schema: each table
//! is composed of the core's typed settings ([`sgmcmc::settings`], [`sgmcmc::tuning::TuneGrid`])
//! plus the file-only parts (data sources, model choice, initialisation, evaluation). [`pipeline`]
//! loads the data, builds the model, samplers and estimators, runs the chains through
//! [`sgmcmc::runner`] and writes the summary. The CLI and the papers' experiments use it; a Rust
//! user who builds typed values directly does not need it.
#![warn(missing_docs)]

pub mod config;
pub mod pipeline;
