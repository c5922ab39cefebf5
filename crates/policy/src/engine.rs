//! The engine: [`PolicyEngine`] creates one wasmtime `Engine` (with its
//! epoch ticker, the shared linker and the precompiled-guest directory)
//! from [`EngineSettings`] when the first guest is loaded, and loads guests
//! through the cache of compiled builds ([`crate::compiled_cache`]). A host
//! whose configuration names no guest never creates it: no address-space
//! reservation, no ticker thread, nothing to tear down at exit.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::compiled_cache::{CacheStats, CompiledCache};
use crate::context::CallLimits;
use crate::error::{LoadError, PolicyError};
use crate::guest::Guest;
use crate::linker;
use crate::observer::CallObserver;
use crate::precompiled::PrecompiledDir;
use crate::prepared::Prepared;
use crate::shared::Shared;
use crate::signature::{self, TrustedKey, TrustedKeys};
use crate::ticker::Ticker;
use wdp_regular_file::{RegularFileError, read_regular_file};

/// The largest guest file [`PolicyEngine::load_file`] reads: 64 MiB, room
/// for the biggest toolchain output (a componentize-py guest, which embeds
/// a Python interpreter, is about 18 MiB).
pub const MAX_GUEST_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Default of [`EngineSettings::unused_cache_bytes`]: 4 MiB, about a dozen
/// compiled Rust guests.
pub const DEFAULT_UNUSED_CACHE_BYTES: u64 = 4 * 1024 * 1024;

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
    /// When set, compiled guests are also kept on disk in this directory
    /// (one file per guest content hash and engine configuration, see
    /// [`PolicyEngine::precompiled_path`]) and mapped from there on later
    /// loads: a restart, or a host whose directory `check` filled, never
    /// compiles those guests and holds their code in file-backed pages.
    /// It is created if missing and made private (0700); one this
    /// process's user does not own is not used (a warning says why).
    /// Default `None`.
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
    /// How many bytes of compiled code the engine keeps for guests that
    /// no loaded [`Guest`] uses any more, so that loading a recent build
    /// again does not recompile it. Compiled guests still in use are
    /// always found without recompiling, whatever this says; the least
    /// recently loaded unused builds go first. Default
    /// [`DEFAULT_UNUSED_CACHE_BYTES`]; 0 keeps none.
    pub unused_cache_bytes: u64,
    /// Keep instances warm between calls of one guest and one device-set
    /// generation ([`crate::CallContext::generation`]) instead of
    /// instantiating afresh for every call. A warm instance is thrown away
    /// after any trap, timeout or memory-cap hit, when the generation
    /// changes, when it grew its memory by more than 4 MiB since its first
    /// call, and after 10,000 calls; at most two are kept per loaded
    /// [`Guest`]. Default `true`.
    pub warm_instances: bool,
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
            unused_cache_bytes: DEFAULT_UNUSED_CACHE_BYTES,
            warm_instances: true,
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
            .field("unused_cache_bytes", &self.unused_cache_bytes)
            .field("warm_instances", &self.warm_instances)
            .finish()
    }
}

/// The sandboxed runtime for policy guests: one wasmtime engine (component
/// model, epoch interruption, pooling allocator), an epoch ticker thread
/// (ticking only while a guest runs), a
/// linker with the host imports and an empty WASI context, and a cache of
/// compiled guests keyed by the SHA-256 of their bytes.
///
/// The wasmtime pieces are made on the first load
/// ([`PolicyEngine::load_bytes`] and the loads built on it), not by
/// [`PolicyEngine::new`]: creating them reserves the pooling allocator's
/// address space and starts the ticker thread, which a configuration
/// without guests never needs.
///
/// Cheap to share behind an `Arc`; every method takes `&self`.
pub struct PolicyEngine {
    settings: EngineSettings,
    /// The wasmtime engine and what guests share, once a guest was loaded.
    shared: Mutex<Option<Arc<Shared>>>,
    cache: Mutex<CompiledCache>,
}

impl fmt::Debug for PolicyEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyEngine")
            .field("epoch_tick", &self.settings.epoch_tick)
            .field("max_memory_bytes", &self.settings.max_memory_bytes)
            .field("created", &self.created().is_some())
            .finish_non_exhaustive()
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
    Ok(config)
}

