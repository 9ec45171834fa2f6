//! Streaming draws to a Zarr v3 store in the ArviZ `InferenceData` layout.
//!
//! Layout written by [`ZarrSink`] (numeric arrays uncompressed, `bytes` codec, little endian):
//!
//! ```text
//! <path>/zarr.json                      root group (ArviZ-style attributes; consolidated metadata after `finalize`)
//! <path>/posterior/zarr.json            group `posterior` (same attributes)
//! <path>/posterior/<variable>           float64 (chain, draw, <variable>_dim_0), fill NaN, chunks (1, C, dim)
//! <path>/posterior/chain                int64 coordinate 0..chains
//! <path>/posterior/<variable>_dim_0     string coordinate: the parameter names (`vlen-utf8`;
//!                                       int64 0..dim when no names are given)
//! <path>/posterior/draw                 int64 coordinate 0..max draws (written by `finalize`)
//! <path>/sample_stats/<statistic>       per draw, (chain, draw): `step_size`, `thermostat`
//!                                       (float64, fill NaN), `accepted` (bool, fill false); only
//!                                       those some draw has ([`ZarrSink::write_draw_statistics`],
//!                                       at the end of a run); `chain`, `draw` coordinates beside
//! <path>/unconstrained_posterior/<variable>  for a model with constrained parameters: the
//!                                       posterior's draws on the sampler's scale θ (log σ, …),
//!                                       same layout ([`ZarrSink::write_unconstrained`])
//! ```
//!
//! Open it from Python with
//! `idata = az.InferenceData.from_datatree(xr.open_datatree(path, engine="zarr"))`.
//!
//! Crash safety: every chunk and every metadata document is written to a temporary file and
//! renamed into place, and the variable's draw extent is enlarged *before* a chunk beyond it
//! is written. A process killed at any point therefore leaves a valid store holding every
//! completed chunk (draws not yet written read as NaN); it lacks only the `draw` coordinate
//! and the consolidated metadata, which `finalize` adds.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};
use zarrs::array::codec::BytesCodec;
use zarrs::array::{Array, ArrayBuilder, ArrayMetadata, ArrayMetadataOptions, data_type};
use zarrs::filesystem::FilesystemStore;
use zarrs::group::{Group, GroupBuilder, GroupMetadata};
use zarrs::metadata_ext::group::consolidated_metadata::{
    ConsolidatedMetadata, ConsolidatedMetadataKind,
};
use zarrs::node::Node;

use super::sink::{ChainWriter, DrawSink, SinkError};
// The reading lives in `zarr_read`; re-exported so that `io::zarr::read_draws` stays.
pub use super::zarr_read::{StoredDraws, read_draws};
use crate::sampler::DrawStatistics;

/// Target size of one chunk of the draws array.
const CHUNK_BYTES: usize = 1 << 20;
/// Upper bound on the number of draws per chunk.
const MAX_CHUNK_DRAWS: usize = 4096;
/// Elements per chunk of the `draw` coordinate.
const COORD_CHUNK: u64 = 1 << 17;
/// The group that keeps every chain's draws as run when the posterior shows fewer
/// ([`ZarrSink::finalize_summarised`]).
pub const ALL_CHAINS: &str = "all_chains";
/// The group of a constrained model's draws on the unconstrained scale
/// ([`ZarrSink::write_unconstrained`]; ArviZ's `unconstrained_posterior`).
pub const UNCONSTRAINED: &str = "unconstrained_posterior";
/// Value of the `inference_library` attribute; also marks stores this module may overwrite.
const LIBRARY: &str = "sgmcmc";

/// A float statistic of `sample_stats`: its array's name and its field of [`DrawStatistics`].
struct FloatStatistic {
    name: &'static str,
    get: fn(&DrawStatistics) -> Option<f64>,
    set: fn(&mut DrawStatistics, f64),
}

/// The float statistics that the store holds (`accepted`, a bool, is handled beside them).
const FLOAT_STATISTICS: [FloatStatistic; 2] = [
    FloatStatistic {
        name: "step_size",
        get: |s| s.step_size,
        set: |s, v| s.step_size = Some(v),
    },
    FloatStatistic {
        name: "thermostat",
        get: |s| s.thermostat,
        set: |s, v| s.thermostat = Some(v),
    },
];

/// A [`DrawSink`] writing a Zarr v3 store in the ArviZ `InferenceData` layout (see the module docs).
#[derive(Debug)]
pub struct ZarrSink {
    root: PathBuf,
    store: Arc<FilesystemStore>,
    chains: usize,
    dim: usize,
    chunk_draws: usize,
    shared: Mutex<Shared>,
}

/// State shared by the chain writers, guarded by one lock.
#[derive(Debug)]
struct Shared {
    /// The draws array; its shape is what is on disk.
    array: Array<FilesystemStore>,
    /// Current draw extent on disk.
    extent: u64,
    /// Draws written per chain.
    draws: Vec<usize>,
    /// Whether a writer was handed out per chain.
    taken: Vec<bool>,
}

impl ZarrSink {
    /// Creates the store at `path` and writes the groups, coordinates and the empty draws array
    /// `posterior/<variable>` with shape `(chains, 0, dim)`.
    ///
    /// `path` must not exist, be an empty directory, or be a store previously written by this
    /// module (its root `inference_library` attribute is `"sgmcmc"`), which is deleted and
    /// replaced; anything else is refused with [`SinkError::PathExists`].
    /// `parameter_names` must be empty or have `dim` entries; they are stored in the variable's
    /// `parameter_names` attribute. `expected_draws` (per chain) only caps the chunk length.
    pub fn create(
        path: &Path,
        chains: usize,
        dim: usize,
        variable: &str,
        parameter_names: &[String],
        expected_draws: Option<usize>,
    ) -> Result<ZarrSink, SinkError> {
        validate(chains, dim, variable, parameter_names)?;
        prepare_dir(path)?;
        let root = path.to_path_buf();
        let store =
            Arc::new(FilesystemStore::new(path).map_err(|e| zarr_err(path, e.to_string()))?);

        let mut chunk_draws = (CHUNK_BYTES / (8 * dim)).clamp(1, MAX_CHUNK_DRAWS);
        if let Some(n) = expected_draws.filter(|&n| n > 0) {
            chunk_draws = chunk_draws.min(n);
        }

        let attrs = arviz_attrs();
        for group_path in ["/", "/posterior"] {
            let group = GroupBuilder::new()
                .attributes(attrs.clone())
                .build(store.clone(), group_path)
                .map_err(|e| zarr_err(path, e.to_string()))?;
            write_group_meta(&root, &group)?;
        }

        let chain_values: Vec<i64> = (0..chains as i64).collect();
        write_coordinate(&root, &store, "posterior", "chain", &chain_values)?;
        let dim_name = format!("{variable}_dim_0");
        if parameter_names.is_empty() {
            let dim_values: Vec<i64> = (0..dim as i64).collect();
            write_coordinate(&root, &store, "posterior", &dim_name, &dim_values)?;
        } else {
            write_name_coordinate(&root, &store, "posterior", &dim_name, parameter_names)?;
        }

        let mut var_attrs = Map::new();
        if !parameter_names.is_empty() {
            var_attrs.insert("parameter_names".into(), json!(parameter_names));
        }
        let array = ArrayBuilder::new(
            vec![chains as u64, 0, dim as u64],
            vec![1, chunk_draws as u64, dim as u64],
            data_type::float64(),
            f64::NAN,
        )
        .array_to_bytes_codec(Arc::new(BytesCodec::little()))
        .dimension_names(Some(["chain", "draw", dim_name.as_str()]))
        .attributes(var_attrs)
        .build(store.clone(), &format!("/posterior/{variable}"))
        .map_err(|e| zarr_err(path, e.to_string()))?;
        write_array_meta(&root, &array)?;

        Ok(Self::assemble(
            root,
            store,
            dim,
            chunk_draws,
            array,
            0,
            vec![0; chains],
        ))
    }

    /// The sink over an open draws array whose extent on disk is `extent` draws, chain `c`
    /// having written `draws[c]` of them.
    fn assemble(
        root: PathBuf,
        store: Arc<FilesystemStore>,
        dim: usize,
        chunk_draws: usize,
        array: Array<FilesystemStore>,
        extent: u64,
        draws: Vec<usize>,
    ) -> Self {
        let chains = draws.len();
        ZarrSink {
            root,
            store,
            chains,
            dim,
            chunk_draws,
            shared: Mutex::new(Shared {
                array,
                extent,
                draws,
                taken: vec![false; chains],
            }),
        }
    }

