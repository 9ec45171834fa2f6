//! LIBSVM / SVMlight text loading (`label idx:value ...`) into a dense `Matrix<f64>`.

use std::io::{BufRead, BufReader};
use std::path::Path;

use flate2::read::MultiGzDecoder;

use super::{CsrMatrix, DataError, Dataset, Features, Matrix};

/// Opens `path` for buffered reading, decompressing it if the extension is `.gz`.
pub(super) fn open_text(path: &Path, name: &str) -> Result<Box<dyn BufRead>, DataError> {
    let file = crate::io::open_regular(path).map_err(|e| DataError::io(name, e))?;
    let gz = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"));
    Ok(if gz {
        Box::new(BufReader::with_capacity(
            1 << 16,
            MultiGzDecoder::new(BufReader::new(file)),
        ))
    } else {
        Box::new(BufReader::with_capacity(1 << 16, file))
    })
}

/// Sparse rows collected before densifying.
struct Sparse {
    labels: Vec<f64>,
    /// `row_end[i]` is the end of row `i` in `index`/`value`.
    row_end: Vec<usize>,
    /// 0-based column indices.
    index: Vec<usize>,
    value: Vec<f64>,
    /// Largest 1-based index seen.
    max_index: usize,
}

/// Loads a LIBSVM file (`label idx:value ...`, 1-based indices, missing entries = 0).
///
/// `.gz` files are decompressed transparently (by extension). The number of columns
/// is `n_features` if given (a larger index is an error naming the line), otherwise
/// the largest index seen. Blank lines and `#` comments are ignored; if an index
/// repeats within a line, the last value wins. Errors name the 1-based line.
///
/// Rows whose density (non-zeros / entries) is at most [`super::SPARSE_DENSITY`] are kept
/// sparse ([`Features::Sparse`], as a9a at 11 %); denser data are stored as a dense f64 matrix.
pub fn load_libsvm(path: &Path, n_features: Option<usize>) -> Result<Dataset, DataError> {
    let name = path.display().to_string();
    let mut input = open_text(path, &name)?;
    let sparse = parse(&mut input, &name, n_features)?;
    let rows = sparse.labels.len();
    let cols = n_features.unwrap_or(sparse.max_index);
    // A model over these rows holds several vectors of `cols` parameters (and their names):
    // refuse a column count (from a stray index such as 10⁹) that could never be sampled.
    super::check_fits(
        &name,
        || format!("a model over {cols} feature columns (the largest index)"),
        cols as u128 * super::BYTES_PER_PARAMETER,
    )?;
    let csr = to_csr(&sparse, rows, cols, &name)?;
    let features = if csr.density() <= super::SPARSE_DENSITY {
        Features::Sparse(csr)
    } else {
        let len = rows
            .checked_mul(cols)
            .filter(|&n| n <= isize::MAX as usize / 8)
            .ok_or_else(|| DataError::TooLarge {
                path: name.clone(),
                shape: format!("{rows} x {cols}"),
            })?;
        super::check_fits(
            &name,
            || format!("a dense {rows} x {cols} f64 matrix"),
            len as u128 * 8,
        )?;
        let mut dense = vec![0.0f64; len];
        for (i, row) in dense.chunks_exact_mut(cols.max(1)).enumerate().take(rows) {
            csr.row_into(i, row);
        }
        Features::F64(Matrix::from_vec(dense, rows, cols)?)
    };
    super::check_nonempty(&features, &name)?;
    Ok(Dataset {
        features,
        targets: Some(sparse.labels),
        feature_names: Vec::new(),
        features_source: name.clone(),
        targets_source: Some(name),
    })
}

/// The parsed rows as CSR: each row's entries sorted by column, a repeated column keeping its
/// last value, explicit zeros dropped.
fn to_csr(sp: &Sparse, rows: usize, cols: usize, name: &str) -> Result<CsrMatrix, DataError> {
    let mut row_ptr = Vec::with_capacity(rows + 1);
    let mut col_idx = Vec::with_capacity(sp.index.len());
    let mut values = Vec::with_capacity(sp.value.len());
    let mut entries: Vec<(usize, usize)> = Vec::new();
    row_ptr.push(0);
    let mut start = 0;
    for &end in &sp.row_end {
        // (column, position in the line): sorting by both keeps the last repeat last.
        entries.clear();
        entries.extend((start..end).map(|k| (sp.index[k], k)));
        entries.sort_unstable();
        for (n, &(j, k)) in entries.iter().enumerate() {
            let last_of_column = entries.get(n + 1).is_none_or(|&(next, _)| next != j);
            if last_of_column && sp.value[k] != 0.0 {
                col_idx.push(j as u32);
                values.push(sp.value[k]);
            }
        }
        row_ptr.push(values.len());
        start = end;
    }
    CsrMatrix::new(rows, cols, row_ptr, col_idx, values, name)
}

