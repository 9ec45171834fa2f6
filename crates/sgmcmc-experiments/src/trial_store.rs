//! Finished trials kept on disk, so that a long experiment stopped part-way (a killed session,
//! a crash, a machine taken back) resumes where it stopped and gives the same tables as one
//! uninterrupted run.
//!
//! Each trial is one JSON file `<hash>.json` holding `{"key": …, "result": …}`, where the hash
//! is FNV-1a (64 bits) of the key's JSON. A stored trial is reused only when its key equals the
//! one asked for, so a changed setting runs the trial again. Files are written to a temporary
//! name and renamed, so a trial is either stored whole or not at all. Keys and results should
//! hold their f64 as bits ([`f64::to_bits`]): JSON does not carry NaN or ∞, and the bits
//! round-trip exactly. Written by hand: a directory of small JSON files needs no database.

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};

/// A directory of finished trials (see the module documentation).
#[derive(Debug, Clone)]
pub struct TrialStore {
    dir: PathBuf,
}

/// FNV-1a, 64 bits: the file name of a key.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl TrialStore {
    /// The store in `dir`, created if missing.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, String> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create the trial store {}: {e}", dir.display()))?;
        Ok(Self { dir })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn key_and_path<K: Serialize>(&self, key: &K) -> Result<(serde_json::Value, PathBuf), String> {
        let value = serde_json::to_value(key).map_err(|e| format!("trial key: {e}"))?;
        let text = value.to_string();
        let path = self
            .dir
            .join(format!("{:016x}.json", fnv1a(text.as_bytes())));
        Ok((value, path))
    }

    /// The stored result of the trial `key`, if one was stored under an equal key.
    ///
    /// A file that cannot be read or parsed is an error naming it (delete it to run that trial
    /// again), never a silent re-run or a wrong result.
    pub fn load<K: Serialize, R: DeserializeOwned>(&self, key: &K) -> Result<Option<R>, String> {
        let (key, path) = self.key_and_path(key)?;
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(format!(
                    "cannot read the stored trial {}: {e}",
                    path.display()
                ));
            }
        };
        let corrupt = |e: &dyn std::fmt::Display| {
            format!(
                "the stored trial {} is not readable ({e}); delete it to run that trial again",
                path.display()
            )
        };
        let mut stored: serde_json::Value = serde_json::from_str(&text).map_err(|e| corrupt(&e))?;
        if stored.get("key") != Some(&key) {
            // Another key with the same hash: not this trial.
            return Ok(None);
        }
        let result = stored
            .get_mut("result")
            .map(serde_json::Value::take)
            .ok_or_else(|| corrupt(&"no result"))?;
        serde_json::from_value(result)
            .map(Some)
            .map_err(|e| corrupt(&e))
    }

    /// Stores `result` as the trial `key` (replacing what was stored under it).
    pub fn save<K: Serialize, R: Serialize>(&self, key: &K, result: &R) -> Result<(), String> {
        let (key, path) = self.key_and_path(key)?;
        let text = serde_json::json!({ "key": key, "result": result }).to_string();
        let temporary = path.with_extension("json.partial");
        std::fs::write(&temporary, text)
            .and_then(|()| std::fs::rename(&temporary, &path))
            .map_err(|e| format!("cannot store the trial {}: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Key {
        name: &'static str,
        seed: u64,
    }

    #[test]
    fn a_saved_trial_is_found_under_an_equal_key_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = TrialStore::open(dir.path().join("trials")).unwrap();
        let key = Key { name: "a", seed: 1 };
        assert_eq!(store.load::<_, Vec<u64>>(&key).unwrap(), None);
        let value = vec![
            f64::NAN.to_bits(),
            0.1f64.to_bits(),
            f64::INFINITY.to_bits(),
        ];
        store.save(&key, &value).unwrap();
        assert_eq!(store.load::<_, Vec<u64>>(&key).unwrap(), Some(value));
        let other = Key { name: "a", seed: 2 };
        assert_eq!(store.load::<_, Vec<u64>>(&other).unwrap(), None);
        // A file under the key's name whose stored key differs (a hash collision) is not it.
        let (_, path) = store.key_and_path(&key).unwrap();
        std::fs::write(&path, r#"{"key": {"name": "b", "seed": 1}, "result": [1]}"#).unwrap();
        assert_eq!(store.load::<_, Vec<u64>>(&key).unwrap(), None);
        // A damaged file is an error that names it.
        std::fs::write(&path, "{\"key\": ").unwrap();
        let e = store.load::<_, Vec<u64>>(&key).unwrap_err();
        assert!(
            e.contains(&path.display().to_string()) && e.contains("delete it"),
            "{e}"
        );
    }
}
