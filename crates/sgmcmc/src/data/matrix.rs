//! Row-major matrices (owned or memory-mapped) and validation scans.

use std::fmt;
use std::mem;
use std::slice;

use memmap2::Mmap;

use super::{DataError, Dataset, Features};
use crate::model::DataIndex;

mod sealed {
    /// Prevents implementations of `Element` outside this module: a memory-mapped
    /// file is reinterpreted as `[T]`, which is only sound for types where every
    /// bit pattern is valid.
    pub trait Sealed {}
    impl Sealed for f64 {}
    impl Sealed for f32 {}
}

/// f64 or f32 element; `to_f64` is what models use in their inner loops.
///
/// Sealed: implemented only for `f64` and `f32` (every bit pattern is a valid value,
/// which makes reinterpreting mapped bytes sound).
pub trait Element: Copy + Send + Sync + PartialEq + fmt::Debug + 'static + sealed::Sealed {
    /// numpy dtype name without byte order, e.g. `"f8"`.
    const DTYPE: &'static str;
    /// Converts to `f64` (exact for both implementations).
    fn to_f64(self) -> f64;
    /// `true` unless the value is NaN or ±infinity.
    fn is_finite(self) -> bool;
}

impl Element for f64 {
    const DTYPE: &'static str = "f8";
    #[inline]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline]
    fn is_finite(self) -> bool {
        f64::is_finite(self)
    }
}

impl Element for f32 {
    const DTYPE: &'static str = "f4";
    #[inline]
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    #[inline]
    fn is_finite(self) -> bool {
        f32::is_finite(self)
    }
}

/// The pieces in which an out-of-core matrix is scanned for non-finite values.
const SCAN_PIECE_BYTES: usize = 8 << 20;

/// Ranges shorter than this are not worth a system call in [`Matrix::advise_will_read`]: the
/// kernel's own read-ahead already fetches 128 KiB around a fault.
pub const WILL_READ_MIN_BYTES: usize = 64 << 10;

/// Where the elements of a [`Matrix`] live. The buffers are only held to keep
/// `Matrix::ptr` valid; all reads go through that pointer.
enum Storage<T> {
    /// Heap buffer.
    Owned(#[expect(dead_code, reason = "owns the buffer that `Matrix::ptr` points into")] Vec<T>),
    /// Read-only memory map (of a file, or anonymous memory holding a copy); the data starts
    /// `offset` bytes into it.
    Mapped {
        mmap: Mmap,
        offset: usize,
        /// A file larger than half the memory available when it was mapped: its pages are read
        /// from disk as the rows are used, so block reads are announced to the kernel
        /// ([`Matrix::advise_will_read`]) and unmapped after use.
        out_of_core: bool,
    },
    /// Memory another owner keeps alive and unchanged (e.g. a NumPy array held by the Python
    /// package): [`Matrix::from_external`].
    External(
        #[expect(
            dead_code,
            reason = "keeps the buffer that `Matrix::ptr` points into alive"
        )]
        Box<dyn Send + Sync>,
    ),
}

/// Row-major matrix whose rows are zero-copy slices; either owned or a memory-mapped .npy file.
///
/// A mapped matrix reads the file lazily through the page cache, so files larger
/// than RAM work. As with any memory map, the file must not be truncated or
/// modified by another process while the matrix is alive.
pub struct Matrix<T> {
    storage: Storage<T>,
    /// Start of the `rows * cols` elements; points into `storage` (heap buffer or
    /// mapping), whose address does not change when `Matrix` is moved.
    ptr: *const T,
    rows: usize,
    cols: usize,
}

// SAFETY: `ptr` points into memory owned by `storage` (a `Vec<T>` or an `Mmap`,
// both `Send + Sync` for `T: Send + Sync`), and it is only ever used for shared,
// read-only access. No interior mutability is exposed.
unsafe impl<T: Element> Send for Matrix<T> {}
// SAFETY: see `Send`; all access through `&Matrix` is read-only.
unsafe impl<T: Element> Sync for Matrix<T> {}

