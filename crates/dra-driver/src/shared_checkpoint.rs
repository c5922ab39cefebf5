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
//! changes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};

use tokio::sync::{Mutex, MutexGuard, oneshot};

use crate::checkpoint::{Change, Checkpoint};

/// A driver's checkpoint shared by its claims.
#[derive(Debug)]
pub struct SharedCheckpoint {
    driver: String,
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
    done: oneshot::Sender<Result<(), String>>,
}

impl SharedCheckpoint {
    /// `checkpoint` of `driver`.
    pub fn new(driver: &str, checkpoint: Checkpoint) -> Self {
        Self {
            driver: driver.to_owned(),
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

    /// Writes `change`, together with every change queued meanwhile, and
    /// waits for the outcome. The write runs in a task of its own, so a
    /// caller that goes away (the kubelet cancelled its call) never leaves
    /// a write half done: once queued, a change is written and its outcome
    /// taken whether or not anyone still waits.
    pub async fn record(self: &Arc<Self>, change: Change) -> Result<(), String> {
        let (done, outcome) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(QueuedChange { change, done });
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
        let (changes, waiting): (Vec<_>, Vec<_>) = batch
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
#[path = "shared_checkpoint_tests.rs"]
mod tests;
