//! The kernel stand-in's control FIFOs: a thread per FIFO reads the lines
//! written to it and sends each, with the FIFO's path, to the stand-in's
//! worker, so that every write is seen on its own and in order.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;

/// The threads reading the control FIFOs, each sending the lines written
/// to its FIFO to the worker.
pub(super) struct Readers {
    /// Where a reader sends `(path, line)`; `None` once stopping (the
    /// worker ends when the last sender is gone).
    lines: Option<Sender<(PathBuf, String)>>,
    /// A handle on each FIFO, to wake its reader when stopping.
    wakers: Vec<File>,
    threads: Vec<JoinHandle<()>>,
}

impl Readers {
    /// Readers sending to `lines`.
    pub(super) fn new(lines: Sender<(PathBuf, String)>) -> Self {
        Self {
            lines: Some(lines),
            wakers: Vec::new(),
            threads: Vec::new(),
        }
    }

    /// Stops reading: drops this side's sender, wakes each reader with a
    /// line of its own (`stopping` must be set first) and answers the
    /// threads to join.
    pub(super) fn stop(&mut self) -> Vec<JoinHandle<()>> {
        self.lines = None;
        for waker in &mut self.wakers {
            let _ = waker.write_all(b"\n");
        }
        std::mem::take(&mut self.threads)
    }

    /// Makes `path` a FIFO (replacing a regular file there) and starts
    /// reading it. Opened for reading and writing, the FIFO never reads
    /// end-of-file when a writer closes it.
    pub(super) fn read_control(&mut self, path: &Path, stopping: &Arc<AtomicBool>) {
        let Some(lines) = self.lines.clone() else {
            return;
        };
        let is_fifo = std::fs::symlink_metadata(path)
            .is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_fifo(&m.file_type()));
        if !is_fifo {
            let _ = std::fs::remove_file(path);
            let made = std::process::Command::new("mkfifo").arg(path).status();
            assert!(
                made.is_ok_and(|status| status.success()),
                "mkfifo {}",
                path.display()
            );
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        self.wakers.push(file.try_clone().unwrap());
        let (path, stopping) = (path.to_owned(), Arc::clone(stopping));
        let thread = std::thread::Builder::new()
            .name("kernel-standin-fifo".into())
            .spawn(move || {
                for line in BufReader::new(file).lines() {
                    let Ok(line) = line else { return };
                    if stopping.load(Ordering::SeqCst) {
                        return;
                    }
                    if lines.send((path.clone(), line)).is_err() {
                        return;
                    }
                }
            })
            .unwrap();
        self.threads.push(thread);
    }
}