impl<T: Element> Matrix<T> {
    /// Wraps a row-major buffer; fails unless `data.len() == rows * cols`.
    pub fn from_vec(data: Vec<T>, rows: usize, cols: usize) -> Result<Self, DataError> {
        if rows.checked_mul(cols) != Some(data.len()) {
            return Err(DataError::ShapeMismatch {
                rows,
                cols,
                len: data.len(),
            });
        }
        if let Some(m) = Self::huge_page_copy(&data, rows, cols) {
            return Ok(m);
        }
        let ptr = data.as_ptr();
        Ok(Matrix {
            storage: Storage::Owned(data),
            ptr,
            rows,
            cols,
        })
    }

    /// Large matrices are moved into anonymous memory advised for transparent huge pages
    /// (Linux), so random row access does not also miss the TLB on every row; `None` when the
    /// matrix is small or the mapping fails (the plain `Vec` is then used).
    fn huge_page_copy(data: &[T], rows: usize, cols: usize) -> Option<Self> {
        const MIN_BYTES: usize = 16 << 20;
        let bytes = mem::size_of_val(data);
        if bytes < MIN_BYTES || !cfg!(target_os = "linux") {
            return None;
        }
        let mut anon = memmap2::MmapOptions::new().len(bytes).map_anon().ok()?;
        #[cfg(target_os = "linux")]
        let _ = anon.advise(memmap2::Advice::HugePage);
        // SAFETY: `anon` is a fresh, page-aligned, writable mapping of exactly `bytes` bytes, and
        // T is f32 or f64 (sealed), for which every bit pattern is valid.
        let dst = unsafe { slice::from_raw_parts_mut(anon.as_mut_ptr().cast::<T>(), data.len()) };
        dst.copy_from_slice(data);
        Self::from_mmap(anon.make_read_only().ok()?, 0, rows, cols, false)
    }

    /// Wraps a read-only mapping whose bytes `offset..` hold exactly `rows * cols`
    /// native-endian `T`s. Returns `None` if the sizes do not match exactly or the
    /// data is misaligned for `T` (callers check these first to report good errors).
    /// `out_of_core`: see [`Matrix::is_out_of_core`].
    pub(super) fn from_mmap(
        mmap: Mmap,
        offset: usize,
        rows: usize,
        cols: usize,
        out_of_core: bool,
    ) -> Option<Self> {
        let n_bytes = rows.checked_mul(cols)?.checked_mul(mem::size_of::<T>())?;
        if n_bytes > isize::MAX as usize || offset.checked_add(n_bytes)? != mmap.len() {
            return None;
        }
        // `offset <= mmap.len()` was just checked, so this stays inside the mapping.
        let ptr = mmap[offset..].as_ptr().cast::<T>();
        if !ptr.is_aligned() {
            return None;
        }
        if out_of_core {
            // A page fault reads that page only, not a readahead window around it: the rows
            // are read where the program asks for them (announced blocks, announced scattered
            // rows), and a window of neighbours would mostly be evicted, unused, before the
            // loop reaches it (a uniform minibatch read 1.2 MB per row without this).
            #[cfg(unix)]
            let _ = mmap.advise(memmap2::Advice::Random);
        }
        Some(Matrix {
            storage: Storage::Mapped {
                mmap,
                offset,
                out_of_core,
            },
            ptr,
            rows,
            cols,
        })
    }

