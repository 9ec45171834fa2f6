//! The IDX (MNIST) loader: round trips of small files written here (plain and gzipped), one
//! error per malformed input whose message names the file and the problem, and the real MNIST
//! files at `../shared/data/mnist` (skipped with a note when absent).

use crate::common;

use common::idx_bytes;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use sgmcmc::data::idx::{load_idx_images, load_idx_labels, mnist_pair};
use sgmcmc::data::{DataError, Matrix};

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, bytes).unwrap();
    p
}

/// Three 2 × 3 images whose pixels cover 0, 255 and values in between.
const PIXELS: [u8; 18] = [
    0, 1, 2, 127, 128, 255, //
    255, 254, 3, 0, 0, 17, //
    9, 8, 7, 6, 5, 4,
];
const LABELS: [u8; 3] = [7, 1, 0];

/// The loaded matrix is 3 × 6 and every pixel is b/255 for its byte b, in file order.
fn check_images<T: sgmcmc::data::Element>(m: &Matrix<T>, what: &str) {
    assert_eq!((m.rows(), m.cols()), (3, 6), "{what}: shape");
    for (k, (v, &b)) in m.as_slice().iter().zip(&PIXELS).enumerate() {
        let v = v.to_f64();
        assert!((0.0..=1.0).contains(&v), "{what}: pixel {k} = {v}");
        // Correct rounding of b/255 in f32 or f64 is within 2⁻²⁴ relative.
        assert!(
            (v - f64::from(b) / 255.0).abs() <= 6e-8 * v,
            "{what}: pixel {k}: {v} for byte {b}"
        );
        assert_eq!((v * 255.0).round() as u8, b, "{what}: pixel {k}");
    }
}

/// Plain and gzipped files, with and without a `.gz` name (gzip is recognised by its magic
/// bytes), read back exactly, in f64 and f32.
/// Break-once check: mapping each byte to b/256 instead of b/255 in `IdxPixel::from_byte`
/// made this test fail at pixel 1 (0.00390625 for byte 1); `real_mnist` failed too (maximum
/// pixel 255/256).
#[test]
fn round_trip_plain_and_gzipped() {
    let dir = tempfile::tempdir().unwrap();
    let images = idx_bytes(&[3, 2, 3], &PIXELS);
    let labels = idx_bytes(&[3], &LABELS);
    for (name, bytes) in [
        ("images.idx3", images.clone()),
        ("images.idx3.gz", gzip(&images)),
        ("images-gzip-without-suffix", gzip(&images)),
    ] {
        let p = write(dir.path(), name, &bytes);
        check_images(&load_idx_images::<f64>(&p).unwrap(), name);
        check_images(&load_idx_images::<f32>(&p).unwrap(), name);
    }
    for (name, bytes) in [
        ("labels.idx1", labels.clone()),
        ("labels.idx1.gz", gzip(&labels)),
    ] {
        let p = write(dir.path(), name, &bytes);
        assert_eq!(load_idx_labels(&p).unwrap(), LABELS, "{name}");
    }
    // Multi-member gzip (concatenated streams) is one gzip file.
    let (head, tail) = images.split_at(10);
    let mut two = gzip(head);
    two.extend(gzip(tail));
    let p = write(dir.path(), "two-members.gz", &two);
    check_images(&load_idx_images::<f64>(&p).unwrap(), "two members");
}

/// `mnist_pair` finds `{split}-images-idx3-ubyte[.gz]` and `{split}-labels-idx1-ubyte[.gz]`,
/// and rejects disagreeing counts and labels that are not digits.
/// Break-once check: removing the row-count comparison made the mismatch case load without
/// error, and this test failed on `unwrap_err`.
#[test]
fn mnist_pair_checks_the_counts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "train-images-idx3-ubyte.gz",
        &gzip(&idx_bytes(&[3, 2, 3], &PIXELS)),
    );
    write(
        d,
        "train-labels-idx1-ubyte.gz",
        &gzip(&idx_bytes(&[3], &LABELS)),
    );
    let (images, labels) = mnist_pair::<f64>(d, "train").unwrap();
    check_images(&images, "mnist_pair");
    assert_eq!(labels, LABELS);

    // Uncompressed names are used when the .gz ones are absent.
    write(d, "t10k-images-idx3-ubyte", &idx_bytes(&[3, 2, 3], &PIXELS));
    write(d, "t10k-labels-idx1-ubyte", &idx_bytes(&[2], &LABELS[..2]));
    let e = mnist_pair::<f32>(d, "t10k").unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, DataError::RowMismatch { .. }), "{msg}");
    assert!(
        msg.contains("t10k-images-idx3-ubyte has 3 rows")
            && msg.contains("t10k-labels-idx1-ubyte has 2"),
        "{msg}"
    );

    write(d, "t10k-labels-idx1-ubyte", &idx_bytes(&[3], &[1, 10, 2]));
    let msg = mnist_pair::<f32>(d, "t10k").unwrap_err().to_string();
    assert!(
        msg.contains("t10k-labels-idx1-ubyte: row 2: label 10") && msg.contains("digit 0-9"),
        "{msg}"
    );

    let msg = mnist_pair::<f32>(d, "valid").unwrap_err().to_string();
    assert!(msg.contains("valid-images-idx3-ubyte.gz"), "{msg}");
}

