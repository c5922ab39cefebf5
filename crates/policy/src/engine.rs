//! The engine: one wasmtime `Engine`, its epoch ticker, the shared linker
//! and the compile cache.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::error::{LoadError, PolicyError};
use crate::guest::{Guest, Prepared};
use crate::host::{self, CallState};
use crate::{CallLimits, CallObserver};

/// How many compiled guests the in-memory cache keeps (by content hash).
const COMPILED_CACHE_ENTRIES: usize = 64;

/// Settings of a [`PolicyEngine`].
#[derive(Clone)]
pub struct EngineSettings {
    /// How often the epoch advances; the granularity of call deadlines.
    /// Default 5 ms.
    pub epoch_tick: Duration,
    /// The largest memory a guest may ever have (bytes); per-call caps
    /// ([`CallLimits::memory_bytes`]) are clamped to it. It sizes the pooling
    /// allocator's memory slots. Default 256 MiB.
    pub max_memory_bytes: u64,
    /// When set, compiled guests are also cached on disk in this directory
    /// (wasmtime's cache, keyed by the engine's compilation settings and the
    /// guest's bytes), so a restart does not recompile. Default `None`.
    pub precompiled_cache_dir: Option<PathBuf>,
    /// How many guest instances may be alive at once across all calls (the
    /// pooling allocator's size). A call beyond it fails with
    /// [`crate::CallErrorKind::Instantiate`]. Default 1000.
    pub max_instances: u32,
    /// Use the pooling instance allocator (falls back to on-demand
    /// allocation, with a warning, when the virtual memory cannot be
    /// reserved). Default `true`.
    pub pooling: bool,
    /// Limits of the instance made at load time to type-check a guest's
    /// exports. Default: [`CallLimits::default`].
    pub load_limits: CallLimits,
    /// Told about every finished call (metrics). Default `None`.
    pub observer: Option<Arc<dyn CallObserver>>,
}

impl Default for EngineSettings {
    fn default() -> Self {
        Self {
            epoch_tick: Duration::from_millis(5),
            max_memory_bytes: 256 * 1024 * 1024,
            precompiled_cache_dir: None,
            max_instances: 1000,
            pooling: true,
            load_limits: CallLimits::default(),
            observer: None,
        }
    }
}

impl fmt::Debug for EngineSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EngineSettings")
            .field("epoch_tick", &self.epoch_tick)
            .field("max_memory_bytes", &self.max_memory_bytes)
            .field("precompiled_cache_dir", &self.precompiled_cache_dir)
            .field("max_instances", &self.max_instances)
            .field("pooling", &self.pooling)
            .field("load_limits", &self.load_limits)
            .field("observer", &self.observer.as_ref().map(|_| ".."))
            .finish()
    }
}

/// State shared by the engine and every guest loaded from it. The epoch
/// ticker stops when the last of them is dropped.
pub(crate) struct Shared {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<CallState>,
    pub(crate) epoch_tick: Duration,
    pub(crate) max_memory_bytes: u64,
    pub(crate) load_limits: CallLimits,
    pub(crate) observer: Option<Arc<dyn CallObserver>>,
    pub(crate) pooling: bool,
    _ticker: Ticker,
}

impl Shared {
    /// Deadline in epoch ticks for a timeout: rounded up, plus one tick
    /// because the next tick may come right after the deadline is set.
    pub(crate) fn deadline_ticks(&self, timeout: Duration) -> u64 {
        let tick = self.epoch_tick.as_nanos().max(1);
        let ticks = timeout.as_nanos().div_ceil(tick);
        u64::try_from(ticks)
            .unwrap_or(u64::MAX / 2)
            .saturating_add(1)
    }
}

/// Advances the engine's epoch every tick until dropped.
struct Ticker {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Ticker {
    fn start(engine: Engine, tick: Duration) -> Result<Self, PolicyError> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("wdp-policy-epoch".into())
            .spawn(move || {
                // Ends when the sender is dropped (or sends).
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(tick) {
                    engine.increment_epoch();
                }
            })
            .map_err(PolicyError::Ticker)?;
        Ok(Self {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take()
            && thread.thread().id() != std::thread::current().id()
        {
            let _ = thread.join();
        }
    }
}

/// The sandboxed runtime for policy guests: one wasmtime engine (component
/// model, epoch interruption, pooling allocator), an epoch ticker thread, a
/// linker with the host imports and an empty WASI context, and a cache of
/// compiled guests keyed by the SHA-256 of their bytes.
///
/// Cheap to share behind an `Arc`; every method takes `&self`.
pub struct PolicyEngine {
    shared: Arc<Shared>,
    cache: Mutex<CompiledCache>,
}

impl fmt::Debug for PolicyEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyEngine")
            .field("epoch_tick", &self.shared.epoch_tick)
            .field("max_memory_bytes", &self.shared.max_memory_bytes)
            .field("pooling", &self.shared.pooling)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct CompiledCache {
    entries: HashMap<String, Arc<Prepared>>,
    order: VecDeque<String>,
}

impl CompiledCache {
    fn get(&self, hash: &str) -> Option<Arc<Prepared>> {
        self.entries.get(hash).cloned()
    }

