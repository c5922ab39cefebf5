//! The hardware side of one pipeline run ([`crate::pipeline::run`]): the
//! scan of every selector, and the host paths the resource's hardware
//! watch covers. No guest runs here.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use wdp_hardware::{Candidate, HostRoot, ListingCache, Selector};

use crate::error::ResourceError;
use crate::pipeline::Mode;
use crate::spec::ResourceSpec;

/// The hardware scan: the candidates of every selector (each once, in
/// selector order), with each one's replica count beside it. A selector
/// that cannot be read refuses a strict run and is a warning otherwise.
pub(crate) fn scan(
    spec: &ResourceSpec,
    root: &HostRoot,
    listings: Option<&ListingCache>,
    mode: Mode,
    warnings: &mut Vec<String>,
) -> Result<(Vec<Candidate>, Vec<u32>), ResourceError> {
    let mut scanned: Vec<Candidate> = Vec::new();
    let mut replicas: Vec<u32> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for (i, selector) in spec.config.selectors.iter().enumerate() {
        let one = std::slice::from_ref(selector);
        let found = match listings {
            Some(listings) => wdp_hardware::discover_cached(root, one, listings),
            None => wdp_hardware::discover(root, one),
        };
        match found {
            Ok(scan) => {
                warnings.extend(scan.warnings);
                let count = spec.config.replicas.get(&i).copied().unwrap_or(1);
                for c in scan.candidates {
                    if seen.insert(c.id.clone()) {
                        scanned.push(c);
                        replicas.push(count);
                    }
                }
            }
            Err(source) if mode == Mode::Strict => {
                return Err(ResourceError::Hardware {
                    file: spec.config.file.clone(),
                    source,
                });
            }
            Err(error) => warnings.push(format!("{}: {error}", describe(selector))),
        }
    }
    // Held until the next scan: no room left over from growing.
    scanned.shrink_to_fit();
    Ok((scanned, replicas))
}

/// The host paths to watch: the selectors' and companions', and gone
/// hardware's, so its return is an event too.
pub(crate) fn watch_paths(
    spec: &ResourceSpec,
    root: &HostRoot,
    present: &[Candidate],
    gone: &BTreeMap<String, Candidate>,
) -> Vec<PathBuf> {
    let mut selectors: Vec<Selector> = spec.config.selectors.clone();
    selectors.extend(spec.config.companions.iter().cloned().map(Selector::Nodes));
    let mut paths = wdp_hardware::watch_paths(root, &selectors, present);
    if !gone.is_empty() {
        let gone: Vec<Candidate> = gone.values().cloned().collect();
        paths.extend(wdp_hardware::watch_paths(root, &[], &gone));
        paths.sort();
        paths.dedup();
    }
    paths
}

fn describe(selector: &Selector) -> String {
    match selector {
        Selector::Nodes(n) => format!("nodes {}", n.path),
        Selector::Pci(_) => "pci selector".to_owned(),
        Selector::Usb(_) => "usb selector".to_owned(),
    }
}
