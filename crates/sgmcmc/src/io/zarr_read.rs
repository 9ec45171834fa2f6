//! Reading draws back from a Zarr store in the ArviZ `InferenceData` layout: the stores
//! [`ZarrSink`](super::ZarrSink) writes, and those ArviZ (`idata.to_zarr`), xarray and
//! zarr-python write with their defaults: Zarr v2 (`.zgroup`, `.zarray`, `.zattrs`, optionally a
//! consolidated `.zmetadata`) or v3 (`zarr.json`), compressed with zstd, gzip, zlib or blosc or
//! not at all, float32 or float64 values (read as float64).
//!
//! The draws are the arrays of the `posterior` group whose first two dimensions are
//! (chain, draw): a variable of shape (chain, draw) is one parameter, one of shape
//! (chain, draw, k, …) has as many parameters as its trailing dimensions hold (C order).

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use zarrs::array::{Array, ArrayMetadata, ArraySubset, data_type};
use zarrs::filesystem::FilesystemStore;
use zarrs::group::Group;
use zarrs::node::NodeMetadata;

use super::sink::SinkError;

/// The variable that [`ZarrSink`](super::ZarrSink) writes, read when no other is named.
pub const DEFAULT_VARIABLE: &str = "theta";

/// Draws read back from a Zarr store (see [`read_posterior`]).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredDraws {
    /// Parameter names: a variable's `parameter_names` attribute (which [`ZarrSink`] writes),
    /// else `name` for a variable of shape (chain, draw) and `name[j]` (`name[i,j]`, …) for
    /// the entries of a larger one.
    ///
    /// [`ZarrSink`]: super::ZarrSink
    pub parameter_names: Vec<String>,
    /// Dimension D.
    pub dim: usize,
    /// Per chain, its draws row-major (draws × D), without the NaN padding after a shorter
    /// chain's last draw.
    pub chains: Vec<Vec<f64>>,
}

impl StoredDraws {
    /// Every chain's draws one after another (chain-major), as one row-major matrix.
    pub fn pooled(&self) -> Vec<f64> {
        self.chains.concat()
    }

    /// Total number of draws.
    pub fn len(&self) -> usize {
        self.chains.iter().map(|c| c.len() / self.dim.max(1)).sum()
    }

