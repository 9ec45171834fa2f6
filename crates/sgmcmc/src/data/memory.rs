//! How much memory this process can use: decides whether a mapped file is read as data larger
//! than memory ([`super::Matrix::is_out_of_core`]) and whether an in-memory copy would fit.

use std::fs;

/// The memory available to this process, in bytes: `MemAvailable` from `/proc/meminfo`
/// (free memory plus the page cache the kernel can reclaim), or the limit of its memory
/// cgroup (v2 `memory.max`, v1 `memory.limit_in_bytes`) when that is lower. `None` where
/// neither can be read (not Linux).
pub fn available_memory() -> Option<usize> {
    let meminfo = fs::read_to_string("/proc/meminfo").ok().and_then(|text| {
        let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
        let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib.saturating_mul(1024))
    });
    match (meminfo, cgroup_limit()) {
        (Some(m), Some(c)) => Some(m.min(c)),
        (m, c) => m.or(c),
    }
}

/// The memory limit of this process's cgroup (v2 unified hierarchy, or the v1 memory
/// controller); `None` when there is none or it is unlimited.
fn cgroup_limit() -> Option<usize> {
    let own = fs::read_to_string("/proc/self/cgroup").ok()?;
    let read = |path: String| -> Option<usize> {
        fs::read_to_string(path).ok()?.trim().parse::<usize>().ok()
    };
    let mut limit = None;
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let found = if controllers.is_empty() {
            read(format!("/sys/fs/cgroup{path}/memory.max"))
                .or_else(|| read(format!("/sys/fs/cgroup/unified{path}/memory.max")))
        } else if controllers.split(',').any(|c| c == "memory") {
            read(format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes"))
        } else {
            None
        };
        // "max" (v2) does not parse, and v1 reports "no limit" as a value near 2^63.
        if let Some(l) = found.filter(|&l| l < 1 << 62) {
            limit = Some(limit.map_or(l, |m: usize| m.min(l)));
        }
    }
    limit
}

/// A lower bound on what sampling a model holds per parameter: its name (about 40 bytes) and
/// a few dozen f64 vectors of the parameters' length (the MAP search's history, each chain's
/// position, gradient and state, the summaries).
pub const BYTES_PER_PARAMETER: u128 = 512;

/// An error if holding `bytes` (described by `what`, for the message) would exceed the memory
/// available ([`available_memory`]); no check where that cannot be read.
pub fn check_fits(
    path: &str,
    what: impl FnOnce() -> String,
    bytes: u128,
) -> Result<(), super::DataError> {
    match available_memory() {
        Some(available) if bytes > available as u128 => Err(super::DataError::TooLargeForMemory {
            path: path.to_string(),
            what: what(),
            needed_gb: bytes as f64 / 1e9,
            available_gb: available as f64 / 1e9,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn available_memory_is_positive_on_linux() {
        if cfg!(target_os = "linux") {
            let m = available_memory().expect("/proc/meminfo is readable on Linux");
            assert!(m > 1 << 20, "{m} bytes available");
        }
    }
}
