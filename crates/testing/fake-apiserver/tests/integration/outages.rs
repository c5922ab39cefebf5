//! Simulated trouble: a server that refuses requests, a restart that drops every connection,
//! and a pre-1.37 server that drops device taints.

use std::time::Duration;

use crate::common::{api_error, slice, start};
use futures::StreamExt;
use k8s_openapi::api::resource::v1::DeviceTaint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams, WatchParams};
use kube::runtime::watcher::{self, Event};
use wdp_fake_apiserver::ResourceSlice;

const PATIENCE: Duration = Duration::from_secs(10);

#[tokio::test]
async fn refusing_answers_503_and_ends_watches() {
    let h = start().await;
    let api: Api<ResourceSlice> =
        Api::all(crate::common::client_of(&h.server, &h.dir, false).await);
    api.create(
        &PostParams::default(),
        &slice("a", "n", "d.example.com", &["x"]),
    )
    .await
    .unwrap();
    let mut watch = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    // The synthetic ADDED of the current state shows the watch is open.
    assert!(
        tokio::time::timeout(PATIENCE, watch.next())
            .await
            .unwrap()
            .is_some()
    );

    h.server.set_refusing(true);
    let ended = tokio::time::timeout(PATIENCE, watch.next())
        .await
        .expect("the watch ends promptly");
    assert!(ended.is_none(), "no more events: {ended:?}");
    let status = api_error(api.get("a").await);
    assert_eq!(
        (status.code, status.reason.as_str()),
        (503, "ServiceUnavailable")
    );

    h.server.set_refusing(false);
    assert_eq!(
        api.get("a").await.unwrap().metadata.name.as_deref(),
        Some("a")
    );
    assert!(h.server.stats().requests_total >= 4);
}

#[tokio::test]
async fn restart_keeps_state_and_clients_reconnect() {
    let mut h = start().await;
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    let url = h.server.url();
    let before = api
        .create(
            &PostParams::default(),
            &slice("a", "n", "d.example.com", &["x"]),
        )
        .await
        .unwrap();
    let mut events = watcher::watcher(api.clone(), watcher::Config::default()).boxed();
    loop {
        let event = tokio::time::timeout(PATIENCE, events.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if matches!(event, Event::InitDone) {
            break;
        }
    }

    let mut raw_watch = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    assert!(
        tokio::time::timeout(PATIENCE, raw_watch.next())
            .await
            .unwrap()
            .is_some()
    );

    h.server.restart().await.expect("restart");
    let ended = tokio::time::timeout(PATIENCE, raw_watch.next())
        .await
        .expect("the watch ends promptly");
    assert!(
        !matches!(ended, Some(Ok(_))),
        "the open watch broke with the restart: {ended:?}"
    );
    assert_eq!(h.server.url(), url, "same port");
    assert_eq!(
        api.get("a").await.unwrap(),
        before,
        "state kept, the same client reconnects"
    );
    api.create(
        &PostParams::default(),
        &slice("b", "n", "d.example.com", &["x"]),
    )
    .await
    .unwrap();

    // The watcher's stream broke with the restart; it watches again and sees the new slice.
    let seen = tokio::time::timeout(PATIENCE, async {
        loop {
            match events.next().await {
                Some(Ok(Event::Apply(s) | Event::InitApply(s)))
                    if s.metadata.name.as_deref() == Some("b") =>
                {
                    break;
                }
                Some(_) => {}
                None => panic!("the watcher stream ended"),
            }
        }
    })
    .await;
    assert!(
        seen.is_ok(),
        "the watcher saw the slice created after the restart"
    );
}

fn taint(key: &str, effect: &str, added: Option<Timestamp>) -> DeviceTaint {
    DeviceTaint {
        key: key.into(),
        effect: effect.into(),
        value: Some("bad".into()),
        time_added: added.map(Time),
    }
}

fn tainted(name: &str, taints: Vec<DeviceTaint>) -> ResourceSlice {
    let mut s = slice(name, "n", "d.example.com", &["x"]);
    s.spec.devices.as_mut().unwrap()[0].taints = Some(taints);
    s
}

#[tokio::test]
async fn taints_dropped_mode_strips_taints_silently() {
    let h = start().await;
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    h.server.set_taints_dropped(true);
    let created = api
        .create(
            &PostParams::default(),
            &tainted("a", vec![taint("example.com/health", "NoSchedule", None)]),
        )
        .await
        .unwrap();
    assert_eq!(created.spec.devices.as_ref().unwrap()[0].taints, None);
    assert_eq!(
        h.server.slices()[0].spec.devices.as_ref().unwrap()[0].taints,
        None
    );

    h.server.set_taints_dropped(false);
    let created = api
        .create(
            &PostParams::default(),
            &tainted("b", vec![taint("example.com/health", "NoSchedule", None)]),
        )
        .await
        .unwrap();
    let kept = created.spec.devices.as_ref().unwrap()[0]
        .taints
        .as_ref()
        .expect("taints kept");
    assert!(kept[0].time_added.is_some(), "the server fills timeAdded");
}

#[tokio::test]
async fn taint_time_added_survives_updates_that_keep_the_taint() {
    let h = start().await;
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    let long_ago: Timestamp = "2020-01-01T00:00:00Z".parse().unwrap();
    let created = api
        .create(
            &PostParams::default(),
            &tainted(
                "a",
                vec![taint("example.com/health", "NoSchedule", Some(long_ago))],
            ),
        )
        .await
        .unwrap();

    // The client sends the same taint without timeAdded, and a new one.
    let mut update = created.clone();
    update.spec.devices.as_mut().unwrap()[0].taints = Some(vec![
        taint("example.com/health", "NoSchedule", None),
        taint("example.com/health", "NoExecute", None),
    ]);
    let updated = api
        .replace("a", &PostParams::default(), &update)
        .await
        .unwrap();
    let taints = updated.spec.devices.as_ref().unwrap()[0]
        .taints
        .clone()
        .unwrap();
    assert_eq!(
        taints[0].time_added.as_ref().map(|t| t.0),
        Some(long_ago),
        "unchanged taint keeps its time"
    );
    assert!(
        taints[1]
            .time_added
            .as_ref()
            .is_some_and(|t| t.0 > long_ago),
        "a new taint gets now"
    );
}
