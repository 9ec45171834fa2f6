//! The fuzz targets on stable Rust, in `cargo test`: every input of each target's committed
//! corpus (`fuzz/corpus/<target>/`, which holds the seeds, what the coverage-guided runs kept,
//! and every input that once crashed or hung a target), then a fixed number of seeded
//! mutations of them. A target that panics fails the test; one that hangs makes it time out.
//!
//! This is a short, deterministic, uninstrumented run of each target for CI; the
//! coverage-guided fuzzing (libFuzzer, through cargo fuzz) is `fuzz/run` (see fuzz/README.md).

use std::fs;
use std::path::Path;

use rand::{Rng, RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Mutated inputs per target (each is one call of the target).
const MUTATIONS: usize = 20_000;

/// The committed corpus of `target`, in file-name order.
fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    let mut paths: Vec<_> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    paths.sort();
    let inputs: Vec<Vec<u8>> = paths.iter().map(|p| fs::read(p).unwrap()).collect();
    assert!(!inputs.is_empty(), "{}: no corpus", dir.display());
    inputs
}

/// One random edit of `input` (libFuzzer's simplest mutations: flip, insert, erase, copy a
/// run, splice with another input, put a boundary value).
fn mutate(input: &[u8], other: &[u8], rng: &mut impl Rng) -> Vec<u8> {
    let mut out = input.to_vec();
    let edits = 1 + rng.random_range(0..4);
    for _ in 0..edits {
        let len = out.len();
        match rng.random_range(0..6) {
            0 if len > 0 => {
                let at = rng.random_range(0..len);
                out[at] ^= 1 << rng.random_range(0..8);
            }
            1 => {
                let at = rng.random_range(0..=len);
                let byte = *[b'[', b'"', b'\'', b'\n', b'0', b'9', b':', 0, 0xff]
                    .get(rng.random_range(0..9))
                    .unwrap();
                let count = 1 + rng.random_range(0..64);
                out.splice(at..at, std::iter::repeat_n(byte, count));
            }
            2 if len > 0 => {
                let at = rng.random_range(0..len);
                let end = (at + 1 + rng.random_range(0..16)).min(len);
                out.drain(at..end);
            }
            3 if len > 0 => {
                let at = rng.random_range(0..len);
                let end = (at + 1 + rng.random_range(0..32)).min(len);
                let run = out[at..end].to_vec();
                let to = rng.random_range(0..=out.len());
                out.splice(to..to, run);
            }
            4 if !other.is_empty() => {
                let cut = rng.random_range(0..=len);
                let from = rng.random_range(0..other.len());
                out.truncate(cut);
                out.extend_from_slice(&other[from..]);
            }
            _ if len >= 8 => {
                let at = rng.random_range(0..=len - 8);
                let value: u64 = *[0, 1, u64::MAX, 1 << 31, 1 << 40, u32::MAX as u64]
                    .get(rng.random_range(0..6))
                    .unwrap();
                out[at..at + 8].copy_from_slice(&value.to_le_bytes());
            }
            _ => out.push(rng.random()),
        }
    }
    out
}

/// Runs `body` on the corpus of `target`, then on [`MUTATIONS`] seeded mutations of it.
fn run(target: &str, body: fn(&[u8])) {
    let inputs = corpus(target);
    for input in &inputs {
        body(input);
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0x5eed ^ target.len() as u64);
    for _ in 0..MUTATIONS {
        let input = &inputs[rng.random_range(0..inputs.len())];
        let other = &inputs[rng.random_range(0..inputs.len())];
        body(&mutate(input, other, &mut rng));
    }
    sgmcmc_fuzz::remove_scratch();
}

#[test]
fn run_file() {
    run("run_file", sgmcmc_fuzz::run_file);
}

#[test]
fn npy() {
    run("npy", sgmcmc_fuzz::npy);
}

#[test]
fn csv() {
    run("csv", sgmcmc_fuzz::csv);
}

#[test]
fn libsvm() {
    run("libsvm", sgmcmc_fuzz::libsvm);
}

#[test]
fn idx() {
    run("idx", sgmcmc_fuzz::idx);
}

#[test]
fn movielens() {
    run("movielens", sgmcmc_fuzz::movielens);
}

#[test]
fn reference_json() {
    run("reference_json", sgmcmc_fuzz::reference_json);
}

#[test]
fn zarr() {
    run("zarr", sgmcmc_fuzz::zarr);
}
