//! Output: where draws go ([`sink`]: in memory, or streamed to a Zarr store that ArviZ opens)
//! and the run summary written as JSON.

pub mod sink;
pub mod zarr;

pub use sink::{ChainWriter, DrawSink, MemorySink, SinkError, Tee};
pub use zarr::ZarrSink;