    /// Wraps `rows * cols` elements at `ptr` that `owner` keeps alive: zero copy, e.g. for a
    /// NumPy array handed over by the Python package. Fails on a size mismatch, a null or
    /// misaligned pointer.
    ///
    /// # Safety
    /// `ptr` must be valid for reads of `rows * cols` elements of `T`, row-major and contiguous,
    /// for as long as `owner` lives, and nothing may write to that memory while the matrix
    /// exists.
    pub unsafe fn from_external(
        owner: Box<dyn Send + Sync>,
        ptr: *const T,
        rows: usize,
        cols: usize,
    ) -> Result<Self, DataError> {
        let len = rows.checked_mul(cols).filter(|&n| {
            n.checked_mul(mem::size_of::<T>())
                .is_some_and(|b| b <= isize::MAX as usize)
        });
        let reason = if len.is_none() {
            Some("too large")
        } else if ptr.is_null() {
            Some("null pointer")
        } else if !ptr.is_aligned() {
            Some("not aligned for its element type")
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(DataError::ExternalBuffer { rows, cols, reason });
        }
        Ok(Matrix {
            storage: Storage::External(owner),
            ptr,
            rows,
            cols,
        })
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

    /// Row `i` as a slice of `cols()` elements. Panics if `i >= rows()`.
    #[inline]
    pub fn row(&self, i: usize) -> &[T] {
        debug_assert!(i < self.rows, "row {i} out of range ({} rows)", self.rows);
        let start = i * self.cols;
        &self.as_slice()[start..start + self.cols]
    }

    /// Hint the CPU to start loading row `i` into cache (a no-op off x86-64). Random-row loops
    /// call this a few rows ahead so that several memory loads are in flight at once. A row of
    /// at least 64 bytes is fetched into L2 (`prefetcht1`), a shorter one into L1
    /// (`prefetcht0`): on 1M × 10 rows, uniform SGLD was 1.05–1.17× as fast with f64 rows (80
    /// bytes) into L2, and 0.91–0.97× with f32 rows (40 bytes); no other row length was
    /// measured (`docs/experiments/sgld_throughput.md`).
    #[inline(always)]
    pub fn prefetch_row(&self, i: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use core::arch::x86_64::{_MM_HINT_T0, _MM_HINT_T1, _mm_prefetch};
            let row_bytes = self.cols * std::mem::size_of::<T>();
            let first = self
                .as_slice()
                .as_ptr()
                .wrapping_add(i * self.cols)
                .cast::<i8>();
            let last = first.wrapping_add(row_bytes.saturating_sub(1));
            // SAFETY: a prefetch is only a hint; it never faults or reads memory into the program.
            unsafe {
                if row_bytes >= 64 {
                    _mm_prefetch::<_MM_HINT_T1>(first);
                    _mm_prefetch::<_MM_HINT_T1>(last);
                } else {
                    _mm_prefetch::<_MM_HINT_T0>(first);
                    _mm_prefetch::<_MM_HINT_T0>(last);
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = i;
    }

    /// `true` for a mapped file larger than half the memory available when it was mapped
    /// ([`super::available_memory`]): rows come from disk as they are used, and block
    /// minibatches announce their reads ([`Self::advise_will_read`],
    /// [`Self::advise_done_reading`]). For data that fits, those calls would only cost time.
    pub fn is_out_of_core(&self) -> bool {
        matches!(
            self.storage,
            Storage::Mapped {
                out_of_core: true,
                ..
            }
        )
    }

    /// Tells the kernel that rows `rows` (clamped to the matrix) are about to be read, when the
    /// matrix is out of core: one `madvise(MADV_WILLNEED)`, which starts reading the whole
    /// range from disk at once, instead of one page fault (and one small read) per 4 KiB as the
    /// loop reaches each page. A no-op for data in memory, and for ranges of fewer than
    /// [`WILL_READ_MIN_BYTES`] bytes.
    pub fn advise_will_read(&self, rows: std::ops::Range<usize>) {
        #[cfg(unix)]
        if let Some((mmap, start, len)) = self.mapped_range(rows)
            && len >= WILL_READ_MIN_BYTES
        {
            // Only a hint: an error (none is expected for an in-bounds range) changes nothing.
            let _ = mmap.advise_range(memmap2::Advice::WillNeed, start, len);
        }
        #[cfg(not(unix))]
        let _ = rows;
    }

    /// [`Self::advise_will_read`] for a block of `n` rows from `first`, wrapping around the end
    /// (rows first, …, first + n − 1 mod N): a block minibatch.
    pub fn advise_will_read_block(&self, first: usize, n: usize) {
        let head = n.min(self.rows.saturating_sub(first));
        self.advise_will_read(first..first + head);
        self.advise_will_read(0..n - head);
    }

    /// Before a scattered minibatch (not one block) of an out-of-core matrix: one
    /// `madvise(MADV_WILLNEED)` per row, so that the reads of all its pages are in flight at
    /// once, instead of one page fault (with a readahead window, mostly wasted) after another.
    /// Blocks were announced ahead ([`Self::advise_will_read_block`]) and are skipped, as is
    /// data in memory.
    pub fn advise_will_read_rows(&self, batch: &[DataIndex]) {
        if !self.is_out_of_core() || is_block(batch, self.rows) {
            return;
        }
        for &i in batch {
            if let Some((mmap, start, len)) = self.mapped_range(i as usize..i as usize + 1) {
                // Only a hint, as in `advise_will_read`.
                let _ = mmap.advise_range(memmap2::Advice::WillNeed, start, len);
            }
        }
    }

    /// After a minibatch that was a block (one run of consecutive indices, or two when it wraps
    /// around the end; checked from its ends only), when the matrix is out of core: drops this
    /// process's mapping of the block's pages (`MADV_DONTNEED`). The pages stay in the page
    /// cache, but the kernel can reclaim them without first unmapping them, which under memory
    /// pressure is most of the cost of reading a mapped file. Any other batch, or data in
    /// memory: nothing.
    pub fn advise_done_reading(&self, batch: &[DataIndex]) {
        if !self.is_out_of_core() {
            return;
        }
        let (Some(&lo), Some(&hi)) = (batch.first(), batch.last()) else {
            return;
        };
        if !is_block(batch, self.rows) {
            return;
        }
        let (lo, hi) = (lo as usize, hi as usize);
        if hi >= lo {
            self.drop_mapping(lo..hi + 1);
        } else {
            self.drop_mapping(lo..self.rows);
            self.drop_mapping(0..hi + 1);
        }
    }

    #[cfg(unix)]
    fn drop_mapping(&self, rows: std::ops::Range<usize>) {
        if let Some((mmap, start, len)) = self.mapped_range(rows)
            && len > 0
        {
            // SAFETY: the mapping is a read-only private map of a file, never written: after
            // MADV_DONTNEED its pages are read again from the file (the page cache) on the next
            // access, with the same contents. No reference into the mapping is invalidated.
            let _ = unsafe {
                mmap.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, len)
            };
        }
    }

    #[cfg(not(unix))]
    fn drop_mapping(&self, _rows: std::ops::Range<usize>) {}

    /// The mapping of an out-of-core matrix and the byte range of `rows` (clamped) in it.
    fn mapped_range(&self, rows: std::ops::Range<usize>) -> Option<(&Mmap, usize, usize)> {
        let Storage::Mapped {
            mmap,
            offset,
            out_of_core: true,
        } = &self.storage
        else {
            return None;
        };
        let row_bytes = self.cols * mem::size_of::<T>();
        let end = rows.end.min(self.rows);
        let start = rows.start.min(end);
        Some((mmap, offset + start * row_bytes, (end - start) * row_bytes))
    }

    /// All rows contiguously (row-major), `rows() * cols()` elements.
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: `ptr` is aligned, non-null and valid for `rows * cols` reads of `T`
        // for as long as `self.storage` lives (checked in the constructors); the
        // memory is never written; every bit pattern is a valid `T` (sealed trait).
        unsafe { slice::from_raw_parts(self.ptr, self.rows * self.cols) }
    }

    /// Iterator over the rows.
    pub fn iter_rows(&self) -> impl ExactSizeIterator<Item = &[T]> + '_ {
        (0..self.rows).map(move |i| self.row(i))
    }

