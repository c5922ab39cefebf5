//! The DRA kubelet stand-in against a small tonic DRA driver: registration
//! and the choice of services, prepare/unprepare over both versions, the
//! kubelet's checks on answers, the health stream, deregistration and a
//! kubelet restart.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::support::{DriverSpec, TestDriver, WAIT};
use wdp_kubelet_api::dra_health::v1::HealthStatus;
use wdp_kubelet_sim::dra::{ClaimRef, DeviceHealth, HealthStream};
use wdp_kubelet_sim::{DraSimOptions, SimDraKubelet, SimError};

const ALL: &[&str] = &[
    "v1.DRAPlugin",
    "v1beta1.DRAPlugin",
    "v1.DRAResourceHealth",
    "v1alpha1.DRAResourceHealth",
];

fn claims(names: &[&str]) -> Vec<ClaimRef> {
    names
        .iter()
        .map(|n| ClaimRef::new("default", n, &format!("uid-{n}")))
        .collect()
}

fn reported(device: &str, health: HealthStatus, message: &str) -> crate::support::Reported {
    (
        "node-a".to_owned(),
        device.to_owned(),
        health as i32,
        message.to_owned(),
    )
}

#[tokio::test]
async fn a_driver_offering_both_versions_gets_v1_and_is_told_it_registered() {
    let mut driver = TestDriver::start(DriverSpec::new("gpu.example.com", ALL)).await;
    let kubelet = SimDraKubelet::start(driver.registry(), DraSimOptions::default())
        .await
        .unwrap();
    let record = kubelet
        .wait_registered("gpu.example.com", WAIT)
        .await
        .unwrap();
    assert_eq!(record.chosen_service, "v1.DRAPlugin");
    assert_eq!(
        record.health_service.as_deref(),
        Some("v1.DRAResourceHealth")
    );
    assert_eq!(record.info.endpoint, driver.endpoint().to_string_lossy());
    assert_eq!(record.registrations, 1);
    let status = driver.registration.as_mut().unwrap().status(0, WAIT).await;
    assert!(status.plugin_registered, "{status:?}");
    assert!(status.error.is_empty());
}

#[tokio::test]
async fn a_driver_listing_only_v1beta1_is_prepared_over_v1beta1() {
    let driver =
        TestDriver::start(DriverSpec::new("gpu.example.com", &["v1beta1.DRAPlugin"])).await;
    let kubelet = SimDraKubelet::start(driver.registry(), DraSimOptions::default())
        .await
        .unwrap();
    let record = kubelet
        .wait_registered("gpu.example.com", WAIT)
        .await
        .unwrap();
    assert_eq!(record.chosen_service, "v1beta1.DRAPlugin");
    assert_eq!(record.health_service, None);
    assert_eq!(record.health_stream, HealthStream::NotOffered);

    let asked = claims(&["a", "b"]);
    let prepared = kubelet.prepare("gpu.example.com", &asked).await.unwrap();
    assert_eq!(prepared.service, "v1beta1.DRAPlugin");
    let devices = prepared.claims["uid-a"].as_ref().unwrap();
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].device_name, "dev-a");
    assert_eq!(devices[0].pool_name, "node-a");
    assert_eq!(devices[0].request_names, vec!["gpu".to_owned()]);
    assert_eq!(devices[0].cdi_device_ids, vec!["gpu.example.com/claim=a"]);
    assert_eq!(devices[0].share_id, None, "v1beta1 has no share ID");
    assert!(prepared.claims["uid-b"].is_ok());
    assert_eq!(driver.prepared().len(), 2);

    let unprepared = kubelet.unprepare("gpu.example.com", &asked).await.unwrap();
    assert_eq!(unprepared.claims.len(), 2);
    assert!(unprepared.claims.values().all(Result::is_ok));
    assert!(driver.prepared().is_empty());
    assert_eq!(
        driver.calls(),
        [
            "v1beta1 NodePrepareResources",
            "v1beta1 NodeUnprepareResources"
        ]
    );
}

