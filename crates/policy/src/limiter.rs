//! The resource limiter of a call's store: caps the memories and tables of
//! one instance and remembers when a cap was hit.

use wasmtime::ResourceLimiter;

/// Most table elements a guest may have.
const MAX_TABLE_ELEMENTS: usize = 100_000;
/// Most core instances, tables and memories in one store.
const MAX_INSTANCES: usize = 64;
const MAX_TABLES: usize = 64;
const MAX_MEMORIES: usize = 16;

/// Caps memories and tables of one store and remembers when a cap was hit
/// (a failed `memory.grow` usually ends in a trap; the flag tells the two
/// apart).
pub(crate) struct CallLimiter {
    memory_bytes: usize,
    pub(crate) exceeded: Option<String>,
    /// Bytes of linear memory the instance holds (all its memories).
    pub(crate) held_bytes: usize,
}

impl CallLimiter {
    pub(crate) fn new(memory_bytes: u64) -> Self {
        Self {
            memory_bytes: usize::try_from(memory_bytes).unwrap_or(usize::MAX),
            exceeded: None,
            held_bytes: 0,
        }
    }

    /// Readies the limiter of a warm instance for its next call: the
    /// call's memory cap, and a clean limit flag.
    pub(crate) fn rearm(&mut self, memory_bytes: u64) {
        self.memory_bytes = usize::try_from(memory_bytes).unwrap_or(usize::MAX);
        self.exceeded = None;
    }

    /// Whether the instance's memory fits a cap of `memory_bytes`.
    pub(crate) fn fits(&self, memory_bytes: u64) -> bool {
        u64::try_from(self.held_bytes).is_ok_and(|held| held <= memory_bytes)
    }
}

impl ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes || maximum.is_some_and(|max| desired > max) {
            self.exceeded = Some(format!(
                "memory growth from {current} to {desired} bytes refused"
            ));
            return Ok(false);
        }
        self.held_bytes = self
            .held_bytes
            .saturating_add(desired.saturating_sub(current));
        Ok(true)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.exceeded = Some(format!("memory growth failed: {error:#}"));
        Ok(())
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > MAX_TABLE_ELEMENTS || maximum.is_some_and(|max| desired > max) {
            self.exceeded = Some(format!(
                "table growth from {current} to {desired} elements refused"
            ));
            return Ok(false);
        }
        Ok(true)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.exceeded = Some(format!("table growth failed: {error:#}"));
        Ok(())
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}