    /// Reopens a store this module wrote (finalized or not) to continue its chains: chain `c`
    /// keeps its first `kept[c]` draws and its writer goes on after them. Whatever the store
    /// holds beyond (draws written after a chain's last checkpoint) is cleared: later chunks
    /// deleted, the rest of the chain's last chunk rewritten as NaN; the consolidated metadata
    /// of an earlier `finalize` is dropped until the next. Returns the sink and each chain's
    /// kept draws (row-major, `kept[c] × dim`).
    pub fn reopen(
        path: &Path,
        variable: &str,
        kept: &[usize],
    ) -> Result<(ZarrSink, Vec<Vec<f64>>), SinkError> {
        Self::reopen_chains(path, variable, kept, None)
    }

    /// [`ZarrSink::reopen`] for a process that runs only the chains `only` of the store
    /// (others run theirs into it at the same time): only those chains are read back and
    /// cleared (the others' kept draws come back empty), and a store that was finished (its
    /// posterior cut to fewer chains) is refused rather than rearranged.
    pub fn reopen_chains(
        path: &Path,
        variable: &str,
        kept: &[usize],
        only: Option<&[usize]>,
    ) -> Result<(ZarrSink, Vec<Vec<f64>>), SinkError> {
        use zarrs::array::ArraySubset;
        let err = |m: String| zarr_err(path, m);
        let ours_chain = |c: usize| only.is_none_or(|o| o.contains(&c));
        let ours = fs::read(path.join("zarr.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .is_some_and(|v| v["attributes"]["inference_library"] == LIBRARY);
        if !ours {
            return Err(err(
                "not a store written by sgmcmc; it cannot be continued".into()
            ));
        }
        // A finished store whose posterior shows fewer chains or draws than were run: every
        // chain's draws go back to where the run writes them.
        let all = path.join(ALL_CHAINS);
        if all.is_dir() && only.is_some() {
            return Err(err(
                "the run's store was finished (its chains summarised); its chains cannot be run into it again"
                    .into(),
            ));
        }
        // The unconstrained draws of an earlier finish are written again at the next.
        let unconstrained = path.join(UNCONSTRAINED);
        if unconstrained.is_dir() && only.is_none() {
            fs::remove_dir_all(&unconstrained).map_err(|source| SinkError::Io {
                path: unconstrained.clone(),
                source,
            })?;
        }
        if all.is_dir() {
            let posterior = path.join("posterior");
            let io = |p: &Path| {
                let p = p.to_path_buf();
                move |source| SinkError::Io { path: p, source }
            };
            fs::remove_dir_all(&posterior).map_err(io(&posterior))?;
            fs::rename(&all, &posterior).map_err(io(&all))?;
        }
        let root = path.to_path_buf();
        let store = Arc::new(FilesystemStore::new(path).map_err(|e| err(e.to_string()))?);
        let array = Array::open(store.clone(), &format!("/posterior/{variable}"))
            .map_err(|e| err(format!("no variable posterior/{variable}: {e}")))?;
        let shape = array.shape().to_vec();
        let [chains, extent, dim] = shape[..] else {
            return Err(err(format!(
                "posterior/{variable} has shape {shape:?}, expected (chain, draw, dim)"
            )));
        };
        let (chains, dim) = (chains as usize, dim as usize);
        if chains != kept.len() {
            return Err(err(format!(
                "the store has {chains} chains, the run {}",
                kept.len()
            )));
        }
        let chunk = array
            .chunk_shape(&[0, 0, 0])
            .map_err(|e| err(e.to_string()))?;
        let chunk_draws = chunk[1].get() as usize;
        if chunk[0].get() != 1 || chunk[2].get() as usize != dim {
            return Err(err(format!("unexpected chunk shape {chunk:?}")));
        }
        let mut earlier = Vec::with_capacity(chains);
        for (c, &n) in kept.iter().enumerate() {
            let c64 = c as u64;
            let draws: Vec<f64> = if n == 0 || !ours_chain(c) {
                Vec::new()
            } else if n as u64 > extent {
                return Err(err(format!(
                    "chain {c}: the checkpoint is after draw {n}, the store holds {extent} draws"
                )));
            } else {
                array
                    .retrieve_array_subset(&ArraySubset::new_with_ranges(&[
                        c64..c64 + 1,
                        0..n as u64,
                        0..dim as u64,
                    ]))
                    .map_err(|e| err(e.to_string()))?
            };
            if let Some(k) = draws.iter().position(|v| v.is_nan()) {
                return Err(err(format!(
                    "chain {c}: draw {} is missing from the store, before the checkpoint's draw {n}",
                    k / dim.max(1)
                )));
            }
            earlier.push(draws);
        }
        // Every chain checked: clear what follows the kept draws (the rest of their last
        // chunk, later chunks).
        for (c, (&n, draws)) in kept.iter().zip(&earlier).enumerate() {
            if !ours_chain(c) {
                continue;
            }
            let c64 = c as u64;
            let (full, partial) = (n / chunk_draws, n % chunk_draws);
            if partial > 0 {
                let mut rows = vec![f64::NAN; chunk_draws * dim];
                rows[..partial * dim].copy_from_slice(&draws[full * chunk_draws * dim..]);
                let bytes: Vec<u8> = rows.iter().flat_map(|x| x.to_le_bytes()).collect();
                let key = array.chunk_key(&[c64, full as u64, 0]);
                write_atomic(&root.join(key.as_str()), &bytes)?;
            }
            let first_stale = full + usize::from(partial > 0);
            for k in first_stale..(extent as usize).div_ceil(chunk_draws) {
                let file = root.join(array.chunk_key(&[c64, k as u64, 0]).as_str());
                match fs::remove_file(&file) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(SinkError::Io {
                            path: file,
                            source: e,
                        });
                    }
                    _ => {}
                }
            }
        }
        let mut root_group = Group::open(store.clone(), "/").map_err(|e| err(e.to_string()))?;
        if root_group.consolidated_metadata().is_some() {
            root_group.set_consolidated_metadata(None);
            write_group_meta(&root, &root_group)?;
        }
        let sink = Self::assemble(root, store, dim, chunk_draws, array, extent, kept.to_vec());
        Ok((sink, earlier))
    }

    /// Makes the on-disk draw extent at least `draws` now, so that chains run by several
    /// processes into one store never enlarge it (each process would rewrite the array's
    /// metadata, and the last writer would win).
    pub fn reserve(&self, draws: usize) -> Result<(), SinkError> {
        self.ensure_extent(draws as u64, &[0, 0, 0]).map(|_| ())
    }

    /// Root directory of the store.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Number of draws per chunk (the `C` of chunk shape `(1, C, dim)`).
    pub fn chunk_draws(&self) -> usize {
        self.chunk_draws
    }

    /// Draws written so far per chain (complete after the chains' writers finished).
    pub fn draws_per_chain(&self) -> Vec<usize> {
        self.lock().draws.clone()
    }

    /// Sets the draw extent to the longest chain, writes the `draw` coordinate and the
    /// consolidated metadata (which xarray looks for). Chains shorter than the longest read
    /// as NaN after their last draw.
    pub fn finalize(self) -> Result<(), SinkError> {
        self.set_final_extent()?;
        self.consolidate()
    }

