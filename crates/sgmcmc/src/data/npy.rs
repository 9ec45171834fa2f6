//! `.npy` loading: memory-mapped feature matrices and in-memory target vectors (decoded from a
//! mapping of the file, in place when the byte order is native).
//!
//! The header is parsed with `ndarray_npy::npy::header::Header` (to choose the
//! element type and give precise errors) and the data is validated and viewed with
//! `ndarray_npy::ViewNpyExt` (descriptor, endianness, length, alignment). The
//! resulting [`Matrix`] keeps the `Mmap` alive and exposes rows as plain slices.

use std::io;
use std::mem;
use std::path::Path;

use memmap2::Mmap;
use ndarray::{ArrayD, ArrayViewD};
use ndarray_npy::npy::header::{Header, ReadHeaderError};
use ndarray_npy::{ReadNpyExt, ReadableElement, ViewElement, ViewNpyError, ViewNpyExt};

use super::{DataError, Element, Features, Matrix};

const FEATURE_DTYPES: &str = "'<f8' (float64) or '<f4' (float32)";
const VECTOR_DTYPES: &str = "f8, f4, i8, i4, u1, b1";

fn invalid(path: &str, message: impl Into<String>) -> DataError {
    DataError::InvalidNpy {
        path: path.to_string(),
        message: message.into(),
    }
}

/// Shape as `1000 x 10` (or `scalar` for a 0-d array).
fn shape_string(shape: &[usize]) -> String {
    if shape.is_empty() {
        return "scalar".to_string();
    }
    shape
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(" x ")
}

/// Deepest bracket nesting accepted in a header's dictionary. A plain array's header nests 2
/// deep (`{'shape': (3, 4)}`), a structured dtype's 3 (which the loaders refuse anyway); the
/// Python-literal parser behind `Header::from_reader` takes time exponential in the depth of
/// unclosed brackets, about ×3 per `{` (found by fuzzing: 80 `[` took more than 10 s; then,
/// within the first limit of 16, 10 nested levels took 0.15 s, 12 took 1.3 s and 14 took 32 s
/// in a release build), so deeper headers are refused before it sees them.
const MAX_HEADER_NESTING: usize = 4;

