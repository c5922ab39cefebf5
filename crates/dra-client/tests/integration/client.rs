//! The client builder and ResourceClaim reads against the fake API server.

use crate::common::*;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use wdp_dra_client::{ApiError, get_claim};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_are_read_and_a_missing_one_is_none() {
    let cluster = Cluster::start().await;
    let stored = cluster.server.put_claim(ResourceClaim {
        metadata: ObjectMeta {
            name: Some("claim-a".into()),
            namespace: Some("team-1".into()),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimSpec::default(),
        status: None,
    });
    let read = within("get_claim", get_claim(&cluster.client, "team-1", "claim-a"))
        .await
        .expect("the claim is read")
        .expect("the claim exists");
    assert_eq!(read.metadata.uid, stored.metadata.uid);
    assert!(read.metadata.uid.is_some());

    let missing = within("get_claim", get_claim(&cluster.client, "team-1", "claim-b")).await;
    assert!(matches!(missing, Ok(None)), "{missing:?}");
    assert!(cluster.server.delete_claim("team-1", "claim-a"));
    let deleted = within("get_claim", get_claim(&cluster.client, "team-1", "claim-a")).await;
    assert!(matches!(deleted, Ok(None)), "{deleted:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_errors_say_what_was_read() {
    let cluster = Cluster::start().await;
    cluster.server.set_refusing(true);
    let error = within("get_claim", get_claim(&cluster.client, "team-1", "claim-a"))
        .await
        .expect_err("a refusing server fails the read");
    assert_eq!(error.http_status(), Some(503));
    assert!(
        error
            .summary()
            .contains("reading ResourceClaim team-1/claim-a"),
        "{}",
        error.summary()
    );
}

#[tokio::test]
async fn a_missing_kubeconfig_is_named() {
    let path = std::path::Path::new("/nonexistent/wdp/kubeconfig");
    let Err(error) = wdp_dra_client::client(Some(path)).await else {
        panic!("a client from a kubeconfig that does not exist");
    };
    assert!(matches!(error, ApiError::Kubeconfig { .. }), "{error:?}");
    assert!(
        error.to_string().contains("/nonexistent/wdp/kubeconfig"),
        "{error}"
    );
}
