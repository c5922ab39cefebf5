//! A stand-in of the kernel's PCI driver binding in sysfs, on a fixture
//! host tree (feature `kernel-standin`).
//!
//! [`KernelStandin::start`] gives every function the control files the
//! kernel has (`driver_override`, reading `(null)`), and the bus the
//! `drivers_probe` file and each driver its `bind` and `unbind` (always
//! including `vfio-pci`, as if the module were loaded). The write-only
//! triggers (`drivers_probe`, `bind`, `unbind`) are FIFOs the stand-in
//! reads: like the kernel, it sees every write on its own, in order, however
//! close together writers come (binds of several groups at once all
//! probing through `drivers_probe`), and reacts to each as the kernel does
//! (one worker applies them one at a time). A write returns once it is in
//! the FIFO, before its effect, as an asynchronous probe does; the binder
//! waits for the effect.
//! - `<drv>/unbind` removes the function's `driver` link and the driver's
//!   link back to it;
//! - `drivers_probe` binds the function to its `driver_override` when set,
//!   else to its default driver (what the fixture had; see
//!   [`KernelStandin::set_default_driver`]); `<drv>/bind` binds it to
//!   `<drv>` unless its override names another driver;
//! - when every function of an IOMMU group but bridges is on `vfio-pci`,
//!   `/dev/vfio/<group>` (an empty file) and
//!   `/sys/devices/virtual/vfio/<group>` appear, and `/dev/vfio/vfio` if
//!   missing; when one leaves they go.
//!
//! Faults: a driver that never lets go ([`KernelStandin::never_lets_go`]),
//! a bind that takes a while ([`KernelStandin::bind_takes`]) or fails
//! ([`KernelStandin::bind_fails`]), probes held until released
//! ([`KernelStandin::hold_probes`]). Writes the kernel would refuse with an
//! error (unbinding from a driver the function is not on) are ignored: a
//! FIFO cannot fail a write. A test may put a FIFO nobody reads in a
//! control file's place (a write that blocks in the kernel). Panics on a
//! fixture it cannot set up.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[path = "kernel_standin_fifo.rs"]
mod fifo;

use fifo::Readers;

/// The driver whose groups get `/dev/vfio/<group>`.
const VFIO: &str = "vfio-pci";

/// A running stand-in; stops when dropped.
pub struct KernelStandin {
    inner: Arc<Inner>,
    readers: Mutex<Readers>,
    worker: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for KernelStandin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelStandin")
            .field("root", &self.inner.root)
            .finish_non_exhaustive()
    }
}

struct Inner {
    /// The host root, symlinks resolved.
    root: PathBuf,
    state: Mutex<State>,
    changed: Condvar,
    /// Held while the tree is changed (worker, delayed binds, test calls).
    tree: Mutex<()>,
    /// Set when the stand-in stops: the FIFO readers end.
    stopping: Arc<AtomicBool>,
}

#[derive(Default)]
struct State {
    default_driver: HashMap<String, Option<String>>,
    never_lets_go: HashSet<String>,
    bind_delay: HashMap<(String, String), Duration>,
    bind_fails: HashSet<(String, String)>,
    hold_probes: bool,
    held: Vec<String>,
    writes: Vec<(String, String)>,
    generation: u64,
}