    /// Ends a run's store so that ArviZ sees only valid draws: `posterior` holds the
    /// `summarised` chains (those that did not diverge), each cut to the shortest of them, with
    /// their own numbers as the `chain` coordinate, and `sample_stats` their `statistics` (per
    /// chain of the store) with `diverging` (false: no draw kept there diverged). Unless that is
    /// every chain at full length, every chain's draws as run (a diverged chain's up to its
    /// last finite draw, a shorter chain's NaN after its last) stay in the group `all_chains`,
    /// whose attributes `draws_per_chain` and `summarised_chains` say what is where; the two
    /// share their chunk files (hard links where the file system allows, else copies).
    pub fn finalize_summarised(
        self,
        summarised: &[usize],
        statistics: &[&[DrawStatistics]],
    ) -> Result<(), SinkError> {
        if statistics.len() != self.chains || summarised.iter().any(|&c| c >= self.chains) {
            return Err(SinkError::InvalidConfig(format!(
                "statistics of {} chains or summarised chains {summarised:?} in a store of {}",
                statistics.len(),
                self.chains
            )));
        }
        let draws = self.draws_per_chain();
        let length = summarised.iter().map(|&c| draws[c]).min().unwrap_or(0);
        let kept: Vec<&[DrawStatistics]> = summarised
            .iter()
            .map(|&c| &statistics[c][..statistics[c].len().min(length)])
            .collect();
        if summarised.len() == self.chains && draws.iter().all(|&n| n == length) {
            self.write_statistics_of(summarised, &kept, true)?;
            return self.finalize();
        }
        self.set_final_extent()?;
        let err = |e: String| zarr_err(&self.root, e);
        let io = |path: PathBuf| move |source| SinkError::Io { path, source };
        let (old_array, variable) = self.variable_and_attributes();
        // Every chain as run moves to `all_chains`.
        let all = self.root.join(ALL_CHAINS);
        if all.exists() {
            fs::remove_dir_all(&all).map_err(io(all.clone()))?;
        }
        fs::rename(self.root.join("posterior"), &all).map_err(io(all.clone()))?;
        let mut attrs = arviz_attrs();
        attrs.insert("draws_per_chain".into(), json!(draws));
        attrs.insert("summarised_chains".into(), json!(summarised));
        let group = GroupBuilder::new()
            .attributes(attrs)
            .build(self.store.clone(), &format!("/{ALL_CHAINS}"))
            .map_err(|e| err(e.to_string()))?;
        write_group_meta(&self.root, &group)?;

        // The posterior: the summarised chains, `length` draws each.
        let group = GroupBuilder::new()
            .attributes(arviz_attrs())
            .build(self.store.clone(), "/posterior")
            .map_err(|e| err(e.to_string()))?;
        write_group_meta(&self.root, &group)?;
        let dim_name =
            self.write_coordinates("posterior", summarised, length, &variable, &old_array)?;
        let array = self.draws_array(
            &format!("/posterior/{variable}"),
            summarised.len(),
            length,
            &dim_name,
            old_array,
        )?;
        let source = Array::open(self.store.clone(), &format!("/{ALL_CHAINS}/{variable}"))
            .map_err(|e| err(e.to_string()))?;
        for (i, &c) in summarised.iter().enumerate() {
            for k in 0..length.div_ceil(self.chunk_draws) as u64 {
                let from = self.root.join(source.chunk_key(&[c as u64, k, 0]).as_str());
                let to = self.root.join(array.chunk_key(&[i as u64, k, 0]).as_str());
                if !from.is_file() {
                    continue; // never written: reads as the fill value in both
                }
                if let Some(dir) = to.parent() {
                    fs::create_dir_all(dir).map_err(io(dir.to_path_buf()))?;
                }
                let _ = fs::remove_file(&to);
                if fs::hard_link(&from, &to).is_err() {
                    fs::copy(&from, &to).map_err(io(to.clone()))?;
                }
            }
        }
        self.write_statistics_of(summarised, &kept, true)?;
        self.consolidate()
    }

    /// Writes the group `unconstrained_posterior` (ArviZ's name): for a model whose parameters
    /// are constrained (σ > 0, ordered means, a probability), the same draws as the posterior
    /// on the unconstrained scale θ the samplers move in (log σ, log(μ₂ − μ₁), the logit),
    /// under the posterior's variable and parameter names. `chains[i]` (row-major, at least
    /// `length` draws) is the store's chain `chain_ids[i]`: pass the chains and length that
    /// [`finalize_summarised`](Self::finalize_summarised) shows in `posterior`, and call this
    /// before it, whose consolidated metadata then lists the group.
    pub fn write_unconstrained(
        &self,
        chain_ids: &[usize],
        chains: &[&[f64]],
        length: usize,
    ) -> Result<(), SinkError> {
        let dim = self.dim;
        if chain_ids.len() != chains.len() || chains.iter().any(|c| c.len() < length * dim) {
            return Err(SinkError::InvalidConfig(format!(
                "unconstrained draws: {} chain ids for {} chains, or a chain of fewer than {length} draws",
                chain_ids.len(),
                chains.len()
            )));
        }
        let err = |e: String| zarr_err(&self.root, e);
        let (attributes, variable) = self.variable_and_attributes();
        let dir = self.root.join(UNCONSTRAINED);
        if dir.exists() {
            fs::remove_dir_all(&dir).map_err(|source| SinkError::Io {
                path: dir.clone(),
                source,
            })?;
        }
        let mut attrs = arviz_attrs();
        attrs.insert(
            "description".into(),
            json!(
                "the posterior's draws on the unconstrained scale the samplers move in \
                 (log sigma for a scale, log(mu[2] - mu[1]) for ordered means, the logit of a \
                 probability), under the posterior's parameter names"
            ),
        );
        let group = GroupBuilder::new()
            .attributes(attrs)
            .build(self.store.clone(), &format!("/{UNCONSTRAINED}"))
            .map_err(|e| err(e.to_string()))?;
        write_group_meta(&self.root, &group)?;
        let dim_name =
            self.write_coordinates(UNCONSTRAINED, chain_ids, length, &variable, &attributes)?;
        let array = self.draws_array(
            &format!("/{UNCONSTRAINED}/{variable}"),
            chains.len(),
            length,
            &dim_name,
            attributes,
        )?;
        let chunk = self.chunk_draws * dim;
        let mut buffer = vec![f64::NAN; chunk];
        for (i, chain) in chains.iter().enumerate() {
            for (k, part) in chain[..length * dim].chunks(chunk).enumerate() {
                buffer[..part.len()].copy_from_slice(part);
                buffer[part.len()..].fill(f64::NAN);
                array
                    .store_chunk(&[i as u64, k as u64, 0], buffer.as_slice())
                    .map_err(|e| err(e.to_string()))?;
            }
        }
        Ok(())
    }

    /// A float64 (chain, draw, parameter) array at `path`, `chains × length × D`, chunked as
    /// the draws are, its metadata written.
    fn draws_array(
        &self,
        path: &str,
        chains: usize,
        length: usize,
        dim_name: &str,
        attributes: Map<String, Value>,
    ) -> Result<Array<FilesystemStore>, SinkError> {
        let array = ArrayBuilder::new(
            vec![chains as u64, length as u64, self.dim as u64],
            vec![1, self.chunk_draws as u64, self.dim as u64],
            data_type::float64(),
            f64::NAN,
        )
        .array_to_bytes_codec(Arc::new(BytesCodec::little()))
        .dimension_names(Some(["chain", "draw", dim_name]))
        .attributes(attributes)
        .build(self.store.clone(), path)
        .map_err(|e| zarr_err(&self.root, e.to_string()))?;
        write_array_meta(&self.root, &array)?;
        Ok(array)
    }

    /// The draws variable's name and attributes.
    fn variable_and_attributes(&self) -> (Map<String, Value>, String) {
        let shared = self.lock();
        let path = shared.array.path().as_str().to_string();
        let variable = path.rsplit('/').next().unwrap_or_default().to_string();
        (shared.array.attributes().clone(), variable)
    }

    /// Writes a group's `chain` (`chain_ids`), `draw` (0..`length`) and parameter coordinates
    /// (the names in `attributes`' `parameter_names`, else 0..D); returns the parameter
    /// dimension's name.
    fn write_coordinates(
        &self,
        group: &str,
        chain_ids: &[usize],
        length: usize,
        variable: &str,
        attributes: &Map<String, Value>,
    ) -> Result<String, SinkError> {
        let ids: Vec<i64> = chain_ids.iter().map(|&c| c as i64).collect();
        write_coordinate(&self.root, &self.store, group, "chain", &ids)?;
        let draws: Vec<i64> = (0..length as i64).collect();
        write_coordinate(&self.root, &self.store, group, "draw", &draws)?;
        let dim_name = format!("{variable}_dim_0");
        let names: Vec<String> = attributes
            .get("parameter_names")
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default();
        if names.len() == self.dim {
            write_name_coordinate(&self.root, &self.store, group, &dim_name, &names)?;
        } else {
            let values: Vec<i64> = (0..self.dim as i64).collect();
            write_coordinate(&self.root, &self.store, group, &dim_name, &values)?;
        }
        Ok(dim_name)
    }

