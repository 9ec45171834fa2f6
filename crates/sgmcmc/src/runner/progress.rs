//! Progress reporting: the [`Progress`] callbacks the runner calls (the CLI draws bars or log
//! lines through them), and [`NoProgress`], the library default.

use super::ChainReport;

/// Receives progress from the runner (from several threads at once).
pub trait Progress: Sync {
    /// Chain `chain` starts; `total` iterations if the budget is a count.
    fn chain_started(&self, _chain: usize, _total: Option<usize>) {}
    /// Chain `chain` has done `iterations` iterations (called every few thousand).
    fn advanced(&self, _chain: usize, _iterations: usize) {}
    /// Chain `chain` finished (or diverged).
    fn chain_finished(&self, _chain: usize, _report: &ChainReport) {}
}

/// Reports nothing (library default).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProgress;
impl Progress for NoProgress {}
