//! IDX files, the format of MNIST (LeCun et al.), plain or gzip-compressed.
//!
//! Layout: a 4-byte big-endian magic number (two zero bytes, the element type code, the number
//! of dimensions k), k big-endian u32 sizes, then the elements in row-major order without
//! padding. Images are `0x00000803` (u8, n × rows × cols), labels `0x00000801` (u8, n).
//! Only the unsigned-byte type (code `0x08`) is read: it is the only one MNIST uses.
//!
//! A file is decompressed when it starts with the gzip magic bytes `1f 8b` (an IDX file starts
//! with `00 00`, so the two cannot be confused); a `.gz` name on a file that is not a gzip
//! stream is an error. Hand-written because the format is a 4-byte header plus raw bytes: no
//! crate is needed beyond flate2 for the decompression.

use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use flate2::read::MultiGzDecoder;

use super::{DataError, Element, Matrix};

/// Pixel precision of [`load_idx_images`]: a byte b becomes b/255 in [0, 1].
///
/// Implemented for `f64` and `f32`. For MNIST, `f32` loses nothing: every b/255 is correctly
/// rounded (relative error ≤ 2⁻²⁴) and the 256 values stay distinct, so the byte is recovered
/// exactly as round(255·v); it halves the memory (188 MB instead of 376 MB for the training
/// images) and the bytes the GLM kernels read per row, and [`super::Features::F32`] carries it
/// through the models unchanged.
pub trait IdxPixel: Element {
    /// The byte `b` scaled to [0, 1]: b/255, correctly rounded.
    fn from_byte(b: u8) -> Self;
}

impl IdxPixel for f64 {
    #[inline]
    fn from_byte(b: u8) -> f64 {
        f64::from(b) / 255.0
    }
}

impl IdxPixel for f32 {
    #[inline]
    fn from_byte(b: u8) -> f32 {
        f32::from(b) / 255.0
    }
}

/// Loads an IDX image file (magic `0x00000803`: n images of rows × cols unsigned bytes) as an
/// n × (rows·cols) matrix of pixels scaled to [0, 1] by /255, one image per row in row-major
/// pixel order. gzip input is decompressed (see the module docs).
///
/// Errors name the file and the problem: missing file, wrong magic number or dimension count,
/// unsupported element type, truncated header or data, trailing bytes, corrupt gzip stream.
pub fn load_idx_images<T: IdxPixel>(path: &Path) -> Result<Matrix<T>, DataError> {
    let name = path.display().to_string();
    let (dims, bytes) = read_idx(path, &name, 3)?;
    let (n, cols) = (dims[0], dims[1] * dims[2]);
    let pixels: Vec<T> = bytes.iter().map(|&b| T::from_byte(b)).collect();
    drop(bytes);
    Matrix::from_vec(pixels, n, cols)
}

/// Loads an IDX label file (magic `0x00000801`: n unsigned bytes). gzip input is decompressed
/// (see the module docs); errors as for [`load_idx_images`].
pub fn load_idx_labels(path: &Path) -> Result<Vec<u8>, DataError> {
    let name = path.display().to_string();
    Ok(read_idx(path, &name, 1)?.1)
}

/// The MNIST split `split` (`"train"` or `"t10k"`) from `dir`: the images of
/// `{split}-images-idx3-ubyte.gz` and the labels of `{split}-labels-idx1-ubyte.gz` (each name
/// without `.gz` is used when only the uncompressed file exists).
///
/// Checks that both files hold the same number of items and that every label is a digit 0–9.
pub fn mnist_pair<T: IdxPixel>(dir: &Path, split: &str) -> Result<(Matrix<T>, Vec<u8>), DataError> {
    let images_path = mnist_file(dir, &format!("{split}-images-idx3-ubyte"));
    let labels_path = mnist_file(dir, &format!("{split}-labels-idx1-ubyte"));
    let images = load_idx_images::<T>(&images_path)?;
    let labels = load_idx_labels(&labels_path)?;
    let labels_source = labels_path.display().to_string();
    if images.rows() != labels.len() {
        return Err(DataError::RowMismatch {
            features_source: images_path.display().to_string(),
            features_rows: images.rows(),
            targets_source: labels_source,
            targets_rows: labels.len(),
        });
    }
    if let Some((row, &label)) = labels.iter().enumerate().find(|&(_, &l)| l > 9) {
        return Err(DataError::LabelOutOfSupport {
            source_name: labels_source,
            row: row + 1,
            value: f64::from(label),
            expected: "a digit 0-9".to_string(),
        });
    }
    Ok((images, labels))
}

/// `dir/stem.gz`, or `dir/stem` if only that exists (the `.gz` name otherwise, so that a missing
/// file is reported under its canonical name).
fn mnist_file(dir: &Path, stem: &str) -> PathBuf {
    let gz = dir.join(format!("{stem}.gz"));
    let plain = dir.join(stem);
    if !gz.exists() && plain.exists() {
        plain
    } else {
        gz
    }
}