    fn insert(&mut self, hash: String, prepared: Arc<Prepared>) {
        if self.entries.insert(hash.clone(), prepared).is_none() {
            self.order.push_back(hash);
        }
        while self.order.len() > COMPILED_CACHE_ENTRIES {
            if let Some(old) = self.order.pop_front() {
                self.entries.remove(&old);
            }
        }
    }
}

fn engine_config(settings: &EngineSettings, pooling: bool) -> Result<Config, PolicyError> {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .concurrency_support(false);
    if pooling {
        let instances = settings.max_instances.max(1);
        let max_memory = usize::try_from(settings.max_memory_bytes).unwrap_or(usize::MAX);
        let mut pool = PoolingAllocationConfig::new();
        pool.total_component_instances(instances)
            // A Rust wasip2 component has a handful of core instances, one
            // or two memories and tables.
            .total_core_instances(instances.saturating_mul(8))
            .total_memories(instances.saturating_mul(2))
            .total_tables(instances.saturating_mul(4))
            .max_memories_per_component(4)
            .max_tables_per_component(16)
            .max_core_instances_per_component(32)
            .max_memory_size(max_memory);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    } else {
        config.allocation_strategy(InstanceAllocationStrategy::OnDemand);
    }
    if let Some(dir) = &settings.precompiled_cache_dir {
        std::fs::create_dir_all(dir).map_err(|e| PolicyError::Cache {
            dir: dir.clone(),
            detail: e.to_string(),
        })?;
        let mut cache_config = wasmtime::CacheConfig::new();
        cache_config.with_directory(dir);
        let cache = wasmtime::Cache::new(cache_config).map_err(|e| PolicyError::Cache {
            dir: dir.clone(),
            detail: format!("{e:#}"),
        })?;
        config.cache(Some(cache));
    }
    Ok(config)
}

impl PolicyEngine {
    /// Creates the engine and starts its epoch ticker.
    pub fn new(settings: EngineSettings) -> Result<Self, PolicyError> {
        let mut pooling = settings.pooling;
        let engine = if pooling {
            match Engine::new(&engine_config(&settings, true)?) {
                Ok(engine) => engine,
                Err(error) => {
                    tracing::warn!(
                        error = %format!("{error:#}"),
                        "pooling instance allocator unavailable (cannot reserve virtual memory?); \
                         falling back to on-demand allocation"
                    );
                    pooling = false;
                    Engine::new(&engine_config(&settings, false)?)
                        .map_err(|e| PolicyError::Engine(format!("{e:#}")))?
                }
            }
        } else {
            Engine::new(&engine_config(&settings, false)?)
                .map_err(|e| PolicyError::Engine(format!("{e:#}")))?
        };
        let linker =
            host::linker(&engine).map_err(|e| PolicyError::Engine(format!("linker: {e:#}")))?;
        let ticker = Ticker::start(
            engine.clone(),
            settings.epoch_tick.max(Duration::from_micros(100)),
        )?;
        let max_memory_bytes = settings.max_memory_bytes;
        let load_limits = CallLimits {
            timeout: settings.load_limits.timeout,
            memory_bytes: settings.load_limits.memory_bytes.min(max_memory_bytes),
        };
        Ok(Self {
            shared: Arc::new(Shared {
                engine,
                linker,
                epoch_tick: settings.epoch_tick,
                max_memory_bytes,
                load_limits,
                observer: settings.observer,
                pooling,
                _ticker: ticker,
            }),
            cache: Mutex::new(CompiledCache::default()),
        })
    }

    /// Whether the pooling allocator is in use (false after a fallback).
    pub fn uses_pooling(&self) -> bool {
        self.shared.pooling
    }

    /// Loads a guest from a file; the guest's name is the file name.
    pub fn load_file(&self, path: &Path) -> Result<Arc<Guest>, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        self.load_bytes(&name, &bytes)
    }

    /// Loads a guest from its bytes: compiles it (once per content hash),
    /// checks its exports (known hooks of a compatible WIT version) and
    /// imports (all provided by the host), pre-links it, and type-checks
    /// every exported hook in a throwaway instance.
    pub fn load_bytes(&self, name: &str, bytes: &[u8]) -> Result<Arc<Guest>, LoadError> {
        let hash = content_hash(bytes);
        let cached = self
            .cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&hash);
        let prepared = match cached {
            Some(prepared) => prepared,
            None => {
                let prepared = Arc::new(Prepared::new(&self.shared, name, &hash, bytes)?);
                self.cache
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(hash, Arc::clone(&prepared));
                prepared
            }
        };
        Ok(Arc::new(Guest::new(
            name.to_string(),
            prepared,
            Arc::clone(&self.shared),
        )))
    }

    /// Compiles `bytes` without keeping or checking anything: how long
    /// compilation takes (benchmarks) or whether it succeeds.
    pub fn compile_only(&self, bytes: &[u8]) -> Result<(), LoadError> {
        Component::new(&self.shared.engine, bytes)
            .map(|_| ())
            .map_err(|e| LoadError::Compile {
                guest: "<bytes>".into(),
                detail: format!("{e:#}"),
            })
    }
}

/// Lower-case hex SHA-256 of `bytes`.
pub(crate) fn content_hash(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
        hex.push(char::from_digit(u32::from(byte & 0xf), 16).unwrap_or('0'));
    }
    hex
}
