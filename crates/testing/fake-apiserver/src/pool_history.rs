//! The device sets each node's pool showed, change by change: what a
//! scheduler watching the ResourceSlices could have seen. After every
//! accepted write the devices of every (node, driver) pool are gathered
//! from all of its slices; a set that differs from the pool's last one is
//! appended. A handover that replaces a pool's list once shows one change;
//! an instance writing its list back shows as two more.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::ResourceSlice;

/// One pool's key: node name and driver.
type PoolKey = (String, String);

/// Per pool, each distinct device set in the order the pool showed them.
#[derive(Debug, Default)]
pub(crate) struct PoolHistory {
    pools: BTreeMap<PoolKey, Vec<Vec<String>>>,
}

impl PoolHistory {
    /// Notes the pools as `slices` (every slice stored) show them now.
    pub(crate) fn observe(&mut self, slices: &[ResourceSlice]) {
        let mut now: BTreeMap<PoolKey, BTreeSet<String>> = BTreeMap::new();
        for slice in slices {
            let Some(node) = &slice.spec.node_name else {
                continue;
            };
            now.entry((node.clone(), slice.spec.driver.clone()))
                .or_default()
                .extend(slice.spec.devices.iter().flatten().map(|d| d.name.clone()));
        }
        // Pools whose slices are all gone show an empty set.
        for key in self.pools.keys() {
            now.entry(key.clone()).or_default();
        }
        for (key, devices) in now {
            let devices: Vec<String> = devices.into_iter().collect();
            let history = self.pools.entry(key).or_default();
            let unchanged = match history.last() {
                Some(last) => *last == devices,
                None => devices.is_empty(),
            };
            if !unchanged {
                history.push(devices);
            }
        }
    }

    /// The device sets the pool of `node` and `driver` showed, in order.
    pub(crate) fn of(&self, node: &str, driver: &str) -> Vec<Vec<String>> {
        self.pools
            .get(&(node.to_owned(), driver.to_owned()))
            .cloned()
            .unwrap_or_default()
    }
}
