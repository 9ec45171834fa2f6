//! Loading data sets: memory-mapped `.npy`, CSV and LIBSVM, plus validation.
//!
//! Features are kept in the precision they were stored in ([`Features::F32`] or
//! [`Features::F64`]); rows are zero-copy slices ([`Matrix::row`]). Error messages
//! are one line, name the file and use 1-based rows/columns (see [`DataError`]).

pub mod coreset_sets;
mod csv;
mod error;
pub mod idx;
mod libsvm;
mod matrix;
mod movielens;
mod npy;
pub mod synthetic;

pub use self::coreset_sets::{load_bike_sharing, load_bike_sharing_reference, load_nba_games};
pub use self::csv::load_csv;
pub use self::error::DataError;
pub use self::libsvm::load_libsvm;
pub use self::matrix::{
    Element, Matrix, PREFETCH_DISTANCE, check_finite_matrix, check_finite_targets, check_nonempty,
    check_same_rows, gather_sum, prefetch_element, validate, validate_finite,
};
pub use self::movielens::{MOVIELENS_FEATURES, load_movielens, movielens_counts};
pub use self::npy::{load_npy_features, load_npy_vector};

/// Features in the precision they were stored in (f32 files are NOT converted: halving bytes/row matters).
#[derive(Debug)]
pub enum Features {
    /// Double-precision features.
    F64(Matrix<f64>),
    /// Single-precision features.
    F32(Matrix<f32>),
}

impl Features {
    /// Number of rows.
    #[inline]
    pub fn rows(&self) -> usize {
        match self {
            Features::F64(m) => m.rows(),
            Features::F32(m) => m.rows(),
        }
    }

    /// Number of columns.
    #[inline]
    pub fn cols(&self) -> usize {
        match self {
            Features::F64(m) => m.cols(),
            Features::F32(m) => m.cols(),
        }
    }

    /// numpy dtype name of the stored elements: `"f8"` or `"f4"`.
    pub fn dtype(&self) -> &'static str {
        match self {
            Features::F64(_) => <f64 as Element>::DTYPE,
            Features::F32(_) => <f32 as Element>::DTYPE,
        }
    }

    /// `true` if the features are a memory-mapped file.
    pub fn is_mapped(&self) -> bool {
        match self {
            Features::F64(m) => m.is_mapped(),
            Features::F32(m) => m.is_mapped(),
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
}