#[tokio::test]
async fn a_kubelet_supporting_only_v1beta1_picks_it_from_a_driver_offering_both() {
    let driver = TestDriver::start(DriverSpec::new("gpu.example.com", ALL)).await;
    let options = DraSimOptions {
        supported_services: vec!["v1beta1.DRAPlugin".into()],
        health_services: vec!["v1alpha1.DRAResourceHealth".into()],
        ..DraSimOptions::default()
    };
    let kubelet = SimDraKubelet::start(driver.registry(), options)
        .await
        .unwrap();
    let record = kubelet
        .wait_registered("gpu.example.com", WAIT)
        .await
        .unwrap();
    assert_eq!(record.chosen_service, "v1beta1.DRAPlugin");
    assert_eq!(
        record.health_service.as_deref(),
        Some("v1alpha1.DRAResourceHealth")
    );
    driver
        .health
        .send(vec![reported("gpu-0", HealthStatus::Unhealthy, "XID 79")])
        .unwrap();
    let record = kubelet
        .wait_health("gpu.example.com", WAIT, |r| !r.health.is_empty())
        .await
        .unwrap();
    let gpu0 = &record.health[&("node-a".to_owned(), "gpu-0".to_owned())];
    assert_eq!(gpu0.health, DeviceHealth::Unhealthy);
    assert_eq!(gpu0.message, "XID 79");
    kubelet
        .prepare("gpu.example.com", &claims(&["a"]))
        .await
        .unwrap();
    assert_eq!(
        driver.calls(),
        [
            "v1alpha1 NodeWatchResources",
            "v1beta1 NodePrepareResources"
        ]
    );
}

#[tokio::test]
async fn a_driver_offering_no_known_service_is_refused_with_a_message() {
    let mut driver =
        TestDriver::start(DriverSpec::new("old.example.com", &["v1alpha4.DRAPlugin"])).await;
    let kubelet = SimDraKubelet::start(driver.registry(), DraSimOptions::default())
        .await
        .unwrap();
    let status = driver.registration.as_mut().unwrap().status(0, WAIT).await;
    assert!(!status.plugin_registered);
    assert!(
        status
            .error
            .contains("none of services supported by the plugin")
            && status.error.contains("v1alpha4.DRAPlugin"),
        "{}",
        status.error
    );
    let state = kubelet.state();
    assert!(state.drivers.is_empty());
    assert_eq!(state.failures.len(), 1);
    assert_eq!(state.failures[0].0, driver.registration_path());
    assert!(matches!(
        kubelet.prepare("old.example.com", &claims(&["a"])).await,
        Err(SimError::DriverNotRegistered(name)) if name == "old.example.com"
    ));
}

#[tokio::test]
async fn a_refusing_kubelet_tells_the_driver_why() {
    let mut driver = TestDriver::start(DriverSpec::new("gpu.example.com", ALL)).await;
    std::fs::remove_file(driver.registration_path()).unwrap();
    let kubelet = SimDraKubelet::start(driver.registry(), DraSimOptions::default())
        .await
        .unwrap();
    kubelet.refuse(Some("node is draining"));
    driver.serve_registration();
    let status = driver.registration.as_mut().unwrap().status(0, WAIT).await;
    assert!(!status.plugin_registered);
    assert_eq!(status.error, "node is draining");
    assert_eq!(kubelet.state().refused.len(), 1);
    assert!(kubelet.driver("gpu.example.com").is_none());
}

#[tokio::test]
async fn prepare_and_unprepare_round_trip_over_v1() {
    let driver = TestDriver::start(DriverSpec::new("gpu.example.com", ALL)).await;
    let kubelet = SimDraKubelet::start(driver.registry(), DraSimOptions::default())
        .await
        .unwrap();
    kubelet
        .wait_registered("gpu.example.com", WAIT)
        .await
        .unwrap();
    let asked = claims(&["a"]);
    let prepared = kubelet.prepare("gpu.example.com", &asked).await.unwrap();
    assert_eq!(prepared.service, "v1.DRAPlugin");
    let devices = prepared.claims["uid-a"].as_ref().unwrap();
    assert_eq!(devices[0].share_id.as_deref(), Some("share-uid-a"));
    assert_eq!(devices[0].cdi_device_ids, vec!["gpu.example.com/claim=a"]);
    assert!(driver.prepared().contains("uid-a"));
    let unprepared = kubelet.unprepare("gpu.example.com", &asked).await.unwrap();
    assert_eq!(unprepared.service, "v1.DRAPlugin");
    assert_eq!(unprepared.claims["uid-a"], Ok(()));
    assert!(driver.prepared().is_empty());
    // Both calls carry the kubelet's 45 s deadline.
    let deadlines: Vec<Duration> = driver.deadlines().iter().map(|d| grpc_timeout(d)).collect();
    assert_eq!(deadlines, [Duration::from_secs(45); 2]);
}

