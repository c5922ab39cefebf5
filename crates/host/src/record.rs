//! `record`: what a configuration's selectors see on this machine (sysfs,
//! device nodes, NUMA), companions included, copied into a snapshot usable
//! as `--host-root`.

use std::path::Path;

use wdp_hardware::{HostRoot, NodeSelector, RecordSummary, Selector};

use crate::error::HostError;

/// What `record` copied for one resource.
#[derive(Clone, Debug)]
pub struct RecordedResource {
    /// The resource name.
    pub name: String,
    /// The candidates its selectors found (companions not counted).
    pub candidates: usize,
    /// What the snapshot received.
    pub summary: RecordSummary,
}

/// Records every resource of `config_dir` as `host_root` shows it into
/// `output`.
pub fn record(
    config_dir: &Path,
    host_root: &Path,
    output: &Path,
) -> Result<Vec<RecordedResource>, HostError> {
    let config = wdp_config::load_dir(config_dir)?;
    let root = HostRoot::new(host_root);
    let mut recorded = Vec::new();
    for (name, resource) in &config.resources {
        let failed = |what: String| move |source| HostError::Record { what, source };
        let file = resource.file.display();
        let scan = wdp_hardware::discover(&root, &resource.selectors)
            .map_err(failed(format!("{file}: scanning for {name}")))?;
        // Companion nodes too, so the snapshot reproduces the node.
        let companions: Vec<Selector> =
            wdp_resource::wanted_companions(&resource.companions, &scan.candidates)
                .into_iter()
                .map(|c| {
                    Selector::Nodes(NodeSelector {
                        optional: true,
                        ..c
                    })
                })
                .collect();
        let companions = wdp_hardware::discover(&root, &companions)
            .map_err(failed(format!("{file}: scanning companions of {name}")))?;
        let mut candidates = scan.candidates.clone();
        candidates.extend(companions.candidates);
        let summary = wdp_hardware::record(&root, &candidates, output).map_err(failed(format!(
            "recording {name} into {}",
            output.display()
        )))?;
        recorded.push(RecordedResource {
            name: name.clone(),
            candidates: scan.candidates.len(),
            summary,
        });
    }
    Ok(recorded)
}
