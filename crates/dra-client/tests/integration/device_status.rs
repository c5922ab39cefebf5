//! Device status (KEP-4817) against the fake API server: writing and clearing
//! this driver's entries on a claim, leaving other drivers' alone; claims
//! gone or replaced; entries the server would reject; concurrent writers; a
//! server that never answers the write.

use crate::common::*;
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceAllocationResult, DeviceRequestAllocationResult, ResourceClaimStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use wdp_dra_client::{
    AllocatedDeviceStatus, ApiError, NetworkDeviceData, ResourceClaim, STATUS_REQUEST_TIMEOUT,
    clear_device_status, write_device_status,
};

const NAMESPACE: &str = "default";
const CLAIM: &str = "gpu-claim";
const NIC_DRIVER: &str = "nic.example.com";

fn result(driver: &str, pool: &str, device: &str) -> DeviceRequestAllocationResult {
    DeviceRequestAllocationResult {
        request: "req".into(),
        driver: driver.into(),
        pool: pool.into(),
        device: device.into(),
        ..DeviceRequestAllocationResult::default()
    }
}

fn entry(driver: &str, pool: &str, device: &str, ready: &str) -> AllocatedDeviceStatus {
    AllocatedDeviceStatus {
        driver: driver.into(),
        pool: pool.into(),
        device: device.into(),
        conditions: Some(vec![Condition {
            type_: "Ready".into(),
            status: ready.into(),
            reason: "Prepared".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(Timestamp::now()),
        }]),
        ..AllocatedDeviceStatus::default()
    }
}

/// A claim allocated `results`, with `entries` already in its status.
fn claim(
    results: Vec<DeviceRequestAllocationResult>,
    entries: Vec<AllocatedDeviceStatus>,
) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(CLAIM.into()),
            namespace: Some(NAMESPACE.into()),
            ..ObjectMeta::default()
        },
        status: Some(ResourceClaimStatus {
            allocation: Some(AllocationResult {
                devices: Some(DeviceAllocationResult {
                    results: Some(results),
                    ..DeviceAllocationResult::default()
                }),
                ..AllocationResult::default()
            }),
            devices: (!entries.is_empty()).then_some(entries),
            ..ResourceClaimStatus::default()
        }),
        ..ResourceClaim::default()
    }
}

fn stored_entries(cluster: &Cluster) -> Vec<(String, String, String, String)> {
    let claim = cluster.server.claim(NAMESPACE, CLAIM).expect("the claim");
    claim
        .status
        .and_then(|s| s.devices)
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            let ready = e
                .conditions
                .and_then(|c| c.first().map(|c| c.status.clone()))
                .unwrap_or_default();
            (e.driver, e.pool, e.device, ready)
        })
        .collect()
}

fn row(driver: &str, pool: &str, device: &str, ready: &str) -> (String, String, String, String) {
    (driver.into(), pool.into(), device.into(), ready.into())
}

/// A cluster holding claim `CLAIM` allocated this driver's `gpu0`, and
/// the claim's UID.
async fn cluster_with_one_gpu_claim() -> (Cluster, String) {
    let cluster = Cluster::start().await;
    let stored = cluster
        .server
        .put_claim(claim(vec![result(DRIVER, NODE, "gpu0")], Vec::new()));
    let uid = stored.metadata.uid.unwrap();
    (cluster, uid)
}

