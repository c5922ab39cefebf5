//! The cache of compiled guests by content hash ([`CompiledCache`]): every
//! build alive anywhere is found again without recompiling, and builds no
//! loaded guest uses are kept only up to a byte budget ([`CacheStats`]).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Weak};

use crate::prepared::Prepared;

/// What the compiled-guest cache holds; see
/// [`PolicyEngine::cache_stats`](crate::PolicyEngine::cache_stats).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Compiled guests alive (in use, kept, or both).
    pub live_entries: usize,
    /// Compiled guests only the cache keeps alive (no loaded guest uses them).
    pub unused_entries: usize,
    /// Bytes of compiled code of those unused guests.
    pub unused_bytes: u64,
}

/// Compiled guests by content hash.
///
/// Every compiled guest that is alive anywhere is found through a weak
/// reference, so a guest in use is never compiled twice. Besides, the
/// cache keeps recently loaded builds alive itself (newest last), but
/// those that nothing else uses only up to a byte budget: memory stays
/// bounded whatever the number of distinct builds loaded over time.
pub(crate) struct CompiledCache {
    live: HashMap<String, Weak<Prepared>>,
    kept: VecDeque<Arc<Prepared>>,
    unused_budget: u64,
}

impl CompiledCache {
    pub(crate) fn new(unused_budget: u64) -> Self {
        Self {
            live: HashMap::new(),
            kept: VecDeque::new(),
            unused_budget,
        }
    }

    pub(crate) fn get(&mut self, hash: &str) -> Option<Arc<Prepared>> {
        let prepared = self.live.get(hash)?.upgrade()?;
        // Most recently used goes last.
        self.kept.retain(|p| !Arc::ptr_eq(p, &prepared));
        self.kept.push_back(Arc::clone(&prepared));
        self.evict();
        Some(prepared)
    }

    pub(crate) fn insert(&mut self, prepared: Arc<Prepared>) {
        self.live
            .insert(prepared.hash().to_owned(), Arc::downgrade(&prepared));
        self.kept.push_back(prepared);
        self.evict();
    }

    /// Whether only the cache holds `prepared`.
    fn unused(prepared: &Arc<Prepared>) -> bool {
        Arc::strong_count(prepared) == 1
    }

    /// Drops the oldest unused builds until the unused ones fit the budget,
    /// and forgets hashes whose compiled guest is gone.
    fn evict(&mut self) {
        let mut unused_bytes: u64 = self
            .kept
            .iter()
            .filter(|p| Self::unused(p))
            .map(|p| p.compiled_bytes())
            .sum();
        let mut i = 0;
        while unused_bytes > self.unused_budget && i < self.kept.len() {
            if Self::unused(&self.kept[i]) {
                if let Some(gone) = self.kept.remove(i) {
                    unused_bytes = unused_bytes.saturating_sub(gone.compiled_bytes());
                }
            } else {
                i += 1;
            }
        }
        self.live.retain(|_, weak| weak.strong_count() > 0);
    }

    pub(crate) fn retain(&mut self, keep: &mut dyn FnMut(&str) -> bool) {
        self.kept.retain(|p| keep(p.hash()));
        self.evict();
    }

    pub(crate) fn stats(&mut self) -> CacheStats {
        self.evict();
        let unused: Vec<&Arc<Prepared>> = self.kept.iter().filter(|p| Self::unused(p)).collect();
        CacheStats {
            live_entries: self
                .live
                .values()
                .filter(|weak| weak.strong_count() > 0)
                .count(),
            unused_entries: unused.len(),
            unused_bytes: unused.iter().map(|p| p.compiled_bytes()).sum(),
        }
    }
}
