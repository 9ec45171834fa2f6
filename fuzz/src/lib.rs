//! The bodies of the cargo-fuzz targets (`fuzz_targets/*.rs` call one each).
//!
//! Every loader of sgmcmc reads a path, so each body writes the fuzzer's bytes to a file in a
//! scratch directory of this process (in `/dev/shm` where there is one) and calls the loader on
//! it. A body panics only where the code under test is wrong: a loader must answer any bytes
//! with a value or an error, never a panic, an abort, a hang or an allocation the bytes do not
//! justify (libFuzzer's `-rss_limit_mb` and `-malloc_limit_mb` catch the last).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use sgmcmc::data::{self, idx};
use sgmcmc::io::{posterior_variables, read_all_chains, read_draws};
use sgmcmc::moments::ReferenceMoments;
use sgmcmc_runfile::config::Config;
use sgmcmc_runfile::config::coreset::CoresetFile;
use sgmcmc_runfile::pipeline::{build_model, check_run};

thread_local! {
    /// This thread's scratch directory (tests run targets on several threads at once).
    static SCRATCH: PathBuf = {
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let thread = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("sgmcmc-fuzz-{}-{thread}", std::process::id()));
        fs::create_dir_all(&dir).expect("cannot make the fuzzing scratch directory");
        dir
    };
}

/// This thread's scratch directory (made once; each body overwrites its own files in it).
fn scratch() -> PathBuf {
    SCRATCH.with(PathBuf::clone)
}

/// Removes this thread's scratch directory (a test calls it when done).
pub fn remove_scratch() {
    let _ = fs::remove_dir_all(scratch());
}

/// Writes `bytes` to the scratch file `name` and returns its path.
fn file(name: &str, bytes: &[u8]) -> PathBuf {
    let path = scratch().join(name);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).expect("cannot make a scratch directory");
    }
    fs::write(&path, bytes).expect("cannot write a scratch file");
    path
}

/// Writes `bytes` to the scratch file `name` if it can: two chunk keys of different array
/// ranks (`c/0/0` and `c/0/0/0`) cannot both be files, and the first one written wins.
fn file_if_possible(name: &str, bytes: &[u8]) {
    let path = scratch().join(name);
    if let Some(parent) = path.parent() {
        let _ = fs::create_dir_all(parent);
    }
    let _ = fs::write(&path, bytes);
}

/// The same bytes gzip-compressed (the loaders decompress `.gz` files by extension).
fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).expect("gzip into memory");
    encoder.finish().expect("gzip into memory")
}

/// Splits off the first byte, which a body uses to choose among variants of its loader.
fn selector(data: &[u8]) -> (u8, &[u8]) {
    match data.split_first() {
        Some((&first, rest)) => (first, rest),
        None => (0, data),
    }
}

/// A run file (`sgmcmc run`'s TOML) and a coreset run file: parsed; a parsed run file goes back
/// to TOML and parses to an equal value, and is checked against a small model of its kind.
pub fn run_file(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = CoresetFile::from_toml(text, "fuzz.toml");
    let Ok(cfg) = Config::from_toml(text, "fuzz.toml") else {
        return;
    };
    // A NaN anywhere makes the value unequal to itself: the round trip cannot be compared.
    #[allow(clippy::eq_op)]
    if cfg == cfg {
        let written = cfg
            .to_toml()
            .unwrap_or_else(|e| panic!("a parsed run file cannot be written back: {e}"));
        let back = Config::from_toml(&written, "written.toml")
            .unwrap_or_else(|e| panic!("the run file as written does not parse: {e}\n{written}"));
        assert_eq!(
            back, cfg,
            "the run file changed in a round trip:\n{written}"
        );
    }
    for dataset in [
        data::synthetic::logistic_regression(24, 3, 1).0,
        data::synthetic::gaussian_location(24, 3, 1),
    ] {
        if let Ok(model) = build_model(&cfg.model, dataset) {
            let _ = check_run(&cfg, model.as_ref());
        }
    }
}