    /// `true` if the data is a memory-mapped file rather than a heap buffer.
    pub fn is_mapped(&self) -> bool {
        matches!(self.storage, Storage::Mapped { .. })
    }

    /// Byte offset of the data within the mapped file (`None` for an owned matrix).
    pub fn mapped_offset(&self) -> Option<usize> {
        match self.storage {
            Storage::Owned(_) | Storage::External(_) => None,
            Storage::Mapped { offset, .. } => Some(offset),
        }
    }
}

impl<T: Element> fmt::Debug for Matrix<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Matrix")
            .field("dtype", &T::DTYPE)
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .field("mapped_offset", &self.mapped_offset())
            .finish()
    }
}

/// Whether `batch` looks like a block of consecutive rows of `rows`, wrapping around the end
/// at most once, judged from its first and last index and its length only (O(1)).
fn is_block(batch: &[DataIndex], rows: usize) -> bool {
    let (Some(&lo), Some(&hi)) = (batch.first(), batch.last()) else {
        return false;
    };
    let (lo, hi, n) = (lo as usize, hi as usize, batch.len());
    if hi >= lo {
        hi - lo + 1 == n
    } else {
        (rows - lo) + hi + 1 == n
    }
}

/// Index and kind (`"NaN"`, `"inf"`, `"-inf"`) of the first non-finite element.
fn first_non_finite<T: Element>(data: &[T]) -> Option<(usize, &'static str)> {
    // Branch-free check per chunk (vectorises), then locate within the bad chunk.
    const CHUNK: usize = 4096;
    for (c, chunk) in data.chunks(CHUNK).enumerate() {
        if chunk.iter().fold(true, |ok, &v| ok & v.is_finite()) {
            continue;
        }
        let j = chunk.iter().position(|v| !v.is_finite())?;
        let v = chunk[j].to_f64();
        let kind = if v.is_nan() {
            "NaN"
        } else if v > 0.0 {
            "inf"
        } else {
            "-inf"
        };
        return Some((c * CHUNK + j, kind));
    }
    None
}

