//! `sgmcmc._sgmcmc`: the compiled half of the Python package (`python/sgmcmc/` is the other).
//!
//! The Python side writes a run as the run file's JSON form (the same tables as the TOML file,
//! `sgmcmc_runfile::Config`) and hands over the data as NumPy arrays or file paths; this module
//! runs it through the same pipeline as `sgmcmc run` on a thread of its own, with the GIL
//! released, and gives back the draws and `summary.json`'s content. The Python side polls the
//! run for progress and turns Ctrl-C into the runner's stop flag.

mod callback;
mod data;
mod run;

use pyo3::prelude::*;

pyo3::create_exception!(
    _sgmcmc,
    SgmcmcError,
    pyo3::exceptions::PyValueError,
    "A run that cannot start or failed: bad settings or data, a model that cannot be built, \
     a sampler that diverged everywhere. The message names the problem."
);

/// The extension module.
#[pymodule]
fn _sgmcmc(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SgmcmcError", m.py().get_type::<SgmcmcError>())?;
    m.add_class::<run::RunHandle>()?;
    m.add_function(wrap_pyfunction!(run::start_run, m)?)?;
    m.add_function(wrap_pyfunction!(run::read_store, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
