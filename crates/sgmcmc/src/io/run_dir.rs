//! A run's output directory as one transaction: a lock that a second run into it is refused
//! by (an advisory `flock` on `.sgmcmc.lock`, released by the kernel when the process ends,
//! kill -9 included, so a crash leaves no stale lock), an existing run that is refused or, on
//! request, cleared before anything new is written (never one run's draws beside another's
//! summary), and files written atomically ([`write_atomic`]).

use super::files::write_atomic;
use crate::sampler::DrawStatistics;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The lock file in every run directory.
pub const LOCK_FILE: &str = ".sgmcmc.lock";

/// Every output any command writes into a run directory, so that a run of one command is
/// recognised by another.
pub const RUN_OUTPUTS: &[&str] = &[
    "draws.zarr",
    CHECKPOINTS,
    "summary.json",
    "diagnostics.svg",
    "coreset.json",
    "rounds.csv",
    "tune.json",
    "winner.toml",
    "winner_draws.zarr",
];

/// The folder of a run directory that holds its chains' checkpoints ([`CheckpointDirectory`]).
pub const CHECKPOINTS: &str = "checkpoints";

/// Outputs that describe a finished run (views of its draws), deleted when a run is continued
/// so that none describes draws it has not seen.
const FINISHED_VIEWS: &[&str] = &["summary.json", "diagnostics.svg"];

/// What to do when the directory already holds a run's outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExistingRun {
    /// Refuse with [`RunDirError::HoldsRun`] (the default: nothing is silently mixed).
    Refuse,
    /// Delete the earlier run's outputs (only the names of [`RUN_OUTPUTS`]) first.
    Overwrite,
    /// Continue the earlier run: keep its draws and checkpoints, delete its summary and figure
    /// (they are written again when the continued run ends).
    Resume,
}

/// Errors opening a run directory. `Display` is one line naming the directory.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunDirError {
    /// A file-system operation failed.
    #[error("{path}: cannot {action}: {source}")]
    Io {
        /// The path acted on.
        path: String,
        /// What was being done.
        action: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The path exists and is not a directory.
    #[error("{path} is not a directory; give a directory for the run's outputs")]
    NotADirectory {
        /// The path given.
        path: String,
    },
    /// Another process holds the directory's lock.
    #[error(
        "{path} is in use by another sgmcmc run{holder}; wait for it to end or choose another output directory"
    )]
    InUse {
        /// The directory.
        path: String,
        /// " (process N)" when the holder wrote its id, else empty.
        holder: String,
    },
    /// The directory holds an earlier run's outputs.
    #[error(
        "{path} already holds a run ({found}); choose another output directory, continue that run (--resume; resume=True in Python), or overwrite it (--overwrite; overwrite=True in Python), which deletes those first"
    )]
    HoldsRun {
        /// The directory.
        path: String,
        /// The outputs found, comma separated.
        found: String,
    },
}

/// The error of `action` failing on the directory `path`.
fn io_error(path: &str, action: &'static str) -> impl FnOnce(io::Error) -> RunDirError {
    let path = path.to_string();
    move |source| RunDirError::Io {
        path,
        action,
        source,
    }
}

/// The lock file of chain `c` in a run directory whose chains run as separate processes
/// ([`RunDirectory::open_chains`]); while held, it holds the holder's process id.
pub fn chain_lock_file(c: usize) -> String {
    format!(".chain-{c}.lock")
}