fn column_label(feature_names: &[String], cols: usize, j: usize) -> String {
    if feature_names.len() == cols {
        format!("{:?}", feature_names[j])
    } else {
        (j + 1).to_string()
    }
}

/// Scans a matrix for NaN/±inf (one sequential pass); the error names the 1-based
/// row and the column (quoted name if `feature_names` has one per column, else 1-based index).
pub fn check_finite_matrix<T: Element>(
    m: &Matrix<T>,
    source_name: &str,
    feature_names: &[String],
) -> Result<(), DataError> {
    let found = if m.is_out_of_core() {
        // From disk: scanned in pieces, each announced one piece ahead (the mapping reads one
        // page per fault, see `Matrix::from_mmap`).
        let piece = (SCAN_PIECE_BYTES / (m.cols() * mem::size_of::<T>())).max(1);
        m.advise_will_read(0..piece);
        (0..m.rows()).step_by(piece).find_map(|first| {
            m.advise_will_read(first + piece..first + 2 * piece);
            let last = (first + piece).min(m.rows());
            first_non_finite(&m.as_slice()[first * m.cols()..last * m.cols()])
                .map(|(k, kind)| (first * m.cols() + k, kind))
        })
    } else {
        first_non_finite(m.as_slice())
    };
    match found {
        None => Ok(()),
        Some((k, kind)) => Err(DataError::NonFinite {
            source_name: source_name.to_string(),
            row: k / m.cols() + 1,
            column: Some(column_label(feature_names, m.cols(), k % m.cols())),
            kind,
        }),
    }
}

/// Scans a target vector for NaN/±inf; the error names the 1-based row.
pub fn check_finite_targets(targets: &[f64], source_name: &str) -> Result<(), DataError> {
    match first_non_finite(targets) {
        None => Ok(()),
        Some((k, kind)) => Err(DataError::NonFinite {
            source_name: source_name.to_string(),
            row: k + 1,
            column: None,
            kind,
        }),
    }
}

