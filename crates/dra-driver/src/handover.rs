//! Which instance of the host publishes a driver's ResourceSlices while two
//! run on one node (a DaemonSet rolling update with `maxSurge: 1`).
//!
//! Both instances serve the kubelet (it sends new calls to the newest
//! registered one and may fall back to the other), but only one may
//! publish: two publishers with different device lists would overwrite each
//! other's slices forever. The newest instance takes over: at start it
//! writes its instance ID into `<state-dir>/dra/<driver>.publisher`; every
//! instance follows that file and publishes only while it names itself.
//!
//! Each instance holds an exclusive `flock` on
//! `<state-dir>/dra/<driver>.instances/<id>` for as long as it runs (the
//! kernel releases it when the process dies, however it dies). An instance
//! that finds the publisher file naming an instance whose lock is free (it
//! crashed, or was stopped: a rollback, a new pod that failed) takes the
//! publishing back. Files of instances gone are removed by whoever finds
//! them.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use wdp_dra_client::WriteFence;

use crate::file_stamp::FileStamp;

/// How often the publisher file's metadata is looked at: a newer instance
/// taking over is noticed within this. (Not inotify: the file shares its
/// folder with the checkpoint, whose every write would wake the watcher.)
const LOOK: Duration = Duration::from_millis(100);

/// How often the publisher file is read and its instance's lock checked
/// even when the file did not change (an instance that died leaves it so).
const RECHECK: Duration = Duration::from_secs(1);

/// One instance's claim to publish a driver's slices.
#[derive(Debug)]
pub struct Handover {
    /// The files, for the write fence.
    files: Arc<Files>,
    leading: watch::Receiver<bool>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

/// The files of one driver's handover.
#[derive(Clone, Debug)]
struct Files {
    driver: String,
    instance: String,
    publisher: PathBuf,
    instances: PathBuf,
}

impl Files {
    fn new(state_dir: &Path, driver: &str, instance: &str) -> Self {
        let dir = state_dir.join("dra");
        Self {
            driver: driver.to_owned(),
            instance: instance.to_owned(),
            publisher: dir.join(format!("{driver}.publisher")),
            instances: dir.join(format!("{driver}.instances")),
        }
    }

    fn alive_file(&self, instance: &str) -> PathBuf {
        self.instances.join(instance)
    }

    /// Holds this instance's lock for as long as the file lives.
    fn hold_alive(&self) -> std::io::Result<File> {
        std::fs::create_dir_all(&self.instances)?;
        let path = self.alive_file(&self.instance);
        File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)?;
        // Held open for reading only (a lock needs no more), so the state
        // folder can still be remounted read-only under a running host.
        let file = File::open(&path)?;
        file.try_lock().map_err(|error| match error {
            std::fs::TryLockError::WouldBlock => std::io::Error::other(format!(
                "another running instance uses the instance ID {:?}",
                self.instance
            )),
            std::fs::TryLockError::Error(error) => error,
        })?;
        Ok(file)
    }

    /// Whether instance `id` still runs (its lock is held).
    fn is_alive(&self, id: &str) -> bool {
        if id == self.instance {
            return true;
        }
        let Ok(file) = File::open(self.alive_file(id)) else {
            return false;
        };
        match file.try_lock() {
            Ok(()) => {
                let _ = file.unlock();
                let _ = std::fs::remove_file(self.alive_file(id));
                false
            }
            Err(std::fs::TryLockError::WouldBlock) => true,
            Err(std::fs::TryLockError::Error(_)) => false,
        }
    }

    /// The instance the publisher file names.
    fn publisher(&self) -> Option<String> {
        std::fs::read_to_string(&self.publisher)
            .ok()
            .map(|text| text.trim().to_owned())
            .filter(|id| !id.is_empty())
    }

    /// Names this instance in the publisher file (atomically).
    fn take_over(&self) -> std::io::Result<()> {
        let dir = self.publisher.parent().unwrap_or(Path::new("."));
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        std::io::Write::write_all(&mut tmp, format!("{}\n", self.instance).as_bytes())?;
        tmp.persist(&self.publisher).map_err(|e| e.error)?;
        Ok(())
    }