fn parse(
    input: &mut dyn BufRead,
    name: &str,
    n_features: Option<usize>,
) -> Result<Sparse, DataError> {
    let mut sp = Sparse {
        labels: Vec::new(),
        row_end: Vec::new(),
        index: Vec::new(),
        value: Vec::new(),
        max_index: 0,
    };
    let mut buf = Vec::new();
    let mut line_no: u64 = 0;
    loop {
        buf.clear();
        let n = input
            .read_until(b'\n', &mut buf)
            .map_err(|e| DataError::io(name, e))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let err = |message: String| DataError::Libsvm {
            path: name.to_string(),
            line: line_no,
            message,
        };
        let text = std::str::from_utf8(&buf).map_err(|_| err("invalid UTF-8".to_string()))?;
        let text = text.split('#').next().unwrap_or("");
        let mut tokens = text.split_ascii_whitespace();
        let Some(label) = tokens.next() else {
            continue; // blank line
        };
        let label: f64 = label
            .parse()
            .map_err(|_| err(format!("cannot parse label {label:?} as a number")))?;
        sp.labels.push(label);
        for tok in tokens {
            let (idx, val) = tok
                .split_once(':')
                .ok_or_else(|| err(format!("expected index:value, found {tok:?}")))?;
            let idx: usize = idx
                .parse()
                .map_err(|_| err(format!("invalid feature index {idx:?} in {tok:?}")))?;
            if idx == 0 {
                return Err(err("feature index 0 (indices start at 1)".to_string()));
            }
            if let Some(n) = n_features
                && idx > n
            {
                return Err(DataError::IndexTooLarge {
                    path: name.to_string(),
                    line: line_no,
                    index: idx,
                    n_features: n,
                });
            }
            let val: f64 = val.parse().map_err(|_| {
                err(format!(
                    "cannot parse value {val:?} of feature {idx} as a number"
                ))
            })?;
            sp.max_index = sp.max_index.max(idx);
            sp.index.push(idx - 1);
            sp.value.push(val);
        }
        sp.row_end.push(sp.index.len());
    }
    Ok(sp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::io::Write;

    fn write(dir: &tempfile::TempDir, file: &str, text: &str) -> std::path::PathBuf {
        let p = dir.path().join(file);
        fs::write(&p, text).unwrap();
        p
    }

    /// The rows as a dense matrix, however they were stored.
    fn dense(ds: &Dataset) -> Matrix<f64> {
        match &ds.features {
            Features::F64(m) => {
                Matrix::from_vec(m.as_slice().to_vec(), m.rows(), m.cols()).unwrap()
            }
            Features::Sparse(m) => m.to_dense(),
            Features::F32(_) => panic!("LIBSVM values are f64"),
        }
    }

    #[test]
    fn sparse_rows_stay_sparse() {
        let d = tempfile::tempdir().unwrap();
        // 4 rows × 10 columns, 5 non-zeros (an explicit zero and a repeat dropped): 12.5 %.
        let p = write(
            &d,
            "s.txt",
            "1 10:2 1:0.5
0 3:7 3:1
1
0 4:0 5:-1 2:3
",
        );
        let ds = load_libsvm(&p, None).unwrap();
        let Features::Sparse(m) = &ds.features else {
            panic!("expected sparse rows")
        };
        assert_eq!((m.rows(), m.cols(), m.nnz()), (4, 10, 5));
        let mut want = vec![0.0; 40];
        want[0] = 0.5;
        want[9] = 2.0;
        want[12] = 1.0;
        want[31] = 3.0;
        want[34] = -1.0;
        assert_eq!(m.to_dense().as_slice(), &want[..]);
    }

    #[test]
    fn small_inline() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            &d,
            "s.txt",
            "+1 1:0.5 3:2  \n-1 2:-1e-3\t\n\n0 # no features\n2.5 3:1 1:4 # comment\n",
        );
        let ds = load_libsvm(&p, None).unwrap();
        assert_eq!((ds.rows(), ds.cols()), (4, 3));
        let m = dense(&ds);
        assert_eq!(m.row(0), &[0.5, 0.0, 2.0]);
        assert_eq!(m.row(1), &[0.0, -1e-3, 0.0]);
        assert_eq!(m.row(2), &[0.0, 0.0, 0.0]);
        assert_eq!(m.row(3), &[4.0, 0.0, 1.0]);
        assert_eq!(ds.targets.as_deref(), Some(&[1.0, -1.0, 0.0, 2.5][..]));

        let ds = load_libsvm(&p, Some(5)).unwrap();
        assert_eq!(ds.cols(), 5);
        assert_eq!(dense(&ds).row(0), &[0.5, 0.0, 2.0, 0.0, 0.0]);
    }

    #[test]
    fn index_zero_and_too_large() {
        let d = tempfile::tempdir().unwrap();
        let p = write(&d, "z", "1 1:1\n-1 0:1 2:3\n");
        let e = load_libsvm(&p, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: line 2: feature index 0 (indices start at 1)",
                p.display()
            )
        );
        let p = write(&d, "big", "1 1:1\n1 2:1\n-1 7:1\n");
        let e = load_libsvm(&p, Some(4)).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: line 3: feature index 7 exceeds n_features = 4",
                p.display()
            )
        );
        assert_eq!(load_libsvm(&p, None).unwrap().cols(), 7);
    }

    #[test]
    fn malformed_lines() {
        let d = tempfile::tempdir().unwrap();
        for (text, needle) in [
            ("abc 1:1\n", "line 1: cannot parse label \"abc\""),
            ("1 1:1\n1 2\n", "line 2: expected index:value, found \"2\""),
            ("1 x:1\n", "line 1: invalid feature index \"x\""),
            ("1 -1:1\n", "line 1: invalid feature index \"-1\""),
            (
                "1 1:1 2:zz\n",
                "line 1: cannot parse value \"zz\" of feature 2",
            ),
        ] {
            let p = write(&d, "bad", text);
            let e = load_libsvm(&p, None).unwrap_err().to_string();
            assert!(e.contains(needle), "{e} should contain {needle}");
        }
        let p = write(&d, "empty", "\n\n");
        let e = load_libsvm(&p, None).unwrap_err();
        assert!(matches!(e, DataError::Empty { what: "rows", .. }), "{e}");
        let p = write(&d, "nofeat", "1\n-1\n");
        let e = load_libsvm(&p, None).unwrap_err();
        assert!(
            matches!(
                e,
                DataError::Empty {
                    what: "columns",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn gz_is_decompressed() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.svm.gz");
        let mut enc =
            flate2::write::GzEncoder::new(fs::File::create(&p).unwrap(), Default::default());
        enc.write_all(b"1 2:3\n-1 1:1\n").unwrap();
        enc.finish().unwrap();
        let ds = load_libsvm(&p, None).unwrap();
        assert_eq!(dense(&ds).as_slice(), &[0.0, 3.0, 1.0, 0.0]);
    }

    fn count_labels(ds: &Dataset) -> (usize, usize) {
        let t = ds.targets.as_ref().unwrap();
        let neg = t.iter().filter(|&&y| y == -1.0).count();
        let pos = t.iter().filter(|&&y| y == 1.0).count();
        assert_eq!(neg + pos, t.len(), "labels other than +-1");
        (neg, pos)
    }

    #[test]
    fn real_a9a() {
        let p = &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/a9a/a9a");
        if !p.exists() {
            eprintln!("skipping real_a9a: {} not found", p.display());
            return;
        }
        let ds = load_libsvm(p, None).unwrap();
        assert_eq!((ds.rows(), ds.cols()), (32_561, 123));
        assert_eq!(count_labels(&ds), (24_720, 7_841));
        assert!(
            ds.features.is_sparse(),
            "a9a (11 % non-zero) is kept sparse"
        );
        let m = dense(&ds);
        // First line: "-1 3:1 11:1 14:1 19:1 39:1 42:1 55:1 64:1 67:1 73:1 75:1 76:1 80:1 83:1"
        let ones: Vec<usize> = (0..123)
            .filter(|&j| m.row(0)[j] == 1.0)
            .map(|j| j + 1)
            .collect();
        assert_eq!(
            ones,
            [3, 11, 14, 19, 39, 42, 55, 64, 67, 73, 75, 76, 80, 83]
        );
        assert!(m.as_slice().iter().all(|&v| v == 0.0 || v == 1.0));
        super::super::validate(&ds).unwrap();
        assert_eq!(load_libsvm(p, Some(124)).unwrap().cols(), 124);
    }

    #[test]
    fn real_ijcnn1_gz() {
        let p =
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/ijcnn1/ijcnn1.gz");
        if !p.exists() {
            eprintln!("skipping real_ijcnn1_gz: {} not found", p.display());
            return;
        }
        let ds = load_libsvm(p, None).unwrap();
        assert_eq!((ds.rows(), ds.cols()), (49_990, 22));
        assert_eq!(count_labels(&ds), (45_137, 4_853));
        // First line: "-1 6:1 11:-0.731854 12:0.173431 13:0 14:0.00027 ..."
        let m = dense(&ds);
        assert_eq!(m.row(0)[5], 1.0);
        assert_eq!(m.row(0)[10], -0.731854);
        assert_eq!(m.row(0)[0], 0.0);
        super::super::validate(&ds).unwrap();
    }
}