    /// Whether no chain has a draw.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Read the draws of `posterior/<variable>` (see [`read_posterior`]).
pub fn read_draws(path: &Path, variable: &str) -> Result<StoredDraws, SinkError> {
    read_posterior(path, &[variable])
}

/// Read the draws of the `posterior` variables `variables`, their parameters side by side in
/// the given order. A store written by [`ZarrSink`](super::ZarrSink) may be unfinalized (an
/// interrupted run's store reads up to its last written chunk). Rows that are entirely NaN at
/// the end of a chain (padding of shorter chains, or the unwritten part of a chunk) are
/// dropped; a NaN inside a chain's draws is an error naming it.
pub fn read_posterior<S: AsRef<str>>(
    path: &Path,
    variables: &[S],
) -> Result<StoredDraws, SinkError> {
    read_group(path, "posterior", variables)
}

/// A constrained model's draws of `variable` on the unconstrained scale θ (the group
/// `unconstrained_posterior`, [`ZarrSink::write_unconstrained`](super::ZarrSink::write_unconstrained)),
/// the same draws as the posterior's.
pub fn read_unconstrained(path: &Path, variable: &str) -> Result<StoredDraws, SinkError> {
    read_group(path, super::zarr::UNCONSTRAINED, &[variable])
}

/// Every chain's draws of `variable` as a run made them: the group `all_chains` of a store whose
/// posterior shows only the chains that did not diverge, cut to the shortest
/// ([`ZarrSink::finalize_summarised`](super::ZarrSink::finalize_summarised)), else the
/// posterior's.
pub fn read_all_chains(path: &Path, variable: &str) -> Result<StoredDraws, SinkError> {
    let group = if path.join(super::zarr::ALL_CHAINS).is_dir() {
        super::zarr::ALL_CHAINS
    } else {
        "posterior"
    };
    read_group(path, group, &[variable])
}

fn read_group<S: AsRef<str>>(
    path: &Path,
    group: &str,
    variables: &[S],
) -> Result<StoredDraws, SinkError> {
    let err = |m: String| zarr_err(path, m);
    let store = open_store(path)?;
    if variables.is_empty() {
        return Err(err("no posterior variable named to read".into()));
    }
    let mut seen = HashSet::new();
    let mut read = Vec::with_capacity(variables.len());
    for name in variables.iter().map(AsRef::as_ref) {
        if !seen.insert(name) {
            return Err(err(format!("posterior/{name} is named twice")));
        }
        read.push(read_variable(path, &store, group, name)?);
    }
    let (chains, draws) = (read[0].chains, read[0].draws);
    if let Some(v) = read.iter().find(|v| (v.chains, v.draws) != (chains, draws)) {
        return Err(err(format!(
            "posterior/{} has {} chains × {} draws, posterior/{} {chains} × {draws}",
            v.name, v.chains, v.draws, read[0].name
        )));
    }
    let dim: usize = read.iter().map(|v| v.width).sum();
    let parameter_names = read.iter().flat_map(|v| v.names.iter().cloned()).collect();
    let rows = if dim == 0 { 0 } else { draws };
    let mut out = Vec::with_capacity(chains);
    for c in 0..chains {
        let mut chain = Vec::with_capacity(rows * dim);
        for j in 0..rows {
            for v in &read {
                let start = (c * draws + j) * v.width;
                chain.extend_from_slice(&v.values[start..start + v.width]);
            }
        }
        let mut kept = rows;
        while kept > 0
            && chain[(kept - 1) * dim..kept * dim]
                .iter()
                .all(|v| v.is_nan())
        {
            kept -= 1;
        }
        chain.truncate(kept * dim);
        if let Some(k) = chain.iter().position(|v| v.is_nan()) {
            return Err(err(format!(
                "chain {c}, draw {}: NaN inside the stored draws",
                k / dim
            )));
        }
        out.push(chain);
    }
    Ok(StoredDraws {
        parameter_names,
        dim,
        chains: out,
    })
}

/// The names of the `posterior` group's draws variables, sorted: its arrays of at least two
/// dimensions whose first two are named (chain, draw) where the store names dimensions (v3
/// `dimension_names`, xarray's `_ARRAY_DIMENSIONS` attribute); coordinates are left out.
pub fn posterior_variables(path: &Path) -> Result<Vec<String>, SinkError> {
    let err = |m: String| zarr_err(path, m);
    let store = open_store(path)?;
    let group =
        Group::open(store, "/posterior").map_err(|e| err(format!("no group posterior: {e}")))?;
    let children = group
        .children(false)
        .map_err(|e| err(format!("cannot list the posterior group: {e}")))?;
    let mut names: Vec<String> = children
        .iter()
        .filter(|node| match node.metadata() {
            NodeMetadata::Array(meta) => holds_draws(meta),
            NodeMetadata::Group(_) => false,
        })
        .map(|node| node.name().as_str().to_string())
        .collect();
    names.sort();
    Ok(names)
}

/// The variable read when none is named: [`DEFAULT_VARIABLE`] if `variables` (as
/// [`posterior_variables`] lists them) has it, else the only one; `None` otherwise.
pub fn default_variable(variables: &[String]) -> Option<&str> {
    match variables {
        _ if variables.iter().any(|v| v == DEFAULT_VARIABLE) => Some(DEFAULT_VARIABLE),
        [only] => Some(only),
        _ => None,
    }
}

/// One variable's values, as (chain, draw, width) row-major float64.
struct Variable {
    name: String,
    chains: usize,
    draws: usize,
    width: usize,
    names: Vec<String>,
    values: Vec<f64>,
}

fn read_variable(
    path: &Path,
    store: &Arc<FilesystemStore>,
    group: &str,
    name: &str,
) -> Result<Variable, SinkError> {
    let err = |m: String| zarr_err(path, m);
    let node = path.join(group).join(name);
    if !["zarr.json", ".zarray"]
        .iter()
        .any(|f| node.join(f).is_file())
    {
        let listed = posterior_variables(path)
            .map(|names| format!(" (the posterior group holds {})", names.join(", ")))
            .unwrap_or_default();
        return Err(err(format!("no variable posterior/{name}{listed}")));
    }
    let array = Array::open(store.clone(), &format!("/{group}/{name}"))
        .map_err(|e| err(format!("cannot open {group}/{name}: {e}")))?;
    let shape: Vec<usize> = array.shape().iter().map(|&n| n as usize).collect();
    let [chains, draws, ref rest @ ..] = shape[..] else {
        return Err(err(format!(
            "posterior/{name} has shape {shape:?}, expected (chain, draw, ...)"
        )));
    };
    // Limits before allocation: the metadata's shape, not the bytes on disk, sizes what is
    // read (found by fuzzing: a (3, 52222222222, 1) array of one small chunk asked for 1.25 TB).
    let bytes = shape
        .iter()
        .try_fold(8u128, |acc, &n| acc.checked_mul(n as u128))
        .unwrap_or(u128::MAX);
    if let Some(available) = crate::data::available_memory()
        && bytes > available as u128
    {
        return Err(err(format!(
            "posterior/{name} has shape {shape:?}: {:.1} GB as float64, more than the {:.1} GB \
             of memory available",
            bytes as f64 / 1e9,
            available as f64 / 1e9
        )));
    }
    let whole = ArraySubset::new_with_shape(array.shape().to_vec());
    let retrieve = |e: zarrs::array::ArrayError| err(format!("cannot read posterior/{name}: {e}"));
    let dtype = array.data_type();
    let values: Vec<f64> = if *dtype == data_type::float64() {
        array.retrieve_array_subset(&whole).map_err(retrieve)?
    } else if *dtype == data_type::float32() {
        let values: Vec<f32> = array.retrieve_array_subset(&whole).map_err(retrieve)?;
        values.into_iter().map(f64::from).collect()
    } else {
        return Err(err(format!(
            "posterior/{name} holds {dtype} values; only float32 and float64 are read"
        )));
    };
    let width = rest.iter().product();
    let names = array
        .attributes()
        .get("parameter_names")
        .and_then(|v| serde_json::from_value::<Vec<String>>(v.clone()).ok())
        .filter(|names| names.len() == width)
        .unwrap_or_else(|| element_names(name, rest));
    Ok(Variable {
        name: name.to_string(),
        chains,
        draws,
        width,
        names,
        values,
    })
}

/// `name` for a scalar, else `name[i,j,…]` per entry in C order.
fn element_names(name: &str, shape: &[usize]) -> Vec<String> {
    if shape.is_empty() {
        return vec![name.to_string()];
    }
    let total: usize = shape.iter().product();
    (0..total)
        .map(|mut flat| {
            let mut index = vec![0; shape.len()];
            for (i, &n) in index.iter_mut().zip(shape).rev() {
                *i = flat % n;
                flat /= n;
            }
            let index: Vec<String> = index.iter().map(usize::to_string).collect();
            format!("{name}[{}]", index.join(","))
        })
        .collect()
}

/// Whether an array of `posterior` holds draws (see [`posterior_variables`]).
fn holds_draws(meta: &ArrayMetadata) -> bool {
    let (rank, attributes, dimension_names) = match meta {
        ArrayMetadata::V3(m) => (m.shape.len(), &m.attributes, m.dimension_names.as_ref()),
        ArrayMetadata::V2(m) => (m.shape.len(), &m.attributes, None),
    };
    let named: Option<Vec<String>> = match dimension_names {
        Some(names) => names.iter().cloned().collect(),
        None => attributes
            .get("_ARRAY_DIMENSIONS")
            .and_then(|v| serde_json::from_value(v.clone()).ok()),
    };
    rank >= 2 && named.is_none_or(|d| d.len() >= 2 && d[0] == "chain" && d[1] == "draw")
}

/// The store at `path`, which must hold a Zarr v3 (`zarr.json`) or v2 (`.zgroup`) root group.
fn open_store(path: &Path) -> Result<Arc<FilesystemStore>, SinkError> {
    if !["zarr.json", ".zgroup"]
        .iter()
        .any(|f| path.join(f).is_file())
    {
        return Err(zarr_err(
            path,
            "not a Zarr store (no zarr.json or .zgroup)".into(),
        ));
    }
    FilesystemStore::new(path)
        .map(Arc::new)
        .map_err(|e| zarr_err(path, e.to_string()))
}

fn zarr_err(path: &Path, message: String) -> SinkError {
    SinkError::Zarr {
        path: path.to_path_buf(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use serde_json::{Value, json};
    use zarrs::array::Element;

    use super::*;

    #[derive(Clone, Copy, Debug)]
    enum Format {
        V2,
        V3,
    }

    /// The compressions zarr-python and numcodecs offer by default.
    #[derive(Clone, Copy, Debug)]
    enum Codec {
        Uncompressed,
        Zstd,
        Gzip,
        Blosc,
    }

    impl Codec {
        const ALL: [Codec; 4] = [Codec::Uncompressed, Codec::Zstd, Codec::Gzip, Codec::Blosc];

        /// The v2 `compressor` (numcodecs' configuration).
        fn v2(self) -> Value {
            match self {
                Codec::Uncompressed => Value::Null,
                Codec::Zstd => json!({"id": "zstd", "level": 0, "checksum": false}),
                Codec::Gzip => json!({"id": "gzip", "level": 1}),
                Codec::Blosc => json!({
                    "id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0
                }),
            }
        }

        /// The v3 codecs after `bytes`.
        fn v3(self, typesize: usize) -> Vec<Value> {
            match self {
                Codec::Uncompressed => vec![],
                Codec::Zstd => vec![json!({
                    "name": "zstd", "configuration": {"level": 0, "checksum": false}
                })],
                Codec::Gzip => vec![json!({"name": "gzip", "configuration": {"level": 1}})],
                Codec::Blosc => vec![json!({"name": "blosc", "configuration": {
                    "cname": "zstd", "clevel": 5, "shuffle": "shuffle",
                    "typesize": typesize, "blocksize": 0
                }})],
            }
        }
    }

    /// Chain `c`, draw `j`, entry `k`, exact in float32.
    fn value(c: usize, j: usize, k: usize) -> f64 {
        100.0 * c as f64 + j as f64 + 0.25 * k as f64 + 0.5
    }

    fn write_json(path: &Path, value: &Value) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
    }

    /// The root and `posterior` groups, with ArviZ's attributes (v2: consolidated `.zmetadata`
    /// too, as xarray writes; its content is not what is read).
    fn write_groups(root: &Path, format: Format) {
        let attrs = json!({"inference_library": "numpyro", "arviz_version": "0.23.4"});
        for group in [root.to_path_buf(), root.join("posterior")] {
            match format {
                Format::V2 => {
                    write_json(&group.join(".zgroup"), &json!({"zarr_format": 2}));
                    write_json(&group.join(".zattrs"), &attrs);
                }
                Format::V3 => write_json(
                    &group.join("zarr.json"),
                    &json!({"zarr_format": 3, "node_type": "group", "attributes": attrs}),
                ),
            }
        }
        if let Format::V2 = format {
            write_json(
                &root.join(".zmetadata"),
                &json!({"zarr_consolidated_format": 1, "metadata": {}}),
            );
        }
    }

    /// `posterior/<name>` as xarray writes it: the metadata (dimension names included) by
    /// hand, the chunks (one per chain) encoded by zarrs.
    fn write_array<T: Element>(
        root: &Path,
        format: Format,
        codec: Codec,
        name: &str,
        (shape, dims): (&[u64], &[&str]),
        values: &[T],
    ) {
        let types = [
            ("<f4", "float32", data_type::float32()),
            ("<f8", "float64", data_type::float64()),
            ("<i4", "int32", data_type::int32()),
            ("<i8", "int64", data_type::int64()),
        ];
        let (v2_type, v3_type, _) = types
            .into_iter()
            .find(|(_, _, t)| T::validate_data_type(t).is_ok())
            .unwrap();
        let fill = if v3_type.starts_with("float") {
            json!("NaN")
        } else {
            json!(0)
        };
        let mut chunks = shape.to_vec();
        if chunks.len() >= 2 {
            chunks[0] = 1;
        }
        let dir = root.join("posterior").join(name);
        match format {
            Format::V2 => {
                write_json(
                    &dir.join(".zarray"),
                    &json!({
                        "zarr_format": 2, "shape": shape, "chunks": chunks, "dtype": v2_type,
                        "compressor": codec.v2(), "fill_value": fill, "order": "C",
                        "filters": null, "dimension_separator": "."
                    }),
                );
                write_json(&dir.join(".zattrs"), &json!({"_ARRAY_DIMENSIONS": dims}));
            }
            Format::V3 => {
                let mut codecs =
                    vec![json!({"name": "bytes", "configuration": {"endian": "little"}})];
                codecs.extend(codec.v3(size_of::<T>()));
                write_json(
                    &dir.join("zarr.json"),
                    &json!({
                        "zarr_format": 3, "node_type": "array", "shape": shape,
                        "data_type": v3_type,
                        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
                        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
                        "fill_value": fill, "codecs": codecs, "attributes": {},
                        "dimension_names": dims
                    }),
                );
            }
        }
        let store = Arc::new(FilesystemStore::new(root).unwrap());
        let array = Array::open(store, &format!("/posterior/{name}")).unwrap();
        array
            .store_array_subset(&ArraySubset::new_with_shape(shape.to_vec()), values)
            .unwrap();
    }

    /// An ArviZ-style posterior: `theta` (chains, draws, 3), its coordinates (`chain`, `draw`,
    /// `theta_dim_0`) and a (dim, dim) array beside (not draws).
    fn write_theta<T: Element>(
        root: &Path,
        format: Format,
        codec: Codec,
        (chains, draws): (usize, usize),
        convert: fn(f64) -> T,
    ) -> Vec<Vec<f64>> {
        write_groups(root, format);
        let shape = [chains as u64, draws as u64, 3];
        let values: Vec<T> = (0..chains)
            .flat_map(|c| (0..draws).flat_map(move |j| (0..3).map(move |k| value(c, j, k))))
            .map(convert)
            .collect();
        let dims = ["chain", "draw", "theta_dim_0"];
        write_array(root, format, codec, "theta", (&shape, &dims), &values);
        let coordinate = |n: usize| (0..n as i64).collect::<Vec<i64>>();
        for (name, n) in [("chain", chains), ("draw", draws), ("theta_dim_0", 3)] {
            let shape = [n as u64];
            write_array(root, format, codec, name, (&shape, &[name]), &coordinate(n));
        }
        let dims = ["theta_dim_0", "theta_dim_1"];
        write_array(root, format, codec, "cov", (&[3, 3], &dims), &[0i64; 9]);
        (0..chains)
            .map(|c| {
                (0..draws)
                    .flat_map(|j| (0..3).map(move |k| value(c, j, k)))
                    .collect()
            })
            .collect()
    }

    /// Zarr v2 and v3 stores, uncompressed or compressed with zstd, gzip or blosc, float64 or
    /// float32 (exact in float32, so read back exactly), read as written; the coordinates and
    /// the (dim, dim) array are not draws variables.
    #[test]
    fn reads_v2_and_v3_stores_with_each_codec_in_float32_and_float64() {
        let dir = tempfile::tempdir().unwrap();
        for format in [Format::V2, Format::V3] {
            for codec in Codec::ALL {
                for single in [false, true] {
                    let path = dir
                        .path()
                        .join(format!("{format:?}-{codec:?}-{single}.zarr"));
                    let want = if single {
                        write_theta(&path, format, codec, (2, 5), |x| x as f32)
                    } else {
                        write_theta(&path, format, codec, (2, 5), |x| x)
                    };
                    let what = format!("{format:?}, {codec:?}, float32 {single}");
                    let back = read_draws(&path, "theta").unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!(back.chains, want, "{what}");
                    assert_eq!(back.dim, 3);
                    assert_eq!(back.parameter_names, ["theta[0]", "theta[1]", "theta[2]"]);
                    assert_eq!(posterior_variables(&path).unwrap(), ["theta"], "{what}");
                }
            }
        }
    }

    /// float32 values that are not exact in float32 read as their float32 rounding.
    #[test]
    fn float32_values_read_as_their_float64_conversion() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f32.zarr");
        let to_f32 = |x: f64| (x / 3.0) as f32;
        write_theta(&path, Format::V3, Codec::Zstd, (2, 4), to_f32);
        let back = read_draws(&path, "theta").unwrap();
        for (c, chain) in back.chains.iter().enumerate() {
            let want: Vec<f64> = (0..4)
                .flat_map(|j| (0..3).map(move |k| f64::from(to_f32(value(c, j, k)))))
                .collect();
            assert_eq!(chain, &want, "chain {c}");
        }
    }

    /// Several variables are read side by side in the given order: a (chain, draw) variable
    /// is one parameter, a (chain, draw, 2, 2) one four (C order); mismatched chains or draws,
    /// a name given twice, a missing variable and an integer variable are one-line errors.
    #[test]
    fn several_variables_are_concatenated_in_the_given_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("several.zarr");
        let (format, codec) = (Format::V2, Codec::Zstd);
        write_groups(&path, format);
        let (chains, draws) = (2, 3);
        let mu: Vec<f64> = (0..chains * draws).map(|i| -(i as f64)).collect();
        let beta: Vec<f32> = (0..chains * draws * 4).map(|i| i as f32 + 0.5).collect();
        let scalar = ["chain", "draw"];
        let shape = [chains as u64, draws as u64];
        write_array(&path, format, codec, "mu", (&shape, &scalar), &mu);
        let dims = ["chain", "draw", "beta_dim_0", "beta_dim_1"];
        let beta_shape = [chains as u64, draws as u64, 2, 2];
        write_array(&path, format, codec, "beta", (&beta_shape, &dims), &beta);
        write_array(&path, format, codec, "steps", (&shape, &scalar), &[3i32; 6]);
        let short = [chains as u64, 2];
        write_array(
            &path,
            format,
            codec,
            "short",
            (&short, &scalar),
            &[0.0f64; 4],
        );
        write_array(
            &path,
            format,
            codec,
            "draw",
            (&[3], &["draw"]),
            &[0i64, 1, 2],
        );

        let both = read_posterior(&path, &["beta", "mu"]).unwrap();
        assert_eq!(both.dim, 5);
        assert_eq!(
            both.parameter_names,
            ["beta[0,0]", "beta[0,1]", "beta[1,0]", "beta[1,1]", "mu"]
        );
        for c in 0..chains {
            let want: Vec<f64> = (0..draws)
                .flat_map(|j| {
                    let i = c * draws + j;
                    beta[4 * i..4 * i + 4]
                        .iter()
                        .map(|&b| f64::from(b))
                        .chain([mu[i]])
                })
                .collect();
            assert_eq!(both.chains[c], want, "chain {c}");
        }
        let names = posterior_variables(&path).unwrap();
        assert_eq!(names, ["beta", "mu", "short", "steps"]);
        assert_eq!(default_variable(&names), None);

        let error = |names: &[&str]| read_posterior(&path, names).unwrap_err().to_string();
        let e = error(&["mu", "short"]);
        assert!(e.contains("posterior/short has 2 chains × 2 draws"), "{e}");
        let e = error(&["mu", "mu"]);
        assert!(e.contains("posterior/mu is named twice"), "{e}");
        let e = error(&["theta"]);
        assert!(
            e.contains(
                "no variable posterior/theta (the posterior group holds beta, mu, short, steps)"
            ),
            "{e}"
        );
        let e = error(&["steps"]);
        assert!(e.contains("only float32 and float64"), "{e}");
        let e = error(&["draw"]);
        assert!(e.contains("expected (chain, draw, ...)"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    /// As in the stores `ZarrSink` writes: trailing all-NaN rows of a chain (a shorter chain's
    /// padding) are dropped, in v2 and float32 too; a NaN inside a chain is an error naming it.
    #[test]
    fn trailing_nan_rows_are_dropped_and_inner_nan_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        for (i, format) in [Format::V2, Format::V3].into_iter().enumerate() {
            let path = dir.path().join(format!("ragged{i}.zarr"));
            write_groups(&path, format);
            let mut values: Vec<f32> = (0..2 * 4 * 2).map(|i| i as f32).collect();
            // Chain 1 holds 2 draws of 4.
            values[12..].fill(f32::NAN);
            values[10..12].fill(f32::NAN);
            let dims = ["chain", "draw", "x_dim_0"];
            write_array(
                &path,
                format,
                Codec::Blosc,
                "x",
                (&[2, 4, 2], &dims),
                &values,
            );
            let back = read_draws(&path, "x").unwrap();
            assert_eq!(back.chains[0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
            assert_eq!(back.chains[1], [8.0, 9.0]);
            assert_eq!(back.len(), 5);

            values[3] = f32::NAN;
            write_array(
                &path,
                format,
                Codec::Blosc,
                "x",
                (&[2, 4, 2], &dims),
                &values,
            );
            let e = read_draws(&path, "x").unwrap_err().to_string();
            assert!(
                e.contains("chain 0, draw 1: NaN inside the stored draws"),
                "{e}"
            );
        }
    }

    /// Found by fuzzing: a small store whose metadata declares a (3, 52222222222, 1) array
    /// (1.25 TB as float64) aborted on the allocation; now it is refused before reading, with
    /// the sizes.
    #[test]
    fn a_declared_shape_larger_than_memory_is_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("huge.zarr");
        write_groups(&path, Format::V2);
        let array = path.join("posterior").join("theta");
        std::fs::create_dir_all(&array).unwrap();
        let meta = json!({
            "shape": [3, 52_222_222_222u64, 1], "chunks": [2, 5, 3], "dtype": "<f8",
            "fill_value": 0.0, "order": "C", "filters": null, "dimension_separator": ".",
            "compressor": null, "zarr_format": 2
        });
        std::fs::write(array.join(".zarray"), meta.to_string()).unwrap();
        std::fs::write(array.join("0.0.0"), [0u8; 240]).unwrap();
        let e = read_draws(&path, "theta").unwrap_err().to_string();
        assert!(e.contains("1253.3 GB as float64, more than the"), "{e}");
    }

    /// The default variable: `theta` when present, else the only one.
    #[test]
    fn default_variable_is_theta_else_the_only_one() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(default_variable(&names(&["a", "theta"])), Some("theta"));
        assert_eq!(default_variable(&names(&["beta"])), Some("beta"));
        assert_eq!(default_variable(&names(&["a", "b"])), None);
        assert_eq!(default_variable(&[]), None);
        let dir = tempfile::tempdir().unwrap();
        let e = posterior_variables(dir.path()).unwrap_err().to_string();
        assert!(e.contains("not a Zarr store"), "{e}");
    }
}