/// Creates the wasmtime engine (falling back from the pooling allocator
/// when its address space cannot be reserved), the linker, the
/// precompiled-guest directory and the epoch ticker.
fn create_shared(settings: &EngineSettings) -> Result<Shared, PolicyError> {
    let mut pooling = settings.pooling;
    let engine = if pooling {
        match Engine::new(&engine_config(settings, true)?) {
            Ok(engine) => engine,
            Err(error) => {
                tracing::warn!(
                    error = %format!("{error:#}"),
                    "pooling instance allocator unavailable (cannot reserve virtual memory?); \
                     falling back to on-demand allocation"
                );
                pooling = false;
                Engine::new(&engine_config(settings, false)?)
                    .map_err(|e| PolicyError::Engine(format!("{e:#}")))?
            }
        }
    } else {
        Engine::new(&engine_config(settings, false)?)
            .map_err(|e| PolicyError::Engine(format!("{e:#}")))?
    };
    // An unusable directory costs speed and memory, not correctness:
    // guests are then compiled in this process, as without one.
    let precompiled = settings.precompiled_cache_dir.as_ref().and_then(|dir| {
        PrecompiledDir::new(dir.clone(), &engine)
            .inspect_err(|error| {
                tracing::warn!(dir = %dir.display(), %error, "not using the precompiled-guest directory; guests are compiled in this process");
            })
            .ok()
    });
    let linker =
        linker::linker(&engine).map_err(|e| PolicyError::Engine(format!("linker: {e:#}")))?;
    let ticker = Ticker::start(
        engine.clone(),
        settings.epoch_tick.max(Duration::from_micros(100)),
    )?;
    let max_memory_bytes = settings.max_memory_bytes;
    let load_limits = CallLimits {
        timeout: settings.load_limits.timeout,
        memory_bytes: settings.load_limits.memory_bytes.min(max_memory_bytes),
    };
    Ok(Shared {
        engine,
        linker,
        epoch_tick: settings.epoch_tick,
        max_memory_bytes,
        load_limits,
        observer: settings.observer.clone(),
        pooling,
        warm_instances: settings.warm_instances,
        precompiled,
        ticker,
    })
}

impl PolicyEngine {
    /// An engine with these settings. Its configuration is checked here;
    /// the wasmtime engine itself is created by the first load.
    pub fn new(settings: EngineSettings) -> Result<Self, PolicyError> {
        engine_config(&settings, settings.pooling)?;
        Ok(Self {
            cache: Mutex::new(CompiledCache::new(settings.unused_cache_bytes)),
            settings,
            shared: Mutex::new(None),
        })
    }

    /// The wasmtime engine and what guests share, created on first use.
    fn shared(&self) -> Result<Arc<Shared>, PolicyError> {
        let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(created) = shared.as_ref() {
            return Ok(Arc::clone(created));
        }
        let created = Arc::new(create_shared(&self.settings)?);
        *shared = Some(Arc::clone(&created));
        Ok(created)
    }