/// A `grpc-timeout` header value (digits and a unit letter) as a duration.
fn grpc_timeout(value: &str) -> Duration {
    let (digits, unit) = value.split_at(value.len() - 1);
    let n: u64 = digits
        .parse()
        .unwrap_or_else(|_| panic!("grpc-timeout {value:?}"));
    match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => panic!("grpc-timeout {value:?}"),
    }
}

#[tokio::test]
async fn a_driver_that_never_answers_runs_into_the_deadline() {
    let mut spec = DriverSpec::new("gpu.example.com", ALL);
    spec.hang_prepare = true;
    let driver = TestDriver::start(spec).await;
    let options = DraSimOptions {
        call_timeout: Duration::from_millis(200),
        ..DraSimOptions::default()
    };
    let kubelet = SimDraKubelet::start(driver.registry(), options)
        .await
        .unwrap();
    kubelet
        .wait_registered("gpu.example.com", WAIT)
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let outcome = kubelet.prepare("gpu.example.com", &claims(&["a"])).await;
    assert!(
        matches!(&outcome, Err(SimError::Timeout(limit, _)) if *limit == Duration::from_millis(200)),
        "{outcome:?}"
    );
    assert!(started.elapsed() < WAIT);
    assert_eq!(driver.deadlines().len(), 1);
}

#[tokio::test]
async fn a_claim_missing_from_the_answer_is_an_error_for_that_claim() {
    let mut spec = DriverSpec::new("gpu.example.com", ALL);
    spec.omit_claims = vec!["uid-b".into()];
    let driver = TestDriver::start(spec).await;
    let kubelet = SimDraKubelet::start(driver.registry(), DraSimOptions::default())
        .await
        .unwrap();
    kubelet
        .wait_registered("gpu.example.com", WAIT)
        .await
        .unwrap();
    let prepared = kubelet
        .prepare("gpu.example.com", &claims(&["a", "b"]))
        .await
        .unwrap();
    assert!(prepared.claims["uid-a"].is_ok());
    let missing = prepared.claims["uid-b"].as_ref().unwrap_err();
    assert!(
        missing.contains("default/b") && missing.contains("missing"),
        "{missing}"
    );
}

#[tokio::test]
async fn health_updates_are_recorded_per_device() {
    let driver = TestDriver::start(DriverSpec::new("gpu.example.com", ALL)).await;
    let kubelet = SimDraKubelet::start(driver.registry(), DraSimOptions::default())
        .await
        .unwrap();
    driver
        .health
        .send(vec![
            reported("gpu-0", HealthStatus::Healthy, ""),
            reported("gpu-1", HealthStatus::Healthy, ""),
        ])
        .unwrap();
    let key = |d: &str| ("node-a".to_owned(), d.to_owned());
    let before = kubelet
        .wait_health("gpu.example.com", WAIT, |r| r.health.len() == 2)
        .await
        .unwrap();
    assert_eq!(before.health_stream, HealthStream::Open);
    assert_eq!(before.health[&key("gpu-1")].health, DeviceHealth::Healthy);
    assert_eq!(before.health[&key("gpu-1")].timeout_seconds, 60);
    assert_eq!(
        before.health[&key("gpu-1")].last_updated_time,
        1_700_000_000
    );

    let long = "x".repeat(1500);
    driver
        .health
        .send(vec![
            reported("gpu-0", HealthStatus::Healthy, ""),
            reported("gpu-1", HealthStatus::Unhealthy, &long),
        ])
        .unwrap();
    let after = kubelet
        .wait_health("gpu.example.com", WAIT, |r| {
            r.health[&key("gpu-1")].health == DeviceHealth::Unhealthy
        })
        .await
        .unwrap();
    assert!(after.health_updates > before.health_updates);
    let message = &after.health[&key("gpu-1")].message;
    assert_eq!(message.chars().count(), 1024, "cut as the kubelet cuts");
    assert!(message.ends_with("..."));
    assert_eq!(after.health[&key("gpu-0")].health, DeviceHealth::Healthy);
    assert!(
        kubelet.state().violations[0].contains("longer than 1024"),
        "{:?}",
        kubelet.state().violations
    );
}