/// Readers hold at most this many bytes in advance of the data (the MNIST training images,
/// 47 MB, fit in one reservation); larger data grows the buffer as it arrives, so a corrupt
/// header that claims terabytes fails on the missing bytes, not on the allocation.
const MAX_RESERVE: usize = 1 << 26;

/// Reads the IDX file at `path` (display name `name`), which must hold unsigned bytes in
/// `want_dims` dimensions; returns the sizes and the data bytes.
fn read_idx(path: &Path, name: &str, want_dims: u8) -> Result<(Vec<usize>, Vec<u8>), DataError> {
    let invalid = |message: String| DataError::InvalidIdx {
        path: name.to_string(),
        message,
    };
    let file = crate::io::open_regular(path).map_err(|e| DataError::io(name, e))?;
    let mut file = BufReader::with_capacity(1 << 16, file);
    let gzip = file
        .fill_buf()
        .map_err(|e| DataError::io(name, e))?
        .starts_with(&[0x1f, 0x8b]);
    let gz_name = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"));
    if gz_name && !gzip {
        return Err(invalid(
            "the name ends in .gz but the file is not a gzip stream (it does not start with bytes 1f 8b)"
                .to_string(),
        ));
    }
    let mut reader: Box<dyn Read> = if gzip {
        Box::new(MultiGzDecoder::new(file))
    } else {
        Box::new(file)
    };
    // flate2 reports a damaged stream as InvalidInput/InvalidData and a cut-off one as
    // UnexpectedEof; anything else is a genuine I/O error.
    let read_error = |e: io::Error| {
        if gzip
            && matches!(
                e.kind(),
                io::ErrorKind::InvalidInput
                    | io::ErrorKind::InvalidData
                    | io::ErrorKind::UnexpectedEof
            )
        {
            invalid(format!("corrupt or truncated gzip stream ({e})"))
        } else {
            DataError::io(name, e)
        }
    };
    let what = if want_dims == 1 {
        "a label"
    } else {
        "an image"
    };

    let mut magic = [0u8; 4];
    let got = read_full(&mut reader, &mut magic).map_err(read_error)?;
    if got < magic.len() {
        return Err(invalid(format!(
            "truncated header: the data ends after {got} bytes, inside the 4-byte magic number"
        )));
    }
    let magic_value = u32::from_be_bytes(magic);
    if magic[..2] != [0, 0] {
        return Err(invalid(format!(
            "bad magic number 0x{magic_value:08x}: an IDX file starts with two zero bytes"
        )));
    }
    if magic[2] != 0x08 {
        return Err(invalid(format!(
            "unsupported element type code 0x{:02x} ({}) in magic number 0x{magic_value:08x}; only 0x08 (unsigned byte) is supported",
            magic[2],
            type_name(magic[2])
        )));
    }
    if magic[3] != want_dims {
        return Err(invalid(format!(
            "magic number 0x{magic_value:08x} declares {} dimension(s), but {what} file has {want_dims} (magic 0x0000080{want_dims})",
            magic[3]
        )));
    }

    let mut sizes = vec![0u8; 4 * usize::from(want_dims)];
    let got = read_full(&mut reader, &mut sizes).map_err(read_error)?;
    if got < sizes.len() {
        return Err(invalid(format!(
            "truncated header: {got} of the {} bytes of dimension sizes present",
            sizes.len()
        )));
    }
    let dims: Vec<usize> = sizes
        .chunks_exact(4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .collect();
    let shape = dims
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(" x ");
    // The caller converts to f32/f64: keep the element count addressable at 8 bytes each.
    let total = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= isize::MAX as usize / 8)
        .ok_or_else(|| DataError::TooLarge {
            path: name.to_string(),
            shape: shape.clone(),
        })?;

    let mut data = Vec::with_capacity(total.min(MAX_RESERVE));
    reader
        .by_ref()
        .take(total as u64)
        .read_to_end(&mut data)
        .map_err(read_error)?;
    if data.len() < total {
        return Err(invalid(format!(
            "truncated data: the header says {shape} ({total} bytes) but only {} bytes follow it",
            data.len()
        )));
    }
    let extra = io::copy(&mut reader, &mut io::sink()).map_err(read_error)?;
    if extra > 0 {
        return Err(invalid(format!(
            "{extra} trailing bytes after the {shape} data ({total} bytes) the header describes"
        )));
    }
    Ok((dims, data))
}

/// Fills `buf` from `reader` as far as the data goes; returns the number of bytes read
/// (less than `buf.len()` only at the end of the data).
fn read_full(reader: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Name of an IDX element type code.
fn type_name(code: u8) -> &'static str {
    match code {
        0x08 => "unsigned byte",
        0x09 => "signed byte",
        0x0b => "i16",
        0x0c => "i32",
        0x0d => "f32",
        0x0e => "f64",
        _ => "not an IDX type",
    }
}