    /// The wasmtime engine's shared state if a load created it already.
    fn created(&self) -> Option<Arc<Shared>> {
        self.shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Where the compiled build of a guest with `bytes` is kept on disk
    /// ([`EngineSettings::precompiled_cache_dir`]); `None` without one.
    /// Creates the wasmtime engine if no load did yet (the directory's
    /// name depends on it); `None` too when it cannot be created.
    pub fn precompiled_path(&self, bytes: &[u8]) -> Option<PathBuf> {
        let shared = self.shared().ok()?;
        let dir = shared.precompiled.as_ref()?;
        Some(dir.path(&content_hash(bytes)))
    }

    /// Whether the pooling allocator is in use (false after a fallback).
    /// Creates the wasmtime engine if no load did yet; `false` when it
    /// cannot be created.
    pub fn uses_pooling(&self) -> bool {
        self.shared().is_ok_and(|shared| shared.pooling)
    }

    /// Whether the wasmtime engine exists, i.e. a guest was loaded (or
    /// [`Self::precompiled_path`] or [`Self::uses_pooling`] asked for it).
    pub fn is_created(&self) -> bool {
        self.created().is_some()
    }

    /// Loads a guest from a file; the guest's name is the file name.
    ///
    /// Only a regular file (symlinks followed) of at most
    /// [`MAX_GUEST_FILE_BYTES`] is read, and it is opened without
    /// blocking: `/dev/zero`, a FIFO or a directory is refused by name
    /// ([`LoadError::NotAFile`], [`LoadError::TooLarge`]) instead of being
    /// read without end or hanging the caller.
    pub fn load_file(&self, path: &Path) -> Result<Arc<Guest>, LoadError> {
        let bytes = read_guest_file(path)?;
        self.load_bytes(&guest_name(path), &bytes)
    }

    /// [`Self::load_file`] for a guest pinned by digest: the bytes read are
    /// hashed first, and unless their SHA-256 is `sha256` (lower-case hex,
    /// as [`Guest::content_hash`] and `check` print it) the file is refused
    /// with [`LoadError::DigestMismatch`] before anything is compiled. The
    /// bytes checked are the bytes loaded: a file swapped between the two
    /// cannot slip through.
    pub fn load_pinned_file(&self, path: &Path, sha256: &str) -> Result<Arc<Guest>, LoadError> {
        self.load_verified_file(path, Some(sha256), &TrustedKeys::default())
            .map(|(guest, _)| guest)
    }

    /// Loads a guest file the way its configuration asks: its SHA-256 must
    /// be `sha256` when pinned ([`Self::load_pinned_file`]), and when
    /// `trusted` holds keys the signature beside it
    /// ([`signature::signature_path`]) must verify with one of them over
    /// the very bytes loaded. Both are checked before anything is compiled;
    /// answers the guest and the key that signed it (`None` when no
    /// signature was required).
    pub fn load_verified_file(
        &self,
        path: &Path,
        sha256: Option<&str>,
        trusted: &TrustedKeys,
    ) -> Result<(Arc<Guest>, Option<TrustedKey>), LoadError> {
        let bytes = read_guest_file(path)?;
        if let Some(pin) = sha256 {
            let actual = content_hash(&bytes);
            if actual != pin {
                return Err(LoadError::DigestMismatch {
                    path: path.to_path_buf(),
                    expected: pin.to_owned(),
                    actual,
                });
            }
        }
        let signer = if trusted.is_empty() {
            None
        } else {
            let signature = signature::read_signature(path)?;
            Some(trusted.verify(path, &bytes, signature.as_deref())?.clone())
        };
        Ok((self.load_bytes(&guest_name(path), &bytes)?, signer))
    }

    /// Loads a guest from its bytes: compiles it (once per content hash),
    /// checks its exports (known hooks of a compatible WIT version) and
    /// imports (all provided by the host), pre-links it, and type-checks
    /// every exported hook in a throwaway instance.
    pub fn load_bytes(&self, name: &str, bytes: &[u8]) -> Result<Arc<Guest>, LoadError> {
        let shared = self.shared()?;
        let hash = content_hash(bytes);
        let cached = self.cache().get(&hash);
        let prepared = match cached {
            Some(prepared) => prepared,
            None => {
                let prepared = Arc::new(Prepared::new(&shared, name, &hash, bytes)?);
                self.cache().insert(Arc::clone(&prepared));
                prepared
            }
        };
        Ok(Arc::new(Guest::new(name.to_string(), prepared, shared)))
    }

    /// Drops from the compiled-guest cache every build whose content hash
    /// `keep` refuses. Call it after a reload with the hashes the new
    /// configuration uses (or `|_| false`): builds nothing uses any more
    /// are freed at once instead of waiting for the byte budget
    /// ([`EngineSettings::unused_cache_bytes`]) to push them out. Guests
    /// still loaded keep working and are still found by hash without
    /// recompiling; their compiled code is freed when the last of them is
    /// dropped.
    pub fn retain_compiled(&self, mut keep: impl FnMut(&str) -> bool) {
        self.cache().retain(&mut keep);
    }

    /// What the compiled-guest cache holds now (after applying the byte
    /// budget, which is otherwise applied on every load).
    pub fn cache_stats(&self) -> CacheStats {
        self.cache().stats()
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, CompiledCache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Compiles `bytes` without keeping or checking anything: how long
    /// compilation takes (benchmarks) or whether it succeeds.
    pub fn compile_only(&self, bytes: &[u8]) -> Result<(), LoadError> {
        Component::new(&self.shared()?.engine, bytes)
            .map(|_| ())
            .map_err(|e| LoadError::Compile {
                guest: "<bytes>".into(),
                detail: format!("{e:#}"),
            })
    }
}

/// Reads a guest file: a regular file only (symlinks followed), at most
/// [`MAX_GUEST_FILE_BYTES`], opened without blocking.
/// A guest's name: its file name.
fn guest_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

fn read_guest_file(path: &Path) -> Result<Vec<u8>, LoadError> {
    read_regular_file(path, MAX_GUEST_FILE_BYTES).map_err(|e| match e {
        RegularFileError::Io(source) => LoadError::Read {
            path: path.to_path_buf(),
            source,
        },
        RegularFileError::NotAFile { kind } => LoadError::NotAFile {
            path: path.to_path_buf(),
            kind,
        },
        RegularFileError::TooLarge { limit } => LoadError::TooLarge {
            path: path.to_path_buf(),
            limit,
        },
    })
}

/// The content hash a guest file would load under ([`Guest::content_hash`]),
/// read with the same rules as [`PolicyEngine::load_file`] but without
/// compiling or checking anything: how a reload tells an untouched guest
/// from a new build without loading it again.
pub fn guest_file_hash(path: &Path) -> Result<String, LoadError> {
    read_guest_file(path).map(|bytes| content_hash(&bytes))
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
