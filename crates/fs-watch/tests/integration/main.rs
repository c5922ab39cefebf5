//! `close` as a process's shutdown uses it. Its own binary: `close` ends
//! the watching of the whole process, which the unit tests share.

use std::path::Path;

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

#[test]
fn close_removes_every_watch_at_once_and_the_instance_when_dropped() {
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
    assert_eq!(
        inotify_watch_counts(),
        [0],
        "the instance stays open, with no watch left"
    );
    std::fs::write(a_dir.join("after-close"), b"").unwrap();
    drop(closing);
    // The watcher's thread closes the instance after the drop returns.
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
    drop((a, b));
}
