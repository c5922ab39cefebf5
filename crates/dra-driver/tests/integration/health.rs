//! The DRA health stream, served over a Unix socket and read with a tonic
//! client as the kubelet would: the full list at once, an update on every
//! change of the device set, and the full list again within the timeout
//! while nothing changes; v1 and v1alpha1 alike.

use std::time::{Duration, Instant};

use tokio::net::UnixListener;
use tokio::sync::watch;
use tokio_stream::wrappers::UnixListenerStream;
use tokio_util::sync::CancellationToken;
use tonic::codec::Streaming;
use wdp_dra_driver::HealthService;
use wdp_k8s_naming as naming;
use wdp_kubelet_api::dra_health::{v1, v1alpha1};
use wdp_policy::types::Device;
use wdp_resource::SharedDeviceSet;

const DRIVER: &str = "gpu.example.com";
const NODE: &str = "node-a";
/// Bound on every awaited event; far above what any step needs.
const PATIENCE: Duration = Duration::from_secs(10);

fn device_set(unhealthy: &[(&str, &str)]) -> SharedDeviceSet {
    let devices: Vec<Device> = ["0000:3b:00.0", "0000:af:00.0"]
        .into_iter()
        .map(|id| Device {
            id: id.into(),
            candidates: vec![id.into()],
            ..Device::default()
        })
        .collect();
    crate::common::device_set_of(&devices, unhealthy)
}

struct Served {
    _dir: tempfile::TempDir,
    channel: tonic::transport::Channel,
    devices: watch::Sender<SharedDeviceSet>,
    stop: CancellationToken,
}

async fn serve(timeout: Duration) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("dra.sock");
    let (devices, receiver) = watch::channel(device_set(&[]));
    let stop = CancellationToken::new();
    let service = HealthService::new(receiver, DRIVER, NODE)
        .with_timeout(timeout)
        .with_stop(stop.clone());
    let listener = UnixListener::bind(&socket).unwrap();
    let server_stop = stop.clone();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service.v1_server())
            .add_service(service.v1alpha1_server())
            .serve_with_incoming_shutdown(
                UnixListenerStream::new(listener),
                server_stop.cancelled_owned(),
            ),
    );
    let channel = wdp_kubelet_api::connect_unix(&socket).await.unwrap();
    Served {
        _dir: dir,
        channel,
        devices,
        stop,
    }
}

async fn next<T>(stream: &mut Streaming<T>) -> T {
    tokio::time::timeout(PATIENCE, stream.message())
        .await
        .expect("an update within the patience bound")
        .expect("a healthy stream")
        .expect("the stream stays open")
}