/// Scans features and targets of `ds` for NaN/±inf (for a mapped file, one sequential pass).
pub fn validate_finite(ds: &Dataset) -> Result<(), DataError> {
    match &ds.features {
        Features::F64(m) => check_finite_matrix(m, &ds.features_source, &ds.feature_names)?,
        Features::F32(m) => check_finite_matrix(m, &ds.features_source, &ds.feature_names)?,
        Features::Sparse(m) => m.check_finite(&ds.features_source)?,
    }
    if let Some(t) = &ds.targets {
        let name = ds
            .targets_source
            .as_deref()
            .unwrap_or(ds.features_source.as_str());
        check_finite_targets(t, name)?;
    }
    Ok(())
}

/// Checks that features and targets have the same number of rows.
pub fn check_same_rows(
    features: &Features,
    features_source: &str,
    targets: &[f64],
    targets_source: &str,
) -> Result<(), DataError> {
    if features.rows() == targets.len() {
        Ok(())
    } else {
        Err(DataError::RowMismatch {
            features_source: features_source.to_string(),
            features_rows: features.rows(),
            targets_source: targets_source.to_string(),
            targets_rows: targets.len(),
        })
    }
}

/// Checks that the features have at least one row and one column.
pub fn check_nonempty(features: &Features, source_name: &str) -> Result<(), DataError> {
    let what = if features.rows() == 0 {
        "rows"
    } else if features.cols() == 0 {
        "columns"
    } else {
        return Ok(());
    };
    Err(DataError::Empty {
        source_name: source_name.to_string(),
        what,
    })
}

/// Runs all structural checks on a data set: non-empty, X/y row counts, finite values.
pub fn validate(ds: &Dataset) -> Result<(), DataError> {
    check_nonempty(&ds.features, &ds.features_source)?;
    if let Some(t) = &ds.targets {
        let name = ds
            .targets_source
            .as_deref()
            .unwrap_or(ds.features_source.as_str());
        check_same_rows(&ds.features, &ds.features_source, t, name)?;
    }
    validate_finite(ds)
}

/// Rows ahead that random-row loops prefetch.
pub const PREFETCH_DISTANCE: usize = 16;

/// Rows ahead that the vectorised dense-row loops (the GLMs' minibatch kernel, and
/// [`gather_sum`], its read-only reference) prefetch: their rows take a few nanoseconds each,
/// so more of them must be in flight to cover a memory latency (measured on 1M × 10 f64 rows,
/// uniform SGLD batch 10,000: 16 ahead 5.3k it/s, 48 7.6k, 96 8.0k, 160 7.1k).
pub const ROW_PREFETCH_DISTANCE: usize = 64;