/// The error of loading `bytes` (written as `name`) as images, or as labels if `labels`.
fn load_error(dir: &Path, name: &str, bytes: &[u8], labels: bool) -> String {
    let p = write(dir, name, bytes);
    let e = if labels {
        load_idx_labels(&p).map(|_| ()).unwrap_err()
    } else {
        load_idx_images::<f64>(&p).map(|_| ()).unwrap_err()
    };
    let msg = e.to_string();
    assert!(msg.starts_with(&p.display().to_string()), "{msg}");
    assert!(!msg.contains('\n'), "{msg}");
    msg
}

fn assert_contains(msg: &str, parts: &[&str]) {
    for part in parts {
        assert!(msg.contains(part), "{msg:?} does not mention {part:?}");
    }
}

/// Every malformed input fails with a one-line error that starts with the file name and says
/// what is wrong.
/// Break-once check: dropping the trailing-bytes read (returning right after the data) made
/// the first trailing-bytes case load without error, and this test failed on `unwrap_err`.
#[test]
fn malformed_files_give_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let images = idx_bytes(&[3, 2, 3], &PIXELS);

    // Missing file.
    let p = d.join("nowhere-images-idx3-ubyte.gz");
    let msg = load_idx_images::<f64>(&p).unwrap_err().to_string();
    assert!(msg.starts_with(&p.display().to_string()), "{msg}");
    assert_contains(&msg, &["No such file"]);

    // Wrong magic: not an IDX file at all.
    let msg = load_error(d, "text.idx", b"P5 28 28 255\n", false);
    assert_contains(&msg, &["invalid IDX file", "bad magic number 0x50352032"]);

    // Unsupported element type (f32, 0x0d).
    let mut f32_file = images.clone();
    f32_file[2] = 0x0d;
    let msg = load_error(d, "f32.idx", &f32_file, false);
    assert_contains(
        &msg,
        &[
            "unsupported element type code 0x0d (f32)",
            "0x08 (unsigned byte)",
        ],
    );

    // A label file where images are expected, and the converse.
    let labels = idx_bytes(&[3], &LABELS);
    let msg = load_error(d, "labels-as-images.idx", &labels, false);
    assert_contains(
        &msg,
        &["0x00000801 declares 1 dimension", "an image file has 3"],
    );
    let msg = load_error(d, "images-as-labels.idx", &images, true);
    assert_contains(
        &msg,
        &["0x00000803 declares 3 dimension", "a label file has 1"],
    );

    // Truncated header: empty file, and a file ending inside the sizes.
    let msg = load_error(d, "empty.idx", b"", false);
    assert_contains(&msg, &["truncated header", "after 0 bytes"]);
    let msg = load_error(d, "short-header.idx", &images[..10], false);
    assert_contains(&msg, &["truncated header", "6 of the 12 bytes"]);

    // Truncated data, plain and inside a complete gzip stream.
    let cut = &images[..images.len() - 5];
    let want = ["truncated data", "3 x 2 x 3 (18 bytes)", "only 13 bytes"];
    assert_contains(&load_error(d, "cut.idx", cut, false), &want);
    assert_contains(&load_error(d, "cut.idx.gz", &gzip(cut), false), &want);

    // Trailing bytes, plain and inside a gzip stream.
    let mut long = images.clone();
    long.extend_from_slice(&[0; 7]);
    let want = ["7 trailing bytes", "3 x 2 x 3 data (18 bytes)"];
    assert_contains(&load_error(d, "long.idx", &long, false), &want);
    assert_contains(&load_error(d, "long.idx.gz", &gzip(&long), false), &want);
    let mut long_labels = labels.clone();
    long_labels.push(4);
    let msg = load_error(d, "long-labels.idx", &long_labels, true);
    assert_contains(&msg, &["1 trailing bytes"]);

    // A header whose sizes cannot be addressed.
    let huge = idx_bytes(&[u32::MAX, u32::MAX, u32::MAX], &[]);
    let msg = load_error(d, "huge.idx", &huge, false);
    assert_contains(&msg, &["too large to address"]);

    // gzip damage: a flipped byte inside the compressed data, a cut-off stream, a bad CRC, and
    // a `.gz` name on a file that is not gzip.
    let big: Vec<u8> = (0..4000u32).map(|i| (i * i % 251) as u8).collect();
    let big_gz = gzip(&idx_bytes(&[40, 10, 10], &big));
    let want = ["corrupt or truncated gzip stream"];
    let mut flipped = big_gz.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0xff;
    assert_contains(&load_error(d, "flipped.gz", &flipped, false), &want);
    let cut_gz = &big_gz[..big_gz.len() * 2 / 3];
    assert_contains(&load_error(d, "cut-stream.gz", cut_gz, false), &want);
    let mut bad_crc = big_gz.clone();
    let crc_at = bad_crc.len() - 8;
    bad_crc[crc_at] ^= 0x01;
    assert_contains(&load_error(d, "bad-crc.gz", &bad_crc, false), &want);
    let msg = load_error(d, "plain-named.idx3.gz", &images, false);
    assert_contains(&msg, &["name ends in .gz", "not a gzip stream"]);
}

