//! Reading and writing sysfs beneath the host root: bounded reads that
//! never block on a special file, link names, control-file writes under a
//! deadline and waits for a condition.

use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::BindError;

/// Largest attribute or `/proc` file read (a mount table of a big node fits).
const READ_LIMIT: u64 = 8 << 20;

/// The host root: every host path is opened beneath it.
#[derive(Clone, Debug)]
pub(crate) struct Root(PathBuf);

impl Root {
    pub(crate) fn new(path: PathBuf) -> Self {
        Self(path)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }

    /// The real path of host path `host` (absolute, as on the node).
    pub(crate) fn real(&self, host: &str) -> PathBuf {
        self.0.join(host.trim_start_matches('/'))
    }

    /// The host path of a real path beneath the root (for messages).
    pub(crate) fn host(&self, real: &Path) -> String {
        match real.strip_prefix(&self.0) {
            Ok(rest) => format!("/{}", rest.display()),
            Err(_) => real.display().to_string(),
        }
    }
}

/// The content of a small file, trimmed, when it is a regular file (sysfs
/// attributes and `/proc` files are): a FIFO or device in a damaged tree
/// is an error, never a hang.
pub(crate) fn read_text(real: &Path) -> std::io::Result<String> {
    match wdp_regular_file::read_regular_file(real, READ_LIMIT) {
        Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).trim().to_owned()),
        Err(wdp_regular_file::RegularFileError::Io(e)) => Err(e),
        Err(other) => Err(std::io::Error::other(other.to_string())),
    }
}

/// The last component of the target of symlink `real` (a `driver` or
/// `iommu_group` link), `None` when there is no such link.
pub(crate) fn link_name(real: &Path) -> std::io::Result<Option<String>> {
    match std::fs::read_link(real) {
        Ok(target) => Ok(target
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The driver a function is bound to now (its `driver` link).
pub(crate) fn current_driver(root: &Root, address: &str) -> Result<Option<String>, BindError> {
    let link = root.real(&format!("/sys/bus/pci/devices/{address}/driver"));
    link_name(&link).map_err(|e| BindError::Read {
        path: root.host(&link),
        error: wdp_regular_file::io_words(&e),
    })
}

/// The driver override a function carries (`None` for the kernel's
/// `(null)`, an empty file or no file).
pub(crate) fn driver_override(root: &Root, address: &str) -> Option<String> {
    let path = root.real(&format!("/sys/bus/pci/devices/{address}/driver_override"));
    read_text(&path)
        .ok()
        .filter(|v| !v.is_empty() && v != "(null)")
}

/// Writes `value` and a newline to the control file at host path `host`
/// in one `write`, as `echo value > file` does; the file must exist (a
/// missing control file means the kernel lacks the feature). The write
/// runs on a thread of its own, so a driver whose remove or probe blocks
/// in the kernel costs a leaked thread, not a hang: after `timeout` it is
/// [`BindError::WriteHung`].
pub(crate) fn write_control(
    root: &Root,
    host: &str,
    value: &str,
    timeout: Duration,
) -> Result<(), BindError> {
    let real = root.real(host);
    let mut bytes = value.as_bytes().to_vec();
    bytes.push(b'\n');
    let write = move || -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&real)?;
        file.write_all(&bytes)
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("wdp-sysfs-write".into())
        .spawn(move || {
            let _ = tx.send(write());
        });
    let result = match spawned {
        Ok(_) => match rx.recv_timeout(timeout) {
            Ok(result) => result,
            Err(_) => {
                return Err(BindError::WriteHung {
                    path: host.to_owned(),
                    value: value.to_owned(),
                    after: timeout,
                });
            }
        },
        // No thread to be had: write inline.
        Err(_) => {
            let real = root.real(host);
            std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&real)
                .and_then(|mut f| f.write_all(format!("{value}\n").as_bytes()))
        }
    };
    result.map_err(|e| BindError::Write {
        path: host.to_owned(),
        value: value.to_owned(),
        error: wdp_regular_file::io_words(&e),
    })
}

/// Calls `done` until it answers true or `deadline` passes (then one last
/// time), backing off from 50 µs to 1 ms between calls: sysfs links and
/// `/dev` nodes give no event to await under a host root. On a kernel the
/// `unbind`/`drivers_probe` write returns once the driver is done, so the
/// first call mostly answers; the backoff bounds the wait for what lags
/// (an asynchronous probe, the kernel stand-in's FIFO round trip).
pub(crate) fn wait_until(deadline: Instant, mut done: impl FnMut() -> bool) -> bool {
    let mut pause = Duration::from_micros(50);
    loop {
        if done() {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return done();
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(1));
    }
}