fn status_writes(cluster: &Cluster) -> u64 {
    cluster.server.stats().claim_status_writes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_entries_are_written_replaced_and_cleared_and_others_kept() {
    let cluster = Cluster::start().await;
    let stored = cluster.server.put_claim(claim(
        vec![
            result(DRIVER, NODE, "gpu0"),
            result(DRIVER, NODE, "gpu1"),
            result(NIC_DRIVER, NODE, "nic0"),
        ],
        vec![entry(NIC_DRIVER, NODE, "nic0", "True")],
    ));
    let uid = stored.metadata.uid.clone().unwrap();
    let client = &cluster.client;

    let write =
        |statuses| write_device_status(client, NAMESPACE, CLAIM, &uid, DRIVER, NODE, statuses);
    within("a write", write(vec![entry(DRIVER, NODE, "gpu0", "False")]))
        .await
        .unwrap();
    assert_eq!(
        stored_entries(&cluster),
        vec![
            row(NIC_DRIVER, NODE, "nic0", "True"),
            row(DRIVER, NODE, "gpu0", "False")
        ]
    );

    within(
        "a replacement",
        write(vec![
            entry(DRIVER, NODE, "gpu0", "True"),
            entry(DRIVER, NODE, "gpu1", "True"),
        ]),
    )
    .await
    .unwrap();
    assert_eq!(
        stored_entries(&cluster),
        vec![
            row(NIC_DRIVER, NODE, "nic0", "True"),
            row(DRIVER, NODE, "gpu0", "True"),
            row(DRIVER, NODE, "gpu1", "True")
        ]
    );

    within(
        "a clear",
        clear_device_status(client, NAMESPACE, CLAIM, &uid, DRIVER, NODE),
    )
    .await
    .unwrap();
    assert_eq!(
        stored_entries(&cluster),
        vec![row(NIC_DRIVER, NODE, "nic0", "True")]
    );
    // Nothing of ours left: clearing again writes nothing.
    let writes = status_writes(&cluster);
    within(
        "a second clear",
        clear_device_status(client, NAMESPACE, CLAIM, &uid, DRIVER, NODE),
    )
    .await
    .unwrap();
    assert_eq!(status_writes(&cluster), writes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_gone_or_replaced_is_refused_for_writing_and_fine_for_clearing() {
    let cluster = Cluster::start().await;
    let client = &cluster.client;
    let first = cluster
        .server
        .put_claim(claim(vec![result(DRIVER, NODE, "gpu0")], Vec::new()));
    let old_uid = first.metadata.uid.clone().unwrap();

    // Made anew under the same name: another UID.
    cluster.server.delete_claim(NAMESPACE, CLAIM);
    let second = cluster
        .server
        .put_claim(claim(vec![result(DRIVER, NODE, "gpu0")], Vec::new()));
    assert_ne!(second.metadata.uid, first.metadata.uid);
    let refused = within(
        "a write to a replaced claim",
        write_device_status(
            client,
            NAMESPACE,
            CLAIM,
            &old_uid,
            DRIVER,
            NODE,
            vec![entry(DRIVER, NODE, "gpu0", "True")],
        ),
    )
    .await;
    assert!(
        matches!(&refused, Err(ApiError::ClaimReplaced { expected, .. }) if *expected == old_uid),
        "{refused:?}"
    );
    within(
        "clearing a replaced claim",
        clear_device_status(client, NAMESPACE, CLAIM, &old_uid, DRIVER, NODE),
    )
    .await
    .unwrap();
    assert_eq!(status_writes(&cluster), 0);

    cluster.server.delete_claim(NAMESPACE, CLAIM);
    let uid = second.metadata.uid.unwrap();
    let refused = within(
        "a write to a gone claim",
        write_device_status(
            client,
            NAMESPACE,
            CLAIM,
            &uid,
            DRIVER,
            NODE,
            vec![entry(DRIVER, NODE, "gpu0", "True")],
        ),
    )
    .await;
    assert!(
        matches!(refused, Err(ApiError::ClaimGone { .. })),
        "{refused:?}"
    );
    within(
        "clearing a gone claim",
        clear_device_status(client, NAMESPACE, CLAIM, &uid, DRIVER, NODE),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_the_server_would_reject_are_refused_naming_device_and_field() {
    let (cluster, uid) = cluster_with_one_gpu_claim().await;
    let mut bad_status = entry(DRIVER, NODE, "gpu0", "Yes");
    bad_status.network_data = Some(NetworkDeviceData {
        ips: Some(vec!["10.0.0.1".into()]),
        ..NetworkDeviceData::default()
    });
    let refused = within(
        "a refused write",
        write_device_status(
            &cluster.client,
            NAMESPACE,
            CLAIM,
            &uid,
            DRIVER,
            NODE,
            vec![bad_status, entry(DRIVER, NODE, "gpu7", "True")],
        ),
    )
    .await;
    let Err(ApiError::InvalidDeviceStatus { problems, .. }) = &refused else {
        panic!("{refused:?}");
    };
    let named: Vec<(&str, &str)> = problems
        .iter()
        .map(|p| (p.device.as_str(), p.field.as_str()))
        .collect();
    assert_eq!(
        named,
        vec![
            ("gpu0", "conditions[0].status"),
            ("gpu0", "networkData.ips[0]"),
            ("gpu7", "device")
        ]
    );
    let message = refused.unwrap_err().to_string();
    assert!(
        message.contains("gpu7") && message.contains(CLAIM),
        "{message}"
    );
    assert_eq!(status_writes(&cluster), 0);
    assert!(cluster.server.stats().claim_status_rejected.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_of_one_claim_all_get_through() {
    // At most POOLS - 1 others can win between a read and a write: within
    // MAX_STATUS_ATTEMPTS whatever the interleaving.
    const POOLS: usize = 4;
    let cluster = Cluster::start().await;
    let pools: Vec<String> = (0..POOLS).map(|i| format!("pool-{i}")).collect();
    let stored = cluster.server.put_claim(claim(
        pools
            .iter()
            .map(|pool| result(DRIVER, pool, "gpu0"))
            .collect(),
        Vec::new(),
    ));
    let uid = stored.metadata.uid.unwrap();
    for round in ["False", "True"] {
        let writers: Vec<_> = pools
            .iter()
            .map(|pool| {
                let client = cluster.client.clone();
                let (pool, uid) = (pool.clone(), uid.clone());
                tokio::spawn(async move {
                    write_device_status(
                        &client,
                        NAMESPACE,
                        CLAIM,
                        &uid,
                        DRIVER,
                        &pool,
                        vec![entry(DRIVER, &pool, "gpu0", round)],
                    )
                    .await
                })
            })
            .collect();
        for writer in writers {
            within("a writer", writer).await.unwrap().unwrap();
        }
        let mut entries = stored_entries(&cluster);
        entries.sort();
        let wanted: Vec<_> = pools
            .iter()
            .map(|pool| row(DRIVER, pool, "gpu0", round))
            .collect();
        assert_eq!(entries, wanted);
    }
    let conflicts = cluster
        .server
        .stats()
        .claim_status_rejected
        .iter()
        .filter(|r| r.code == 409)
        .count();
    eprintln!("{conflicts} conflicts retried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_the_server_never_answers_gives_up_in_time_naming_the_claim() {
    let (cluster, uid) = cluster_with_one_gpu_claim().await;
    let write = || {
        write_device_status(
            &cluster.client,
            NAMESPACE,
            CLAIM,
            &uid,
            DRIVER,
            NODE,
            vec![entry(DRIVER, NODE, "gpu0", "True")],
        )
    };
    cluster.server.hang_claim_status_writes(true);
    let started = std::time::Instant::now();
    let error = within("a write the server holds", write())
        .await
        .unwrap_err();
    assert!(started.elapsed() >= STATUS_REQUEST_TIMEOUT);
    assert!(
        matches!(error, ApiError::TimedOut { .. }) && error.to_string().contains(CLAIM),
        "{error}"
    );
    assert!(stored_entries(&cluster).is_empty());
    // The server answers again: the next write goes through.
    cluster.server.hang_claim_status_writes(false);
    within("a write", write()).await.unwrap();
    assert_eq!(
        stored_entries(&cluster),
        [row(DRIVER, NODE, "gpu0", "True")]
    );
}