impl KernelStandin {
    /// Sets up the control files beneath the host root `root` (a fixture
    /// copy) and starts reacting to writes.
    pub fn start(root: &Path) -> Self {
        let root = std::fs::canonicalize(root).unwrap();
        let inner = Arc::new(Inner {
            root: root.clone(),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            tree: Mutex::new(()),
            stopping: Arc::new(AtomicBool::new(false)),
        });
        let devices = root.join("sys/bus/pci/devices");
        let mut drivers: HashSet<String> = HashSet::from([VFIO.to_owned()]);
        if let Ok(entries) = std::fs::read_dir(root.join("sys/bus/pci/drivers")) {
            drivers.extend(entries.flatten().map(|e| name_of(&e.path())));
        }
        for entry in std::fs::read_dir(&devices).unwrap().flatten() {
            let address = name_of(&entry.path());
            let driver = inner.driver(&address);
            let override_file = entry.path().join("driver_override");
            if !override_file.exists() {
                std::fs::write(&override_file, "(null)\n").unwrap();
            }
            if let Some(driver) = &driver {
                drivers.insert(driver.clone());
            }
            inner.lock().default_driver.insert(address, driver);
        }
        let (lines, received) = std::sync::mpsc::channel::<(PathBuf, String)>();
        let mut readers = Readers::new(lines);
        readers.read_control(&root.join("sys/bus/pci/drivers_probe"), &inner.stopping);
        for driver in &drivers {
            inner.driver_files(driver, &mut readers);
        }
        let worker_inner = inner.clone();
        let worker = std::thread::Builder::new()
            .name("kernel-standin".into())
            .spawn(move || {
                for (path, value) in received {
                    worker_inner.written(&path, &value);
                }
            })
            .unwrap();
        Self {
            inner,
            readers: Mutex::new(readers),
            worker: Some(worker),
        }
    }

    /// The host root (symlinks resolved).
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// The driver `address` is bound to now (its `driver` link).
    pub fn driver(&self, address: &str) -> Option<String> {
        self.inner.driver(address)
    }

    /// Binds `address` to `driver` (or leaves it unbound) at once, as the
    /// fixture's starting state, and makes that its default driver.
    pub fn set_driver(&self, address: &str, driver: Option<&str>) {
        if let Some(driver) = driver {
            self.add_driver(driver);
        }
        let _tree = self.inner.tree();
        self.inner.unlink(address);
        if let Some(driver) = driver {
            self.inner.link(address, driver);
        }
        self.inner.update_group(address);
        self.set_default_driver(address, driver);
        self.inner.bump();
    }

    /// Makes `driver` known to the bus (its folder, `bind` and `unbind`).
    pub fn add_driver(&self, driver: &str) {
        let dir = self.inner.root.join("sys/bus/pci/drivers").join(driver);
        if dir.join("bind").exists() {
            return;
        }
        let mut readers = self
            .readers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.inner.driver_files(driver, &mut readers);
    }

    /// The driver a probe binds `address` to when it has no override.
    pub fn set_default_driver(&self, address: &str, driver: Option<&str>) {
        self.inner
            .lock()
            .default_driver
            .insert(address.to_owned(), driver.map(str::to_owned));
    }

    /// From now on, unbinding `address` is ignored: its driver never lets go.
    pub fn never_lets_go(&self, address: &str) {
        self.inner.lock().never_lets_go.insert(address.to_owned());
    }

    /// From now on, binding `address` to `driver` completes `delay` after
    /// the write (the write itself returns at once).
    pub fn bind_takes(&self, address: &str, driver: &str, delay: Duration) {
        self.inner
            .lock()
            .bind_delay
            .insert((address.to_owned(), driver.to_owned()), delay);
    }

    /// From now on, binding `address` to `driver` fails: it stays unbound.
    pub fn bind_fails(&self, address: &str, driver: &str) {
        self.inner
            .lock()
            .bind_fails
            .insert((address.to_owned(), driver.to_owned()));
    }

    /// From now on, writes to `drivers_probe` are held (the function stays
    /// unbound) until [`release_probes`](Self::release_probes); writes to a
    /// driver's `bind` still bind.
    pub fn hold_probes(&self) {
        self.inner.lock().hold_probes = true;
    }

    /// The functions whose probe is held.
    pub fn held_probes(&self) -> Vec<String> {
        self.inner.lock().held.clone()
    }

    /// Forgets the held probes without carrying them out: what a probe
    /// never written looks like (its writer was killed first). Probes are
    /// still held from now on.
    pub fn discard_held_probes(&self) {
        self.inner.lock().held.clear();
        self.inner.bump();
    }

    /// Stops holding probes and carries out the held ones.
    pub fn release_probes(&self) {
        let held = {
            let mut state = self.inner.lock();
            state.hold_probes = false;
            std::mem::take(&mut state.held)
        };
        for address in held {
            self.inner.probe(&address);
        }
        self.inner.bump();
    }

    /// Every write the stand-in reacted to, in order: (host path, value).
    pub fn writes(&self) -> Vec<(String, String)> {
        self.inner.lock().writes.clone()
    }