/// (device name, health, message) of every entry of a v1 update.
fn summary(update: &v1::NodeWatchResourcesResponse) -> Vec<(String, v1::HealthStatus, String)> {
    update
        .devices
        .iter()
        .map(|d| {
            let id = d.device.as_ref().unwrap();
            assert_eq!(id.pool_name, NODE);
            (id.device_name.clone(), d.health(), d.message.clone())
        })
        .collect()
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn name(id: &str) -> String {
    naming::device_name(id).unwrap()
}

#[tokio::test]
async fn full_list_at_once_then_every_change() {
    let served = serve(Duration::from_secs(60)).await;
    let mut client =
        v1::dra_resource_health_client::DraResourceHealthClient::new(served.channel.clone());
    let mut stream = client
        .node_watch_resources(v1::NodeWatchResourcesRequest {})
        .await
        .unwrap()
        .into_inner();

    let first = next(&mut stream).await;
    assert_eq!(
        summary(&first),
        [
            (
                name("0000:3b:00.0"),
                v1::HealthStatus::Healthy,
                String::new()
            ),
            (
                name("0000:af:00.0"),
                v1::HealthStatus::Healthy,
                String::new()
            ),
        ]
    );
    assert_eq!(first.devices[0].health_check_timeout_seconds, 60);
    assert!(first.devices[0].last_updated_time > 1_700_000_000);

    // Hot-unplug: the verdict turns unhealthy with a reason.
    let before_unplug = unix_now();
    served
        .devices
        .send_replace(device_set(&[("0000:af:00.0", "fell off the bus")]));
    let update = next(&mut stream).await;
    // The time is when the health changed: the unplugged device's is new,
    // the other keeps the time it was first reported with.
    assert!(update.devices[1].last_updated_time >= before_unplug);
    assert_eq!(
        update.devices[0].last_updated_time,
        first.devices[0].last_updated_time
    );
    assert_eq!(
        summary(&update),
        [
            (
                name("0000:3b:00.0"),
                v1::HealthStatus::Healthy,
                String::new()
            ),
            (
                name("0000:af:00.0"),
                v1::HealthStatus::Unhealthy,
                "fell off the bus".to_string()
            ),
        ]
    );

    // A reason longer than the kubelet keeps is cut to 1024 characters.
    let long = "x".repeat(5000);
    served
        .devices
        .send_replace(device_set(&[("0000:3b:00.0", long.as_str())]));
    let update = next(&mut stream).await;
    assert_eq!(update.devices[0].message.chars().count(), 1024);
    assert_eq!(update.devices[1].health(), v1::HealthStatus::Healthy);

    // Recovery.
    served.devices.send_replace(device_set(&[]));
    let update = next(&mut stream).await;
    assert!(
        update
            .devices
            .iter()
            .all(|d| d.health() == v1::HealthStatus::Healthy)
    );

    // Stopping the driver ends the stream.
    served.stop.cancel();
    let end = tokio::time::timeout(PATIENCE, stream.message())
        .await
        .expect("the stream ends");
    assert!(!matches!(end, Ok(Some(_))), "{end:?}");
}

#[tokio::test]
async fn the_full_list_is_sent_again_within_the_timeout() {
    // Timeout 2 s: without any change the list must come again within it
    // (every second), well before the kubelet would mark devices Unknown.
    let served = serve(Duration::from_secs(2)).await;
    let mut client =
        v1alpha1::dra_resource_health_client::DraResourceHealthClient::new(served.channel.clone());
    let mut stream = client
        .node_watch_resources(v1alpha1::NodeWatchResourcesRequest {})
        .await
        .unwrap()
        .into_inner();
    let first = next(&mut stream).await;
    assert_eq!(first.devices.len(), 2);
    assert_eq!(first.devices[0].health_check_timeout_seconds, 2);
    let mut last = Instant::now();
    for _ in 0..3 {
        let again = next(&mut stream).await;
        let gap = last.elapsed();
        last = Instant::now();
        assert_eq!(again.devices.len(), 2);
        // Resent, not changed: the times stay those of the first update.
        assert_eq!(
            again
                .devices
                .iter()
                .map(|d| d.last_updated_time)
                .collect::<Vec<_>>(),
            first
                .devices
                .iter()
                .map(|d| d.last_updated_time)
                .collect::<Vec<_>>()
        );
        assert!(
            again
                .devices
                .iter()
                .all(|d| d.health() == v1alpha1::HealthStatus::Healthy)
        );
        assert!(gap < Duration::from_secs(2), "resent after {gap:?}");
    }
}

#[tokio::test]
async fn the_stream_ends_when_the_resource_goes_away() {
    let served = serve(Duration::from_secs(60)).await;
    let mut client =
        v1::dra_resource_health_client::DraResourceHealthClient::new(served.channel.clone());
    let mut stream = client
        .node_watch_resources(v1::NodeWatchResourcesRequest {})
        .await
        .unwrap()
        .into_inner();
    next(&mut stream).await;
    drop(served.devices);
    let end = tokio::time::timeout(PATIENCE, stream.message())
        .await
        .expect("the stream ends");
    assert!(matches!(end, Ok(None)), "{end:?}");
}