    /// Sets the draw extent to the longest chain and writes the `draw` coordinate.
    fn set_final_extent(&self) -> Result<(), SinkError> {
        let mut shared = self.lock();
        let max_draws = shared.draws.iter().copied().max().unwrap_or(0) as u64;
        shared
            .array
            .set_shape(vec![self.chains as u64, max_draws, self.dim as u64])
            .map_err(|e| zarr_err(&self.root, e.to_string()))?;
        write_array_meta(&self.root, &shared.array)?;
        shared.extent = max_draws;
        drop(shared);
        let draw_values: Vec<i64> = (0..max_draws as i64).collect();
        write_coordinate(&self.root, &self.store, "posterior", "draw", &draw_values)
    }

    /// Writes the consolidated metadata (which xarray looks for) of what is on disk.
    fn consolidate(&self) -> Result<(), SinkError> {
        // Consolidate from what is on disk, through a fresh store (no cached handles).
        let store = Arc::new(
            FilesystemStore::new(&self.root).map_err(|e| zarr_err(&self.root, e.to_string()))?,
        );
        let node = Node::open(&store, "/").map_err(|e| zarr_err(&self.root, e.to_string()))?;
        let metadata = node.consolidate_metadata().unwrap_or_default();
        let mut root_group =
            Group::open(store, "/").map_err(|e| zarr_err(&self.root, e.to_string()))?;
        root_group.set_consolidated_metadata(Some(ConsolidatedMetadata {
            metadata,
            kind: ConsolidatedMetadataKind::Inline,
        }));
        write_group_meta(&self.root, &root_group)
    }

    /// Writes each chain's state at its kept draws (the runner's
    /// [`crate::runner::ChainReport::draw_statistics`]) as the group `sample_stats`: one
    /// `(chain, draw)` array per statistic that some draw has, padded after a chain's last draw
    /// (NaN, or false for `accepted`); the group's `draws_per_chain` attribute holds each chain's
    /// length. Call it before [`finalize`](Self::finalize), whose consolidated metadata then
    /// lists the group. No statistic at all writes nothing.
    pub fn write_draw_statistics(&self, statistics: &[&[DrawStatistics]]) -> Result<(), SinkError> {
        if statistics.len() != self.chains {
            return Err(SinkError::InvalidConfig(format!(
                "draw statistics for {} chains in a store of {}",
                statistics.len(),
                self.chains
            )));
        }
        let chains: Vec<usize> = (0..self.chains).collect();
        self.write_statistics_of(&chains, statistics, false)
    }

    /// `sample_stats` of the store's chains `chains` (their numbers the `chain` coordinate),
    /// `statistics[i]` being chain `chains[i]`'s; with `diverging`, also the (all false)
    /// `diverging` array ArviZ looks for, so the group exists even without a statistic.
    fn write_statistics_of(
        &self,
        chains: &[usize],
        statistics: &[&[DrawStatistics]],
        diverging: bool,
    ) -> Result<(), SinkError> {
        let has =
            |get: &dyn Fn(&DrawStatistics) -> bool| statistics.iter().any(|c| c.iter().any(get));
        let floats: Vec<&FloatStatistic> = FLOAT_STATISTICS
            .iter()
            .filter(|f| has(&|s| (f.get)(s).is_some()))
            .collect();
        let accepted = has(&|s| s.accepted.is_some());
        if floats.is_empty() && !accepted && !diverging {
            return Ok(());
        }
        let lengths: Vec<usize> = statistics.iter().map(|c| c.len()).collect();
        let extent = lengths.iter().copied().max().unwrap_or(0);
        let mut attrs = arviz_attrs();
        attrs.insert("draws_per_chain".into(), json!(lengths));
        let group = GroupBuilder::new()
            .attributes(attrs)
            .build(self.store.clone(), "/sample_stats")
            .map_err(|e| zarr_err(&self.root, e.to_string()))?;
        write_group_meta(&self.root, &group)?;
        let chain_values: Vec<i64> = chains.iter().map(|&c| c as i64).collect();
        write_coordinate(
            &self.root,
            &self.store,
            "sample_stats",
            "chain",
            &chain_values,
        )?;
        let draw_values: Vec<i64> = (0..extent as i64).collect();
        write_coordinate(
            &self.root,
            &self.store,
            "sample_stats",
            "draw",
            &draw_values,
        )?;

        for f in floats {
            self.write_statistic(
                f.name,
                statistics.len(),
                extent,
                data_type::float64(),
                f64::NAN,
                |c| {
                    let mut v: Vec<f64> = statistics[c]
                        .iter()
                        .map(|s| (f.get)(s).unwrap_or(f64::NAN))
                        .collect();
                    v.resize(extent, f64::NAN);
                    v
                },
            )?;
        }
        if accepted {
            self.write_statistic(
                "accepted",
                statistics.len(),
                extent,
                data_type::bool(),
                false,
                |c| {
                    let mut v: Vec<bool> = statistics[c]
                        .iter()
                        .map(|s| s.accepted.unwrap_or(false))
                        .collect();
                    v.resize(extent, false);
                    v
                },
            )?;
        }
        if diverging {
            self.write_statistic(
                "diverging",
                statistics.len(),
                extent,
                data_type::bool(),
                false,
                |_| vec![false; extent],
            )?;
        }
        Ok(())
    }

    /// One `(chain, draw)` array `sample_stats/<name>`, one chunk per chain (`row(c)`, of
    /// length `extent`).
    fn write_statistic<T: zarrs::array::Element + Copy>(
        &self,
        name: &str,
        rows: usize,
        extent: usize,
        data_type: zarrs::array::DataType,
        fill: T,
        row: impl Fn(usize) -> Vec<T>,
    ) -> Result<(), SinkError>
    where
        zarrs::array::FillValue: From<T>,
    {
        let err = |e: String| zarr_err(&self.root, e);
        let array = ArrayBuilder::new(
            vec![rows as u64, extent as u64],
            vec![1, extent.max(1) as u64],
            data_type,
            zarrs::array::FillValue::from(fill),
        )
        .array_to_bytes_codec(Arc::new(BytesCodec::little()))
        .dimension_names(Some(["chain", "draw"]))
        .build(self.store.clone(), &format!("/sample_stats/{name}"))
        .map_err(|e| err(e.to_string()))?;
        if extent > 0 {
            for c in 0..rows {
                array
                    .store_chunk(&[c as u64, 0], row(c))
                    .map_err(|e| err(e.to_string()))?;
            }
        }
        write_array_meta(&self.root, &array)
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the on-disk draw extent at least `needed` (before a chunk reaching there is
    /// written); returns the file of the chunk at `chunk_indices`.
    fn ensure_extent(&self, needed: u64, chunk_indices: &[u64]) -> Result<PathBuf, SinkError> {
        let mut shared = self.lock();
        let chunk_path = self
            .root
            .join(shared.array.chunk_key(chunk_indices).as_str());
        if shared.extent >= needed {
            return Ok(chunk_path);
        }
        let shape = vec![self.chains as u64, needed, self.dim as u64];
        shared
            .array
            .set_shape(shape)
            .map_err(|e| zarr_err(&self.root, e.to_string()))?;
        if let Err(e) = write_array_meta(&self.root, &shared.array) {
            let old = vec![self.chains as u64, shared.extent, self.dim as u64];
            // Restoring a shape that was valid before cannot fail.
            let _ = shared.array.set_shape(old);
            return Err(e);
        }
        shared.extent = needed;
        Ok(chunk_path)
    }
}

impl DrawSink for ZarrSink {
    fn chain_writer(&self, chain: usize) -> Result<Box<dyn ChainWriter + '_>, SinkError> {
        let mut shared = self.lock();
        let chains = self.chains;
        let taken = shared
            .taken
            .get_mut(chain)
            .ok_or(SinkError::ChainOutOfRange { chain, chains })?;
        if *taken {
            return Err(SinkError::ChainTaken(chain));
        }
        *taken = true;
        // A reopened store's chain goes on after its kept draws (0 in a new store).
        let before = shared.draws[chain];
        drop(shared);
        let len = self.chunk_draws * self.dim;
        let (chunks_written, in_chunk) = (before / self.chunk_draws, before % self.chunk_draws);
        let mut buf = vec![f64::NAN; len];
        if in_chunk > 0 {
            use zarrs::array::ArraySubset;
            let start = (chunks_written * self.chunk_draws) as u64;
            let c = chain as u64;
            let rows: Vec<f64> = self
                .lock()
                .array
                .retrieve_array_subset(&ArraySubset::new_with_ranges(&[
                    c..c + 1,
                    start..start + in_chunk as u64,
                    0..self.dim as u64,
                ]))
                .map_err(|e| zarr_err(&self.root, e.to_string()))?;
            buf[..rows.len()].copy_from_slice(&rows);
        }
        Ok(Box::new(ZarrChainWriter {
            sink: self,
            chain,
            buf,
            bytes: Vec::with_capacity(len * 8),
            in_chunk,
            chunks_written,
            partial_written: in_chunk > 0,
            finished: false,
        }))
    }
}

/// [`ChainWriter`] of a [`ZarrSink`]: buffers one chunk and writes it when full.
struct ZarrChainWriter<'a> {
    sink: &'a ZarrSink,
    chain: usize,
    /// One chunk, `chunk_draws × dim`, row-major.
    buf: Vec<f64>,
    /// Reused encoding buffer.
    bytes: Vec<u8>,
    /// Draws currently in `buf`.
    in_chunk: usize,
    /// Full chunks already on disk.
    chunks_written: usize,
    /// The partial chunk as it is now is on disk ([`ChainWriter::flush`]).
    partial_written: bool,
    finished: bool,
}

