//! The test-facing API: waiting for slices, wiping a node as the kubelet does, and request
//! details a publisher may rely on (dry runs, watch timeouts, versions on create).

use std::time::Duration;

use crate::common::{api_error, slice, start};
use futures::StreamExt;
use kube::api::{Api, PostParams, WatchParams};
use wdp_fake_apiserver::ResourceSlice;

const PATIENCE: Duration = Duration::from_secs(10);

#[tokio::test]
async fn wait_for_slices_wakes_on_writes_and_times_out_otherwise() {
    let h = start().await;
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    let writer = {
        let api = api.clone();
        tokio::spawn(async move {
            for name in ["a", "b", "c"] {
                api.create(
                    &PostParams::default(),
                    &slice(name, "n", "d.example.com", &["x"]),
                )
                .await
                .unwrap();
            }
        })
    };
    let seen = h
        .server
        .wait_for_slices(|s| s.len() == 3, PATIENCE)
        .await
        .expect("three slices");
    assert_eq!(seen.len(), 3);
    writer.await.unwrap();

    let timeout = h
        .server
        .wait_for_slices(|s| s.len() == 4, Duration::from_millis(200))
        .await
        .expect_err("nobody writes a fourth");
    assert_eq!(timeout.last.len(), 3);
    assert!(timeout.to_string().contains("did not reach"), "{timeout}");
}

#[tokio::test]
async fn wipe_without_a_driver_takes_every_slice_of_the_node() {
    let h = start().await;
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    for (name, node, driver) in [
        ("a", "n1", "d1.example.com"),
        ("b", "n1", "d2.example.com"),
        ("c", "n2", "d1.example.com"),
    ] {
        api.create(&PostParams::default(), &slice(name, node, driver, &["x"]))
            .await
            .unwrap();
    }
    assert_eq!(h.server.wipe_node_slices("n1", None), 2);
    assert_eq!(h.server.wipe_node_slices("n1", None), 0);
    assert_eq!(h.server.slices_of("n2", "d1.example.com").len(), 1);
    assert_eq!(
        h.server.stats().slice_deletes,
        0,
        "test-side deletes are not client writes"
    );
}

#[tokio::test]
async fn dry_runs_store_nothing_and_create_refuses_a_resource_version() {
    let h = start().await;
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let answered = api
        .create(&dry, &slice("a", "n", "d.example.com", &["x"]))
        .await
        .unwrap();
    assert_eq!(answered.metadata.name.as_deref(), Some("a"));
    assert!(h.server.slices().is_empty());

    let mut versioned = slice("a", "n", "d.example.com", &["x"]);
    versioned.metadata.resource_version = Some("12".into());
    let status = api_error(api.create(&PostParams::default(), &versioned).await);
    assert_eq!(status.code, 500);
    assert!(
        status.message.contains("resourceVersion should not be set"),
        "{}",
        status.message
    );
}

#[tokio::test]
async fn watches_end_at_their_timeout() {
    let h = start().await;
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    let mut stream = api
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .unwrap()
        .boxed();
    let ended = tokio::time::timeout(PATIENCE, stream.next())
        .await
        .expect("ends after about a second");
    assert!(ended.is_none(), "{ended:?}");
}