/// Refuses a header whose dictionary nests brackets deeper than [`MAX_HEADER_NESTING`] or
/// closes one it did not open.
fn check_header_nesting(path: &str, bytes: &[u8]) -> Result<(), DataError> {
    // Magic (6 bytes), version (2), then the header's length: u16 in version 1, u32 after.
    let (start, len): (usize, usize) = match bytes.get(6) {
        Some(1) if bytes.len() >= 10 => (10, u16::from_le_bytes([bytes[8], bytes[9]]) as usize),
        Some(2 | 3) if bytes.len() >= 12 => (
            12,
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
        ),
        // Anything else is left to the parser, which names the problem.
        _ => return Ok(()),
    };
    let text = &bytes[start..bytes.len().min(start.saturating_add(len))];
    // Brackets outside quoted strings must match, as in any Python literal: the parser's
    // exponential time comes from brackets it cannot match.
    let mut open: Vec<u8> = Vec::with_capacity(MAX_HEADER_NESTING);
    let mut quote: Option<u8> = None;
    for &b in text {
        match (quote, b) {
            (Some(q), _) if b == q => quote = None,
            (Some(_), _) => {}
            (None, b'\'' | b'"') => quote = Some(b),
            (None, b'[' | b'(' | b'{') => {
                if open.len() == MAX_HEADER_NESTING {
                    return Err(invalid(
                        path,
                        format!(
                            "the header's dictionary nests brackets more than \
                             {MAX_HEADER_NESTING} deep (a plain array's nests 2)"
                        ),
                    ));
                }
                open.push(b);
            }
            (None, b']' | b')' | b'}') => {
                let opener = match b {
                    b']' => b'[',
                    b')' => b'(',
                    _ => b'{',
                };
                if open.pop() != Some(opener) {
                    return Err(invalid(
                        path,
                        format!(
                            "the header's brackets do not match (`{}` where no `{}` is open)",
                            b as char, opener as char
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Parses the header at the start of `bytes`; returns it with the data offset.
fn parse_header(path: &str, bytes: &[u8]) -> Result<(Header, usize), DataError> {
    check_header_nesting(path, bytes)?;
    let mut reader = bytes;
    let header = Header::from_reader(&mut reader).map_err(|e| match e {
        ReadHeaderError::Io(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            invalid(path, "file ends inside the header")
        }
        other => invalid(path, other.to_string().replace('\n', " ")),
    })?;
    Ok((header, bytes.len() - reader.len()))
}

/// The dtype descriptor as a string such as `<f8`.
fn descriptor(path: &str, header: &Header, expected: &str) -> Result<String, DataError> {
    match header.type_descriptor.as_string() {
        Some(s) => Ok(s.clone()),
        None => Err(DataError::UnsupportedDtype {
            path: path.to_string(),
            dtype: header.type_descriptor.to_string(),
            expected: expected.to_string(),
        }),
    }
}

/// Checks that exactly `prod(shape) * elem_size` data bytes follow the header.
fn check_data_len(
    path: &str,
    shape: &[usize],
    elem_size: usize,
    dtype: &str,
    present: usize,
) -> Result<(), DataError> {
    let expected = shape
        .iter()
        .try_fold(elem_size, |acc, &d| acc.checked_mul(d))
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| DataError::TooLarge {
            path: path.to_string(),
            shape: shape_string(shape),
        })?;
    let (expected_bytes, present_bytes) = (expected as u64, present as u64);
    let fields = || (path.to_string(), shape_string(shape), dtype.to_string());
    if present < expected {
        let (path, shape, dtype) = fields();
        return Err(DataError::TruncatedNpy {
            path,
            shape,
            dtype,
            expected_bytes,
            present_bytes,
        });
    }
    if present > expected {
        let (path, shape, dtype) = fields();
        return Err(DataError::TrailingBytes {
            path,
            shape,
            dtype,
            expected_bytes,
            present_bytes,
        });
    }
    Ok(())
}

fn empty_check(path: &str, rows: usize, cols: usize) -> Result<(), DataError> {
    let what = if rows == 0 {
        "rows"
    } else if cols == 0 {
        "columns"
    } else {
        return Ok(());
    };
    Err(DataError::Empty {
        source_name: path.to_string(),
        what,
    })
}

/// Loads a 2-D (or 1-D, as n×1) C-order `.npy` of `<f8` or `<f4` as a memory-mapped matrix.
///
/// Nothing is read eagerly: pages are faulted in on access, so files larger than RAM
/// work. The file must not be modified while the returned matrix is alive.
pub fn load_npy_features(path: &Path) -> Result<Features, DataError> {
    let name = path.display().to_string();
    let file = crate::io::open_regular(path).map_err(|e| DataError::io(&name, e))?;
    // SAFETY: read-only mapping; we never create mutable references into it. Another
    // process truncating/modifying the file while mapped is outside our control
    // (documented above), as with any memory-mapped input.
    let mmap = unsafe { Mmap::map(&file) }.map_err(|e| DataError::io(&name, e))?;
    let (header, offset) = parse_header(&name, &mmap)?;
    let descr = descriptor(&name, &header, FEATURE_DTYPES)?;
    let (rows, cols) = match header.shape[..] {
        [n] => (n, 1),
        [r, c] => (r, c),
        _ => {
            return Err(DataError::BadShape {
                path: name,
                shape: shape_string(&header.shape),
                expected: "a 1-D or 2-D array".to_string(),
            });
        }
    };
    // A Fortran-order array with one row or one column has the same memory layout as C order.
    if header.layout.is_fortran() && rows > 1 && cols > 1 {
        return Err(DataError::FortranOrder {
            path: name,
            shape: shape_string(&header.shape),
        });
    }
    match descr.as_str() {
        "<f8" => map_matrix::<f64>(&name, mmap, &header, offset, rows, cols).map(Features::F64),
        "<f4" => map_matrix::<f32>(&name, mmap, &header, offset, rows, cols).map(Features::F32),
        ">f8" | ">f4" => Err(DataError::BigEndian {
            path: name,
            dtype: descr,
        }),
        _ => Err(DataError::UnsupportedDtype {
            path: name,
            dtype: descr,
            expected: FEATURE_DTYPES.to_string(),
        }),
    }
}

fn map_matrix<T: Element + ViewElement>(
    name: &str,
    mmap: Mmap,
    header: &Header,
    offset: usize,
    rows: usize,
    cols: usize,
) -> Result<Matrix<T>, DataError> {
    check_data_len(
        name,
        &header.shape,
        mem::size_of::<T>(),
        T::DTYPE,
        mmap.len() - offset,
    )?;
    empty_check(name, rows, cols)?;
    let misaligned = || DataError::Misaligned {
        path: name.to_string(),
        offset,
        align: mem::align_of::<T>(),
        dtype: T::DTYPE.to_string(),
    };
    if !(mmap.as_ptr() as usize + offset).is_multiple_of(mem::align_of::<T>()) {
        return Err(misaligned());
    }
    // Let ndarray-npy validate descriptor, endianness, length and alignment and
    // produce the view; we keep only the data offset and own the mapping ourselves.
    let data_offset = {
        let view = ArrayViewD::<T>::view_npy(&mmap).map_err(|e| match e {
            ViewNpyError::MisalignedData => misaligned(),
            other => invalid(name, other.to_string().replace('\n', " ")),
        })?;
        let data = view
            .as_slice()
            .ok_or_else(|| invalid(name, "array data is not in C order"))?;
        data.as_ptr() as usize - mmap.as_ptr() as usize
    };
    if data_offset != offset {
        return Err(invalid(name, "inconsistent data offset"));
    }
    let out_of_core = super::available_memory().is_some_and(|m| mmap.len() > m / 2);
    Matrix::from_mmap(mmap, data_offset, rows, cols, out_of_core)
        .ok_or_else(|| invalid(name, "data does not match the header shape"))
}

/// Loads a 1-D (or n×1) `.npy` target vector as `f64`.
///
/// Accepted dtypes: f8, f4, i8 (int64), i4, u1, b1 (bool), either byte order.
/// Reads the whole file into memory.
pub fn load_npy_vector(path: &Path) -> Result<Vec<f64>, DataError> {
    let name = path.display().to_string();
    let file = crate::io::open_regular(path).map_err(|e| DataError::io(&name, e))?;
    // Mapped, not read: the file's pages are page cache the kernel can drop, so loading holds
    // one copy of the values (the f64 vector), not three (the file, an array, the vector).
    // SAFETY: read-only mapping, dropped before returning; another process modifying the
    // file meanwhile is outside our control, as for the memory-mapped features.
    let bytes = unsafe { Mmap::map(&file) }.map_err(|e| DataError::io(&name, e))?;
    let (header, offset) = parse_header(&name, &bytes)?;
    let descr = descriptor(&name, &header, VECTOR_DTYPES)?;
    let n = match header.shape[..] {
        [n] | [n, 1] => n,
        _ => {
            return Err(DataError::BadShape {
                path: name,
                shape: shape_string(&header.shape),
                expected: "a 1-D array or an n x 1 column".to_string(),
            });
        }
    };
    let (size, dtype) = match descr.as_str() {
        "<f8" | ">f8" => (8, "f8"),
        "<f4" | ">f4" => (4, "f4"),
        "<i8" | ">i8" => (8, "i8"),
        "<i4" | ">i4" => (4, "i4"),
        "|u1" | "u1" => (1, "u1"),
        "|b1" => (1, "b1"),
        _ => {
            return Err(DataError::UnsupportedDtype {
                path: name,
                dtype: descr,
                expected: VECTOR_DTYPES.to_string(),
            });
        }
    };
    check_data_len(&name, &header.shape, size, dtype, bytes.len() - offset)?;
    empty_check(&name, n, 1)?;
    let data = &bytes[..];
    match dtype {
        "f8" => read_all::<f64>(&name, data, |v| v),
        "f4" => read_all::<f32>(&name, data, f64::from),
        // int64 labels beyond 2^53 lose precision; labels are small in practice.
        "i8" => read_all::<i64>(&name, data, |v| v as f64),
        "i4" => read_all::<i32>(&name, data, f64::from),
        "u1" => read_all::<u8>(&name, data, f64::from),
        _ => read_all::<bool>(&name, data, |v| if v { 1.0 } else { 0.0 }),
    }
}

fn read_all<T: ReadableElement + ViewElement + Copy>(
    name: &str,
    bytes: &[u8],
    convert: impl Fn(T) -> f64,
) -> Result<Vec<f64>, DataError> {
    // In place when the stored byte order is the machine's (the usual case); otherwise (or if
    // the view refuses the data for any other reason) through a decoded copy.
    if let Ok(view) = ArrayViewD::<T>::view_npy(bytes) {
        return Ok(view.iter().map(|&v| convert(v)).collect());
    }
    let arr = ArrayD::<T>::read_npy(bytes)
        .map_err(|e| invalid(name, e.to_string().replace('\n', " ")))?;
    // For 1-D and n x 1 arrays, logical order equals memory order in either layout.
    Ok(arr.iter().map(|&v| convert(v)).collect())
}

#[cfg(test)]
mod tests {
    use super::super::{Dataset, validate_finite};
    use super::*;
    use ndarray::{Array1, Array2, Array3};
    use ndarray_npy::write_npy;
    use std::fs;
    use std::path::PathBuf;

    fn tmp() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    /// Minimal v1.0 `.npy` writer: header padded to a multiple of 64, plus `extra` spaces.
    fn write_raw(
        path: &Path,
        descr: &str,
        fortran: bool,
        shape: &[usize],
        data: &[u8],
        extra: usize,
    ) {
        let shape_s = match shape {
            [n] => format!("({n},)"),
            _ => format!(
                "({})",
                shape
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let fo = if fortran { "True" } else { "False" };
        let mut dict =
            format!("{{'descr': '{descr}', 'fortran_order': {fo}, 'shape': {shape_s}, }}");
        while (10 + dict.len() + 1) % 64 != 0 {
            dict.push(' ');
        }
        dict.push_str(&" ".repeat(extra));
        dict.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        out.extend_from_slice(dict.as_bytes());
        out.extend_from_slice(data);
        fs::write(path, out).unwrap();
    }

    fn f64_bytes(v: &[f64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn grid(rows: usize, cols: usize) -> Array2<f64> {
        Array2::from_shape_fn((rows, cols), |(i, j)| (i * cols + j) as f64 + 0.5)
    }

    /// Found by fuzzing, three times: a header nesting 80 brackets took more than 10 s to
    /// parse, and so did one nesting 10 unclosed `{` (within the first limit of 16; a release
    /// build takes 32 s at 14), and one never deeper than 4 whose `)` closed `{`s (2 s in a
    /// release build; more than 10 s on a loaded machine; the guard, which skips quoted text,
    /// now refuses it as nesting more than 4). The message shows the guard, not the parser,
    /// answered.
    #[test]
    fn deeply_nested_header_is_refused_quickly() {
        let dir = tmp();
        let path = dir.path().join("nested.npy");
        for dict in [
            format!("{{'descr': '<f8', {}}}", "[".repeat(80)),
            format!("{{'descr': {{'descr': '>f8',{}b'x'),4, }}", "{".repeat(10)),
        ] {
            let mut header = dict.into_bytes();
            header.resize(118, b' ');
            header.push(b'\n');
            let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
            bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
            bytes.extend_from_slice(&header);
            bytes.extend_from_slice(&[0; 8]);
            fs::write(&path, &bytes).unwrap();
            let e = load_npy_vector(&path).unwrap_err().to_string();
            assert!(e.contains("nests brackets more than 4 deep"), "{e}");
            let e = load_npy_features(&path).unwrap_err().to_string();
            assert!(e.contains("nests brackets"), "{e}");
        }
        // The third input, as the fuzzer found it.
        let mut bytes = b"\x93NUMPY\x01\x00v\x00".to_vec();
        bytes.extend_from_slice(
            b"{'descr':{{'desc4), }    c3),r':{{'desc4), }    r':{'deesa3),r':{{'':{'deesc3),\
              r':{{'desc4), }    r         cr':{[0\x03\x04\r\n\x05",
        );
        fs::write(&path, &bytes).unwrap();
        let started = std::time::Instant::now();
        let e = load_npy_vector(&path).unwrap_err().to_string();
        assert!(e.contains("the header's"), "{e}");
        assert!(started.elapsed().as_secs_f64() < 1.0);
        // A bracket closed by the wrong one, outside any string.
        let header = b"{'descr': '<f8', 'fortran_order': False, 'shape': (3,], }";
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16 + 1).to_le_bytes());
        bytes.extend_from_slice(header);
        bytes.push(b'\n');
        bytes.extend_from_slice(&[0; 24]);
        fs::write(&path, &bytes).unwrap();
        let e = load_npy_vector(&path).unwrap_err().to_string();
        assert!(
            e.contains("brackets do not match (`]` where no `[` is open)"),
            "{e}"
        );
    }

    #[test]
    fn f64_round_trip() {
        let d = tmp();
        let p = d.path().join("x.npy");
        let a = grid(3, 4);
        write_npy(&p, &a).unwrap();
        let Features::F64(m) = load_npy_features(&p).unwrap() else {
            panic!("expected f64")
        };
        assert_eq!((m.rows(), m.cols()), (3, 4));
        assert!(m.is_mapped());
        assert_eq!(m.mapped_offset().unwrap() % 64, 0);
        for i in 0..3 {
            assert_eq!(m.row(i), a.row(i).as_slice().unwrap());
        }
        assert_eq!(m.as_slice(), a.as_slice().unwrap());
    }

    #[test]
    fn f32_round_trip_stays_f32() {
        let d = tmp();
        let p = d.path().join("x32.npy");
        let a = Array2::from_shape_fn((5, 2), |(i, j)| i as f32 * 0.25 - j as f32);
        write_npy(&p, &a).unwrap();
        let f = load_npy_features(&p).unwrap();
        assert_eq!(f.dtype(), "f4");
        assert_eq!((f.rows(), f.cols()), (5, 2));
        let Features::F32(m) = f else {
            panic!("expected f32")
        };
        for i in 0..5 {
            assert_eq!(m.row(i), a.row(i).as_slice().unwrap());
            assert_eq!(m.row(i)[0].to_f64(), f64::from(a[[i, 0]]));
        }
    }

    #[test]
    fn one_d_loads_as_column() {
        let d = tmp();
        let p = d.path().join("v.npy");
        write_npy(&p, &Array1::from(vec![1.0f64, 2.0, 3.0])).unwrap();
        let f = load_npy_features(&p).unwrap();
        assert_eq!((f.rows(), f.cols()), (3, 1));
        let Features::F64(m) = f else { panic!() };
        assert_eq!(m.row(2), &[3.0]);
    }

    #[test]
    fn truncated_file_is_an_error() {
        let d = tmp();
        let p = d.path().join("x.npy");
        write_npy(&p, &grid(1000, 10)).unwrap();
        let len = fs::metadata(&p).unwrap().len();
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(len - 8)
            .unwrap();
        let e = load_npy_features(&p).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: truncated .npy: header says 1000 x 10 f8 (80000 bytes) but only 79992 data bytes present",
                p.display()
            )
        );
        let e = load_npy_vector(&p).unwrap_err();
        assert!(matches!(e, DataError::BadShape { .. }), "{e}");
    }

    #[test]
    fn trailing_bytes_and_garbage() {
        let d = tmp();
        let p = d.path().join("x.npy");
        let mut data = f64_bytes(&[1.0, 2.0]);
        data.extend_from_slice(&[0u8; 3]);
        write_raw(&p, "<f8", false, &[2], &data, 0);
        let e = load_npy_features(&p).unwrap_err();
        assert!(matches!(e, DataError::TrailingBytes { .. }), "{e}");
        assert!(e.to_string().contains("3 extra bytes"), "{e}");

        fs::write(&p, b"hello world, not numpy").unwrap();
        let e = load_npy_features(&p).unwrap_err();
        assert!(matches!(e, DataError::InvalidNpy { .. }), "{e}");
        fs::write(&p, b"").unwrap();
        let e = load_npy_features(&p).unwrap_err();
        assert!(e.to_string().contains("file ends inside the header"), "{e}");

        let missing = d.path().join("nope.npy");
        let e = load_npy_features(&missing).unwrap_err();
        assert!(matches!(e, DataError::Io { .. }));
        assert!(e.to_string().starts_with(&missing.display().to_string()));
    }

    #[test]
    fn wrong_dtype_is_an_error() {
        let d = tmp();
        let p = d.path().join("i.npy");
        write_npy(&p, &Array2::<i64>::zeros((2, 2))).unwrap();
        let e = load_npy_features(&p).unwrap_err();
        assert!(matches!(e, DataError::UnsupportedDtype { .. }), "{e}");
        assert!(e.to_string().contains("\"<i8\""), "{e}");
        assert!(e.to_string().starts_with(&p.display().to_string()), "{e}");
    }

    #[test]
    fn fortran_order_is_an_error() {
        let d = tmp();
        let p = d.path().join("f.npy");
        let a = grid(4, 3);
        let t = a.t(); // 3 x 4, Fortran-contiguous: written with fortran_order = True
        write_npy(&p, &t).unwrap();
        let e = load_npy_features(&p).unwrap_err();
        assert!(matches!(e, DataError::FortranOrder { .. }), "{e}");
        assert!(e.to_string().contains("Fortran"), "{e}");

        // n x 1 in Fortran order has C layout too: accepted.
        write_raw(&p, "<f8", true, &[2, 1], &f64_bytes(&[1.0, 2.0]), 0);
        assert_eq!(load_npy_features(&p).unwrap().rows(), 2);
    }

    #[test]
    fn big_endian_and_bad_shape_are_errors() {
        let d = tmp();
        let p = d.path().join("b.npy");
        let be: Vec<u8> = [1.0f64, 2.0].iter().flat_map(|x| x.to_be_bytes()).collect();
        write_raw(&p, ">f8", false, &[2, 1], &be, 0);
        let e = load_npy_features(&p).unwrap_err();
        assert!(matches!(e, DataError::BigEndian { .. }), "{e}");
        // ... but a big-endian target vector is converted.
        assert_eq!(load_npy_vector(&p).unwrap(), vec![1.0, 2.0]);

        write_npy(&p, &Array3::<f64>::zeros((2, 2, 2))).unwrap();
        let e = load_npy_features(&p).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: .npy array has shape (2 x 2 x 2) but a 1-D or 2-D array was expected",
                p.display()
            )
        );
    }

    #[test]
    fn misaligned_data_is_an_error() {
        let d = tmp();
        let p = d.path().join("m.npy");
        // Header padded to a multiple of 64, plus 4: data offset is 4 mod 8.
        write_raw(
            &p,
            "<f8",
            false,
            &[2, 2],
            &f64_bytes(&[1.0, 2.0, 3.0, 4.0]),
            4,
        );
        let e = load_npy_features(&p).unwrap_err();
        match e {
            DataError::Misaligned { offset, align, .. } => {
                assert_eq!((offset % 64, align), (4, 8));
            }
            other => panic!("expected Misaligned, got {other}"),
        }
        // f4 needs only 4-byte alignment: offset 68 is fine.
        let f: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|x| x.to_le_bytes()).collect();
        write_raw(&p, "<f4", false, &[2], &f, 4);
        let Features::F32(m) = load_npy_features(&p).unwrap() else {
            panic!()
        };
        assert_eq!(m.as_slice(), &[1.0, 2.0]);
    }

    #[test]
    fn empty_array_is_an_error() {
        let d = tmp();
        let p = d.path().join("e.npy");
        write_npy(&p, &Array2::<f64>::zeros((0, 3))).unwrap();
        let e = load_npy_features(&p).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("empty data set: {} has 0 rows", p.display())
        );
        write_npy(&p, &Array2::<f32>::zeros((3, 0))).unwrap();
        let e = load_npy_features(&p).unwrap_err();
        assert!(e.to_string().ends_with("has 0 columns"), "{e}");
    }

    #[test]
    fn nan_is_reported_with_row_and_column() {
        let d = tmp();
        let p = d.path().join("x.npy");
        let mut a = grid(5, 4);
        a[[3, 2]] = f64::NAN;
        write_npy(&p, &a).unwrap();
        let ds = Dataset {
            features: load_npy_features(&p).unwrap(),
            targets: None,
            feature_names: vec![],
            features_source: "x.npy".into(),
            targets_source: None,
        };
        assert_eq!(
            validate_finite(&ds).unwrap_err().to_string(),
            "x.npy: row 4, column 3: NaN"
        );
    }

    #[test]
    fn large_mapped_matrix_matches_written_values() {
        let d = tmp();
        let p = d.path().join("big.npy");
        let (rows, cols) = (100_000, 10);
        write_npy(&p, &grid(rows, cols)).unwrap();
        let Features::F64(m) = load_npy_features(&p).unwrap() else {
            panic!()
        };
        assert_eq!((m.rows(), m.cols()), (rows, cols));
        for i in 0..rows {
            let r = m.row(i);
            for (j, &v) in r.iter().enumerate() {
                assert_eq!(v, (i * cols + j) as f64 + 0.5, "row {i} col {j}");
            }
        }
        // Shared read-only across threads.
        let m = &m;
        let total: f64 = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|t| {
                    s.spawn(move || {
                        (t * rows / 4..(t + 1) * rows / 4)
                            .map(|i| m.row(i).iter().sum::<f64>())
                            .sum::<f64>()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        let n = (rows * cols) as f64;
        assert_eq!(total, n * (n - 1.0) / 2.0 + 0.5 * n);
    }

    #[test]
    fn vector_dtypes() {
        let d = tmp();
        let p: PathBuf = d.path().join("y.npy");
        write_npy(&p, &Array1::from(vec![1.5f64, -2.0])).unwrap();
        assert_eq!(load_npy_vector(&p).unwrap(), vec![1.5, -2.0]);
        write_npy(&p, &Array1::from(vec![0.5f32, 3.0])).unwrap();
        assert_eq!(load_npy_vector(&p).unwrap(), vec![0.5, 3.0]);
        write_npy(&p, &Array1::from(vec![-1i64, 7])).unwrap();
        assert_eq!(load_npy_vector(&p).unwrap(), vec![-1.0, 7.0]);
        write_npy(&p, &Array1::from(vec![-3i32, 4])).unwrap();
        assert_eq!(load_npy_vector(&p).unwrap(), vec![-3.0, 4.0]);
        write_npy(&p, &Array1::from(vec![0u8, 255])).unwrap();
        assert_eq!(load_npy_vector(&p).unwrap(), vec![0.0, 255.0]);
        write_npy(&p, &Array1::from(vec![true, false, true])).unwrap();
        assert_eq!(load_npy_vector(&p).unwrap(), vec![1.0, 0.0, 1.0]);
        write_npy(
            &p,
            &Array2::from_shape_vec((3, 1), vec![1.0f64, 2.0, 3.0]).unwrap(),
        )
        .unwrap();
        assert_eq!(load_npy_vector(&p).unwrap(), vec![1.0, 2.0, 3.0]);

        write_npy(&p, &Array2::<f64>::zeros((3, 2))).unwrap();
        let e = load_npy_vector(&p).unwrap_err();
        assert!(matches!(e, DataError::BadShape { .. }), "{e}");
        write_npy(&p, &Array1::from(vec![1u16, 2])).unwrap();
        let e = load_npy_vector(&p).unwrap_err();
        assert!(matches!(e, DataError::UnsupportedDtype { .. }), "{e}");
        write_raw(&p, "|b1", false, &[2], &[1, 2], 0);
        let e = load_npy_vector(&p).unwrap_err();
        assert!(matches!(e, DataError::InvalidNpy { .. }), "{e}");
        write_raw(&p, "<i4", false, &[3], &[0u8; 10], 0);
        let e = load_npy_vector(&p).unwrap_err();
        assert!(
            e.to_string()
                .contains("header says 3 i4 (12 bytes) but only 10"),
            "{e}"
        );
        write_npy(&p, &Array1::<f64>::zeros(0)).unwrap();
        let e = load_npy_vector(&p).unwrap_err();
        assert!(matches!(e, DataError::Empty { .. }), "{e}");
    }
}
