use super::*;

async fn until(mut leading: watch::Receiver<bool>, wanted: bool) {
    tokio::time::timeout(
        Duration::from_secs(20),
        leading.wait_for(|now| *now == wanted),
    )
    .await
    .expect("handover in time")
    .expect("handover running");
}

#[tokio::test]
async fn the_newest_instance_publishes_and_the_older_takes_over_when_it_goes() {
    let state = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let old = Handover::start(state.path(), "d.example.com", "pod-old", &shutdown);
    until(old.leading(), true).await;
    let new = Handover::start(state.path(), "d.example.com", "pod-new", &shutdown);
    until(new.leading(), true).await;
    until(old.leading(), false).await;

    // A rollback: the new pod goes, the old one publishes again.
    new.stop().await;
    until(old.leading(), true).await;
    assert!(
        !state
            .path()
            .join("dra/d.example.com.instances/pod-new")
            .exists()
    );
    old.stop().await;
}

#[tokio::test]
async fn the_older_instances_fence_closes_the_moment_a_newer_one_names_itself() {
    let state = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let old = Handover::start(state.path(), "d.example.com", "pod-old", &shutdown);
    let fence = old.write_fence();
    assert!(fence());
    // No wait for the old instance's follower: the newer one has named
    // itself, and that is enough to close the fence.
    let new = Handover::start(state.path(), "d.example.com", "pod-new", &shutdown);
    assert!(!fence());
    assert!(new.write_fence()());
    new.stop().await;
    until(old.leading(), true).await;
    assert!(
        fence(),
        "open again once the old instance took the pool back"
    );
    old.stop().await;
}

#[tokio::test]
async fn two_instances_cannot_share_an_id() {
    let state = tempfile::tempdir().unwrap();
    let files = Files::new(state.path(), "d.example.com", "same");
    let _held = files.hold_alive().unwrap();
    let error = files.hold_alive().unwrap_err();
    assert!(error.to_string().contains("\"same\""), "{error}");
    let observer = Files::new(state.path(), "d.example.com", "observer");
    assert!(observer.is_alive("same"));
    assert!(!observer.is_alive("gone"));
}
