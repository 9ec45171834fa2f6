//! Compressed sparse rows (CSR): features with few non-zeros per row (LIBSVM data such as a9a,
//! 11 % non-zero; click and text data far sparser), stored and multiplied without the zeros.
//!
//! Row i's non-zeros are `values[row_ptr[i]..row_ptr[i + 1]]` at the strictly increasing
//! 0-based columns `col_idx[row_ptr[i]..row_ptr[i + 1]]`.

use super::{DataError, Matrix};

/// Density (non-zeros / entries) at or below which a loader keeps LIBSVM rows sparse: a sparse
/// dot product costs two to three times a dense one per stored entry (an index load and a
/// gather), so below about a third sparse rows are cheaper, and they are always smaller.
pub const SPARSE_DENSITY: f64 = 0.3;

/// A row-major sparse matrix of f64 values with u32 column indices.
#[derive(Debug, Clone, PartialEq)]
pub struct CsrMatrix {
    rows: usize,
    cols: usize,
    row_ptr: Vec<usize>,
    col_idx: Vec<u32>,
    values: Vec<f64>,
}

/// One stored row: its non-zero values at their columns (strictly increasing).
#[derive(Debug, Clone, Copy)]
pub struct SparseRow<'a> {
    /// 0-based columns of the non-zeros.
    pub cols: &'a [u32],
    /// The non-zero values.
    pub values: &'a [f64],
}

impl SparseRow<'_> {
    /// xᵀw.
    #[inline(always)]
    pub fn dot(self, w: &[f64]) -> f64 {
        let mut s = 0.0;
        for (&j, &v) in self.cols.iter().zip(self.values) {
            s += v * w[j as usize];
        }
        s
    }

    /// `g += a·x`.
    #[inline(always)]
    pub fn axpy(self, a: f64, g: &mut [f64]) {
        for (&j, &v) in self.cols.iter().zip(self.values) {
            g[j as usize] += a * v;
        }
    }

    /// `out = a·x` as a dense row (zeros included).
    #[inline(always)]
    pub fn write_scaled(self, a: f64, out: &mut [f64]) {
        out.fill(0.0);
        for (&j, &v) in self.cols.iter().zip(self.values) {
            out[j as usize] = a * v;
        }
    }
}

impl CsrMatrix {
    /// A matrix from its parts, checked: `row_ptr` has rows + 1 non-decreasing entries from 0
    /// to the number of values, every column is below `cols` and strictly increasing within
    /// its row, and every value is finite. `source` names the data in errors.
    pub fn new(
        rows: usize,
        cols: usize,
        row_ptr: Vec<usize>,
        col_idx: Vec<u32>,
        values: Vec<f64>,
        source: &str,
    ) -> Result<Self, DataError> {
        let bad = |message: String| DataError::Invalid {
            source_name: source.to_string(),
            message,
        };
        if row_ptr.len() != rows + 1 || row_ptr.first() != Some(&0) {
            return Err(bad(format!(
                "a sparse matrix of {rows} rows needs {} row offsets starting at 0",
                rows + 1
            )));
        }
        if col_idx.len() != values.len() || row_ptr[rows] != values.len() {
            return Err(bad(format!(
                "{} column indices and {} values for {} non-zeros",
                col_idx.len(),
                values.len(),
                row_ptr[rows]
            )));
        }
        if u32::try_from(cols).is_err() {
            return Err(bad(format!("{cols} columns exceed u32 column indices")));
        }
        for i in 0..rows {
            let (a, b) = (row_ptr[i], row_ptr[i + 1]);
            if b < a {
                return Err(bad(format!("row offsets decrease at row {}", i + 1)));
            }
            let row_cols = &col_idx[a..b];
            if let Some(k) = row_cols.iter().position(|&j| j as usize >= cols) {
                return Err(bad(format!(
                    "row {}: column {} is beyond the {cols} columns",
                    i + 1,
                    row_cols[k] as usize + 1
                )));
            }
            if row_cols.windows(2).any(|p| p[1] <= p[0]) {
                return Err(bad(format!(
                    "row {}: column indices are not strictly increasing",
                    i + 1
                )));
            }
            if let Some(k) = values[a..b].iter().position(|v| !v.is_finite()) {
                return Err(bad(format!(
                    "row {}, column {}: value {} is not finite",
                    i + 1,
                    row_cols[k] as usize + 1,
                    values[a + k]
                )));
            }
        }
        Ok(Self {
            rows,
            cols,
            row_ptr,
            col_idx,
            values,
        })
    }

    /// The non-zeros of a dense row-major `rows × cols` array.
    pub fn from_dense(x: &[f64], rows: usize, cols: usize) -> Self {
        assert_eq!(x.len(), rows * cols, "dense array is rows × cols");
        let mut row_ptr = Vec::with_capacity(rows + 1);
        let mut col_idx = Vec::new();
        let mut values = Vec::new();
        row_ptr.push(0);
        for row in x.chunks_exact(cols.max(1)).take(rows) {
            for (j, &v) in row.iter().enumerate() {
                if v != 0.0 {
                    col_idx.push(j as u32);
                    values.push(v);
                }
            }
            row_ptr.push(values.len());
        }
        Self {
            rows,
            cols,
            row_ptr,
            col_idx,
            values,
        }
    }

