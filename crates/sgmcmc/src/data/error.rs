//! The error type shared by all loaders and validators.
//!
//! Every message is a single line that starts with the file (or source) name.
//! Row and column numbers in messages are 1-based: "row 17" is the 17th data
//! row (a CSV header line is not counted), "line 12" is the 12th physical line
//! of a text file, and "column 3" is the 3rd column.

use std::io;

/// Errors from loading or validating a data set. `Display` is one line naming the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DataError {
    /// Opening, mapping or reading a file failed.
    #[error("{path}: {source}")]
    Io {
        /// File name as given by the user.
        path: String,
        /// Underlying I/O error.
        #[source]
        source: io::Error,
    },

    /// The file is not a valid `.npy` file (bad header or invalid data).
    #[error("{path}: invalid .npy file: {message}")]
    InvalidNpy {
        /// File name.
        path: String,
        /// What is wrong.
        message: String,
    },

    /// The `.npy` dtype is not one this loader accepts.
    #[error("{path}: unsupported .npy dtype {dtype:?} (expected one of {expected})")]
    UnsupportedDtype {
        /// File name.
        path: String,
        /// The dtype descriptor found in the header, e.g. `"<i8"`.
        dtype: String,
        /// Human-readable list of accepted dtypes.
        expected: String,
    },

    /// The `.npy` data is big-endian, which cannot be memory-mapped on this machine.
    #[error(
        "{path}: .npy dtype {dtype:?} is big-endian; only little-endian data can be memory-mapped (re-save it with numpy as '<f8' or '<f4')"
    )]
    BigEndian {
        /// File name.
        path: String,
        /// The dtype descriptor found in the header.
        dtype: String,
    },

    /// The `.npy` array is stored in Fortran (column-major) order.
    #[error(
        "{path}: .npy array of shape {shape} is stored in Fortran (column-major) order; save it in C order (numpy.ascontiguousarray)"
    )]
    FortranOrder {
        /// File name.
        path: String,
        /// Shape as in the header, e.g. `1000 x 10`.
        shape: String,
    },

    /// The `.npy` array has a number of dimensions this loader does not accept.
    #[error("{path}: .npy array has shape ({shape}) but {expected} was expected")]
    BadShape {
        /// File name.
        path: String,
        /// Shape as in the header, comma separated.
        shape: String,
        /// What was expected, e.g. "a 1-D or 2-D array".
        expected: String,
    },

    /// The file holds fewer data bytes than the header promises.
    #[error(
        "{path}: truncated .npy: header says {shape} {dtype} ({expected_bytes} bytes) but only {present_bytes} data bytes present"
    )]
    TruncatedNpy {
        /// File name.
        path: String,
        /// Shape as in the header, e.g. `1000 x 10`.
        shape: String,
        /// Element type, e.g. `f8`.
        dtype: String,
        /// Number of data bytes the header implies.
        expected_bytes: u64,
        /// Number of data bytes actually present after the header.
        present_bytes: u64,
    },

    /// The file holds more data bytes than the header promises.
    #[error(
        "{path}: .npy has {} extra bytes: header says {shape} {dtype} ({expected_bytes} bytes) but {present_bytes} data bytes present", present_bytes - expected_bytes
    )]
    TrailingBytes {
        /// File name.
        path: String,
        /// Shape as in the header.
        shape: String,
        /// Element type.
        dtype: String,
        /// Number of data bytes the header implies.
        expected_bytes: u64,
        /// Number of data bytes actually present after the header.
        present_bytes: u64,
    },

    /// The shape in the header is too large to address on this machine.
    #[error("{path}: data of shape {shape} is too large to address on this machine")]
    TooLarge {
        /// File name.
        path: String,
        /// Shape as in the header.
        shape: String,
    },

    /// Holding the data (or what a model needs per column of it) would take more memory
    /// than is available.
    #[error(
        "{path}: {what} would need about {needed_gb:.1} GB of memory, but {available_gb:.1} GB are available"
    )]
    TooLargeForMemory {
        /// File name.
        path: String,
        /// What would be held, e.g. "a dense 10 x 1000000000 f64 matrix".
        what: String,
        /// Bytes needed, in GB.
        needed_gb: f64,
        /// Bytes available, in GB.
        available_gb: f64,
    },

    /// The data does not start at an offset aligned for the element type.
    #[error(
        "{path}: .npy data starts at byte {offset}, which is not a multiple of {align} as {dtype} requires; cannot memory-map it (re-save it with numpy)"
    )]
    Misaligned {
        /// File name.
        path: String,
        /// Byte offset of the data in the file.
        offset: usize,
        /// Required alignment in bytes.
        align: usize,
        /// Element type.
        dtype: String,
    },

    /// A numeric field could not be parsed.
    #[error("{path}: row {row} (line {line}), column {column}: cannot parse {value:?} as a number")]
    ParseNumber {
        /// File name.
        path: String,
        /// 1-based data row (header not counted).
        row: usize,
        /// 1-based physical line.
        line: u64,
        /// Column name (quoted) or 1-based index.
        column: String,
        /// The offending text.
        value: String,
    },

    /// A CSV row has a different number of fields than the header.
    #[error("{path}: row {row} (line {line}) has {found} fields but the header has {expected}")]
    RaggedRow {
        /// File name.
        path: String,
        /// 1-based data row (header not counted).
        row: usize,
        /// 1-based physical line.
        line: u64,
        /// Number of header fields.
        expected: usize,
        /// Number of fields in this row.
        found: usize,
    },

    /// The requested target column is not in the CSV header.
    #[error(
        "{path}: target column {column:?} not found; available columns: {}",
        fmt_names(available)
    )]
    MissingColumn {
        /// File name.
        path: String,
        /// Requested column.
        column: String,
        /// Columns present in the header.
        available: Vec<String>,
    },

    /// A CSV file is malformed in a way not covered by the other variants.
    #[error("{path}: {message}")]
    Csv {
        /// File name.
        path: String,
        /// Description (already one line).
        message: String,
    },

    /// A LIBSVM line is malformed.
    #[error("{path}: line {line}: {message}")]
    Libsvm {
        /// File name.
        path: String,
        /// 1-based physical line.
        line: u64,
        /// What is wrong, e.g. "feature index 0 (indices start at 1)".
        message: String,
    },

    /// A LIBSVM feature index exceeds the requested number of features.
    #[error("{path}: line {line}: feature index {index} exceeds n_features = {n_features}")]
    IndexTooLarge {
        /// File name.
        path: String,
        /// 1-based physical line.
        line: u64,
        /// The offending 1-based index.
        index: usize,
        /// The number of features requested by the caller.
        n_features: usize,
    },

    /// An IDX file (MNIST format) is malformed: bad magic, unsupported element type, wrong number
    /// of dimensions, truncated or trailing data, or a corrupt gzip stream.
    #[error("{path}: invalid IDX file: {message}")]
    InvalidIdx {
        /// File name.
        path: String,
        /// What is wrong (one line).
        message: String,
    },

    /// A NaN or infinite value was found.
    #[error("{source_name}: row {row}{}: {kind}", fmt_column(column.as_deref()))]
    NonFinite {
        /// File (or source) name.
        source_name: String,
        /// 1-based data row.
        row: usize,
        /// Column name (quoted) or 1-based index; `None` for a target vector.
        column: Option<String>,
        /// `"NaN"`, `"inf"` or `"-inf"`.
        kind: &'static str,
    },

    /// Features and targets disagree on the number of rows.
    #[error("{features_source} has {features_rows} rows but {targets_source} has {targets_rows}")]
    RowMismatch {
        /// Features file name.
        features_source: String,
        /// Number of feature rows.
        features_rows: usize,
        /// Targets file name.
        targets_source: String,
        /// Number of targets.
        targets_rows: usize,
    },

    /// The data set has no rows or no columns.
    #[error("empty data set: {source_name} has 0 {what}")]
    Empty {
        /// File name.
        source_name: String,
        /// `"rows"` or `"columns"`.
        what: &'static str,
    },

    /// `Matrix::from_external` was given a buffer it cannot read as a matrix.
    #[error("external buffer of shape {rows} x {cols}: {reason}")]
    ExternalBuffer {
        /// Requested rows.
        rows: usize,
        /// Requested columns.
        cols: usize,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// `Matrix::from_vec` was given a buffer of the wrong length.
    #[error("matrix of shape {rows} x {cols} needs {} elements but {len} were given", rows.saturating_mul(*cols))]
    ShapeMismatch {
        /// Requested rows.
        rows: usize,
        /// Requested columns.
        cols: usize,
        /// Length of the buffer.
        len: usize,
    },

    /// The parts of a sparse (CSR) matrix are inconsistent.
    #[error("{source_name}: invalid sparse matrix: {message}")]
    Invalid {
        /// File (or source) name of the data.
        source_name: String,
        /// What is wrong.
        message: String,
    },
    /// A model that reads rows densely was given sparse features.
    #[error("{source_name}: model `{model}` needs dense features, but the data are sparse (CSR)")]
    SparseUnsupported {
        /// File (or source) name of the data.
        source_name: String,
        /// The model.
        model: &'static str,
    },

    /// A label lies outside the support of the model's likelihood (reported by model code).
    #[error(
        "{source_name}: row {row}: label {value} is outside the model's support (expected {expected})"
    )]
    LabelOutOfSupport {
        /// File (or source) name of the labels.
        source_name: String,
        /// 1-based data row.
        row: usize,
        /// The offending label.
        value: f64,
        /// Description of the support, e.g. "-1 or +1" or "a non-negative integer".
        expected: String,
    },
}