impl ZarrChainWriter<'_> {
    fn total(&self) -> usize {
        self.chunks_written * self.sink.chunk_draws + self.in_chunk
    }

    /// Writes the buffered chunk (`in_chunk` draws; the rest is NaN).
    fn write_chunk(&mut self) -> Result<(), SinkError> {
        let sink = self.sink;
        let filled = self.in_chunk * sink.dim;
        self.buf[filled..].fill(f64::NAN);
        let end = self.total() as u64;
        let indices = [self.chain as u64, self.chunks_written as u64, 0];
        let chunk_path = sink.ensure_extent(end, &indices)?;

        self.bytes.clear();
        for x in &self.buf {
            self.bytes.extend_from_slice(&x.to_le_bytes());
        }
        write_atomic(&chunk_path, &self.bytes)?;

        sink.lock().draws[self.chain] = end as usize;
        Ok(())
    }

    fn flush_full(&mut self) -> Result<(), SinkError> {
        self.write_chunk()?;
        self.chunks_written += 1;
        self.in_chunk = 0;
        Ok(())
    }
}

impl ChainWriter for ZarrChainWriter<'_> {
    fn push(&mut self, draw: &[f64]) -> Result<(), SinkError> {
        let dim = self.sink.dim;
        if draw.len() != dim {
            return Err(SinkError::WrongDimension {
                expected: dim,
                got: draw.len(),
            });
        }
        if self.in_chunk == self.sink.chunk_draws {
            // An earlier write failed; retry before buffering more.
            self.flush_full()?;
        }
        let start = self.in_chunk * dim;
        self.buf[start..start + dim].copy_from_slice(draw);
        self.in_chunk += 1;
        self.partial_written = false;
        if self.in_chunk == self.sink.chunk_draws {
            self.flush_full()?;
        }
        Ok(())
    }

    fn pending(&self) -> usize {
        if self.partial_written {
            0
        } else {
            self.in_chunk
        }
    }

    /// Writes the partial chunk (NaN after its last draw); it is written again as it fills.
    fn flush(&mut self) -> Result<(), SinkError> {
        if self.in_chunk > 0 && !self.partial_written {
            self.write_chunk()?;
            self.partial_written = true;
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<usize, SinkError> {
        self.finished = true;
        if self.in_chunk > 0 {
            self.write_chunk()?;
        }
        Ok(self.total())
    }
}

impl Drop for ZarrChainWriter<'_> {
    /// Best effort: a writer dropped without `finish` (e.g. on panic) still writes its partial chunk.
    fn drop(&mut self) {
        if !self.finished && self.in_chunk > 0 {
            let _ = self.write_chunk();
        }
    }
}

fn validate(
    chains: usize,
    dim: usize,
    variable: &str,
    parameter_names: &[String],
) -> Result<(), SinkError> {
    let bad = |msg: String| Err(SinkError::InvalidConfig(msg));
    if chains == 0 {
        return bad("chains must be at least 1".into());
    }
    if dim == 0 {
        return bad("dim must be at least 1".into());
    }
    if variable.is_empty()
        || variable.starts_with("__")
        || variable.starts_with('.')
        || variable.contains(['/', '\\'])
        || variable == "chain"
        || variable == "draw"
    {
        return bad(format!("invalid variable name {variable:?}"));
    }
    if !parameter_names.is_empty() && parameter_names.len() != dim {
        return bad(format!(
            "{} parameter names for dimension {dim}",
            parameter_names.len()
        ));
    }
    Ok(())
}

/// Makes `path` an empty directory, replacing a store previously written by this module.
fn prepare_dir(path: &Path) -> Result<(), SinkError> {
    let io = |source| SinkError::Io {
        path: path.to_path_buf(),
        source,
    };
    if !path.exists() {
        return fs::create_dir_all(path).map_err(io);
    }
    if !path.is_dir() {
        return Err(SinkError::PathExists(path.to_path_buf()));
    }
    if fs::read_dir(path).map_err(io)?.next().is_none() {
        return Ok(());
    }
    let ours = fs::read(path.join("zarr.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .is_some_and(|v| v["attributes"]["inference_library"] == LIBRARY);
    if !ours {
        return Err(SinkError::PathExists(path.to_path_buf()));
    }
    fs::remove_dir_all(path).map_err(io)?;
    fs::create_dir_all(path).map_err(io)
}

/// Group attributes as ArviZ writes them (`created_at`, `inference_library`, ...).
fn arviz_attrs() -> Map<String, Value> {
    let mut attrs = Map::new();
    attrs.insert("created_at".into(), json!(utc_now_iso8601()));
    attrs.insert("inference_library".into(), json!(LIBRARY));
    attrs.insert(
        "inference_library_version".into(),
        json!(env!("CARGO_PKG_VERSION")),
    );
    attrs
}

/// Writes a one-dimensional int64 coordinate array `<group>/<name>` (dimension `name`).
fn write_coordinate(
    root: &Path,
    store: &Arc<FilesystemStore>,
    group: &str,
    name: &str,
    values: &[i64],
) -> Result<(), SinkError> {
    let len = values.len() as u64;
    let chunk = len.clamp(1, COORD_CHUNK);
    let array = ArrayBuilder::new(vec![len], vec![chunk], data_type::int64(), 0i64)
        .array_to_bytes_codec(Arc::new(BytesCodec::little()))
        .dimension_names(Some([name]))
        .build(store.clone(), &format!("/{group}/{name}"))
        .map_err(|e| zarr_err(root, e.to_string()))?;
    let mut bytes = Vec::with_capacity(chunk as usize * 8);
    for (i, part) in values.chunks(chunk as usize).enumerate() {
        bytes.clear();
        for v in part {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        // Regular grids store full chunks; pad the last one.
        bytes.resize(chunk as usize * 8, 0);
        let key = array.chunk_key(&[i as u64]);
        write_atomic(&root.join(key.as_str()), &bytes)?;
    }
    write_array_meta(root, &array)
}

/// Writes the parameter names as a one-dimensional string coordinate `<group>/<name>`
/// (Zarr v3 `string` data type, `vlen-utf8` codec, one chunk), so that xarray and ArviZ label
/// the parameter dimension with the names.
fn write_name_coordinate(
    root: &Path,
    store: &Arc<FilesystemStore>,
    group: &str,
    name: &str,
    names: &[String],
) -> Result<(), SinkError> {
    let len = names.len() as u64;
    let array = ArrayBuilder::new(vec![len], vec![len.max(1)], data_type::string(), "")
        .dimension_names(Some([name]))
        .build(store.clone(), &format!("/{group}/{name}"))
        .map_err(|e| zarr_err(root, e.to_string()))?;
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    array
        .store_chunk(&[0], refs)
        .map_err(|e| zarr_err(root, e.to_string()))?;
    write_array_meta(root, &array)
}

fn write_array_meta(root: &Path, array: &Array<FilesystemStore>) -> Result<(), SinkError> {
    let options = ArrayMetadataOptions::default().with_include_zarrs_metadata(false);
    let json = match array.metadata_opt(&options) {
        ArrayMetadata::V3(m) => serde_json::to_vec_pretty(&m),
        ArrayMetadata::V2(m) => serde_json::to_vec_pretty(&m),
    }
    .map_err(|e| zarr_err(root, e.to_string()))?;
    write_atomic(&meta_path(root, array.path().as_str()), &json)
}

fn write_group_meta(root: &Path, group: &Group<FilesystemStore>) -> Result<(), SinkError> {
    let mut value = match group.metadata() {
        GroupMetadata::V3(m) => serde_json::to_value(m),
        GroupMetadata::V2(m) => serde_json::to_value(m),
    }
    .map_err(|e| zarr_err(root, e.to_string()))?;
    readable_consolidated(&mut value);
    let json = serde_json::to_vec_pretty(&value).map_err(|e| zarr_err(root, e.to_string()))?;
    write_atomic(&meta_path(root, group.path().as_str()), &json)
}

/// Makes the consolidated metadata readable by zarr-python (and so xarray): every codec is
/// written as `{"name": …}` (zarrs abbreviates a codec without configuration, `vlen-utf8`, to
/// its bare name there, which zarr-python rejects: "Expected dict, got str"; the arrays' own
/// metadata already has the object), and a group's entry comes before its members' (zarr-python
/// nests the entries in the order listed and otherwise reports the members as missing).
fn readable_consolidated(group: &mut serde_json::Value) {
    let Some(entries) = group
        .pointer_mut("/consolidated_metadata/metadata")
        .and_then(|m| m.as_object_mut())
    else {
        return;
    };
    for entry in entries.values_mut() {
        if let Some(codecs) = entry.get_mut("codecs").and_then(|c| c.as_array_mut()) {
            for codec in codecs.iter_mut() {
                if let Some(name) = codec.as_str() {
                    *codec = json!({ "name": name });
                }
            }
        }
    }
    let mut sorted: Vec<(String, Value)> = std::mem::take(entries).into_iter().collect();
    sorted.sort_by(|(a, _), (b, _)| (a.matches('/').count(), a).cmp(&(b.matches('/').count(), b)));
    entries.extend(sorted);
}

fn meta_path(root: &Path, node_path: &str) -> PathBuf {
    root.join(node_path.trim_start_matches('/'))
        .join("zarr.json")
}

/// Writes `bytes` to `path` via a temporary file and a rename, so readers never see a partial file.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), SinkError> {
    let io = |source| SinkError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(io)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".sgmcmc-tmp");
    let tmp = PathBuf::from(tmp);
    fs::write(&tmp, bytes).map_err(io)?;
    fs::rename(&tmp, path).map_err(io)
}

fn zarr_err(path: &Path, message: String) -> SinkError {
    SinkError::Zarr {
        path: path.to_path_buf(),
        message,
    }
}

/// Current UTC time like Python's `datetime.now(timezone.utc).isoformat()`.
fn utc_now_iso8601() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}+00:00",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        now.subsec_micros()
    )
}

