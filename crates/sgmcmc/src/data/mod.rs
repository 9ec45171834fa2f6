//! Loading data sets: memory-mapped `.npy`, CSV and LIBSVM, plus validation.
//!
//! Features are kept in the precision they were stored in ([`Features::F32`] or
//! [`Features::F64`]), or as sparse rows ([`Features::Sparse`], LIBSVM data of low density);
//! dense rows are zero-copy slices ([`Matrix::row`]). Error messages
//! are one line, name the file and use 1-based rows/columns (see [`DataError`]).

pub mod coreset_sets;
mod csv;
mod error;
pub mod idx;
mod libsvm;
mod matrix;
mod memory;
mod movielens;
mod npy;
mod shuffle;
mod sparse;
pub mod synthetic;

pub use self::coreset_sets::{load_bike_sharing, load_bike_sharing_reference, load_nba_games};
pub use self::csv::load_csv;
pub use self::error::DataError;
pub use self::libsvm::load_libsvm;
pub use self::matrix::{
    Element, Matrix, PREFETCH_DISTANCE, ROW_PREFETCH_DISTANCE, check_finite_matrix,
    check_finite_targets, check_nonempty, check_same_rows, gather_sum, prefetch_element, validate,
    validate_finite,
};
pub use self::memory::{BYTES_PER_PARAMETER, available_memory, check_fits};
pub use self::movielens::{MOVIELENS_FEATURES, load_movielens, movielens_counts};
pub use self::npy::{load_npy_features, load_npy_vector};
pub use self::shuffle::{SHUFFLE_MEMORY, ShuffleReport, shuffle_npy};
pub use self::sparse::{CsrMatrix, SPARSE_DENSITY, SparseRow};

/// Features in the precision they were stored in (f32 files are NOT converted: halving bytes/row matters).
#[derive(Debug)]
pub enum Features {
    /// Double-precision features.
    F64(Matrix<f64>),
    /// Single-precision features.
    F32(Matrix<f32>),
    /// Sparse rows (CSR, f64 values): the GLMs multiply them without the zeros; models that
    /// read rows densely reject them ([`DataError::SparseUnsupported`]) or take
    /// [`Features::densified`].
    Sparse(CsrMatrix),
}

impl Features {
    /// Number of rows.
    #[inline]
    pub fn rows(&self) -> usize {
        match self {
            Features::F64(m) => m.rows(),
            Features::F32(m) => m.rows(),
            Features::Sparse(m) => m.rows(),
        }
    }

    /// Number of columns.
    #[inline]
    pub fn cols(&self) -> usize {
        match self {
            Features::F64(m) => m.cols(),
            Features::F32(m) => m.cols(),
            Features::Sparse(m) => m.cols(),
        }
    }

    /// numpy dtype name of the stored elements: `"f8"` or `"f4"` (sparse values are f8).
    pub fn dtype(&self) -> &'static str {
        match self {
            Features::F64(_) | Features::Sparse(_) => <f64 as Element>::DTYPE,
            Features::F32(_) => <f32 as Element>::DTYPE,
        }
    }

    /// `true` if the features are a memory-mapped file.
    pub fn is_mapped(&self) -> bool {
        match self {
            Features::F64(m) => m.is_mapped(),
            Features::F32(m) => m.is_mapped(),
            Features::Sparse(_) => false,
        }
    }

    /// `true` if the features are a mapped file larger than half the memory available when it
    /// was opened ([`Matrix::is_out_of_core`]): read from disk as they are used.
    pub fn is_out_of_core(&self) -> bool {
        match self {
            Features::F64(m) => m.is_out_of_core(),
            Features::F32(m) => m.is_out_of_core(),
            Features::Sparse(_) => false,
        }
    }

    /// Whether the rows are stored sparse.
    pub fn is_sparse(&self) -> bool {
        matches!(self, Features::Sparse(_))
    }

    /// Entry (i, j) as f64.
    pub fn get(&self, i: usize, j: usize) -> f64 {
        match self {
            Features::F64(m) => m.row(i)[j],
            Features::F32(m) => f64::from(m.row(i)[j]),
            Features::Sparse(m) => m.get(i, j),
        }
    }

    /// Row `i` as f64 into `out` (length cols).
    pub fn row_into(&self, i: usize, out: &mut [f64]) {
        match self {
            Features::F64(m) => out.copy_from_slice(m.row(i)),
            Features::F32(m) => out
                .iter_mut()
                .zip(m.row(i))
                .for_each(|(o, &v)| *o = f64::from(v)),
            Features::Sparse(m) => m.row_into(i, out),
        }
    }

    /// Bytes of storage.
    pub fn bytes(&self) -> usize {
        match self {
            Features::F64(m) => m.rows() * m.cols() * 8,
            Features::F32(m) => m.rows() * m.cols() * 4,
            Features::Sparse(m) => m.bytes(),
        }
    }

    /// Dense features: sparse rows written out as f64, dense ones unchanged.
    pub fn densified(self) -> Features {
        match self {
            Features::Sparse(m) => Features::F64(m.to_dense()),
            dense => dense,
        }
    }

    /// An error unless the rows are dense (for a model that reads them densely).
    pub fn require_dense(&self, model: &'static str, source: &str) -> Result<(), DataError> {
        match self {
            Features::Sparse(_) => Err(DataError::SparseUnsupported {
                source_name: source.to_string(),
                model,
            }),
            _ => Ok(()),
        }
    }
}

