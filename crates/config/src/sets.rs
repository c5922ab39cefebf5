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
//!
//! One set's mistake stays with it: [`scan_sets`] sets a folder whose name
//! cannot name a set aside (refused by name) beside the sets that can, so
//! the default set and every other set still load ([`load_set`] refuses
//! only the set asked for); [`named_sets`], for `check`, refuses the
//! whole directory instead.
//!
//! [`load_set`]: super::load_set

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

/// The set folders of a directory: those that name a set, and those
/// whose name cannot (each refused on its own, see [`scan_sets`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetFolders {
    /// The `sets/` folder.
    pub sets_dir: PathBuf,
    /// The named sets, sorted.
    pub sets: Vec<String>,
    /// The folders whose name cannot name a set, sorted, each with why.
    pub refused: Vec<(String, String)>,
}

impl SetFolders {
    /// Whether the directory holds any set folder, refused ones included.
    pub fn any(&self) -> bool {
        !self.sets.is_empty() || !self.refused.is_empty()
    }

    /// The error refusing folder `name`, when its name cannot name a set.
    pub fn refusal(&self, name: &str) -> Option<ConfigError> {
        self.refused
            .iter()
            .find(|(folder, _)| folder == name)
            .map(|(folder, problem)| ConfigError::SetName {
                dir: self.sets_dir.clone(),
                set: folder.clone(),
                problem: problem.clone(),
            })
    }

    /// Every refused folder's error, in name order.
    pub fn refusals(&self) -> impl Iterator<Item = ConfigError> + '_ {
        self.refused
            .iter()
            .filter_map(|(folder, _)| self.refusal(folder))
    }
}

/// The set folders `dir` holds (none without a `sets/` folder). Hidden
/// entries (a ConfigMap volume's `..data` machinery) are skipped; a folder
/// whose name cannot be a label value, or is `default`, is set aside in
/// [`SetFolders::refused`], the other sets unaffected. Only an unreadable
/// `sets/` folder is an error.
pub fn scan_sets(dir: &Path) -> Result<SetFolders, ConfigError> {
    let sets = dir.join(SETS_DIR);
    let entries = match std::fs::read_dir(&sets) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok(SetFolders {
                sets_dir: sets,
                ..SetFolders::default()
            });
        }
        Err(source) => return Err(ConfigError::Directory { dir: sets, source }),
    };
    let mut found = SetFolders {
        sets_dir: sets.clone(),
        ..SetFolders::default()
    };
    for entry in entries {
        let entry = entry.map_err(|source| ConfigError::Directory {
            dir: sets.clone(),
            source,
        })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !entry.path().is_dir() {
            continue;
        }
        match set_name_problem(&name) {
            Some(problem) => found.refused.push((name, problem)),
            None => found.sets.push(name),
        }
    }
    found.sets.sort();
    found.refused.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(found)
}

/// The named sets `dir` holds, sorted (none without a `sets/` folder), for
/// `check`: a folder whose name cannot name a set refuses the directory,
/// naming it. A host serving the directory uses [`scan_sets`] instead.
pub fn named_sets(dir: &Path) -> Result<Vec<String>, ConfigError> {
    let found = scan_sets(dir)?;
    let refusal = found.refusals().next();
    match refusal {
        Some(error) => Err(error),
        None => Ok(found.sets),
    }
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
    all.extend(scan_sets(dir).map(|found| found.sets).unwrap_or_default());
    all.join(", ")
}
