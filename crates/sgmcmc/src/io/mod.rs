//! Output: where draws go ([`sink`]: in memory, or streamed to a Zarr store that ArviZ opens,
//! `zarr.rs` behind the default-on feature `zarr`; `zarr_read.rs` reads such stores back, and
//! those ArviZ, xarray and zarr-python write), the run summary written as JSON, the run
//! directory that holds one run at a time ([`run_dir`]) and whole-file reads and atomic writes
//! ([`files`]).

pub mod files;
pub mod run_dir;
pub mod sink;
pub mod summary;
#[cfg(feature = "zarr")]
pub mod zarr;
#[cfg(feature = "zarr")]
pub mod zarr_read;

pub use files::{check_replaceable, open_regular, read_regular_to_string, write_atomic};
pub use run_dir::{
    CHECKPOINTS, CheckpointDirectory, ExistingRun, RUN_OUTPUTS, RunDirError, RunDirectory,
    chain_lock_file,
};
pub use sink::{ChainWriter, Constrained, DrawSink, MemorySink, SinkError, Tee, TimingSink};
pub use summary::{ParameterRow, format_table, summarize_model_draws, summarize_parameters};
#[cfg(feature = "zarr")]
pub use zarr::{ALL_CHAINS, ZarrSink, read_draw_statistics};
#[cfg(feature = "zarr")]
pub use zarr_read::{
    DEFAULT_VARIABLE, StoredDraws, default_variable, posterior_variables, read_all_chains,
    read_draws, read_posterior,
};
