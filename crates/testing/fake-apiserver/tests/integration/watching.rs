//! Watches through `kube::runtime::watcher`: initial lists, live events, the kubelet's wipe,
//! streaming lists, and 410 Expired after a compaction.

use std::time::Duration;

use crate::common::{slice, start};
use futures::{Stream, StreamExt};
use kube::api::{Api, PostParams};
use kube::runtime::watcher::{self, Event};
use wdp_fake_apiserver::ResourceSlice;

const PATIENCE: Duration = Duration::from_secs(10);

/// The next event that is not a list-bookkeeping one, with names for short assertions.
async fn next_change<S>(events: &mut S) -> (&'static str, String)
where
    S: Stream<Item = Result<Event<ResourceSlice>, watcher::Error>> + Unpin,
{
    loop {
        let event = tokio::time::timeout(PATIENCE, events.next())
            .await
            .expect("an event in time")
            .expect("the stream goes on")
            .expect("no watch error");
        match event {
            Event::Apply(s) => return ("apply", s.metadata.name.unwrap()),
            Event::Delete(s) => return ("delete", s.metadata.name.unwrap()),
            Event::InitApply(s) => return ("init-apply", s.metadata.name.unwrap()),
            Event::Init | Event::InitDone => {}
        }
    }
}

/// Drives the watcher through its initial list, so later writes arrive as live events.
async fn until_init_done<S>(events: &mut S)
where
    S: Stream<Item = Result<Event<ResourceSlice>, watcher::Error>> + Unpin,
{
    loop {
        let event = tokio::time::timeout(PATIENCE, events.next())
            .await
            .expect("init in time");
        if let Some(Ok(Event::InitDone)) = event {
            return;
        }
        assert!(
            matches!(event, Some(Ok(_))),
            "the initial list failed: {event:?}"
        );
    }
}

#[tokio::test]
async fn watcher_sees_creates_and_the_kubelet_wipe() {
    let h = start().await;
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    api.create(
        &PostParams::default(),
        &slice("before", "n1", "d.example.com", &["x"]),
    )
    .await
    .unwrap();
    let mut events = watcher::watcher(api.clone(), watcher::Config::default()).boxed();
    assert_eq!(
        next_change(&mut events).await,
        ("init-apply", "before".to_string())
    );
    until_init_done(&mut events).await;

    api.create(
        &PostParams::default(),
        &slice("after", "n1", "d.example.com", &["x"]),
    )
    .await
    .unwrap();
    api.create(
        &PostParams::default(),
        &slice("elsewhere", "n2", "d.example.com", &["x"]),
    )
    .await
    .unwrap();
    assert_eq!(
        next_change(&mut events).await,
        ("apply", "after".to_string())
    );
    assert_eq!(
        next_change(&mut events).await,
        ("apply", "elsewhere".to_string())
    );

    assert_eq!(h.server.wipe_node_slices("n1", Some("d.example.com")), 2);
    assert_eq!(
        next_change(&mut events).await,
        ("delete", "after".to_string())
    );
    assert_eq!(
        next_change(&mut events).await,
        ("delete", "before".to_string())
    );
    assert_eq!(h.server.slices().len(), 1);
}

#[tokio::test]
async fn field_selected_watch_only_sees_its_node() {
    let h = start().await;
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    let config = watcher::Config::default().fields("spec.nodeName=n1");
    let mut events = watcher::watcher(api.clone(), config).boxed();
    until_init_done(&mut events).await;
    api.create(
        &PostParams::default(),
        &slice("other", "n2", "d.example.com", &["x"]),
    )
    .await
    .unwrap();
    api.create(
        &PostParams::default(),
        &slice("mine", "n1", "d.example.com", &["x"]),
    )
    .await
    .unwrap();
    assert_eq!(
        next_change(&mut events).await,
        ("apply", "mine".to_string())
    );
}

#[tokio::test]
async fn streaming_list_watcher_gets_initial_state_then_changes() {
    let h = start().await;
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    api.create(
        &PostParams::default(),
        &slice("a", "n1", "d.example.com", &["x"]),
    )
    .await
    .unwrap();
    let config = watcher::Config::default().streaming_lists();
    let mut events = watcher::watcher(api.clone(), config).boxed();
    assert_eq!(
        next_change(&mut events).await,
        ("init-apply", "a".to_string())
    );
    // InitDone arrives only through the annotated bookmark; then live events follow.
    until_init_done(&mut events).await;
    api.create(
        &PostParams::default(),
        &slice("b", "n1", "d.example.com", &["x"]),
    )
    .await
    .unwrap();
    assert_eq!(next_change(&mut events).await, ("apply", "b".to_string()));
}

#[tokio::test]
async fn resuming_from_a_compacted_version_is_expired() {
    let h = start().await;
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    let created = api
        .create(
            &PostParams::default(),
            &slice("a", "n1", "d.example.com", &["x"]),
        )
        .await
        .unwrap();
    api.create(
        &PostParams::default(),
        &slice("b", "n1", "d.example.com", &["x"]),
    )
    .await
    .unwrap();
    h.server.compact();
    let old = created.metadata.resource_version.unwrap();
    let mut stream = api
        .watch(&kube::api::WatchParams::default(), &old)
        .await
        .unwrap()
        .boxed();
    let first = tokio::time::timeout(PATIENCE, stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    match first {
        kube::api::WatchEvent::Error(status) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
}

#[tokio::test]
async fn relabelling_out_of_a_label_selected_watch_is_a_delete() {
    let h = start().await;
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    let mut labelled = slice("a", "n1", "d.example.com", &["x"]);
    labelled.metadata.labels = Some([("tier".to_string(), "gold".to_string())].into());
    let created = api.create(&PostParams::default(), &labelled).await.unwrap();

    let config = watcher::Config::default().labels("tier=gold");
    let mut events = watcher::watcher(api.clone(), config).boxed();
    assert_eq!(
        next_change(&mut events).await,
        ("init-apply", "a".to_string())
    );
    until_init_done(&mut events).await;

    let mut relabelled = created.clone();
    relabelled.metadata.labels = Some([("tier".to_string(), "iron".to_string())].into());
    let relabelled = api
        .replace("a", &PostParams::default(), &relabelled)
        .await
        .unwrap();
    assert_eq!(next_change(&mut events).await, ("delete", "a".to_string()));

    let mut back = relabelled;
    back.metadata.labels = Some([("tier".to_string(), "gold".to_string())].into());
    api.replace("a", &PostParams::default(), &back)
        .await
        .unwrap();
    assert_eq!(next_change(&mut events).await, ("apply", "a".to_string()));
}