/// The process id a held lock file holds, if it holds one.
fn holder_pid(lock: &mut File) -> Option<u32> {
    let mut text = String::new();
    lock.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// Writes this process's id into a lock file it holds.
fn stamp_pid(lock: &mut File) -> io::Result<()> {
    lock.set_len(0)?;
    lock.rewind()?;
    writeln!(lock, "{}", std::process::id())
}

/// An output directory held for one run: created if absent, locked until dropped.
#[derive(Debug)]
pub struct RunDirectory {
    path: PathBuf,
    /// Holds the lock; the kernel releases it when this closes or the process ends.
    _lock: File,
    /// The chains' own locks, when this process runs only some of the run's chains.
    _chain_locks: Vec<File>,
}

impl RunDirectory {
    /// Creates (if needed) and locks `path`, then applies `existing` to an earlier run's
    /// outputs there.
    pub fn open(path: &Path, existing: ExistingRun) -> Result<Self, RunDirError> {
        let shown = path.display().to_string();
        let io = |action: &'static str| io_error(&shown, action);
        match fs::metadata(path) {
            Ok(meta) if !meta.is_dir() => return Err(RunDirError::NotADirectory { path: shown }),
            Ok(_) => {}
            Err(_) => fs::create_dir_all(path).map_err(io("create the directory"))?,
        }
        let lock_path = path.join(LOCK_FILE);
        let mut lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(io("create its lock file"))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let holder =
                    holder_pid(&mut lock).map_or(String::new(), |pid| format!(" (process {pid})"));
                return Err(RunDirError::InUse {
                    path: shown,
                    holder,
                });
            }
            Err(TryLockError::Error(e)) => return Err(io("lock it")(e)),
        }
        stamp_pid(&mut lock).map_err(io("write its lock file"))?;
        let found: Vec<&str> = RUN_OUTPUTS
            .iter()
            .copied()
            .filter(|name| fs::symlink_metadata(path.join(name)).is_ok())
            .collect();
        if !found.is_empty() {
            match existing {
                ExistingRun::Refuse => {
                    return Err(RunDirError::HoldsRun {
                        path: shown,
                        found: found.join(", "),
                    });
                }
                ExistingRun::Resume => {
                    for name in found.iter().filter(|n| FINISHED_VIEWS.contains(n)) {
                        fs::remove_file(path.join(name))
                            .map_err(io("delete the earlier run's summary"))?;
                    }
                }
                ExistingRun::Overwrite => {
                    for name in found {
                        let p = path.join(name);
                        let is_dir = fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir());
                        if is_dir {
                            fs::remove_dir_all(&p)
                        } else {
                            fs::remove_file(&p)
                        }
                        .map_err(io("delete the earlier run's outputs"))?;
                    }
                }
            }
        }
        Ok(RunDirectory {
            path: path.to_path_buf(),
            _lock: lock,
            _chain_locks: Vec::new(),
        })
    }

    /// Opens the directory of a prepared run to run only its chains `chains`, beside other
    /// processes that run the others: the directory's lock is taken shared (a whole run into
    /// it, which takes it alone, is refused while chains run, and the other way round), and
    /// each chain's own lock (`.chain-<c>.lock`) alone, so that no chain runs twice at once.
    /// Nothing is deleted.
    pub fn open_chains(path: &Path, chains: &[usize]) -> Result<Self, RunDirError> {
        let shown = path.display().to_string();
        let io = |action: &'static str| io_error(&shown, action);
        if !fs::metadata(path).is_ok_and(|m| m.is_dir()) {
            return Err(RunDirError::NotADirectory { path: shown });
        }
        let open = |name: &str| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path.join(name))
        };
        let lock = open(LOCK_FILE).map_err(io("create its lock file"))?;
        match lock.try_lock_shared() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(RunDirError::InUse {
                    path: shown,
                    holder: String::new(),
                });
            }
            Err(TryLockError::Error(e)) => return Err(io("lock it")(e)),
        }
        let mut chain_locks = Vec::with_capacity(chains.len());
        for &c in chains {
            let mut file = open(&chain_lock_file(c)).map_err(io("create a chain's lock file"))?;
            match file.try_lock() {
                Ok(()) => {
                    stamp_pid(&mut file).map_err(io("write a chain's lock file"))?;
                    chain_locks.push(file);
                }
                Err(TryLockError::WouldBlock) => {
                    let by = holder_pid(&mut file).map_or("another process".to_string(), |pid| {
                        format!("process {pid}")
                    });
                    return Err(RunDirError::InUse {
                        path: shown,
                        holder: format!(" (chain {c} is being run by {by})"),
                    });
                }
                Err(TryLockError::Error(e)) => return Err(io("lock a chain")(e)),
            }
        }
        Ok(RunDirectory {
            path: path.to_path_buf(),
            _lock: lock,
            _chain_locks: chain_locks,
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `name` inside the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Writes `bytes` to `name` in the directory atomically ([`write_atomic`]); returns its path.
    pub fn write(&self, name: &str, bytes: &[u8]) -> io::Result<PathBuf> {
        let path = self.join(name);
        write_atomic(&path, bytes)?;
        Ok(path)
    }
}

/// The checkpoints of a run's chains, one file per chain (`chain-<c>.state`, each replacing
/// the last atomically), beside a file naming the run they belong to (`run.json`).
#[derive(Debug, Clone)]
pub struct CheckpointDirectory {
    dir: PathBuf,
}

/// The file in a [`CheckpointDirectory`] that describes the run.
const RUN_STATE: &str = "run.json";

impl CheckpointDirectory {
    /// The checkpoint folder of `run` (created when the first file is written).
    pub fn of(run: &RunDirectory) -> Self {
        Self {
            dir: run.join(CHECKPOINTS),
        }
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn chain_file(&self, chain: usize) -> PathBuf {
        self.dir.join(format!("chain-{chain}.state"))
    }

    fn statistics_file(&self, chain: usize) -> PathBuf {
        self.dir.join(format!("chain-{chain}.stats"))
    }

    /// Chain `chain`'s per-draw statistics of its first `draws` draws, as its checkpoints kept
    /// them ([`crate::runner::CheckpointStore::save_statistics`]); draws without a record (a
    /// run of an earlier version) have none.
    pub fn load_statistics(&self, chain: usize, draws: usize) -> io::Result<Vec<DrawStatistics>> {
        let bytes = match fs::read(self.statistics_file(chain)) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        let mut statistics: Vec<DrawStatistics> = bytes
            .chunks_exact(DrawStatistics::RECORD_BYTES)
            .take(draws)
            .map(|r| DrawStatistics::from_record(r.try_into().expect("a whole record")))
            .collect();
        statistics.resize(draws, DrawStatistics::default());
        Ok(statistics)
    }

    /// Writes the description of the run (what a continued run must match) atomically.
    pub fn write_run_state(&self, bytes: &[u8]) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        write_atomic(&self.dir.join(RUN_STATE), bytes)
    }

    /// The description of the run, or `None` when there is none (no run took checkpoints here).
    pub fn read_run_state(&self) -> io::Result<Option<String>> {
        match super::files::read_regular_to_string(&self.dir.join(RUN_STATE)) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes `bytes` to the file `name` of the folder atomically (a checkpoint other than a
    /// chain's, such as a tuner's progress).
    pub fn write_file(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        write_atomic(&self.dir.join(name), bytes)
    }

    /// The file `name` of the folder, or `None` when there is none.
    pub fn read_file(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        match super::files::open_regular(&self.dir.join(name)) {
            Ok(mut file) => {
                let mut bytes = Vec::new();
                io::Read::read_to_end(&mut file, &mut bytes)?;
                Ok(Some(bytes))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Each chain's checkpoint (`None`: the chain took none).
    pub fn load(&self, chains: usize) -> io::Result<Vec<Option<Vec<u8>>>> {
        (0..chains)
            .map(|c| match fs::read(self.chain_file(c)) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            })
            .collect()
    }

    /// Deletes every chain's checkpoint (a run that starts afresh).
    pub fn clear_chains(&self) -> io::Result<()> {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return Ok(());
        };
        for entry in entries {
            let entry = entry?;
            if entry.file_name().to_string_lossy().starts_with("chain-") {
                fs::remove_file(entry.path())?;
            }
        }
        Ok(())
    }
}

impl crate::runner::CheckpointStore for CheckpointDirectory {
    fn save(&self, chain: usize, checkpoint: &[u8]) -> Result<(), super::SinkError> {
        let path = self.chain_file(chain);
        fs::create_dir_all(&self.dir)
            .and_then(|()| write_atomic(&path, checkpoint))
            .map_err(|source| super::SinkError::Io { path, source })
    }

    /// Appends to `chain-<c>.stats`, one [`DrawStatistics::RECORD_BYTES`] record per draw,
    /// cut to `from` records first (records a killed process wrote after its last checkpoint).
    fn save_statistics(
        &self,
        chain: usize,
        from: usize,
        statistics: &[DrawStatistics],
    ) -> Result<(), super::SinkError> {
        let path = self.statistics_file(chain);
        let write = || -> io::Result<()> {
            fs::create_dir_all(&self.dir)?;
            let mut file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)?;
            let start = (from * DrawStatistics::RECORD_BYTES) as u64;
            file.set_len(start)?;
            file.seek(io::SeekFrom::Start(start))?;
            let mut bytes = Vec::with_capacity(statistics.len() * DrawStatistics::RECORD_BYTES);
            for s in statistics {
                bytes.extend_from_slice(&s.to_record());
            }
            file.write_all(&bytes)?;
            file.sync_data()
        };
        write().map_err(|source| super::SinkError::Io { path, source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_open_is_refused_while_the_first_holds_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let first = RunDirectory::open(&out, ExistingRun::Refuse).unwrap();
        let e = RunDirectory::open(&out, ExistingRun::Overwrite).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("in use"), "{text}");
        assert!(
            text.contains(&format!("process {}", std::process::id())),
            "{text}"
        );
        drop(first);
        RunDirectory::open(&out, ExistingRun::Refuse).unwrap();
    }

    #[test]
    fn a_chain_runs_in_one_process_at_a_time_whose_id_its_lock_holds() {
        let dir = tempfile::tempdir().unwrap();
        let here = format!("{}", std::process::id());
        let first = RunDirectory::open_chains(dir.path(), &[0, 1]).unwrap();
        let lock = dir.path().join(chain_lock_file(1));
        assert_eq!(fs::read_to_string(&lock).unwrap().trim(), here);
        let e = RunDirectory::open_chains(dir.path(), &[2, 1]).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains(&format!("chain 1 is being run by process {here}")),
            "{text}"
        );
        // Other chains run beside it; a whole run into the directory is refused meanwhile.
        let other = RunDirectory::open_chains(dir.path(), &[2]).unwrap();
        RunDirectory::open(dir.path(), ExistingRun::Resume).unwrap_err();
        drop((first, other));
        RunDirectory::open_chains(dir.path(), &[1]).unwrap();
    }

    #[test]
    fn an_earlier_run_is_refused_or_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDirectory::open(dir.path(), ExistingRun::Refuse).unwrap();
        run.write("summary.json", b"{}").unwrap();
        fs::create_dir(run.join("draws.zarr")).unwrap();
        fs::write(run.join("draws.zarr/zarr.json"), "{}").unwrap();
        fs::write(run.join("notes.txt"), "mine").unwrap();
        drop(run);
        let e = RunDirectory::open(dir.path(), ExistingRun::Refuse).unwrap_err();
        assert!(e.to_string().contains("draws.zarr, summary.json"), "{e}");
        let run = RunDirectory::open(dir.path(), ExistingRun::Overwrite).unwrap();
        assert!(!run.join("summary.json").exists());
        assert!(!run.join("draws.zarr").exists());
        assert_eq!(fs::read_to_string(run.join("notes.txt")).unwrap(), "mine");
    }

    #[test]
    fn a_file_is_not_a_run_directory() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, "x").unwrap();
        let e = RunDirectory::open(&file, ExistingRun::Overwrite).unwrap_err();
        assert!(e.to_string().contains("is not a directory"), "{e}");
        assert_eq!(fs::read_to_string(&file).unwrap(), "x");
    }

    /// A chain's statistics are appended from where its checkpoint is: records a killed
    /// process wrote after its last checkpoint are replaced, and draws without a record read
    /// as having none.
    #[test]
    fn statistics_are_cut_to_the_checkpoint_and_appended() {
        use crate::runner::CheckpointStore;
        let dir = tempfile::tempdir().unwrap();
        let run = RunDirectory::open(dir.path(), ExistingRun::Refuse).unwrap();
        let store = CheckpointDirectory::of(&run);
        let at = |step: f64| DrawStatistics {
            step_size: Some(step),
            ..DrawStatistics::default()
        };
        let first: Vec<DrawStatistics> = (0..5).map(|i| at(i as f64)).collect();
        store.save_statistics(1, 0, &first).unwrap();
        // A resumed chain whose checkpoint had 3 draws: draws 3.. are written again.
        store.save_statistics(1, 3, &[at(30.0)]).unwrap();
        let back = store.load_statistics(1, 6).unwrap();
        let steps: Vec<Option<f64>> = back.iter().map(|s| s.step_size).collect();
        assert_eq!(
            steps,
            [Some(0.0), Some(1.0), Some(2.0), Some(30.0), None, None]
        );
        assert_eq!(
            store.load_statistics(0, 2).unwrap(),
            vec![DrawStatistics::default(); 2]
        );
        store.clear_chains().unwrap();
        assert_eq!(store.load_statistics(1, 1).unwrap()[0].step_size, None);
    }
}