/// Hint the CPU to start loading `slice[i]` into cache (a no-op off x86-64, or if `i` is out of
/// range): for per-row arrays read alongside random rows, such as a model's targets.
#[inline(always)]
pub fn prefetch_element<T>(slice: &[T], i: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(element) = slice.get(i) {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: a prefetch is only a hint; it never faults or reads memory into the program.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((element as *const T).cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (slice, i);
}

/// Sum of all values of the rows `indices` (with the same prefetching as the model kernels): the
/// memory-bound reference loop of `sgmcmc bench`.
pub fn gather_sum<T: Element>(m: &Matrix<T>, indices: &[u32]) -> f64 {
    let mut acc = 0.0;
    for (k, &i) in indices.iter().enumerate() {
        if let Some(&ahead) = indices.get(k + ROW_PREFETCH_DISTANCE) {
            m.prefetch_row(ahead as usize);
        }
        acc += m.row(i as usize).iter().map(|v| v.to_f64()).sum::<f64>();
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<X: Send + Sync>() {}

    #[test]
    fn matrix_is_send_sync() {
        assert_send_sync::<Matrix<f64>>();
        assert_send_sync::<Matrix<f32>>();
        assert_send_sync::<Features>();
        assert_send_sync::<Dataset>();
    }

    /// An out-of-core mapping reads the same rows after its blocks were announced and their
    /// pages dropped from the mapping (wrapping blocks too); a small file, an owned matrix and
    /// scattered batches are left alone.
    #[test]
    fn advice_on_an_out_of_core_mapping_keeps_the_rows() {
        use std::io::Write;
        let (rows, cols) = (20_000usize, 3usize);
        let values: Vec<f64> = (0..rows * cols).map(|i| i as f64 * 0.5).collect();
        let mut file = tempfile::tempfile().unwrap();
        for v in &values {
            file.write_all(&v.to_ne_bytes()).unwrap();
        }
        // SAFETY: a private temporary file nothing else writes to.
        let map = || unsafe { Mmap::map(&file) }.unwrap();
        let m = Matrix::<f64>::from_mmap(map(), 0, rows, cols, true).unwrap();
        assert!(m.is_out_of_core() && m.is_mapped());
        let block: Vec<DataIndex> = (5_000..15_000).collect();
        let wrapping: Vec<DataIndex> = (17_000..20_000).chain(0..4_000).collect();
        for batch in [&block, &wrapping] {
            let first = batch[0] as usize;
            m.advise_will_read_block(first, batch.len());
            let sum: f64 = batch.iter().map(|&i| m.row(i as usize)[1]).sum();
            m.advise_done_reading(batch);
            m.advise_done_reading(&[3, 9_999, 7]);
            m.advise_will_read_rows(&[3, 9_999, 7, 19_999]);
            let again: f64 = batch.iter().map(|&i| m.row(i as usize)[1]).sum();
            assert_eq!(sum, again);
        }
        assert_eq!(m.as_slice(), values.as_slice());
        assert!(is_block(&block, rows) && is_block(&wrapping, rows));
        assert!(!is_block(&[3, 9_999, 7], rows) && !is_block(&[], rows));
        assert!(check_finite_matrix(&m, "x", &[]).is_ok());
        let in_memory = Matrix::<f64>::from_mmap(map(), 0, rows, cols, false).unwrap();
        assert!(!in_memory.is_out_of_core() && in_memory.mapped_range(0..1).is_none());
        let owned = Matrix::from_vec(values.clone(), rows, cols).unwrap();
        assert!(!owned.is_out_of_core());
        owned.advise_will_read_block(0, rows);
        owned.advise_done_reading(&block);
        assert_eq!(owned.as_slice(), values.as_slice());
    }

    /// The out-of-core finiteness scan goes piece by piece and names the right row and column
    /// of a NaN beyond the first piece.
    #[test]
    fn out_of_core_scan_names_the_row_of_a_nan_in_a_later_piece() {
        use std::io::Write;
        let (rows, cols) = (400_000usize, 3usize);
        assert!(rows * cols * 8 > SCAN_PIECE_BYTES);
        let mut values = vec![1.0f64; rows * cols];
        values[380_000 * cols + 2] = f64::NAN;
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&bytes).unwrap();
        // SAFETY: a private temporary file nothing else writes to.
        let mmap = unsafe { Mmap::map(&file) }.unwrap();
        let m = Matrix::<f64>::from_mmap(mmap, 0, rows, cols, true).unwrap();
        let e = check_finite_matrix(&m, "x.npy", &[]).unwrap_err();
        assert!(
            matches!(&e, DataError::NonFinite { row: 380_001, column: Some(c), kind: "NaN", .. } if c == "3"),
            "{e}"
        );
    }

    #[test]
    fn from_vec_rows_and_shape_check() {
        let m = Matrix::from_vec((0..6).map(f64::from).collect(), 2, 3).unwrap();
        assert_eq!(m.rows(), 2);
        assert_eq!(m.cols(), 3);
        assert_eq!(m.row(1), &[3.0, 4.0, 5.0]);
        assert_eq!(m.as_slice().len(), 6);
        assert!(!m.is_mapped());
        assert_eq!(m.iter_rows().count(), 2);
        let e = Matrix::<f32>::from_vec(vec![0.0; 5], 2, 3).unwrap_err();
        assert!(matches!(e, DataError::ShapeMismatch { len: 5, .. }), "{e}");
        assert!(Matrix::<f64>::from_vec(vec![], usize::MAX, 2).is_err());
        let empty = Matrix::<f64>::from_vec(vec![], 0, 3).unwrap();
        assert_eq!(empty.as_slice().len(), 0);
    }

    #[test]
    #[should_panic]
    fn row_out_of_range_panics() {
        let m = Matrix::from_vec(vec![1.0f64, 2.0], 1, 2).unwrap();
        let _ = m.row(1);
    }

    #[test]
    fn external_buffer_is_read_in_place() {
        let data = vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0];
        let ptr = data.as_ptr();
        // SAFETY: `data` is moved into the owner, which keeps the buffer (unchanged) alive.
        let m = unsafe { Matrix::from_external(Box::new(data), ptr, 3, 2) }.unwrap();
        assert_eq!(m.row(2), &[5.0, 6.0]);
        assert_eq!(m.as_slice().as_ptr(), ptr, "no copy");
        assert!(!m.is_mapped() && m.mapped_offset().is_none());
        let bytes = vec![0u8; 64];
        let odd = bytes.as_ptr().wrapping_add(1).cast::<f64>();
        // SAFETY: rejected before any read (misaligned).
        let e = unsafe { Matrix::from_external(Box::new(bytes), odd, 1, 1) }.unwrap_err();
        assert!(e.to_string().contains("not aligned"), "{e}");
        // SAFETY: rejected before any read (too large).
        let e =
            unsafe { Matrix::<f64>::from_external(Box::new(()), ptr, usize::MAX, 2) }.unwrap_err();
        assert!(e.to_string().contains("too large"), "{e}");
    }

    #[test]
    fn finite_scan_finds_first_bad_value() {
        let mut v = vec![1.0f32; 3 * 5000];
        v[2 * 5000 + 7] = f32::NEG_INFINITY;
        v[2 * 5000 + 9] = f32::NAN;
        let m = Matrix::from_vec(v, 5000, 3).unwrap();
        let e = check_finite_matrix(&m, "x.npy", &[]).unwrap_err();
        // element 10007 -> row 3336 (1-based), column 3
        assert_eq!(e.to_string(), "x.npy: row 3336, column 3: -inf");
        let names: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let e = check_finite_matrix(&m, "t.csv", &names).unwrap_err();
        assert_eq!(e.to_string(), "t.csv: row 3336, column \"c\": -inf");
        let e = check_finite_targets(&[0.0, f64::INFINITY], "y.npy").unwrap_err();
        assert_eq!(e.to_string(), "y.npy: row 2: inf");
    }

    #[test]
    fn validate_dataset() {
        let ds = Dataset {
            features: Features::F64(Matrix::from_vec(vec![1.0; 6], 3, 2).unwrap()),
            targets: Some(vec![0.0; 2]),
            feature_names: vec![],
            features_source: "x.npy".into(),
            targets_source: Some("y.npy".into()),
        };
        assert_eq!(
            validate(&ds).unwrap_err().to_string(),
            "x.npy has 3 rows but y.npy has 2"
        );
        let ds = Dataset {
            features: Features::F64(Matrix::from_vec(vec![], 0, 2).unwrap()),
            targets: None,
            feature_names: vec![],
            features_source: "x.npy".into(),
            targets_source: None,
        };
        assert_eq!(
            validate(&ds).unwrap_err().to_string(),
            "empty data set: x.npy has 0 rows"
        );
        let f = Features::F32(Matrix::from_vec(vec![], 4, 0).unwrap());
        assert_eq!(
            check_nonempty(&f, "x.npy").unwrap_err().to_string(),
            "empty data set: x.npy has 0 columns"
        );
    }
}
