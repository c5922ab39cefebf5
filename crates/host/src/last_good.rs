//! The last good configuration, kept in the state folder: what a start on
//! an invalid configuration serves instead of refusing (see
//! `crate::start_config`).
//!
//! After every start and reload that put a configuration in service, its
//! files (`host.toml`, the served set's resource files, the trusted keys
//! under the config directory) and its guests (with their `.sig` files)
//! are copied under `<state-dir>/last-good/<generation>/`, the guests by
//! their SHA-256, beside a `manifest.json` naming the set, its digest and
//! each guest's original path and digest; `<state-dir>/last-good/current`
//! names the generation, replaced atomically once it is complete, so a
//! crash leaves the previous snapshot whole. A copy that differs from what
//! is served (the directory changed meanwhile) is not kept.
//!
//! Read back ([`load`]), the snapshot is a [`ConfigSet`] whose guests are
//! the copies, each pinned to its digest, and whose trusted keys are read
//! as they are now: every key from where the live configuration names it
//! (never the snapshot's copy), the host-wide list from today's
//! `host.toml` when it reads. A key removed, rotated or no longer listed
//! refuses what it signed; a snapshot guest unsigned where signatures are
//! now required is refused by the usual load.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use wdp_cdi::atomic_file::{self, Durability};
use wdp_config::ConfigSet;
use wdp_config::{HOST_FILE, load_host_settings, load_set};
use wdp_policy::signature::{TrustedKey, TrustedKeys, signature_path};

/// The snapshot's folder, under the state folder.
pub const SNAPSHOT_DIR: &str = "last-good";
/// The file naming the complete generation, under [`SNAPSHOT_DIR`].
const CURRENT: &str = "current";
/// The manifest of a generation.
const MANIFEST: &str = "manifest.json";
/// The copied configuration files of a generation.
const FILES: &str = "files";
/// The copied guests of a generation.
const GUESTS: &str = "guests";