#[tokio::test]
async fn an_unimplemented_health_service_ends_cleanly() {
    let mut spec = DriverSpec::new("gpu.example.com", ALL);
    spec.health_unimplemented = true;
    let driver = TestDriver::start(spec).await;
    let options = DraSimOptions {
        health_retry: Duration::from_millis(20),
        ..DraSimOptions::default()
    };
    let kubelet = SimDraKubelet::start(driver.registry(), options)
        .await
        .unwrap();
    let record = kubelet
        .wait_health("gpu.example.com", WAIT, |r| {
            r.health_stream == HealthStream::Unimplemented
        })
        .await
        .unwrap();
    assert_eq!(record.health_streams_opened, 0);
    // Still usable, and the stream is not asked for again.
    kubelet
        .prepare("gpu.example.com", &claims(&["a"]))
        .await
        .unwrap();
    let watches = |calls: Vec<String>| calls.iter().filter(|c| c.contains("Watch")).count();
    assert_eq!(watches(driver.calls()), 1);
    assert!(kubelet.state().failures.is_empty());
}

#[tokio::test]
async fn an_ended_health_stream_is_opened_again() {
    let driver = TestDriver::start(DriverSpec::new("gpu.example.com", ALL)).await;
    let options = DraSimOptions {
        health_retry: Duration::from_millis(20),
        ..DraSimOptions::default()
    };
    let kubelet = SimDraKubelet::start(driver.registry(), options)
        .await
        .unwrap();
    kubelet
        .wait_health("gpu.example.com", WAIT, |r| {
            r.health_stream == HealthStream::Open
        })
        .await
        .unwrap();
    driver.end_streams.send_modify(|n| *n += 1);
    let record = kubelet
        .wait_health("gpu.example.com", WAIT, |r| {
            r.health_streams_opened == 2 && r.health_stream == HealthStream::Open
        })
        .await
        .unwrap();
    assert_eq!(record.registrations, 1, "the same registration");
}

#[tokio::test]
async fn a_removed_registration_socket_deregisters_the_driver() {
    let driver = TestDriver::start(DriverSpec::new("gpu.example.com", ALL)).await;
    let kubelet = SimDraKubelet::start(driver.registry(), DraSimOptions::default())
        .await
        .unwrap();
    kubelet
        .wait_registered("gpu.example.com", WAIT)
        .await
        .unwrap();
    std::fs::remove_file(driver.registration_path()).unwrap();
    kubelet
        .wait_for("the driver to go", WAIT, |s| s.drivers.is_empty())
        .await
        .unwrap();
    assert!(matches!(
        kubelet.unprepare("gpu.example.com", &claims(&["a"])).await,
        Err(SimError::DriverNotRegistered(_))
    ));
}

#[tokio::test]
async fn a_restart_wipes_deletes_the_socket_and_the_driver_registers_again() {
    let mut driver = TestDriver::start(DriverSpec::new("gpu.example.com", ALL)).await;
    let wipes = Arc::new(AtomicU64::new(0));
    let counter = wipes.clone();
    let options = DraSimOptions {
        wipe: Some(Arc::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        })),
        ..DraSimOptions::default()
    };
    let mut kubelet = SimDraKubelet::start(driver.registry(), options)
        .await
        .unwrap();
    assert_eq!(wipes.load(Ordering::SeqCst), 1, "wiped at start");
    kubelet
        .wait_registered("gpu.example.com", WAIT)
        .await
        .unwrap();

    kubelet.restart().await.unwrap();
    assert_eq!(wipes.load(Ordering::SeqCst), 2, "wiped at restart");
    assert_eq!(kubelet.state().wipes, 2);
    assert!(
        !driver.registration_path().exists(),
        "the restart deletes the registration socket"
    );
    assert!(kubelet.driver("gpu.example.com").is_none());

    driver.serve_registration();
    let record = kubelet
        .wait_registered("gpu.example.com", WAIT)
        .await
        .unwrap();
    assert_eq!(record.registrations, 1, "counted since the restart");
    assert_eq!(kubelet.restarts(), 1);
    let status = driver.registration.as_mut().unwrap().status(0, WAIT).await;
    assert!(status.plugin_registered);
    kubelet
        .prepare("gpu.example.com", &claims(&["a"]))
        .await
        .unwrap();
}