/// A `.npy` file, as features (2-D, any dtype the loader takes) and as a vector (1-D).
pub fn npy(data: &[u8]) {
    let path = file("data.npy", data);
    let _ = data::load_npy_features(&path);
    let _ = data::load_npy_vector(&path);
}

/// A CSV file with a header, with and without a target column, plain or gzip-compressed.
pub fn csv(data: &[u8]) {
    let (choice, bytes) = selector(data);
    let path = if choice & 1 == 0 {
        file("data.csv", bytes)
    } else {
        file("data.csv.gz", &gzip(bytes))
    };
    let _ = data::load_csv(&path, None);
    let _ = data::load_csv(&path, Some("y"));
}

/// A LIBSVM file, plain or gzip-compressed, with the column count from the file or given.
pub fn libsvm(data: &[u8]) {
    let (choice, bytes) = selector(data);
    let path = if choice & 1 == 0 {
        file("data.svm", bytes)
    } else {
        file("data.svm.gz", &gzip(bytes))
    };
    let columns = (choice & 2 != 0).then_some(usize::from(choice >> 2));
    let _ = data::load_libsvm(&path, columns);
}

/// An IDX file (MNIST's format) as images, in f64 and f32, and as labels.
pub fn idx(data: &[u8]) {
    let path = file("data.idx", data);
    let _ = idx::load_idx_images::<f64>(&path);
    let _ = idx::load_idx_images::<f32>(&path);
    let _ = idx::load_idx_labels(&path);
}

/// A MovieLens ratings file (`user::movie::rating::time` or `u.data`'s tab-separated columns).
pub fn movielens(data: &[u8]) {
    let path = file("ratings.dat", data);
    let _ = data::movielens_counts(&path);
    let _ = data::load_movielens(&path);
}

/// A reference-moments JSON file (`sgmcmc reference`'s output, read by `--reference`).
pub fn reference_json(data: &[u8]) {
    let path = file("reference.json", data);
    let _ = ReferenceMoments::load(&path);
}

/// A Zarr store whose `posterior/theta` array has the fuzzer's metadata and one chunk. The
/// first byte chooses Zarr v3 (`zarr.json`, bit 0 clear) or v2 (`.zarray`), and which of the
/// first chunk's keys in the default encodings (of 2-D or 3-D arrays) comes first (bit 1); the
/// rest is the array's metadata, then a NUL byte, then the chunk's bytes.
pub fn zarr(data: &[u8]) {
    let (choice, rest) = selector(data);
    let (metadata, chunk) = match rest.iter().position(|&b| b == 0) {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (rest, &[][..]),
    };
    let store = scratch().join("store.zarr");
    let _ = fs::remove_dir_all(&store);
    let array = |name: &str| format!("store.zarr/posterior/theta/{name}");
    if choice & 1 == 0 {
        let group = br#"{"zarr_format":3,"node_type":"group","attributes":{}}"#;
        file("store.zarr/zarr.json", group);
        file("store.zarr/posterior/zarr.json", group);
        file(&array("zarr.json"), metadata);
        let mut keys = ["c/0/0/0", "c/0/0", "c.0.0.0", "0.0.0", "0/0/0", "0/0"];
        if choice & 2 != 0 {
            keys.reverse();
        }
        for key in keys {
            file_if_possible(&array(key), chunk);
        }
    } else {
        let group = br#"{"zarr_format":2}"#;
        file("store.zarr/.zgroup", group);
        file("store.zarr/posterior/.zgroup", group);
        file(&array(".zarray"), metadata);
        let mut keys = ["0.0.0", "0/0/0", "0.0", "0/0"];
        if choice & 2 != 0 {
            keys.reverse();
        }
        for key in keys {
            file_if_possible(&array(key), chunk);
        }
    }
    let _ = posterior_variables(&store);
    let _ = read_draws(&store, "theta");
    let _ = read_all_chains(&store, "theta");
}
