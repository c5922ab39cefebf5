//! The checkpoint as the concurrent claims of one driver share it: read
//! under a lock (re-read first if the other instance of a rolling update
//! replaced it), and written by group commit.
//!
//! A claim that has a change to record queues it and waits for its turn
//! to write; whoever gets the turn writes every change queued by then, in
//! one write and one sync, and tells each waiter the outcome. The changes
//! are applied in memory first and the file written without holding the
//! checkpoint, so claims that only read it (to pick devices, or answer a
//! repeated prepare) do not wait for the disk meanwhile; what they see
//! then may not be on disk yet, which only ever makes them more careful
//! (a device looks held a moment longer). A write that fails undoes its
//! changes. Claims prepared together share the checkpoint's syncs, and
//! also the sync of the CDI folder: a prepared claim's spec is renamed into the folder
//! without syncing it ([`wdp_resource::cdi::write_file_folder_unsynced`]),
//! and the writer syncs the folder once, before the checkpoint records any
//! of the claims. A claim is thus never recorded as prepared before its
//! spec is on disk for good, as when each claim synced the folder itself.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};

use tokio::sync::{Mutex, MutexGuard, oneshot};

use crate::checkpoint::{Change, Checkpoint};

/// A driver's checkpoint shared by its claims.
#[derive(Debug)]
pub struct SharedCheckpoint {
    driver: String,
    cdi_dir: PathBuf,
    checkpoint: Mutex<Checkpoint>,
    /// Held by whoever writes the file: one write at a time, in order.
    writer: Mutex<()>,
    /// A write is under way: the file on disk is this checkpoint's own, so
    /// readers do not re-read it.
    writing: AtomicBool,
    /// Changes waiting to be written, each with whoever waits for the
    /// outcome.
    pending: std::sync::Mutex<Vec<QueuedChange>>,
}

/// A change waiting to be written.
#[derive(Debug)]
struct QueuedChange {
    change: Change,
    /// The change records a CDI spec renamed into the CDI folder and not
    /// yet synced there.
    after_spec: bool,
    done: oneshot::Sender<Result<(), String>>,
}

impl SharedCheckpoint {
    /// `checkpoint` of `driver`, whose claims' CDI specs go into `cdi_dir`.
    pub fn new(driver: &str, cdi_dir: PathBuf, checkpoint: Checkpoint) -> Self {
        Self {
            driver: driver.to_owned(),
            cdi_dir,
            checkpoint: Mutex::new(checkpoint),
            writer: Mutex::new(()),
            writing: AtomicBool::new(false),
            pending: std::sync::Mutex::default(),
        }
    }