/// The real MNIST files (reference §6.8, data README §2): shapes, label counts, the 13,007
/// training 1s and 7s, pixel range and the well-known pixel mean/sd. Prints the load time of
/// the training images.
#[test]
fn real_mnist() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/mnist");
    if !dir.exists() {
        eprintln!("skipping real_mnist: {} not found", dir.display());
        return;
    }
    let images_path = dir.join("train-images-idx3-ubyte.gz");
    let start = Instant::now();
    let images = load_idx_images::<f64>(&images_path).unwrap();
    let f64_secs = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let (images32, labels) = mnist_pair::<f32>(&dir, "train").unwrap();
    let f32_pair_secs = start.elapsed().as_secs_f64();
    eprintln!(
        "MNIST training images (60,000 x 784 from {:.1} MB of gzip): load_idx_images::<f64> {f64_secs:.3} s; mnist_pair::<f32> (images + labels) {f32_pair_secs:.3} s",
        fs::metadata(&images_path).unwrap().len() as f64 / 1e6
    );

    assert_eq!((images.rows(), images.cols()), (60_000, 784));
    assert_eq!((images32.rows(), images32.cols()), (60_000, 784));
    let mut counts = [0usize; 10];
    labels.iter().for_each(|&l| counts[usize::from(l)] += 1);
    assert_eq!(
        counts,
        [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    );
    assert_eq!(labels[..10], [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]);
    let ones_and_sevens = labels.iter().filter(|&&l| l == 1 || l == 7).count();
    assert_eq!(ones_and_sevens, 13_007);

    let px = images.as_slice();
    let (lo, hi) = px
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    assert_eq!((lo, hi), (0.0, 1.0));
    // README: pixel mean/255 = 0.130660 and sd/255 = 0.308108 (6 decimals).
    let n = px.len() as f64;
    let mean = px.iter().sum::<f64>() / n;
    let sd = (px.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n).sqrt();
    assert!((mean - 0.130660).abs() < 5e-7, "mean {mean}");
    assert!((sd - 0.308108).abs() < 5e-7, "sd {sd}");
    // The f32 pixels are the f64 ones rounded.
    assert!(
        images32
            .as_slice()
            .iter()
            .zip(px)
            .all(|(&a, &b)| a == b as f32)
    );
    drop((images, images32));

    let (test, test_labels) = mnist_pair::<f32>(&dir, "t10k").unwrap();
    assert_eq!((test.rows(), test.cols()), (10_000, 784));
    let mut counts = [0usize; 10];
    test_labels
        .iter()
        .for_each(|&l| counts[usize::from(l)] += 1);
    assert_eq!(
        counts,
        [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    );
    assert_eq!(test_labels[..10], [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]);
    // Reference §6.8: 2,163 test 1s and 7s.
    assert_eq!(
        test_labels.iter().filter(|&&l| l == 1 || l == 7).count(),
        2_163
    );
}