/// Each chain's state at its draws, as written by [`ZarrSink::write_draw_statistics`] (each
/// chain as long as the group's `draws_per_chain` says); an empty list per chain when the store
/// has no `sample_stats` (a run that recorded none, or a store from before they were written).
pub fn read_draw_statistics(path: &Path) -> Result<Vec<Vec<DrawStatistics>>, SinkError> {
    use zarrs::array::ArraySubset;
    let err = |m: String| zarr_err(path, m);
    let store = Arc::new(FilesystemStore::new(path).map_err(|e| err(e.to_string()))?);
    let Ok(group) = Group::open(store.clone(), "/sample_stats") else {
        return Ok(Vec::new());
    };
    let lengths: Vec<usize> = group
        .attributes()
        .get("draws_per_chain")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .ok_or_else(|| err("sample_stats has no draws_per_chain attribute".into()))?;
    let mut out: Vec<Vec<DrawStatistics>> = lengths
        .iter()
        .map(|&n| vec![DrawStatistics::default(); n])
        .collect();
    let extent = lengths.iter().copied().max().unwrap_or(0);
    let open = |name: &str| -> Result<Option<Array<FilesystemStore>>, SinkError> {
        let Ok(array) = Array::open(store.clone(), &format!("/sample_stats/{name}")) else {
            return Ok(None);
        };
        if array.shape() != [lengths.len() as u64, extent as u64] {
            return Err(err(format!(
                "sample_stats/{name} has shape {:?}, expected ({}, {extent})",
                array.shape(),
                lengths.len()
            )));
        }
        Ok(Some(array))
    };
    let whole = ArraySubset::new_with_shape(vec![lengths.len() as u64, extent as u64]);
    for f in &FLOAT_STATISTICS {
        if let Some(array) = open(f.name)? {
            let values: Vec<f64> = array
                .retrieve_array_subset(&whole)
                .map_err(|e| err(e.to_string()))?;
            for (c, chain) in out.iter_mut().enumerate() {
                for (j, s) in chain.iter_mut().enumerate() {
                    (f.set)(s, values[c * extent + j]);
                }
            }
        }
    }
    if let Some(array) = open("accepted")? {
        let values: Vec<bool> = array
            .retrieve_array_subset(&whole)
            .map_err(|e| err(e.to_string()))?;
        for (c, chain) in out.iter_mut().enumerate() {
            for (j, s) in chain.iter_mut().enumerate() {
                s.accepted = Some(values[c * extent + j]);
            }
        }
    }
    // Rows of some chains only (the posterior's, `finalize_summarised`): by chain number.
    let ids: Option<Vec<i64>> = Array::open(store.clone(), "/sample_stats/chain")
        .ok()
        .and_then(|a| {
            a.retrieve_array_subset(&ArraySubset::new_with_shape(a.shape().to_vec()))
                .ok()
        });
    match ids {
        Some(ids) if ids.len() == out.len() && ids.iter().all(|&id| id >= 0) => {
            let chains = ids.iter().copied().max().map_or(0, |m| m as usize + 1);
            let mut by_chain = vec![Vec::new(); chains];
            for (id, row) in ids.into_iter().zip(out) {
                by_chain[id as usize] = row;
            }
            Ok(by_chain)
        }
        _ => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zarrs::array::ArraySubset;

    fn value(c: usize, j: usize, k: usize) -> f64 {
        1000.0 * c as f64 + j as f64 + 0.001 * k as f64
    }

    /// Writes `lens[c]` draws for chain `c`, in parallel threads.
    fn write_chains(sink: &ZarrSink, lens: &[usize], dim: usize) {
        std::thread::scope(|s| {
            for (c, &n) in lens.iter().enumerate() {
                s.spawn(move || {
                    let mut w = sink.chain_writer(c).unwrap();
                    let mut draw = vec![0.0; dim];
                    for j in 0..n {
                        for (k, x) in draw.iter_mut().enumerate() {
                            *x = value(c, j, k);
                        }
                        w.push(&draw).unwrap();
                    }
                    assert_eq!(w.finish().unwrap(), n);
                });
            }
        });
    }

    /// A reopened store keeps each chain's first `kept` draws, clears what follows (draws
    /// written after a checkpoint), and its writers go on after them: the result equals a store
    /// written in one go, whether a chain was cut inside a chunk, at a chunk's end or at 0.
    #[test]
    fn a_reopened_store_continues_each_chain_after_its_kept_draws() {
        let dir = tempfile::tempdir().unwrap();
        let (dim, chunk) = (3, 4);
        let written = [11, 9, 6];
        let kept = [6, 8, 0];
        let total = [13, 10, 5];
        let path = dir.path().join("draws.zarr");
        let sink = ZarrSink::create(&path, 3, dim, "theta", &[], Some(chunk)).unwrap();
        write_chains(&sink, &written, dim);
        sink.finalize().unwrap();

        let (sink, earlier) = ZarrSink::reopen(&path, "theta", &kept).unwrap();
        for (c, draws) in earlier.iter().enumerate() {
            let expected: Vec<f64> = (0..kept[c])
                .flat_map(|j| (0..dim).map(move |k| value(c, j, k)))
                .collect();
            assert_eq!(draws, &expected, "chain {c}");
        }
        // Nothing of the stale tail is left before the chains write again.
        let stale = read_draws(&path, "theta").unwrap();
        for (c, chain) in stale.chains.iter().enumerate() {
            assert_eq!(chain.len(), kept[c] * dim, "chain {c} before writing");
        }
        std::thread::scope(|s| {
            for c in 0..3 {
                let sink = &sink;
                s.spawn(move || {
                    let mut w = sink.chain_writer(c).unwrap();
                    for j in kept[c]..total[c] {
                        let draw: Vec<f64> = (0..dim).map(|k| value(c, j, k)).collect();
                        w.push(&draw).unwrap();
                    }
                    assert_eq!(w.finish().unwrap(), total[c]);
                });
            }
        });
        sink.finalize().unwrap();
        let back = read_draws(&path, "theta").unwrap();
        for (c, chain) in back.chains.iter().enumerate() {
            let expected: Vec<f64> = (0..total[c])
                .flat_map(|j| (0..dim).map(move |k| value(c, j, k)))
                .collect();
            assert_eq!(chain, &expected, "chain {c}");
        }
        assert_eq!(read_all(&path, "theta").0, vec![3, 13, dim as u64]);

        // A checkpoint beyond the store's draws, and a foreign store, are refused.
        let e = ZarrSink::reopen(&path, "theta", &[14, 0, 0]).unwrap_err();
        assert!(e.to_string().contains("holds 13 draws"), "{e}");
        let e = ZarrSink::reopen(&path, "theta", &[13, 12, 0]).unwrap_err();
        assert!(e.to_string().contains("chain 1: draw 10 is missing"), "{e}");
        assert_eq!(
            read_draws(&path, "theta").unwrap(),
            back,
            "a refused reopen clears nothing"
        );
        let e = ZarrSink::reopen(&path, "theta", &[1, 1]).unwrap_err();
        assert!(e.to_string().contains("3 chains"), "{e}");
        let e = ZarrSink::reopen(dir.path(), "theta", &[0]).unwrap_err();
        assert!(
            e.to_string().contains("not a store written by sgmcmc"),
            "{e}"
        );
    }

    /// A run with a diverged chain (1, short) and uneven others (Ctrl-C): the posterior holds
    /// chains 0 and 2 cut to the shorter (7 draws, no NaN, chain coordinate [0, 2]) with their
    /// statistics and `diverging`; `all_chains` keeps every draw as run; a reopened store goes
    /// back to every chain's draws. Before, the posterior held every chain, NaN-padded, and
    /// ArviZ's summary of it was NaN.
    #[test]
    fn the_posterior_shows_the_summarised_chains_and_all_chains_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let (dim, lens) = (2, [10, 4, 7]);
        let path = dir.path().join("draws.zarr");
        let names = vec!["a".to_string(), "b".to_string()];
        let sink = ZarrSink::create(&path, 3, dim, "theta", &names, Some(3)).unwrap();
        write_chains(&sink, &lens, dim);
        let stats: Vec<Vec<DrawStatistics>> = lens
            .iter()
            .enumerate()
            .map(|(c, &n)| {
                (0..n)
                    .map(|j| DrawStatistics {
                        step_size: Some((100 * c + j) as f64),
                        ..DrawStatistics::default()
                    })
                    .collect()
            })
            .collect();
        let refs: Vec<&[DrawStatistics]> = stats.iter().map(Vec::as_slice).collect();
        sink.finalize_summarised(&[0, 2], &refs).unwrap();

        let posterior = read_draws(&path, "theta").unwrap();
        assert_eq!(posterior.chains.len(), 2);
        for (chain, c) in posterior.chains.iter().zip([0, 2]) {
            let expected: Vec<f64> = (0..7)
                .flat_map(|j| (0..dim).map(move |k| value(c, j, k)))
                .collect();
            assert_eq!(chain, &expected, "chain {c}");
        }
        assert_eq!(read_i64(&path, "chain"), vec![0, 2]);
        assert_eq!(read_i64(&path, "draw"), (0..7).collect::<Vec<_>>());
        let all = super::super::read_all_chains(&path, "theta").unwrap();
        for (c, chain) in all.chains.iter().enumerate() {
            assert_eq!(chain.len(), lens[c] * dim, "chain {c} as run");
        }
        let back = read_draw_statistics(&path).unwrap();
        assert_eq!(back.len(), 3);
        assert_eq!(
            back[1].len(),
            0,
            "the diverged chain is not in sample_stats"
        );
        assert_eq!(back[2].len(), 7);
        assert_eq!(back[2][6].step_size, Some(206.0));
        let group = path.join("sample_stats/diverging/zarr.json");
        assert!(group.is_file(), "sample_stats has diverging");

        let (sink, earlier) = ZarrSink::reopen(&path, "theta", &[10, 4, 7]).unwrap();
        assert_eq!(earlier[1].len(), 4 * dim);
        drop(sink);
        assert!(!path.join(ALL_CHAINS).exists());
        assert_eq!(read_draws(&path, "theta").unwrap().chains.len(), 3);
    }

    fn read_all(path: &Path, variable: &str) -> (Vec<u64>, Vec<f64>) {
        let store = Arc::new(FilesystemStore::new(path).unwrap());
        let array = Array::open(store, &format!("/posterior/{variable}")).unwrap();
        let shape = array.shape().to_vec();
        let data: Vec<f64> = array
            .retrieve_array_subset(&ArraySubset::new_with_shape(shape.clone()))
            .unwrap();
        (shape, data)
    }

    fn read_i64(path: &Path, name: &str) -> Vec<i64> {
        let store = Arc::new(FilesystemStore::new(path).unwrap());
        let array = Array::open(store, &format!("/posterior/{name}")).unwrap();
        array
            .retrieve_array_subset(&ArraySubset::new_with_shape(array.shape().to_vec()))
            .unwrap()
    }

    /// `read_draws` returns exactly what was pushed, per chain, without the NaN padding of
    /// shorter chains, before and after `finalize`, and names a missing store or variable.
    #[test]
    fn read_draws_returns_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.zarr");
        let names: Vec<String> = ["a", "b"].map(String::from).to_vec();
        let sink = ZarrSink::create(&path, 3, 2, "theta", &names, Some(4)).unwrap();
        let lens = [9, 0, 5];
        write_chains(&sink, &lens, 2);
        let before = read_draws(&path, "theta").unwrap();
        sink.finalize().unwrap();
        let after = read_draws(&path, "theta").unwrap();
        assert_eq!(before, after);
        assert_eq!(after.parameter_names, names);
        assert_eq!(after.len(), 14);
        for (c, &n) in lens.iter().enumerate() {
            let want: Vec<f64> = (0..n)
                .flat_map(|k| (0..2).map(move |j| value(c, k, j)))
                .collect();
            assert_eq!(after.chains[c], want, "chain {c}");
        }
        assert_eq!(after.pooled().len(), 28);
        let missing = read_draws(&dir.path().join("nope"), "theta").unwrap_err();
        assert!(
            missing.to_string().contains("not a Zarr store"),
            "{missing}"
        );
        let wrong = read_draws(&path, "beta").unwrap_err();
        assert!(wrong.to_string().contains("posterior/beta"), "{wrong}");
    }

    /// The per-draw statistics read back as written (chains of different lengths, a statistic
    /// only some draws have), are listed in the consolidated metadata, and a store without them
    /// reads as no statistics.
    #[test]
    fn draw_statistics_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.zarr");
        let sink = ZarrSink::create(&path, 3, 1, "theta", &[], None).unwrap();
        write_chains(&sink, &[4, 0, 2], 1);
        assert!(read_draw_statistics(&path).unwrap().is_empty());
        let stat = |j: usize| DrawStatistics {
            step_size: Some(0.1 / (j + 1) as f64),
            thermostat: j.is_multiple_of(2).then_some(j as f64 - 1.5),
            accepted: Some(j.is_multiple_of(3)),
        };
        let chains: Vec<Vec<DrawStatistics>> = [4, 0, 2]
            .iter()
            .map(|&n| (0..n).map(stat).collect())
            .collect();
        let views: Vec<&[DrawStatistics]> = chains.iter().map(Vec::as_slice).collect();
        let wrong = sink.write_draw_statistics(&views[..2]).unwrap_err();
        assert!(wrong.to_string().contains("2 chains"), "{wrong}");
        sink.write_draw_statistics(&views).unwrap();
        sink.finalize().unwrap();
        let back = read_draw_statistics(&path).unwrap();
        // A thermostat that some draws lack reads back as NaN there.
        for (c, (got, want)) in back.iter().zip(&chains).enumerate() {
            assert_eq!(got.len(), want.len(), "chain {c}");
            for (g, w) in got.iter().zip(want) {
                assert_eq!(g.step_size, w.step_size);
                assert_eq!(g.accepted, w.accepted);
                match w.thermostat {
                    Some(t) => assert_eq!(g.thermostat, Some(t)),
                    None => assert!(g.thermostat.unwrap().is_nan()),
                }
            }
        }
        let root: Value =
            serde_json::from_slice(&fs::read(path.join("zarr.json")).unwrap()).unwrap();
        let listed = root.pointer("/consolidated_metadata/metadata").unwrap();
        for key in [
            "sample_stats",
            "sample_stats/step_size",
            "sample_stats/accepted",
        ] {
            assert!(listed.get(key).is_some(), "{key} not consolidated");
        }
    }

    #[test]
    fn round_trip_uneven_chains_and_chunk_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.zarr");
        let names: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let sink = ZarrSink::create(&path, 5, 3, "theta", &names, Some(4)).unwrap();
        assert_eq!(sink.chunk_draws(), 4);
        // Exactly one chunk, two chunks, partial third chunk, short partial, empty.
        let lens = [4, 8, 9, 3, 0];
        write_chains(&sink, &lens, 3);
        assert_eq!(sink.draws_per_chain(), lens);
        sink.finalize().unwrap();

        let (shape, data) = read_all(&path, "theta");
        assert_eq!(shape, vec![5, 9, 3]);
        for (c, &n) in lens.iter().enumerate() {
            for j in 0..9 {
                for k in 0..3 {
                    let x = data[(c * 9 + j) * 3 + k];
                    if j < n {
                        assert_eq!(x, value(c, j, k), "chain {c} draw {j} coord {k}");
                    } else {
                        assert!(x.is_nan(), "chain {c} draw {j} should be NaN");
                    }
                }
            }
        }
        assert_eq!(read_i64(&path, "chain"), vec![0, 1, 2, 3, 4]);
        assert_eq!(read_i64(&path, "draw"), (0..9).collect::<Vec<_>>());
        // The parameter names are the parameter dimension's coordinate (a string array).
        let store = Arc::new(FilesystemStore::new(&path).unwrap());
        let names_array = Array::open(store, "/posterior/theta_dim_0").unwrap();
        let coordinate: Vec<String> = names_array
            .retrieve_array_subset(&ArraySubset::new_with_shape(vec![3]))
            .unwrap();
        assert_eq!(coordinate, names);

        let store = Arc::new(FilesystemStore::new(&path).unwrap());
        let root = Group::open(store.clone(), "/").unwrap();
        let consolidated = root.consolidated_metadata().unwrap();
        for key in ["posterior", "posterior/theta", "posterior/draw"] {
            assert!(consolidated.metadata.contains_key(key), "{key}");
        }
        // Every consolidated codec is an object with a name (zarr-python rejects bare names).
        let text = fs::read_to_string(path.join("zarr.json")).unwrap();
        let meta: serde_json::Value = serde_json::from_str(&text).unwrap();
        let entries = meta["consolidated_metadata"]["metadata"]
            .as_object()
            .unwrap();
        for (key, entry) in entries {
            for codec in entry["codecs"].as_array().into_iter().flatten() {
                assert!(codec["name"].is_string(), "{key}: codec {codec}");
            }
        }
        assert_eq!(root.attributes()["inference_library"], "sgmcmc");
        let array = Array::open(store, "/posterior/theta").unwrap();
        assert_eq!(
            array.attributes()["parameter_names"],
            json!(["a", "b", "c"])
        );
        let dims: Vec<_> = array
            .dimension_names()
            .clone()
            .unwrap()
            .into_iter()
            .map(|d| d.unwrap())
            .collect();
        assert_eq!(dims, ["chain", "draw", "theta_dim_0"]);
        // No temporary files are left behind.
        let leftovers = walk(&path)
            .into_iter()
            .filter(|p| p.to_string_lossy().ends_with(".sgmcmc-tmp"))
            .count();
        assert_eq!(leftovers, 0);
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for entry in fs::read_dir(dir).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                out.extend(walk(&p));
            }
            out.push(p);
        }
        out
    }

    #[test]
    fn killed_run_leaves_readable_store() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("crash.zarr");
        let sink = ZarrSink::create(&path, 2, 2, "x", &[], Some(3)).unwrap();
        let mut w0 = sink.chain_writer(0).unwrap();
        let mut w1 = sink.chain_writer(1).unwrap();
        for j in 0..7 {
            w0.push(&[value(0, j, 0), value(0, j, 1)]).unwrap();
        }
        for j in 0..4 {
            w1.push(&[value(1, j, 0), value(1, j, 1)]).unwrap();
        }
        // Simulate a kill: no finish, no drop, no finalize.
        std::mem::forget(w0);
        std::mem::forget(w1);
        std::mem::forget(sink);

        let (shape, data) = read_all(&path, "x");
        assert_eq!(shape, vec![2, 6, 2]);
        for j in 0..6 {
            assert_eq!(data[j * 2 + 1], value(0, j, 1));
            let x = data[(6 + j) * 2];
            if j < 3 {
                assert_eq!(x, value(1, j, 0));
            } else {
                assert!(x.is_nan());
            }
        }
    }

    #[test]
    fn dropped_writer_flushes_partial_chunk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("drop.zarr");
        let sink = ZarrSink::create(&path, 1, 1, "x", &[], None).unwrap();
        let mut w = sink.chain_writer(0).unwrap();
        w.push(&[1.5]).unwrap();
        drop(w);
        assert_eq!(sink.draws_per_chain(), vec![1]);
        sink.finalize().unwrap();
        assert_eq!(read_all(&path, "x"), (vec![1, 1, 1], vec![1.5]));
    }

    #[test]
    fn no_draws_gives_empty_array() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.zarr");
        let sink = ZarrSink::create(&path, 2, 3, "x", &[], None).unwrap();
        sink.finalize().unwrap();
        let (shape, data) = read_all(&path, "x");
        assert_eq!(shape, vec![2, 0, 3]);
        assert!(data.is_empty());
        assert!(read_i64(&path, "draw").is_empty());
    }

    #[test]
    fn chunk_size_targets_one_mebibyte() {
        let dir = tempfile::tempdir().unwrap();
        let sizes = [
            (3, None, 4096),
            (1000, None, 131),
            (1 << 18, None, 1),
            (3, Some(10), 10),
        ];
        for (i, (dim, expected, chunk)) in sizes.into_iter().enumerate() {
            let path = dir.path().join(format!("s{i}.zarr"));
            let sink = ZarrSink::create(&path, 1, dim, "x", &[], expected).unwrap();
            assert_eq!(sink.chunk_draws(), chunk, "dim {dim}");
        }
    }

    #[test]
    fn overwrite_policy_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.zarr");
        let sink = ZarrSink::create(&path, 1, 2, "x", &[], None).unwrap();
        let mut w = sink.chain_writer(0).unwrap();
        assert!(matches!(
            w.push(&[1.0]),
            Err(SinkError::WrongDimension {
                expected: 2,
                got: 1
            })
        ));
        w.push(&[1.0, 2.0]).unwrap();
        assert_eq!(w.finish().unwrap(), 1);
        assert!(matches!(
            sink.chain_writer(0).err(),
            Some(SinkError::ChainTaken(0))
        ));
        assert!(matches!(
            sink.chain_writer(3).err(),
            Some(SinkError::ChainOutOfRange {
                chain: 3,
                chains: 1
            })
        ));
        sink.finalize().unwrap();

        // Our own store is replaced.
        let sink = ZarrSink::create(&path, 1, 2, "x", &[], None).unwrap();
        sink.finalize().unwrap();
        assert_eq!(read_all(&path, "x").0, vec![1, 0, 2]);

        // A foreign non-empty directory is refused, and left alone.
        let foreign = dir.path().join("foreign");
        fs::create_dir(&foreign).unwrap();
        fs::write(foreign.join("notes.txt"), "keep").unwrap();
        let err = ZarrSink::create(&foreign, 1, 2, "x", &[], None).unwrap_err();
        assert!(matches!(err, SinkError::PathExists(_)));
        assert!(err.to_string().contains("foreign"));
        assert!(foreign.join("notes.txt").exists());

        for (chains, dim, var, names) in [
            (0, 1, "x", 0),
            (1, 0, "x", 0),
            (1, 1, "a/b", 0),
            (1, 1, "draw", 0),
            (1, 2, "x", 1),
        ] {
            let names = vec![String::from("p"); names];
            let err = ZarrSink::create(&dir.path().join("bad"), chains, dim, var, &names, None);
            assert!(matches!(err, Err(SinkError::InvalidConfig(_))));
        }
    }

    #[test]
    fn timestamp_format() {
        let t = utc_now_iso8601();
        assert_eq!(t.len(), "2026-01-01T00:00:00.000000+00:00".len());
        assert!(t.starts_with("20") && t.ends_with("+00:00"));
    }
}
