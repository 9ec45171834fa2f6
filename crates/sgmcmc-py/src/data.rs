//! NumPy arrays as the core's `Dataset`: features zero copy (the array is kept alive by the
//! matrix), targets copied (the models convert them to their own label types anyway).

use numpy::{PyArray1, PyArray2, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sgmcmc::data::{CsrMatrix, Dataset, Element, Features, Matrix};

use crate::SgmcmcError;

/// The features `x` (a C-contiguous 2-D float64 or float32 array, or the compressed-sparse-row
/// parts of a SciPy sparse matrix as a dict: `indptr`, `indices` (int64), `data` (float64),
/// `shape`) and targets `y` (1-D float64) as a dataset; a dense `x` is not copied and must not
/// be written to while a run reads it, sparse parts are copied into a checked `CsrMatrix`.
pub fn dataset(
    x: &Bound<'_, PyAny>,
    y: Option<&Bound<'_, PyAny>>,
    feature_names: Vec<String>,
) -> PyResult<Dataset> {
    let features = if let Ok(a) = x.cast::<PyArray2<f64>>() {
        Features::F64(matrix(a)?)
    } else if let Ok(a) = x.cast::<PyArray2<f32>>() {
        Features::F32(matrix(a)?)
    } else if let Ok(parts) = x.cast::<PyDict>() {
        Features::Sparse(csr(parts)?)
    } else {
        return Err(SgmcmcError::new_err(format!(
            "features: expected a 2-D float64 or float32 NumPy array or a SciPy sparse matrix, got {}",
            describe(x)
        )));
    };
    let rows = features.rows();
    let targets = match y {
        None => None,
        Some(y) => {
            let a = y.cast::<PyArray1<f64>>().map_err(|_| {
                SgmcmcError::new_err(format!(
                    "targets: expected a 1-D float64 NumPy array, got {}",
                    describe(y)
                ))
            })?;
            let values = a
                .to_vec()
                .map_err(|e| SgmcmcError::new_err(e.to_string()))?;
            if values.len() != rows {
                return Err(SgmcmcError::new_err(format!(
                    "targets: {} values for {rows} rows of features",
                    values.len()
                )));
            }
            Some(values)
        }
    };
    let (r, c) = (features.rows(), features.cols());
    let dtype = match features {
        Features::F64(_) => "float64",
        Features::F32(_) => "float32",
        Features::Sparse(_) => "sparse float64",
    };
    Ok(Dataset {
        features,
        targets,
        feature_names,
        features_source: format!("the features array ({r} x {c}, {dtype})"),
        targets_source: y.map(|_| "the targets array".to_string()),
    })
}

fn matrix<T: Element + numpy::Element>(a: &Bound<'_, PyArray2<T>>) -> PyResult<Matrix<T>> {
    if !a.is_c_contiguous() {
        return Err(SgmcmcError::new_err(
            "features: the array is not C-contiguous (np.ascontiguousarray makes a copy that is)",
        ));
    }
    let [rows, cols] = [a.shape()[0], a.shape()[1]];
    let ptr = a.data().cast_const();
    let owner: Box<dyn Send + Sync> = Box::new(a.clone().unbind());
    // SAFETY: the array is C-contiguous with `rows * cols` elements at `ptr`; `owner` holds a
    // reference to it, so its buffer lives as long as the matrix; the Python side documents
    // that the array must not be written to during a run.
    unsafe { Matrix::from_external(owner, ptr, rows, cols) }
        .map_err(|e| SgmcmcError::new_err(format!("features: {e}")))
}

/// The `CsrMatrix` of a SciPy sparse matrix's parts (see [`dataset`]); the core checks the
/// offsets, columns and values and names the first bad row.
fn csr(parts: &Bound<'_, PyDict>) -> PyResult<CsrMatrix> {
    let bad = |m: String| SgmcmcError::new_err(format!("features (sparse): {m}"));
    let item = |key: &str| {
        parts
            .get_item(key)?
            .ok_or_else(|| bad(format!("missing \"{key}\"")))
    };
    let ints = |key: &str| -> PyResult<Vec<i64>> {
        let v = item(key)?;
        let a = v
            .cast::<PyArray1<i64>>()
            .map_err(|_| bad(format!("\"{key}\" must be a 1-D int64 array")))?;
        a.to_vec().map_err(|e| bad(e.to_string()))
    };
    let (rows, cols): (usize, usize) = item("shape")?.extract()?;
    let row_ptr = ints("indptr")?
        .into_iter()
        .map(usize::try_from)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| bad("a negative row offset".into()))?;
    let col_idx = ints("indices")?
        .into_iter()
        .map(u32::try_from)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| bad("a column index that is negative or beyond 2^32 - 1".into()))?;
    let values = item("data")?
        .cast::<PyArray1<f64>>()
        .map_err(|_| bad("\"data\" must be a 1-D float64 array".into()))?
        .to_vec()
        .map_err(|e| bad(e.to_string()))?;
    CsrMatrix::new(rows, cols, row_ptr, col_idx, values, "the sparse features")
        .map_err(|e| SgmcmcError::new_err(format!("features: {e}")))
}

fn describe(x: &Bound<'_, PyAny>) -> String {
    match (x.getattr("shape"), x.getattr("dtype")) {
        (Ok(shape), Ok(dtype)) => format!("an array of shape {shape} and dtype {dtype}"),
        _ => x
            .get_type()
            .name()
            .map_or_else(|_| "an object".into(), |n| n.to_string()),
    }
}