impl DataError {
    /// Builds an [`DataError::Io`] for `path`.
    pub fn io(path: impl Into<String>, source: io::Error) -> Self {
        DataError::Io {
            path: path.into(),
            source,
        }
    }
}

fn fmt_names(names: &[String]) -> String {
    if names.is_empty() {
        return "(none)".to_string();
    }
    names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn fmt_column(column: Option<&str>) -> String {
    match column {
        Some(c) => format!(", column {c}"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_line() {
        let errs = [
            DataError::TruncatedNpy {
                path: "data/x.npy".into(),
                shape: "1000 x 10".into(),
                dtype: "f8".into(),
                expected_bytes: 80000,
                present_bytes: 79992,
            },
            DataError::LabelOutOfSupport {
                source_name: "y.npy".into(),
                row: 3,
                value: 2.0,
                expected: "-1 or +1".into(),
            },
            DataError::MissingColumn {
                path: "t.csv".into(),
                column: "y".into(),
                available: vec!["a".into(), "b".into()],
            },
            DataError::NonFinite {
                source_name: "x.npy".into(),
                row: 5,
                column: Some("3".into()),
                kind: "NaN",
            },
        ];
        for e in &errs {
            let s = e.to_string();
            assert!(!s.contains('\n'), "{s}");
        }
        assert_eq!(
            errs[0].to_string(),
            "data/x.npy: truncated .npy: header says 1000 x 10 f8 (80000 bytes) but only 79992 data bytes present"
        );
        assert_eq!(
            errs[1].to_string(),
            "y.npy: row 3: label 2 is outside the model's support (expected -1 or +1)"
        );
        assert_eq!(
            errs[2].to_string(),
            "t.csv: target column \"y\" not found; available columns: \"a\", \"b\""
        );
        assert_eq!(errs[3].to_string(), "x.npy: row 5, column 3: NaN");
    }
}
