use std::sync::mpsc;
use std::time::Duration;

use super::*;

/// A subscriber whose handler sends each event's paths.
fn subscriber() -> (FolderWatch, mpsc::Receiver<Vec<PathBuf>>) {
    let (tx, rx) = mpsc::channel();
    let watch = FolderWatch::new(move |event| {
        if let Ok(event) = event {
            let _ = tx.send(event.paths.clone());
        }
    });
    (watch, rx)
}

/// Waits for an event naming `name`; false when none came in 10 s.
fn saw(rx: &mpsc::Receiver<Vec<PathBuf>>, name: &str) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(paths) if paths.iter().any(|p| p.ends_with(name)) => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    false
}

/// inotify instances this process holds (every test shares the process).
fn inotify_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().contains("inotify"))
        .count()
}

#[test]
fn each_subscriber_hears_its_own_paths_through_one_instance() {
    let tmp = tempfile::tempdir().unwrap();
    let (a_dir, b_dir) = (tmp.path().join("a"), tmp.path().join("b"));
    std::fs::create_dir_all(&a_dir).unwrap();
    std::fs::create_dir_all(&b_dir).unwrap();
    let (a, a_events) = subscriber();
    let (b, b_events) = subscriber();
    a.watch(&a_dir, RecursiveMode::NonRecursive).unwrap();
    b.watch(&b_dir, RecursiveMode::NonRecursive).unwrap();
    assert!(inotify_fds() <= 1, "more than one inotify instance");

    std::fs::write(a_dir.join("for-a"), b"").unwrap();
    std::fs::write(b_dir.join("for-b"), b"").unwrap();
    assert!(saw(&a_events, "for-a"));
    assert!(saw(&b_events, "for-b"));
    // Neither heard the other's file.
    assert!(!a_events.try_iter().flatten().any(|p| p.ends_with("for-b")));
    assert!(!b_events.try_iter().flatten().any(|p| p.ends_with("for-a")));
    drop((a, b));
}

#[test]
fn a_shared_path_stays_watched_until_its_last_subscriber_goes() {
    let tmp = tempfile::tempdir().unwrap();
    let (first, _first_events) = subscriber();
    let (second, second_events) = subscriber();
    first
        .watch(tmp.path(), RecursiveMode::NonRecursive)
        .unwrap();
    second
        .watch(tmp.path(), RecursiveMode::NonRecursive)
        .unwrap();

    drop(first);
    std::fs::write(tmp.path().join("after-first-left"), b"").unwrap();
    assert!(saw(&second_events, "after-first-left"));

    second.unwatch(tmp.path());
    std::fs::write(tmp.path().join("after-unwatch"), b"").unwrap();
    // A later file in a watched folder proves events still flow.
    let other = tempfile::tempdir().unwrap();
    second
        .watch(other.path(), RecursiveMode::NonRecursive)
        .unwrap();
    std::fs::write(other.path().join("marker"), b"").unwrap();
    let mut heard = Vec::new();
    while let Ok(paths) = second_events.recv_timeout(Duration::from_secs(10)) {
        let marker = paths.iter().any(|p| p.ends_with("marker"));
        heard.extend(paths);
        if marker {
            break;
        }
    }
    assert!(heard.iter().any(|p| p.ends_with("marker")), "{heard:?}");
    assert!(
        !heard.iter().any(|p| p.ends_with("after-unwatch")),
        "{heard:?}"
    );
}

#[test]
fn a_missing_path_is_an_error_and_not_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let (watch, _events) = subscriber();
    let missing = tmp.path().join("missing");
    assert!(watch.watch(&missing, RecursiveMode::NonRecursive).is_err());
    assert!(format!("{watch:?}").contains("paths: []"), "{watch:?}");
}

#[test]
fn recursive_and_file_watches_cover_what_they_say() {
    assert!(covers(
        Path::new("/a"),
        RecursiveMode::Recursive,
        Path::new("/a/b/c")
    ));
    assert!(!covers(
        Path::new("/a"),
        RecursiveMode::NonRecursive,
        Path::new("/a/b/c")
    ));
    assert!(covers(
        Path::new("/a/f"),
        RecursiveMode::NonRecursive,
        Path::new("/a/f")
    ));
    assert!(!covers(
        Path::new("/a"),
        RecursiveMode::Recursive,
        Path::new("/ab")
    ));
}
