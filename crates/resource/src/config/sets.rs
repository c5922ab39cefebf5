//! Configuration sets: one config directory serving different nodes
//! differently. Beside the default set (the resource files at the top of
//! the directory, as without sets), `sets/<name>/` may hold named sets,
//! each a folder of resource files. A node runs the set its label names
//! (the host picks it; see `wdp-host`), else the default.
//!
//! What every set shares, at the top of the directory: `host.toml` (host
//! settings are the node's) and the guests, whose paths in any set's
//! resource files are relative to the top of the directory, so one guest
//! file serves every set naming it. A `host.toml` inside a set is refused.
//!
//! ConfigMap keys cannot hold `/`: a projected volume's `items[].path`
//! puts a key such as `inference.gpu.toml` at `sets/inference/gpu.toml`
//! (the operator guide shows the kustomize and Helm forms).
//!
//! A set's name is a node label's value (at most 63 characters of
//! `[A-Za-z0-9._-]`, beginning and ending with a letter or digit), and
//! not `default`, which names the default set.

use std::path::{Path, PathBuf};

use super::error::ConfigError;

/// The folder of named sets, under the config directory.
pub const SETS_DIR: &str = "sets";
/// The name of the set made of the resource files at the top of the
/// directory.
pub const DEFAULT_SET: &str = "default";

/// The folder of set `name` under `dir`.
pub fn set_dir(dir: &Path, name: &str) -> PathBuf {
    dir.join(SETS_DIR).join(name)
}

/// The named sets `dir` holds, sorted (none without a `sets/` folder).
/// Hidden entries (a ConfigMap volume's `..data` machinery) are skipped;
/// a folder whose name cannot be a label value is refused by name.
pub fn named_sets(dir: &Path) -> Result<Vec<String>, ConfigError> {
    let sets = dir.join(SETS_DIR);
    let entries = match std::fs::read_dir(&sets) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(ConfigError::Directory { dir: sets, source }),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| ConfigError::Directory {
            dir: sets.clone(),
            source,
        })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !entry.path().is_dir() {
            continue;
        }
        if let Some(problem) = set_name_problem(&name) {
            return Err(ConfigError::SetName {
                dir: sets,
                set: name,
                problem,
            });
        }
        names.push(name);
    }
    names.sort();
    Ok(names)
}

/// Why `name` cannot name a set, if it cannot: it must be a non-empty
/// label value (`wdp_k8s_naming`'s rule), and not `default`.
pub fn set_name_problem(name: &str) -> Option<String> {
    if name == DEFAULT_SET {
        return Some(format!("`{DEFAULT_SET}` names the top-level set"));
    }
    if name.is_empty() {
        return Some("empty; a set's name is a node label's value".to_owned());
    }
    wdp_k8s_naming::label_value_problem(name)
        .map(|problem| format!("not a node label's value: {problem}"))
}

/// The sets `dir` holds, for messages: `default` first, then the named.
pub fn describe_available(dir: &Path) -> String {
    let mut all = vec![DEFAULT_SET.to_owned()];
    all.extend(named_sets(dir).unwrap_or_default());
    all.join(", ")
}