    /// An error naming the first value that is NaN or ±∞ (1-based row and column).
    pub fn check_finite(&self, source: &str) -> Result<(), DataError> {
        match self.values.iter().position(|v| !v.is_finite()) {
            None => Ok(()),
            Some(k) => {
                let row = self.row_ptr.partition_point(|&p| p <= k);
                Err(DataError::Invalid {
                    source_name: source.to_string(),
                    message: format!(
                        "row {row}, column {}: value {} is not finite",
                        self.col_idx[k] as usize + 1,
                        self.values[k]
                    ),
                })
            }
        }
    }

    /// Number of rows.
    #[inline]
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    #[inline]
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Number of stored non-zeros.
    pub fn nnz(&self) -> usize {
        self.values.len()
    }

    /// Non-zeros / (rows × cols).
    pub fn density(&self) -> f64 {
        self.nnz() as f64 / (self.rows as f64 * self.cols as f64).max(1.0)
    }

    /// Bytes of storage (offsets, indices and values).
    pub fn bytes(&self) -> usize {
        self.row_ptr.len() * 8 + self.col_idx.len() * 4 + self.values.len() * 8
    }

    /// Row `i`.
    #[inline(always)]
    pub fn row(&self, i: usize) -> SparseRow<'_> {
        let (a, b) = (self.row_ptr[i], self.row_ptr[i + 1]);
        SparseRow {
            cols: &self.col_idx[a..b],
            values: &self.values[a..b],
        }
    }

    /// Hint the CPU to start loading row `i` (its first indices and values).
    #[inline(always)]
    pub fn prefetch_row(&self, i: usize) {
        if let Some(&a) = self.row_ptr.get(i) {
            super::prefetch_element(&self.col_idx, a);
            super::prefetch_element(&self.values, a);
        }
    }

    /// Entry (i, j) (0 where nothing is stored).
    pub fn get(&self, i: usize, j: usize) -> f64 {
        let row = self.row(i);
        match row.cols.binary_search(&(j as u32)) {
            Ok(k) => row.values[k],
            Err(_) => 0.0,
        }
    }

    /// Row `i` written densely into `out` (length cols).
    pub fn row_into(&self, i: usize, out: &mut [f64]) {
        self.row(i).write_scaled(1.0, out);
    }

    /// The dense matrix.
    pub fn to_dense(&self) -> Matrix<f64> {
        let mut v = vec![0.0; self.rows * self.cols];
        for (i, out) in v.chunks_exact_mut(self.cols.max(1)).enumerate() {
            self.row_into(i, out);
        }
        Matrix::from_vec(v, self.rows, self.cols).expect("rows × cols by construction")
    }

    /// The given rows, in that order. Panics if a row is out of range.
    pub fn select_rows(&self, rows: &[usize]) -> Self {
        let mut row_ptr = Vec::with_capacity(rows.len() + 1);
        let mut col_idx = Vec::new();
        let mut values = Vec::new();
        row_ptr.push(0);
        for &i in rows {
            let r = self.row(i);
            col_idx.extend_from_slice(r.cols);
            values.extend_from_slice(r.values);
            row_ptr.push(values.len());
        }
        Self {
            rows: rows.len(),
            cols: self.cols,
            row_ptr,
            col_idx,
            values,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_row_operations() {
        let dense = [0.0, 2.0, 0.0, -1.0, 0.0, 0.0, 0.0, 0.0, 3.0, 0.5, 0.0, 4.0];
        let m = CsrMatrix::from_dense(&dense, 3, 4);
        assert_eq!(m.nnz(), 5);
        assert_eq!(m.to_dense().as_slice(), &dense);
        assert_eq!(m.get(2, 3), 4.0);
        assert_eq!(m.get(1, 2), 0.0);
        let w = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(m.row(0).dot(&w), 2.0 * 2.0 - 4.0);
        assert_eq!(m.row(1).dot(&w), 0.0);
        let mut g = [1.0; 4];
        m.row(2).axpy(2.0, &mut g);
        assert_eq!(g, [7.0, 2.0, 1.0, 9.0]);
        let picked = m.select_rows(&[2, 0]);
        assert_eq!(
            picked.to_dense().as_slice(),
            &[3.0, 0.5, 0.0, 4.0, 0.0, 2.0, 0.0, -1.0]
        );
    }

    #[test]
    fn bad_parts_are_named() {
        let err = |r: Result<CsrMatrix, DataError>| r.unwrap_err().to_string();
        let e = err(CsrMatrix::new(2, 3, vec![0, 1], vec![0], vec![1.0], "m"));
        assert!(e.contains("row offsets"), "{e}");
        let e = err(CsrMatrix::new(1, 3, vec![0, 1], vec![3], vec![1.0], "m"));
        assert!(e.contains("column 4 is beyond the 3 columns"), "{e}");
        let e = err(CsrMatrix::new(
            1,
            3,
            vec![0, 2],
            vec![1, 1],
            vec![1.0, 2.0],
            "m",
        ));
        assert!(e.contains("strictly increasing"), "{e}");
        let e = err(CsrMatrix::new(
            1,
            3,
            vec![0, 1],
            vec![1],
            vec![f64::NAN],
            "m",
        ));
        assert!(e.contains("not finite"), "{e}");
    }
}