impl From<Matrix<f64>> for Features {
    fn from(m: Matrix<f64>) -> Self {
        Features::F64(m)
    }
}

impl From<Matrix<f32>> for Features {
    fn from(m: Matrix<f32>) -> Self {
        Features::F32(m)
    }
}

/// A loaded table: features, optional target column, names for error messages.
#[derive(Debug)]
pub struct Dataset {
    /// Feature matrix (one row per observation).
    pub features: Features,
    /// Target value per row, if any.
    pub targets: Option<Vec<f64>>,
    /// Column names (CSV header); empty when the format has none.
    pub feature_names: Vec<String>,
    /// File name used in error messages.
    pub features_source: String,
    /// Name used in error messages about targets (`None`: same as `features_source`).
    pub targets_source: Option<String>,
}

impl Dataset {
    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.features.rows()
    }

    /// Number of feature columns.
    pub fn cols(&self) -> usize {
        self.features.cols()
    }

    /// A copy holding the given 0-based `rows` (features and targets), in that order; `label`
    /// is appended to the sources' names for error messages (e.g. "training rows").
    /// Panics if a row is out of range.
    pub fn select_rows(&self, rows: &[usize], label: &str) -> Dataset {
        fn gather<T: Element>(m: &Matrix<T>, rows: &[usize]) -> Matrix<T> {
            let mut v = Vec::with_capacity(rows.len() * m.cols());
            for &i in rows {
                v.extend_from_slice(m.row(i));
            }
            Matrix::from_vec(v, rows.len(), m.cols()).expect("rows × cols by construction")
        }
        Dataset {
            features: match &self.features {
                Features::F64(m) => Features::F64(gather(m, rows)),
                Features::F32(m) => Features::F32(gather(m, rows)),
                Features::Sparse(m) => Features::Sparse(m.select_rows(rows)),
            },
            targets: self
                .targets
                .as_ref()
                .map(|t| rows.iter().map(|&i| t[i]).collect()),
            feature_names: self.feature_names.clone(),
            features_source: format!("{} ({label})", self.features_source),
            targets_source: self
                .targets_source
                .as_ref()
                .map(|s| format!("{s} ({label})")),
        }
    }

    /// The rows in a uniformly random order (a Fisher–Yates shuffle from the stream `seed`),
    /// as an in-memory copy: what contiguous-block minibatches
    /// ([`crate::estimator::MinibatchScheme::Block`]) read. A model's posterior does not
    /// depend on the order of its rows.
    pub fn shuffled(&self, seed: u64) -> Dataset {
        use rand::seq::SliceRandom;
        let mut order: Vec<usize> = (0..self.rows()).collect();
        order.shuffle(&mut crate::rng::stream(
            seed,
            crate::rng::streams::ROW_ORDER,
        ));
        self.select_rows(&order, "rows shuffled")
    }
}
