//! `close` as a process's shutdown uses it. Its own binary: `close` ends
//! the watching of the whole process, which the unit tests share (and the
//! tests here take turns, for a runner that runs them in one process).

use std::path::Path;
use std::sync::{Mutex, PoisonError};

use wdp_fs_watch::{FolderWatch, RecursiveMode};

/// Per inotify instance this process holds, how many watches it has.
fn inotify_watch_counts() -> Vec<usize> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let target = std::fs::read_link(entry.path()).ok()?;
            if !target.to_string_lossy().contains("inotify") {
                return None;
            }
            let info = Path::new("/proc/self/fdinfo").join(entry.file_name());
            let info = std::fs::read_to_string(info).ok()?;
            Some(
                info.lines()
                    .filter(|l| l.starts_with("inotify wd:"))
                    .count(),
            )
        })
        .collect()
}

/// Held by each test: `close` ends every test's watching.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Total watches over every inotify instance this process holds.
fn inotify_watches() -> usize {
    inotify_watch_counts().iter().sum()
}

#[test]
fn close_stops_every_handler_at_once_and_finishing_removes_the_watches_and_the_instance() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let tmp = tempfile::tempdir().unwrap();
    let (a_dir, b_dir) = (tmp.path().join("a"), tmp.path().join("b"));
    std::fs::create_dir_all(a_dir.join("deeper")).unwrap();
    std::fs::create_dir_all(&b_dir).unwrap();
    let (tx, events) = std::sync::mpsc::channel();
    let a = FolderWatch::new(move |event| {
        if let Ok(event) = event {
            let _ = tx.send(event.paths.clone());
        }
    });
    let b = FolderWatch::new(|_| {});
    a.watch(&a_dir, RecursiveMode::Recursive).unwrap();
    b.watch(&b_dir, RecursiveMode::NonRecursive).unwrap();
    // a/, a/deeper/ and b/.
    assert_eq!(inotify_watch_counts(), [3]);

    let closing = wdp_fs_watch::close();
    std::fs::write(a_dir.join("after-close"), b"").unwrap();
    drop(b);
    assert_eq!(
        inotify_watch_counts(),
        [3],
        "the watches stay until the close finishes, even a dropped subscriber's"
    );
    closing.finish();
    // The watcher's thread closes the instance after finish returns.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !inotify_watch_counts().is_empty() && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    assert_eq!(inotify_watch_counts(), Vec::<usize>::new());

    // Watching again after a close makes a new instance that works, and
    // what it hears first is a file made after it, not the one made
    // while closed.
    a.watch(&a_dir, RecursiveMode::NonRecursive).unwrap();
    std::fs::write(a_dir.join("after-reopen"), b"").unwrap();
    let mut heard = Vec::new();
    while let Ok(paths) = events.recv_timeout(std::time::Duration::from_secs(10)) {
        let reopened = paths.iter().any(|p| p.ends_with("after-reopen"));
        heard.extend(paths);
        if reopened {
            break;
        }
    }
    assert!(
        heard.iter().any(|p| p.ends_with("after-reopen")),
        "{heard:?}"
    );
    assert!(
        !heard.iter().any(|p| p.ends_with("after-close")),
        "a handler was called after close: {heard:?}"
    );
    drop(a);
}

/// A shutdown drops its watches while the close finishes beside it on
/// another thread: a drop removes nothing itself (the close removes every
/// watch, spaced) and returns at once, not after the spaced removals.
#[test]
fn a_watch_dropped_while_the_close_finishes_leaves_its_removal_to_the_close() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    const FOLDERS: usize = 60;
    let tmp = tempfile::tempdir().unwrap();
    let many = FolderWatch::new(|_| {});
    for i in 0..FOLDERS {
        let dir = tmp.path().join(format!("d{i}"));
        std::fs::create_dir(&dir).unwrap();
        many.watch(&dir, RecursiveMode::NonRecursive).unwrap();
    }
    let own_dir = tmp.path().join("own");
    std::fs::create_dir(&own_dir).unwrap();
    let own = FolderWatch::new(|_| {});
    own.watch(&own_dir, RecursiveMode::NonRecursive).unwrap();
    assert_eq!(inotify_watches(), FOLDERS + 1);

    let closing = wdp_fs_watch::close();
    let own_removal = std::thread::spawn(move || drop(own));
    own_removal.join().unwrap();
    assert_eq!(
        inotify_watches(),
        FOLDERS + 1,
        "a drop after close removed a watch itself"
    );

    // 61 removals at least 200 µs apart: 12 ms or more.
    let finishing = std::thread::spawn(move || closing.finish());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while inotify_watches() > FOLDERS && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    drop(many);
    let left = inotify_watches();
    assert!(
        left > 1,
        "the drop waited until the close had removed all but {left} watches"
    );
    finishing.join().unwrap();
    assert_eq!(inotify_watches(), 0);
}
