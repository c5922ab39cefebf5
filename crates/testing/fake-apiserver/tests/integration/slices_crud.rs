//! ResourceSlice reads and writes through the real kube client: create, get, list with
//! selectors, replace with resourceVersion rules, delete and delete-collection.

use crate::common::{api_error, slice, start};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use wdp_fake_apiserver::ResourceSlice;

#[tokio::test]
async fn create_get_list_and_server_owned_metadata() {
    let h = start().await;
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    let created = api
        .create(
            &PostParams::default(),
            &slice("a", "node-1", "gpu.example.com", &["dev-0"]),
        )
        .await
        .unwrap();
    assert!(
        created
            .metadata
            .uid
            .as_deref()
            .is_some_and(|u| u.len() == 36)
    );
    assert!(created.metadata.creation_timestamp.is_some());
    assert_eq!(created.metadata.generation, Some(1));
    let rv_a: u64 = created
        .metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();

    let other = api
        .create(
            &PostParams::default(),
            &slice("b", "node-2", "gpu.example.com", &["dev-0"]),
        )
        .await
        .unwrap();
    let rv_b: u64 = other
        .metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv_b > rv_a, "one global, growing resourceVersion");

    let fetched = api.get("a").await.unwrap();
    assert_eq!(fetched, created);

    let all = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        all.items
            .iter()
            .map(|s| s.metadata.name.clone().unwrap())
            .collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert_eq!(
        all.metadata.resource_version.as_deref(),
        Some(rv_b.to_string().as_str())
    );

    let node_1 = api
        .list(&ListParams::default().fields("spec.nodeName=node-1,spec.driver=gpu.example.com"))
        .await
        .unwrap();
    assert_eq!(node_1.items.len(), 1);
    assert_eq!(node_1.items[0].metadata.name.as_deref(), Some("a"));
    let by_name = api
        .list(&ListParams::default().fields("metadata.name=b"))
        .await
        .unwrap();
    assert_eq!(by_name.items[0].metadata.name.as_deref(), Some("b"));
    assert_eq!(h.server.slices_of("node-2", "gpu.example.com").len(), 1);
    assert_eq!(h.server.stats().slice_creates, 2);
}

#[tokio::test]
async fn existing_names_conflict_and_generate_name_makes_new_ones() {
    let h = start().await;
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    api.create(
        &PostParams::default(),
        &slice("a", "n", "d.example.com", &["x"]),
    )
    .await
    .unwrap();
    let status = api_error(
        api.create(
            &PostParams::default(),
            &slice("a", "n", "d.example.com", &["x"]),
        )
        .await,
    );
    assert_eq!(
        (status.code, status.reason.as_str()),
        (409, "AlreadyExists")
    );

    let mut generated = slice("", "n", "d.example.com", &["x"]);
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("n-d.example.com-".into());
    let first = api
        .create(&PostParams::default(), &generated)
        .await
        .unwrap();
    let second = api
        .create(&PostParams::default(), &generated)
        .await
        .unwrap();
    let (first, second) = (first.metadata.name.unwrap(), second.metadata.name.unwrap());
    assert!(
        first.starts_with("n-d.example.com-") && first.len() == "n-d.example.com-".len() + 5,
        "{first}"
    );
    assert_ne!(first, second);
    let stats = h.server.stats();
    assert_eq!(stats.rejected.len(), 1);
    assert_eq!(stats.rejected[0].reason, "AlreadyExists");
}

#[tokio::test]
async fn replace_checks_resource_version_and_bumps_generation_on_spec_changes() {
    let h = start().await;
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    let created = api
        .create(
            &PostParams::default(),
            &slice("a", "n", "d.example.com", &["x"]),
        )
        .await
        .unwrap();

    let mut changed = created.clone();
    changed.spec.devices = Some(vec![crate::common::device("x"), crate::common::device("y")]);
    let replaced = api
        .replace("a", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_eq!(replaced.metadata.generation, Some(2));
    assert_eq!(replaced.metadata.uid, created.metadata.uid);
    assert_ne!(
        replaced.metadata.resource_version,
        created.metadata.resource_version
    );

    // The first version is stale now.
    let status = api_error(api.replace("a", &PostParams::default(), &changed).await);
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert!(
        status.message.contains("the object has been modified"),
        "{}",
        status.message
    );

    // A label change keeps the generation.
    let mut labelled = replaced.clone();
    labelled.metadata.labels = Some([("k".to_string(), "v".to_string())].into());
    let relabelled = api
        .replace("a", &PostParams::default(), &labelled)
        .await
        .unwrap();
    assert_eq!(relabelled.metadata.generation, Some(2));

    // A no-op update writes nothing.
    let same = api
        .replace("a", &PostParams::default(), &relabelled)
        .await
        .unwrap();
    assert_eq!(
        same.metadata.resource_version,
        relabelled.metadata.resource_version
    );

    let mut missing = relabelled.clone();
    missing.metadata.name = Some("missing".into());
    let status = api_error(
        api.replace("missing", &PostParams::default(), &missing)
            .await,
    );
    assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));
}

#[tokio::test]
async fn delete_and_delete_collection() {
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
    let deleted = api.delete("a", &DeleteParams::default()).await.unwrap();
    assert!(deleted.is_left(), "the deleted object comes back");
    let status = api_error(api.delete("a", &DeleteParams::default()).await);
    assert_eq!(status.code, 404);

    let gone = api
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().fields("spec.nodeName=n1"),
        )
        .await
        .unwrap();
    let gone = gone.left().expect("the deleted list");
    assert_eq!(
        gone.items
            .iter()
            .map(|s| s.metadata.name.clone().unwrap())
            .collect::<Vec<_>>(),
        ["b"]
    );
    assert_eq!(
        h.server
            .slices()
            .iter()
            .map(|s| s.metadata.name.clone().unwrap())
            .collect::<Vec<_>>(),
        ["c"]
    );
    let stats = h.server.stats();
    assert_eq!(
        (stats.slice_deletes, stats.slice_collection_deletes),
        (1, 1)
    );
}