    /// The checkpoint, re-read first if another instance of the host
    /// replaced it (a rolling update runs two).
    pub async fn read(&self) -> MutexGuard<'_, Checkpoint> {
        let mut checkpoint = self.checkpoint.lock().await;
        if self.writing.load(Ordering::SeqCst) {
            return checkpoint;
        }
        if let Err(error) = checkpoint.refresh() {
            tracing::error!(driver = %self.driver, %error, "serving with the prepared claims last read");
        }
        checkpoint
    }

    /// Writes `change`, together with every change queued meanwhile.
    pub async fn record(self: &Arc<Self>, change: Change) -> Result<(), String> {
        self.queue(change, false).await
    }

    /// Writes `change`, which records a claim whose CDI spec was renamed
    /// into the CDI folder without syncing it: the folder is synced first,
    /// and if that fails the change is not written.
    pub async fn record_after_spec(self: &Arc<Self>, change: Change) -> Result<(), String> {
        self.queue(change, true).await
    }

    /// Queues `change` and waits for its outcome. The write runs in a task
    /// of its own, so a caller that goes away (the kubelet cancelled its
    /// call) never leaves a write half done: once queued, a change is
    /// written and its outcome taken whether or not anyone still waits.
    async fn queue(self: &Arc<Self>, change: Change, after_spec: bool) -> Result<(), String> {
        let (done, outcome) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(QueuedChange {
                change,
                after_spec,
                done,
            });
        let shared = Arc::clone(self);
        tokio::spawn(async move { shared.write_pending().await });
        outcome
            .await
            .unwrap_or_else(|_| Err("the checkpoint write was abandoned".to_owned()))
    }

    /// Waits for the turn to write, then writes every change queued by
    /// then (none: an earlier turn wrote them). Nothing queued before the
    /// turn: a writer already took this change, and answers it.
    async fn write_pending(&self) {
        if self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
        {
            return;
        }
        let _turn = self.writer.lock().await;
        let batch =
            std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner));
        if !batch.is_empty() {
            self.write(batch).await;
        }
    }

    /// Writes `batch` (it is the caller's turn) and answers each of its
    /// waiters.
    async fn write(&self, batch: Vec<QueuedChange>) {
        let folder_synced = if batch.iter().any(|queued| queued.after_spec) {
            wdp_resource::cdi::sync_folder(&self.cdi_dir).map_err(|error| {
                format!(
                    "cannot sync the CDI folder {} after writing the claim's spec: {error}",
                    self.cdi_dir.display()
                )
            })
        } else {
            Ok(())
        };
        let (ready, refused): (Vec<_>, Vec<_>) = batch
            .into_iter()
            .partition(|queued| !queued.after_spec || folder_synced.is_ok());
        for queued in refused {
            let _ = queued.done.send(folder_synced.clone());
        }
        if ready.is_empty() {
            return;
        }
        let (changes, waiting): (Vec<_>, Vec<_>) = ready
            .into_iter()
            .map(|queued| (queued.change, queued.done))
            .unzip();
        let staged = {
            let mut checkpoint = self.checkpoint.lock().await;
            let staged = checkpoint.stage(changes);
            self.writing.store(staged.is_ok(), Ordering::SeqCst);
            staged
        };
        let result = match staged {
            Err(error) => Err(error.to_string()),
            Ok(staged) => {
                // The disk: the checkpoint is not held meanwhile.
                let written = staged.write();
                let mut checkpoint = self.checkpoint.lock().await;
                self.writing.store(false, Ordering::SeqCst);
                checkpoint
                    .finish(written)
                    .map_err(|error| error.to_string())
            }
        };
        for waiter in waiting {
            let _ = waiter.send(result.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::PreparedClaim;

    fn claim(name: &str) -> PreparedClaim {
        PreparedClaim {
            namespace: "ns".to_owned(),
            name: name.to_owned(),
            devices: Vec::new(),
            cdi_spec: None,
            status_written: false,
        }
    }

    fn shared(state: &std::path::Path, cdi_dir: PathBuf) -> SharedCheckpoint {
        SharedCheckpoint::new(
            "gpu.example.com",
            cdi_dir,
            Checkpoint::load(state, "gpu.example.com"),
        )
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn claims_recorded_together_are_all_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let cdi = dir.path().join("cdi");
        std::fs::create_dir(&cdi).unwrap();
        let shared = Arc::new(shared(dir.path(), cdi));
        let tasks: Vec<_> = (0..16)
            .map(|n| {
                let shared = Arc::clone(&shared);
                tokio::spawn(async move {
                    let uid = format!("uid-{n}");
                    shared
                        .record_after_spec(Change::Insert(uid, claim(&format!("claim-{n}"))))
                        .await
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        let reread = Checkpoint::load(dir.path(), "gpu.example.com");
        assert_eq!(reread.claims().len(), 16);
        assert_eq!(reread.get("uid-7").unwrap().name, "claim-7");
    }

    #[tokio::test]
    async fn a_claim_is_not_recorded_when_the_cdi_folder_cannot_be_synced() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-such-cdi-folder");
        let shared = Arc::new(shared(dir.path(), missing.clone()));
        shared
            .record(Change::Insert("old".to_owned(), claim("old")))
            .await
            .unwrap();
        let error = shared
            .record_after_spec(Change::Insert("new".to_owned(), claim("new")))
            .await
            .unwrap_err();
        assert!(
            error.contains(&missing.display().to_string()),
            "the error names the folder: {error}"
        );
        // Changes that wrote no spec are still recorded.
        shared
            .record(Change::Remove("old".to_owned()))
            .await
            .unwrap();
        let reread = Checkpoint::load(dir.path(), "gpu.example.com");
        assert!(reread.claims().is_empty(), "{:?}", reread.claims());
    }
}