    /// Waits until `done` answers true, checking it again after each
    /// change the stand-in makes; false once `limit` has passed.
    pub fn wait_until(&self, limit: Duration, mut done: impl FnMut(&Self) -> bool) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            let generation = self.inner.lock().generation;
            if done(self) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            let state = self.inner.lock();
            if state.generation == generation {
                // Changes made by other processes reach us as the events
                // they cause; others (a child's journal) within 50 ms.
                let wait = (deadline - now).min(Duration::from_millis(50));
                let _ = self.inner.changed.wait_timeout(state, wait).unwrap();
            }
        }
    }
}

impl Drop for KernelStandin {
    fn drop(&mut self) {
        // Each reader wakes to a line of its own and ends; with the last
        // sender gone, the worker ends.
        self.inner.stopping.store(true, Ordering::SeqCst);
        let readers = self
            .readers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .stop();
        for reader in readers {
            let _ = reader.join();
        }
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

fn name_of(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn tree(&self) -> MutexGuard<'_, ()> {
        self.tree
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn bump(&self) {
        self.lock().generation += 1;
        self.changed.notify_all();
    }

    fn driver_files(&self, driver: &str, readers: &mut Readers) {
        let dir = self.root.join("sys/bus/pci/drivers").join(driver);
        std::fs::create_dir_all(&dir).unwrap();
        for file in ["bind", "unbind"] {
            readers.read_control(&dir.join(file), &self.stopping);
        }
    }

    /// The real sysfs folder of a function, relative to the root.
    fn function_dir(&self, address: &str) -> Option<PathBuf> {
        let real =
            std::fs::canonicalize(self.root.join("sys/bus/pci/devices").join(address)).ok()?;
        real.strip_prefix(&self.root).ok().map(Path::to_path_buf)
    }

    fn driver(&self, address: &str) -> Option<String> {
        std::fs::read_link(
            self.root
                .join("sys/bus/pci/devices")
                .join(address)
                .join("driver"),
        )
        .ok()
        .map(|t| name_of(&t))
    }

    fn driver_override(&self, address: &str) -> Option<String> {
        let text = std::fs::read_to_string(
            self.root
                .join("sys/bus/pci/devices")
                .join(address)
                .join("driver_override"),
        )
        .ok()?;
        let text = text.trim();
        (!text.is_empty() && text != "(null)").then(|| text.to_owned())
    }

    /// Reacts to `value` written to the control file `path`.
    fn written(self: &Arc<Self>, path: &Path, value: &str) {
        let value = value.trim().to_owned();
        if value.is_empty() {
            return;
        }
        let Ok(rel) = path.strip_prefix(&self.root) else {
            return;
        };
        self.lock()
            .writes
            .push((format!("/{}", rel.display()), value.clone()));
        let parts: Vec<String> = rel
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
        match parts.as_slice() {
            ["sys", "bus", "pci", "drivers_probe"] => self.probe(&value),
            ["sys", "bus", "pci", "drivers", driver, "bind"] => self.bind(&value, driver),
            ["sys", "bus", "pci", "drivers", driver, "unbind"] => self.unbind(&value, driver),
            _ => {}
        }
        self.bump();
    }

    fn unbind(&self, address: &str, driver: &str) {
        let _tree = self.tree();
        if self.driver(address).as_deref() != Some(driver)
            || self.lock().never_lets_go.contains(address)
        {
            return;
        }
        self.unlink(address);
        self.update_group(address);
    }

    fn probe(self: &Arc<Self>, address: &str) {
        {
            let mut state = self.lock();
            if state.hold_probes {
                state.held.push(address.to_owned());
                return;
            }
        }
        if self.driver(address).is_some() {
            return;
        }
        let driver = self
            .driver_override(address)
            .or_else(|| self.lock().default_driver.get(address).cloned().flatten());
        if let Some(driver) = driver {
            self.bind_to(address, &driver);
        }
    }

    fn bind(self: &Arc<Self>, address: &str, driver: &str) {
        if self.driver(address).is_some()
            || self.driver_override(address).is_some_and(|o| o != driver)
        {
            return;
        }
        self.bind_to(address, driver);
    }

    fn bind_to(self: &Arc<Self>, address: &str, driver: &str) {
        let (fails, delay) = {
            let state = self.lock();
            (
                state
                    .bind_fails
                    .contains(&(address.to_owned(), driver.to_owned())),
                state
                    .bind_delay
                    .get(&(address.to_owned(), driver.to_owned()))
                    .copied(),
            )
        };
        if fails {
            return;
        }
        match delay {
            Some(delay) => {
                let inner = self.clone();
                let (address, driver) = (address.to_owned(), driver.to_owned());
                std::thread::spawn(move || {
                    // The simulated kernel's slow probe.
                    std::thread::sleep(delay);
                    {
                        let _tree = inner.tree();
                        inner.apply_bind(&address, &driver);
                    }
                    inner.bump();
                });
            }
            None => {
                let _tree = self.tree();
                self.apply_bind(address, driver);
            }
        }
    }

    fn apply_bind(&self, address: &str, driver: &str) {
        if self.driver(address).is_some() {
            return;
        }
        self.link(address, driver);
        self.update_group(address);
    }

    /// Creates the `driver` link of `address` and the driver's link back.
    fn link(&self, address: &str, driver: &str) {
        let Some(dir) = self.function_dir(address) else {
            return;
        };
        // From the function's folder up to /sys.
        let ups = dir.components().count().saturating_sub(1);
        let to_driver = format!("{}bus/pci/drivers/{driver}", "../".repeat(ups));
        let _ = std::os::unix::fs::symlink(to_driver, self.root.join(&dir).join("driver"));
        let below_sys = dir.strip_prefix("sys").unwrap_or(&dir);
        let back = format!("../../../../{}", below_sys.display());
        let _ = std::os::unix::fs::symlink(
            back,
            self.root
                .join("sys/bus/pci/drivers")
                .join(driver)
                .join(address),
        );
    }

    /// Removes the `driver` link of `address` and the driver's link back.
    fn unlink(&self, address: &str) {
        let Some(driver) = self.driver(address) else {
            return;
        };
        let _ = std::fs::remove_file(
            self.root
                .join("sys/bus/pci/devices")
                .join(address)
                .join("driver"),
        );
        let _ = std::fs::remove_file(
            self.root
                .join("sys/bus/pci/drivers")
                .join(driver)
                .join(address),
        );
    }

    /// Makes `/dev/vfio/<group>` of `address`'s group appear or go.
    fn update_group(&self, address: &str) {
        let Some(group) = std::fs::read_link(
            self.root
                .join("sys/bus/pci/devices")
                .join(address)
                .join("iommu_group"),
        )
        .ok()
        .map(|t| name_of(&t)) else {
            return;
        };
        let members = self
            .root
            .join(format!("sys/kernel/iommu_groups/{group}/devices"));
        let Ok(entries) = std::fs::read_dir(members) else {
            return;
        };
        let all_vfio = entries.flatten().all(|e| {
            let member = name_of(&e.path());
            let class = std::fs::read_to_string(
                self.root
                    .join("sys/bus/pci/devices")
                    .join(&member)
                    .join("class"),
            )
            .unwrap_or_default();
            let class = u32::from_str_radix(class.trim().trim_start_matches("0x"), 16).unwrap_or(0);
            matches!(class >> 8, 0x0604 | 0x0609) || self.driver(&member).as_deref() == Some(VFIO)
        });
        let node = self.root.join("dev/vfio").join(&group);
        let class_dir = self.root.join("sys/devices/virtual/vfio").join(&group);
        if all_vfio {
            std::fs::create_dir_all(&class_dir).unwrap();
            std::fs::write(class_dir.join("dev"), format!("511:{group}\n")).unwrap();
            std::fs::create_dir_all(self.root.join("dev/vfio")).unwrap();
            std::fs::write(&node, "").unwrap();
            let container = self.root.join("dev/vfio/vfio");
            if !container.exists() {
                std::fs::write(container, "").unwrap();
            }
        } else {
            let _ = std::fs::remove_file(node);
            let _ = std::fs::remove_dir_all(class_dir);
        }
    }
}