/// Why the snapshot cannot be kept or served.
#[derive(Debug, thiserror::Error)]
pub enum LastGoodError {
    /// A file of the snapshot cannot be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The manifest is not one this host wrote.
    #[error("{}: not a snapshot manifest: {source}", path.display())]
    Manifest {
        /// The manifest.
        path: PathBuf,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// The snapshot's configuration files no longer read as they did.
    #[error("the snapshot's configuration files are refused: {0}")]
    Config(#[from] wdp_config::ConfigError),
    /// The snapshot's files differ from what they were when kept.
    #[error("{}: {what} differs from what was served ({expected}); the snapshot is damaged or the directory changed while it was copied", path.display())]
    Differs {
        /// The file.
        path: PathBuf,
        /// What differs.
        what: &'static str,
        /// The digest served.
        expected: String,
    },
    /// A guest of the snapshot has no copy in it.
    #[error("{}: no copy of this guest in the snapshot", guest.display())]
    NoCopy {
        /// The guest's path in the configuration.
        guest: PathBuf,
    },
    /// A key trusted today cannot be read.
    #[error("trusted key {}, as the keys are now: {source}", path.display())]
    Key {
        /// The key file.
        path: PathBuf,
        /// Why.
        #[source]
        source: wdp_policy::signature::SignatureError,
    },
}

/// What a generation holds besides its files.
#[derive(Debug, Deserialize, Serialize)]
struct Manifest {
    /// The config directory it was read from.
    config_dir: PathBuf,
    /// The set (`None`: the default set).
    set: Option<String>,
    /// The set's digest, as `config_set_info` showed it.
    digest: String,
    /// Each guest, by the path the configuration named.
    guests: Vec<GuestCopy>,
}

/// One guest of a snapshot.
#[derive(Debug, Deserialize, Serialize)]
struct GuestCopy {
    /// The path the configuration named.
    original: PathBuf,
    /// Its copy, relative to the generation's folder.
    copy: PathBuf,
    /// Its SHA-256 (lower-case hex).
    sha256: String,
}

/// The snapshot's folder under `state_dir`.
pub fn snapshot_dir(state_dir: &Path) -> PathBuf {
    state_dir.join(SNAPSHOT_DIR)
}

/// Whether `state_dir` holds a complete snapshot.
pub fn exists(state_dir: &Path) -> bool {
    current(state_dir).is_some_and(|generation| generation.join(MANIFEST).is_file())
}

/// The complete generation's folder, when one is named.
fn current(state_dir: &Path) -> Option<PathBuf> {
    let root = snapshot_dir(state_dir);
    let name = std::fs::read_to_string(root.join(CURRENT)).ok()?;
    let name = name.trim();
    (!name.is_empty() && !name.contains('/') && !name.starts_with('.')).then(|| root.join(name))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> LastGoodError + '_ {
    move |source| LastGoodError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Keeps `config` as the last good configuration under `state_dir`;
/// `served` maps each guest path to the digest of the build served.
/// Answers whether a new generation was written (not when the current one
/// already holds this very configuration). Blocking.
pub fn save(
    state_dir: &Path,
    config: &ConfigSet,
    served: &BTreeMap<PathBuf, String>,
) -> Result<bool, LastGoodError> {
    let name = generation_name(config, served);
    let root = snapshot_dir(state_dir);
    if current(state_dir).is_some_and(|dir| dir == root.join(&name)) && exists(state_dir) {
        return Ok(false);
    }
    let staging = root.join(format!(".{name}.tmp"));
    let _ = std::fs::remove_dir_all(&staging);
    let files = staging.join(FILES);
    std::fs::create_dir_all(staging.join(GUESTS)).map_err(io(&staging))?;
    let host_file = config.dir.join(HOST_FILE);
    let mut copied: Vec<PathBuf> = Vec::new();
    if host_file.is_file() {
        copied.push(host_file);
    }
    for resource in config.resources.values() {
        copied.push(resource.file.clone());
        copied.extend(
            resource
                .trusted_keys
                .keys()
                .iter()
                .map(|k| k.file().to_owned()),
        );
    }
    for file in copied {
        // Keys named by absolute path are read where they are, always.
        if let Ok(relative) = file.strip_prefix(&config.dir) {
            copy_file(&file, &files.join(relative))?;
        }
    }
    let guests = copy_guests(config, served, &staging)?;
    let copy = load_set(&files, config.set.as_deref())?;
    if copy.digest != config.digest {
        return Err(LastGoodError::Differs {
            path: config.dir.clone(),
            what: "the configuration files",
            expected: config.digest.clone(),
        });
    }
    let manifest = Manifest {
        config_dir: config.dir.clone(),
        set: config.set.clone(),
        digest: config.digest.clone(),
        guests,
    };
    let manifest_path = staging.join(MANIFEST);
    let json = serde_json::to_vec_pretty(&manifest).map_err(|source| LastGoodError::Manifest {
        path: manifest_path.clone(),
        source,
    })?;
    atomic_file::replace(&manifest_path, &json, Durability::Synced).map_err(io(&manifest_path))?;
    let generation = root.join(&name);
    let _ = std::fs::remove_dir_all(&generation);
    std::fs::rename(&staging, &generation).map_err(io(&generation))?;
    let pointer = root.join(CURRENT);
    atomic_file::replace(&pointer, name.as_bytes(), Durability::Synced).map_err(io(&pointer))?;
    remove_others(&root, &name);
    Ok(true)
}

/// A generation's name: a digest of the set's digest and every guest
/// build (and signature) it serves.
fn generation_name(config: &ConfigSet, served: &BTreeMap<PathBuf, String>) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    config.dir.hash(&mut hasher);
    config.digest.hash(&mut hasher);
    for (guest, hash) in served {
        (guest, hash).hash(&mut hasher);
        std::fs::read(signature_path(guest)).ok().hash(&mut hasher);
    }
    format!("{:016x}", hasher.finish())
}

/// Copies every guest of `config` (and its `.sig`) into the staging
/// folder by digest, checking each copy is the build served.
fn copy_guests(
    config: &ConfigSet,
    served: &BTreeMap<PathBuf, String>,
    staging: &Path,
) -> Result<Vec<GuestCopy>, LastGoodError> {
    let mut guests: BTreeMap<PathBuf, GuestCopy> = BTreeMap::new();
    let bindings = config.resources.values().flat_map(|r| r.hooks.iter());
    for binding in bindings {
        if guests.contains_key(&binding.guest) {
            continue;
        }
        let staged = staging.join(GUESTS).join(".copying");
        copy_file(&binding.guest, &staged)?;
        let sha256 = wdp_policy::guest_file_hash(&staged).map_err(|e| LastGoodError::Io {
            path: binding.guest.clone(),
            source: std::io::Error::other(e.to_string()),
        })?;
        if let Some(expected) = served.get(&binding.guest)
            && *expected != sha256
        {
            return Err(LastGoodError::Differs {
                path: binding.guest.clone(),
                what: "the guest",
                expected: expected.clone(),
            });
        }
        let copy = Path::new(GUESTS).join(format!("{sha256}.wasm"));
        let target = staging.join(&copy);
        std::fs::rename(&staged, &target).map_err(io(&target))?;
        let signature = signature_path(&binding.guest);
        if signature.is_file() {
            copy_file(&signature, &signature_path(&target))?;
        }
        guests.insert(
            binding.guest.clone(),
            GuestCopy {
                original: binding.guest.clone(),
                copy,
                sha256,
            },
        );
    }
    Ok(guests.into_values().collect())
}

fn copy_file(from: &Path, to: &Path) -> Result<(), LastGoodError> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    std::fs::copy(from, to).map_err(io(from))?;
    Ok(())
}

/// Removes every generation but `keep` (and the pointer).
fn remove_others(root: &Path, keep: &str) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        if name != keep && name != CURRENT {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The snapshot under `state_dir`, read back to be served by a host whose
/// config directory is `config_dir` now (`None`: there is none): its
/// guests the pinned copies, its keys as trusted today. Blocking.
pub fn load(state_dir: &Path, config_dir: &Path) -> Result<Option<ConfigSet>, LastGoodError> {
    if !exists(state_dir) {
        return Ok(None);
    }
    let Some(generation) = current(state_dir) else {
        return Ok(None);
    };
    let manifest_path = generation.join(MANIFEST);
    let text = std::fs::read(&manifest_path).map_err(io(&manifest_path))?;
    let manifest: Manifest =
        serde_json::from_slice(&text).map_err(|source| LastGoodError::Manifest {
            path: manifest_path.clone(),
            source,
        })?;
    let files = generation.join(FILES);
    let mut config = load_set(&files, manifest.set.as_deref())?;
    if config.digest != manifest.digest {
        return Err(LastGoodError::Differs {
            path: files,
            what: "the configuration files",
            expected: manifest.digest,
        });
    }
    let copies: BTreeMap<&Path, &GuestCopy> = manifest
        .guests
        .iter()
        .map(|g| (g.original.as_path(), g))
        .collect();
    let today_host_keys = load_host_settings(config_dir)
        .map(|host| host.guest_signatures.trusted_keys)
        .unwrap_or_else(|_| config.host.guest_signatures.trusted_keys.clone());
    let host_keys = today_host_keys
        .iter()
        .map(|key| read_key(&config_dir.join(key)))
        .collect::<Result<Vec<_>, _>>()?;
    let snapshot_host_keys = config.host.guest_signatures.trusted_keys.len();
    for resource in config.resources.values_mut() {
        for binding in &mut resource.hooks {
            let original = relocate(&binding.guest, &files, &manifest.config_dir);
            let copy = copies
                .get(original.as_path())
                .ok_or_else(|| LastGoodError::NoCopy {
                    guest: original.clone(),
                })?;
            binding.guest = generation.join(&copy.copy);
            binding.sha256 = Some(copy.sha256.clone());
        }
        let mut keys = host_keys.clone();
        for key in resource.trusted_keys.keys().iter().skip(snapshot_host_keys) {
            keys.push(read_key(&relocate(key.file(), &files, config_dir))?);
        }
        resource.trusted_keys = TrustedKeys::new(keys);
    }
    config.dir = config_dir.to_owned();
    Ok(Some(config))
}

/// A path read from the snapshot's files, as the live directory `live`
/// names it (an absolute path outside the snapshot stays as it is).
fn relocate(path: &Path, files: &Path, live: &Path) -> PathBuf {
    match path.strip_prefix(files) {
        Ok(relative) => live.join(relative),
        Err(_) => path.to_owned(),
    }
}

fn read_key(path: &Path) -> Result<TrustedKey, LastGoodError> {
    TrustedKey::read(path).map_err(|source| LastGoodError::Key {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
#[path = "last_good_tests.rs"]
mod tests;