    /// Whether this instance should publish now; takes the publishing over
    /// from an instance that is gone.
    fn should_lead(&self) -> bool {
        match self.publisher() {
            Some(id) if id == self.instance => true,
            Some(id) if self.is_alive(&id) => false,
            gone => {
                match self.take_over() {
                    Ok(()) => {
                        tracing::info!(driver = %self.driver, instance = %self.instance, previous = ?gone, "the instance that published the ResourceSlices is gone: publishing them");
                    }
                    Err(error) => {
                        tracing::error!(driver = %self.driver, path = %self.publisher.display(), %error, "cannot record this instance as the ResourceSlice publisher; publishing anyway");
                    }
                }
                true
            }
        }
    }
}

impl Handover {
    /// Starts instance `instance` of `driver`, whose state lives under
    /// `state_dir`: it takes the publishing over at once, and follows the
    /// publisher file until `parent` is cancelled or it is stopped. An
    /// instance that cannot write its files (a read-only state folder)
    /// publishes, as a single instance does, and says why at ERROR.
    pub fn start(
        state_dir: &Path,
        driver: &str,
        instance: &str,
        parent: &CancellationToken,
    ) -> Self {
        let files = Files::new(state_dir, driver, instance);
        let alive = files.hold_alive();
        if let Err(error) = &alive {
            tracing::error!(%driver, %instance, path = %files.alive_file(instance).display(), %error, "cannot hold this instance's lock; a second instance during a rolling update could not tell this one runs");
        }
        if let Err(error) = files.take_over() {
            tracing::error!(%driver, path = %files.publisher.display(), %error, "cannot record this instance as the ResourceSlice publisher");
        }
        let (leading_tx, leading) = watch::channel(true);
        let stop = parent.child_token();
        let task = tokio::spawn(follow(files.clone(), alive.ok(), leading_tx, stop.clone()));
        Self {
            files: Arc::new(files),
            leading,
            stop,
            task,
        }
    }

    /// Whether this instance publishes now; changes as instances come and go.
    pub fn leading(&self) -> watch::Receiver<bool> {
        self.leading.clone()
    }

    /// The publisher's write fence: open while the publisher file names
    /// this instance (or cannot be read, as with a read-only state folder),
    /// read afresh at every call. [`Self::leading`] learns of a newer
    /// instance within [`LOOK`]; the fence closes the moment the newer one
    /// has named itself, which it does before its first write, so from its
    /// first write on this instance starts no pass of its own (one already
    /// sent to the API server may still land: the bound is one pass).
    pub fn write_fence(&self) -> WriteFence {
        let files = Arc::clone(&self.files);
        Arc::new(move || files.publisher().is_none_or(|id| id == files.instance))
    }

    /// Stops following; this instance's lock file goes (the next instance
    /// to look takes the publishing over).
    pub async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

async fn follow(
    files: Files,
    alive: Option<File>,
    leading: watch::Sender<bool>,
    stop: CancellationToken,
) {
    'follow: loop {
        let lead = files.should_lead();
        if leading.send_if_modified(|now| std::mem::replace(now, lead) != lead) && !lead {
            tracing::info!(driver = %files.driver, instance = %files.instance, newer = ?files.publisher(), "a newer instance of the host publishes the ResourceSlices now; this one keeps serving the kubelet until it stops");
        }
        let (seen, checked) = (FileStamp::of(&files.publisher), Instant::now());
        while FileStamp::of(&files.publisher) == seen && checked.elapsed() < RECHECK {
            tokio::select! {
                _ = stop.cancelled() => break 'follow,
                _ = tokio::time::sleep(LOOK) => {}
            }
        }
    }
    if let Some(file) = alive {
        let _ = std::fs::remove_file(files.alive_file(&files.instance));
        let _ = file.unlock();
    }
}

#[cfg(test)]
#[path = "handover_tests.rs"]
mod tests;
