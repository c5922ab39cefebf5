//! SR-IOV links of a PCI function: a PF's `virtfnN` links, and which N
//! names a given VF.

use std::collections::HashMap;
use std::path::Path;

use super::{FnDir, PciScan};

impl PciScan<'_> {
    /// The `virtfnN` links of a function: (N, VF address), by N.
    pub(super) fn virtfns(&mut self, dir: &FnDir) -> Vec<(u32, String)> {
        let names: Vec<(u32, String)> = dir
            .names
            .iter()
            .filter_map(|n| Some((n.strip_prefix("virtfn")?.parse().ok()?, n.clone())))
            .collect();
        let mut vfs = Vec::new();
        for (index, link) in names {
            if let Some(target) = self.link(dir, &link)
                && let Some(addr) = target.file_name().and_then(|n| n.to_str())
            {
                vfs.push((index, addr.to_string()));
            }
        }
        vfs.sort_unstable();
        vfs
    }

    /// N of the PF's `virtfnN` link naming `vf`, reading the PF's links once.
    pub(super) fn vf_index(&mut self, pf: &str, pf_dir: &Path, vf: &str) -> Option<u32> {
        if !self.vf_indexes.contains_key(pf) {
            let map: HashMap<String, u32> = match std::fs::read_dir(self.root.resolve(pf_dir)) {
                Ok(entries) => entries
                    .flatten()
                    .filter_map(|e| {
                        let name = e.file_name().into_string().ok()?;
                        let index = name.strip_prefix("virtfn")?.parse().ok()?;
                        let target = std::fs::read_link(e.path()).ok()?;
                        let addr = target.file_name()?.to_str()?.to_string();
                        Some((addr, index))
                    })
                    .collect(),
                Err(_) => HashMap::new(),
            };
            self.vf_indexes.insert(pf.to_string(), map);
        }
        self.vf_indexes.get(pf)?.get(vf).copied()
    }
}
