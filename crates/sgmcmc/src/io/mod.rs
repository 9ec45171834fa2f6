//! Output: where draws go ([`sink`]: in memory, or streamed to a Zarr store that ArviZ opens,
//! `zarr.rs` behind the default-on feature `zarr`) and the run summary written as JSON.

pub mod sink;
pub mod summary;
#[cfg(feature = "zarr")]
pub mod zarr;

pub use sink::{ChainWriter, DrawSink, MemorySink, SinkError, Tee, TimingSink};
pub use summary::{ParameterRow, format_table, summarize_parameters};
#[cfg(feature = "zarr")]
pub use zarr::{StoredDraws, ZarrSink, read_draw_statistics, read_draws};
