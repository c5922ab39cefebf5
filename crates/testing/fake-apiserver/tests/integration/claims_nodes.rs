//! ResourceClaims and Nodes put by the test and read by the client, merge patches on slices,
//! and the `/version` endpoint with the served minor version.

use crate::common::{api_error, slice, start};
use k8s_openapi::api::resource::v1::{ResourceClaimSpec, ResourceClaimStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use wdp_fake_apiserver::{Node, ResourceClaim, ResourceSlice};

fn claim(namespace: &str, name: &str) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            ..Default::default()
        },
        spec: ResourceClaimSpec::default(),
        status: Some(ResourceClaimStatus::default()),
    }
}

#[tokio::test]
async fn claims_put_by_the_test_are_read_by_the_client() {
    let h = start().await;
    let api: Api<ResourceClaim> = Api::namespaced(h.client.clone(), "team-a");
    let status = api_error(api.get("gpu-claim").await);
    assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));
    assert!(
        status
            .message
            .contains("resourceclaims.resource.k8s.io \"gpu-claim\" not found"),
        "{}",
        status.message
    );

    let stored = h.server.put_claim(claim("team-a", "gpu-claim"));
    let uid = stored.metadata.uid.clone().expect("uid filled");
    assert!(
        stored.metadata.resource_version.is_some() && stored.metadata.creation_timestamp.is_some()
    );
    assert_eq!(api.get("gpu-claim").await.unwrap(), stored);

    // Replacing keeps the uid; a claim in another namespace is not seen here.
    let again = h.server.put_claim(claim("team-a", "gpu-claim"));
    assert_eq!(again.metadata.uid.as_deref(), Some(uid.as_str()));
    h.server.put_claim(claim("team-b", "gpu-claim"));
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
    assert_eq!(
        Api::<ResourceClaim>::all(h.client.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        2
    );

    assert!(h.server.delete_claim("team-a", "gpu-claim"));
    assert!(!h.server.delete_claim("team-a", "gpu-claim"));
    assert_eq!(api_error(api.get("gpu-claim").await).code, 404);
}

#[tokio::test]
async fn nodes_and_version() {
    let h = start().await;
    let nodes: Api<Node> = Api::all(h.client.clone());
    assert_eq!(api_error(nodes.get("node-1").await).code, 404);
    let node = Node {
        metadata: ObjectMeta {
            name: Some("node-1".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let stored = h.server.put_node(node);
    assert_eq!(nodes.get("node-1").await.unwrap(), stored);
    let version = h.client.apiserver_version().await.unwrap();
    assert_eq!(
        (version.major.as_str(), version.minor.as_str()),
        ("1", "34")
    );
    h.server.set_served_minor(36);
    assert_eq!(h.server.served_minor(), 36);
    let version = h.client.apiserver_version().await.unwrap();
    assert_eq!(
        (
            version.major.as_str(),
            version.minor.as_str(),
            version.git_version.as_str()
        ),
        ("1", "36", "v1.36.0-wdp-fake")
    );
}

#[tokio::test]
#[should_panic(expected = "resource.k8s.io/v1 is served from 1.34 on")]
async fn versions_before_1_34_are_not_served() {
    let h = start().await;
    h.server.set_served_minor(33);
}

#[tokio::test]
async fn merge_and_json_patches_edit_and_apply_is_unsupported() {
    let h = start().await;
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    api.create(
        &PostParams::default(),
        &slice("a", "n", "d.example.com", &["x"]),
    )
    .await
    .unwrap();
    let patch = serde_json::json!({"metadata": {"labels": {"tier": "gold"}}, "spec": {"pool": {"generation": 7}}});
    let patched = api
        .patch("a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(patched.metadata.labels.unwrap()["tier"], "gold");
    assert_eq!(patched.spec.pool.generation, 7);
    assert_eq!(patched.metadata.generation, Some(2));

    let invalid = serde_json::json!({"spec": {"pool": {"resourceSliceCount": 0}}});
    let status = api_error(
        api.patch("a", &PatchParams::default(), &Patch::Merge(&invalid))
            .await,
    );
    assert_eq!(status.code, 422);

    // kube's Patch::Json needs its `jsonpatch` feature; send the RFC 6902 body by hand.
    let json_patch = |ops: serde_json::Value| {
        axum::http::Request::patch("/apis/resource.k8s.io/v1/resourceslices/a")
            .header("content-type", "application/json-patch+json")
            .body(ops.to_string().into_bytes())
            .unwrap()
    };
    let patched: ResourceSlice = h
        .client
        .request(json_patch(serde_json::json!([
            {"op": "test", "path": "/spec/pool/generation", "value": 7},
            {"op": "replace", "path": "/spec/pool/generation", "value": 8},
        ])))
        .await
        .unwrap();
    assert_eq!(patched.spec.pool.generation, 8);
    let failing = json_patch(
        serde_json::json!([{"op": "test", "path": "/spec/pool/generation", "value": 7}]),
    );
    let status = api_error(h.client.request::<ResourceSlice>(failing).await);
    assert_eq!(status.code, 422, "{}", status.message);
    assert!(status.message.contains("test failed"), "{}", status.message);

    let apply = PatchParams::apply("test");
    let status = api_error(api.patch("a", &apply, &Patch::Apply(&patch)).await);
    assert_eq!(
        (status.code, status.reason.as_str()),
        (415, "UnsupportedMediaType")
    );
    assert_eq!(h.server.stats().slice_updates, 2);
}
