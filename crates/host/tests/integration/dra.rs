//! A DRA resource served in-process against the fake API server, with the
//! kubelet's side played by plain gRPC clients over the sockets: what the
//! kubelet and the scheduler notice.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::WAIT;
use crate::common::dra_world::*;
use k8s_openapi::api::resource::v1::ResourceClaim;
use wdp_host::Metrics;
use wdp_host::{Host, HostOptions};
use wdp_kubelet_api::dra::v1 as dra;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_are_prepared_into_cdi_specs_idempotently_and_unprepared_after_a_restart() {
    let w = DraWorld::new("").await;
    let host = w.start().await;
    wait_for_socket(&w.registration_socket()).await;
    let (endpoint, services) = w.register().await;
    assert_eq!(
        services,
        [
            "v1.DRAPlugin",
            "v1beta1.DRAPlugin",
            "v1.DRAResourceHealth",
            "v1alpha1.DRAResourceHealth"
        ],
        "newest first"
    );
    assert!(
        endpoint.ends_with(&format!("plugins/{DRIVER}/dra.sock")),
        "{endpoint}"
    );
    // No device-plugin socket for a DRA resource.
    assert!(!w.world.plugins().join("wdp-example.com-gpu.sock").exists());

    w.wait_published(8).await;
    let slices = w.api.slices_of(NODE, DRIVER);
    let names: Vec<String> = slices
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten().map(|d| d.name.clone()))
        .collect();
    assert!(names.contains(&name_of(GPU_A)), "{names:?}");
    assert_eq!(slices[0].spec.pool.name, NODE);
    // The standard attributes line a GPU up with other drivers' devices:
    // its root complex (four bridges up in sysfs) and its address.
    let standard = |id: &str, name: &str| {
        let device = slices
            .iter()
            .flat_map(|s| s.spec.devices.iter().flatten())
            .find(|d| d.name == name_of(id))
            .unwrap_or_else(|| panic!("{id} not published"));
        let attributes = device.attributes.as_ref().expect("attributes");
        let value = attributes
            .get(&format!("resource.kubernetes.io/{name}"))
            .unwrap_or_else(|| panic!("{id} has no {name}: {attributes:?}"));
        value.string.clone()
    };
    assert_eq!(standard(GPU_A, "pcieRoot").as_deref(), Some("pci0000:00"));
    assert_eq!(standard(GPU_A, "pciBusID").as_deref(), Some(GPU_A));
    assert_eq!(
        standard("0000:87:00.0", "pcieRoot").as_deref(),
        Some("pci0000:80")
    );
    tokio::time::timeout(WAIT, async {
        while !host.ready().await {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("not ready: {:?}", futures_lines(&host)));

    let good = w.api.put_claim(claim(
        "two-gpus",
        DRIVER,
        &[&name_of(GPU_A), &name_of(GPU_B)],
    ));
    let other_driver = w.api.put_claim(claim("nic", "nic.example.com", &["eth0"]));
    let not_allocated = w.api.put_claim(unallocated("pending"));
    let mut wrong_uid = claim_ref(
        &w.api
            .put_claim(claim("recreated", DRIVER, &[&name_of(GPU_A)])),
    );
    wrong_uid.uid = "00000000-0000-0000-0000-000000000000".to_owned();
    let missing = dra::Claim {
        namespace: "default".into(),
        uid: "11111111-1111-1111-1111-111111111111".into(),
        name: "missing".into(),
    };
    let mut client = dra_client(&endpoint).await;
    let request = dra::NodePrepareResourcesRequest {
        claims: vec![
            claim_ref(&good),
            claim_ref(&other_driver),
            claim_ref(&not_allocated),
            wrong_uid.clone(),
            missing.clone(),
        ],
    };
    let answer = client
        .node_prepare_resources(request.clone())
        .await
        .unwrap()
        .into_inner();
    let good_uid = good.metadata.uid.clone().unwrap();
    let prepared = &answer.claims[&good_uid];
    assert_eq!(prepared.error, "");
    assert_eq!(prepared.devices.len(), 2);
    for (n, device) in prepared.devices.iter().enumerate() {
        assert_eq!(device.request_names, ["gpus"]);
        assert_eq!(device.pool_name, NODE);
        assert!(device.cdi_device_ids[0].starts_with(&format!("example.com/gpu={good_uid}-")));
        // The request's device metadata mount goes with its first device
        // (see dra_metadata.rs).
        let metadata = format!("example.com/gpu={good_uid}_metadata_gpus");
        let expected = if n == 0 { 2 } else { 1 };
        assert_eq!(device.cdi_device_ids.len(), expected, "{device:?}");
        assert_eq!(device.cdi_device_ids.contains(&metadata), n == 0);
    }
    // Asked to prepare a claim that holds nothing of ours: a clear refusal.
    let entry = &answer.claims[&other_driver.metadata.uid.clone().unwrap()];
    assert!(
        entry.error.contains("no device of driver gpu.example.com")
            && entry.error.contains("nic.example.com")
            && entry.devices.is_empty(),
        "{entry:?}"
    );
    let entry = &answer.claims[&not_allocated.metadata.uid.clone().unwrap()];
    assert!(entry.error.contains("not allocated"), "{}", entry.error);
    assert!(
        answer.claims[&wrong_uid.uid].error.contains("UID"),
        "{:?}",
        answer.claims[&wrong_uid.uid]
    );
    assert!(answer.claims[&missing.uid].error.contains("not found"));

    // The CDI spec names every node the container needs.
    let spec_path = w
        .cdi_dir()
        .join(format!("wdp-example.com-gpu_{good_uid}.json"));
    let spec = read_cdi_spec(&spec_path);
    assert_eq!(spec["kind"], "example.com/gpu");
    let text = spec.to_string();
    for node in ["/dev/nvidia0", "/dev/nvidia1"] {
        assert!(text.contains(node), "{node} missing from {text}");
    }
    let cdi_names: Vec<&str> = spec["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    for device in &prepared.devices {
        let name = device.cdi_device_ids[0].split_once('=').unwrap().1;
        assert!(cdi_names.contains(&name), "{name} not in {cdi_names:?}");
    }

    // Idempotent: the same answer again.
    let again = client
        .node_prepare_resources(dra::NodePrepareResourcesRequest {
            claims: vec![claim_ref(&good)],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.claims[&good_uid], *prepared);
    // A second claim on a device already prepared is refused, naming it.
    let thief = w.api.put_claim(claim("thief", DRIVER, &[&name_of(GPU_A)]));
    let refused = client
        .node_prepare_resources(dra::NodePrepareResourcesRequest {
            claims: vec![claim_ref(&thief)],
        })
        .await
        .unwrap()
        .into_inner();
    let error = &refused.claims[&thief.metadata.uid.clone().unwrap()].error;
    assert!(
        error.contains("already prepared") && error.contains(GPU_A),
        "{error}"
    );

    // The host restarts; the claim is deleted; unprepare still works.
    host.shutdown().await;
    drop(client);
    assert!(
        spec_path.exists(),
        "a clean shutdown keeps prepared claims' specs"
    );
    assert_eq!(
        w.api.slices_of(NODE, DRIVER).len(),
        slices.len(),
        "a clean shutdown keeps the slices"
    );
    assert!(w.api.delete_claim("default", "two-gpus"));
    let host = w.start().await;
    wait_for_socket(&w.registration_socket()).await;
    let (endpoint, _) = w.register().await;
    let mut client = dra_client(&endpoint).await;
    let answer = client
        .node_unprepare_resources(dra::NodeUnprepareResourcesRequest {
            claims: vec![claim_ref(&good), missing.clone()],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.claims[&good_uid].error, "");
    assert_eq!(
        answer.claims[&missing.uid].error, "",
        "an unknown claim is already unprepared"
    );
    assert!(
        !spec_path.exists(),
        "unprepare removes the claim's CDI spec"
    );
    assert!(
        cdi_specs(&w.cdi_dir()).is_empty(),
        "{:?}",
        cdi_specs(&w.cdi_dir())
    );
    // The device is free again.
    let retry = client
        .node_prepare_resources(dra::NodePrepareResourcesRequest {
            claims: vec![claim_ref(&thief)],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(retry.claims[&thief.metadata.uid.clone().unwrap()].error, "");
    host.shutdown().await;
}

fn futures_lines(host: &Arc<Host>) -> Vec<String> {
    futures::executor::block_on(host.not_ready())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_pre_start_guest_fails_only_its_claim() {
    let w = DraWorld::new(
        "[hooks.pre-start]\nguest = \"guests/pre-start.wasm\"\n[guest-config]\nrequire-attribute = \"no-such-attribute\"\n",
    )
    .await;
    w.world
        .install_guest(wdp_guest_artifacts::PRE_START_CHECK, "pre-start.wasm");
    let (host, endpoint) = w.serving().await;
    let refused = w
        .api
        .put_claim(claim("refused", DRIVER, &[&name_of(GPU_A)]));
    let elsewhere = w
        .api
        .put_claim(claim("elsewhere", "nic.example.com", &["eth0"]));
    let answer = dra_client(&endpoint)
        .await
        .node_prepare_resources(dra::NodePrepareResourcesRequest {
            claims: vec![claim_ref(&refused), claim_ref(&elsewhere)],
        })
        .await
        .unwrap()
        .into_inner();
    let error = &answer.claims[&refused.metadata.uid.clone().unwrap()].error;
    assert!(
        error.contains("pre-start") && error.contains("no-such-attribute"),
        "{error}"
    );
    // Its own reason, not the guest's.
    let error = &answer.claims[&elsewhere.metadata.uid.clone().unwrap()].error;
    assert!(error.contains("no device of driver"), "{error}");
    assert!(
        cdi_specs(&w.cdi_dir()).is_empty(),
        "no spec for a refused claim"
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_api_server_names_the_driver_and_spares_device_plugin_resources() {
    let w = DraWorld::new("").await;
    w.world.write_config(
        "fuse.toml",
        "version = 1\nresource = \"example.com/fuse\"\n[[nodes]]\npath = \"/dev/nvidia0\"\n",
    );
    w.api.set_refusing(true);
    let kubelet = w.world.kubelet().await;
    let host = Host::start(
        HostOptions {
            registration: wdp_kubelet_socket::RegistrationMode::Kubelet,
            ..w.options()
        },
        Metrics::new(),
    )
    .await
    .unwrap();
    kubelet
        .wait_registered("example.com/fuse", 1, WAIT)
        .await
        .unwrap();
    let status = host.dra_status().await;
    let mut publish: Option<String> = None;
    tokio::time::timeout(WAIT, async {
        loop {
            let lines = host.not_ready().await;
            if let Some(line) = lines
                .iter()
                .find(|l| l.contains(DRIVER) && l.contains("not published"))
            {
                publish = Some(line.clone());
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "never named the driver: {:?} {status:?}",
            futures_lines(&host)
        )
    });
    assert!(!host.ready().await);
    assert!(
        publish
            .as_deref()
            .is_some_and(|l| l.starts_with("example.com/gpu: "))
    );
    // The device-plugin resource becomes ready (its Register call returns
    // just after the kubelet records it) while the API server still refuses.
    tokio::time::timeout(WAIT, async {
        while host
            .not_ready()
            .await
            .iter()
            .any(|l| l.starts_with("example.com/fuse"))
        {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "the device-plugin resource never got ready: {:?}",
            futures_lines(&host)
        )
    });
    assert!(
        host.not_ready().await.iter().any(|l| l.contains(DRIVER)),
        "the API server still refuses"
    );
    // The API server comes back: the slices follow.
    w.api.set_refusing(false);
    w.wait_published(8).await;
    host.shutdown().await;
}

/// `claim` with an opaque configuration for `driver` holding `parameters`.
fn with_config(
    mut claim: ResourceClaim,
    driver: &str,
    parameters: serde_json::Value,
) -> ResourceClaim {
    let devices = claim
        .status
        .as_mut()
        .and_then(|s| s.allocation.as_mut())
        .and_then(|a| a.devices.as_mut())
        .unwrap();
    devices.config = Some(vec![
        serde_json::from_value(serde_json::json!({
            "source": "FromClaim",
            "requests": ["gpus"],
            "opaque": {"driver": driver, "parameters": parameters}
        }))
        .unwrap(),
    ]);
    claim
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claims_opaque_configuration_reaches_the_guests() {
    let w = DraWorld::new(
        "[hooks.allocate]\nguest = \"guests/echo.wasm\"\n[hooks.pre-start]\nguest = \"guests/echo.wasm\"\n",
    )
    .await;
    w.world
        .install_guest(wdp_guest_artifacts::CLAIM_ECHO, "echo.wasm");
    let (host, endpoint) = w.serving().await;
    let echoed = w.api.put_claim(with_config(
        claim("echoed", DRIVER, &[&name_of(GPU_A)]),
        DRIVER,
        serde_json::json!({"mode": "fast"}),
    ));
    // Another driver's configuration is not ours to pass on.
    let foreign = w.api.put_claim(with_config(
        claim("foreign", DRIVER, &[&name_of(GPU_B)]),
        "nic.example.com",
        serde_json::json!({"refuse-pre-start": true}),
    ));
    let refused = w.api.put_claim(with_config(
        claim("refused", DRIVER, &[&name_of("0000:07:00.0")]),
        DRIVER,
        serde_json::json!({"refuse-pre-start": true}),
    ));
    let answer = dra_client(&endpoint)
        .await
        .node_prepare_resources(dra::NodePrepareResourcesRequest {
            claims: vec![claim_ref(&echoed), claim_ref(&foreign), claim_ref(&refused)],
        })
        .await
        .unwrap()
        .into_inner();
    let uid = |c: &ResourceClaim| c.metadata.uid.clone().unwrap();
    assert_eq!(answer.claims[&uid(&echoed)].error, "");
    assert_eq!(answer.claims[&uid(&foreign)].error, "");
    let error = &answer.claims[&uid(&refused)].error;
    assert!(
        error.contains("refused by the claim's configuration"),
        "{error}"
    );

    let spec = read_cdi_spec(
        &w.cdi_dir()
            .join(format!("wdp-example.com-gpu_{}.json", uid(&echoed))),
    );
    let env: Vec<&str> = spec["containerEdits"]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert!(
        env.contains(&format!("WDP_CLAIM=default/echoed/{}", uid(&echoed)).as_str()),
        "{env:?}"
    );
    assert!(env.contains(&"WDP_CLAIM_REQUESTS=gpus"), "{env:?}");
    assert!(
        env.contains(&r#"WDP_CLAIM_CONFIG_0={"mode":"fast"}"#),
        "{env:?}"
    );
    let spec = read_cdi_spec(
        &w.cdi_dir()
            .join(format!("wdp-example.com-gpu_{}.json", uid(&foreign))),
    );
    assert!(spec.to_string().contains("WDP_CLAIM_CONFIGS=0"), "{spec}");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_under_prepare_load_fails_no_call_and_removal_withdraws_the_slices() {
    let w = DraWorld::new("").await;
    let (host, endpoint) = w.serving().await;
    let claims: Vec<ResourceClaim> = (0..4)
        .map(|i| {
            let id = format!("0000:{:02x}:00.0", [3, 4, 7, 8][i]);
            w.api
                .put_claim(claim(&format!("c{i}"), DRIVER, &[&name_of(&id)]))
        })
        .collect();
    // Prepare and unprepare in a loop while the resource's file changes.
    let load = {
        let endpoint = endpoint.clone();
        let claims: Vec<dra::Claim> = claims.iter().map(claim_ref).collect();
        tokio::spawn(async move {
            let mut client = dra_client(&endpoint).await;
            for _ in 0..20 {
                let answer = client
                    .node_prepare_resources(dra::NodePrepareResourcesRequest {
                        claims: claims.clone(),
                    })
                    .await
                    .unwrap()
                    .into_inner();
                for (uid, entry) in &answer.claims {
                    assert_eq!(entry.error, "", "claim {uid}");
                }
                let answer = client
                    .node_unprepare_resources(dra::NodeUnprepareResourcesRequest {
                        claims: claims.clone(),
                    })
                    .await
                    .unwrap()
                    .into_inner();
                for (uid, entry) in &answer.claims {
                    assert_eq!(entry.error, "", "claim {uid}");
                }
            }
        })
    };
    for poll in [60_000, 50_000, 40_000] {
        w.world.write_config(
            "gpu.toml",
            &format!(
                "version = 1\nresource = \"example.com/gpu\"\napi = \"dra\"\ndriver = \"{DRIVER}\"\npoll-interval-ms = {poll}\n[[pci]]\nvendor = \"0x10de\"\nclass = \"0x0302\"\n"
            ),
        );
        // The folder watcher may apply it first; either way it applies.
        host.reload().await.unwrap();
        assert_eq!(
            host.resource("example.com/gpu")
                .await
                .unwrap()
                .spec()
                .config
                .poll_interval
                .as_millis(),
            poll
        );
    }
    load.await.unwrap();

    // Leaving the configuration withdraws the slices and the sockets.
    std::fs::remove_file(w.world.config().join("gpu.toml")).unwrap();
    host.reload().await.unwrap();
    w.api
        .wait_for_slices(
            |slices| slices.iter().all(|s| s.spec.driver != DRIVER),
            WAIT,
        )
        .await
        .unwrap();
    assert!(host.resource("example.com/gpu").await.is_none());
    assert!(!w.registration_socket().exists());
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_prepares_never_share_a_device_and_a_claim_asked_at_once_is_prepared_once() {
    let w = DraWorld::new("").await;
    let (host, endpoint) = w.serving().await;
    let names: Vec<String> = w
        .api
        .slices_of(NODE, DRIVER)
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten().map(|d| d.name.clone()))
        .collect();
    assert_eq!(names.len(), 8);

    // Two claims per GPU (as a scheduler bug or a stale allocation could
    // produce), and one more claim sent four times: all at once, one call
    // per claim, as the kubelet does for many pods after a node restart.
    let mut claims = Vec::new();
    for (i, name) in names.iter().chain(names.iter()).enumerate() {
        claims.push(w.api.put_claim(claim(&format!("c{i}"), DRIVER, &[name])));
    }
    let channel = wdp_kubelet_api::connect_unix(endpoint.clone())
        .await
        .unwrap();
    let call = |claim: &ResourceClaim| {
        let mut client = dra::dra_plugin_client::DraPluginClient::new(channel.clone());
        let request = dra::NodePrepareResourcesRequest {
            claims: vec![claim_ref(claim)],
        };
        tokio::spawn(async move {
            client
                .node_prepare_resources(request)
                .await
                .unwrap()
                .into_inner()
        })
    };
    let calls: Vec<_> = claims.iter().map(call).collect();
    let mut prepared_by_device: std::collections::BTreeMap<String, Vec<String>> =
        Default::default();
    for (claim, call) in claims.iter().zip(calls) {
        let uid = claim.metadata.uid.clone().unwrap();
        let answer = call.await.unwrap();
        let result = &answer.claims[&uid];
        let device = claim
            .status
            .as_ref()
            .unwrap()
            .allocation
            .as_ref()
            .unwrap()
            .devices
            .as_ref()
            .unwrap()
            .results
            .as_ref()
            .unwrap()[0]
            .device
            .clone();
        if result.error.is_empty() {
            prepared_by_device.entry(device).or_default().push(uid);
        } else {
            assert!(
                result.error.contains("already prepared"),
                "{}",
                result.error
            );
        }
    }
    assert_eq!(prepared_by_device.len(), 8, "every GPU prepared once");
    assert!(
        prepared_by_device.values().all(|uids| uids.len() == 1),
        "a GPU went to two claims: {prepared_by_device:?}"
    );

    // One claim of the winners, asked four times at once: one answer.
    let winner = claims
        .iter()
        .find(|c| {
            prepared_by_device
                .values()
                .any(|u| u[0] == *c.metadata.uid.as_ref().unwrap())
        })
        .unwrap()
        .clone();
    let repeats: Vec<_> = (0..4).map(|_| call(&winner)).collect();
    let mut answers = Vec::new();
    for repeat in repeats {
        let answer = repeat.await.unwrap();
        answers.push(answer.claims[winner.metadata.uid.as_ref().unwrap()].clone());
    }
    assert!(
        answers
            .iter()
            .all(|a| a.error.is_empty() && *a == answers[0]),
        "{answers:?}"
    );

    // One CDI spec per prepared claim, and the checkpoint, read back by a
    // restarted host, unprepares every one.
    assert_eq!(cdi_specs(&w.cdi_dir()).len(), 8);
    host.shutdown().await;
    let host = w.start().await;
    wait_for_socket(&w.registration_socket()).await;
    let (endpoint, _) = w.register().await;
    let mut client = dra_client(&endpoint).await;
    let winners: Vec<dra::Claim> = claims
        .iter()
        .filter(|c| {
            prepared_by_device
                .values()
                .any(|u| u[0] == *c.metadata.uid.as_ref().unwrap())
        })
        .map(claim_ref)
        .collect();
    let answer = client
        .node_unprepare_resources(dra::NodeUnprepareResourcesRequest { claims: winners })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.claims.len(), 8);
    assert!(
        answer.claims.values().all(|c| c.error.is_empty()),
        "{answer:?}"
    );
    assert!(
        cdi_specs(&w.cdi_dir()).is_empty(),
        "{:?}",
        cdi_specs(&w.cdi_dir())
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_resource_drains_its_prepared_claims_before_its_sockets_go() {
    let w = DraWorld::new("").await;
    let (host, endpoint) = w.serving().await;
    let held = w.api.put_claim(claim("held", DRIVER, &[&name_of(GPU_A)]));
    assert_eq!(prepare_one(&endpoint, &held).await.error, "");
    assert!(spec_of(&w, &held).exists());

    // The resource leaves the configuration while a pod holds the claim:
    // no new allocation (the slices go at once), no new prepare, but the
    // claim still unprepares, and only then do the sockets go.
    std::fs::remove_file(w.world.config().join("gpu.toml")).unwrap();
    host.reload().await.unwrap();
    w.api
        .wait_for_slices(|s| s.iter().all(|s| s.spec.driver != DRIVER), WAIT)
        .await
        .unwrap();
    assert!(w.registration_socket().exists());
    let late = w.api.put_claim(claim("late", DRIVER, &[&name_of(GPU_B)]));
    let refused = prepare_one(&endpoint, &late).await.error;
    assert!(refused.contains("leaving this node"), "{refused}");
    assert_eq!(unprepare_one(&endpoint, &held).await, "");
    assert!(!spec_of(&w, &held).exists());
    tokio::time::timeout(WAIT, async {
        while w.registration_socket().exists() || Path::new(&endpoint).exists() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the drained driver's sockets go");
    assert!(cdi_specs(&w.cdi_dir()).is_empty());
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_start_claims_gone_from_the_api_server_and_unrecorded_specs_are_cleaned() {
    let w = DraWorld::new("").await;
    let (host, endpoint) = w.serving().await;
    let gone = w.api.put_claim(claim("gone", DRIVER, &[&name_of(GPU_A)]));
    let kept = w.api.put_claim(claim("kept", DRIVER, &[&name_of(GPU_B)]));
    for c in [&gone, &kept] {
        assert_eq!(prepare_one(&endpoint, c).await.error, "");
    }
    host.shutdown().await;

    // While the host is down: a pod and its claim are deleted, and a crash
    // left the spec of a claim that was never recorded (an hour old) and
    // one of a prepare that may still be running (just written).
    assert!(w.api.delete_claim("default", "gone"));
    let stray = w.cdi_dir().join("wdp-example.com-gpu_stray-uid.json");
    std::fs::copy(spec_of(&w, &kept), &stray).unwrap();
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&stray)
        .unwrap()
        .set_modified(hour_ago)
        .unwrap();
    let young = w.cdi_dir().join("wdp-example.com-gpu_young-uid.json");
    std::fs::copy(spec_of(&w, &kept), &young).unwrap();

    let host = w.start().await;
    let checkpoint_file = w
        .world
        .tmp
        .path()
        .join("state/dra")
        .join(format!("{DRIVER}.json"));
    let recorded = || std::fs::read_to_string(&checkpoint_file).unwrap();
    tokio::time::timeout(WAIT, async {
        while spec_of(&w, &gone).exists() || stray.exists() || recorded().contains(&uid(&gone)) {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the gone claim and the stray spec are cleaned");
    assert!(spec_of(&w, &kept).exists());
    assert!(young.exists());
    let checkpoint = recorded();
    assert!(checkpoint.contains(&uid(&kept)), "{checkpoint}");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_checkpoint_is_set_aside_and_new_claims_are_still_prepared() {
    let w = DraWorld::new("").await;
    let (host, endpoint) = w.serving().await;
    let old = w.api.put_claim(claim("old", DRIVER, &[&name_of(GPU_A)]));
    assert_eq!(prepare_one(&endpoint, &old).await.error, "");
    host.shutdown().await;

    // Cut in half, as a disk-full write of another tool might leave it.
    let file = w
        .world
        .tmp
        .path()
        .join("state/dra")
        .join(format!("{DRIVER}.json"));
    let text = std::fs::read(&file).unwrap();
    std::fs::write(&file, &text[..text.len() / 2]).unwrap();

    let host = w.start().await;
    wait_for_socket(&w.registration_socket()).await;
    let (endpoint, _) = w.register().await;
    let aside: Vec<PathBuf> = std::fs::read_dir(file.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".json.unreadable-"))
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(std::fs::read(&aside[0]).unwrap(), &text[..text.len() / 2]);
    let new = w.api.put_claim(claim("new", DRIVER, &[&name_of(GPU_B)]));
    assert_eq!(prepare_one(&endpoint, &new).await.error, "");
    // The old claim cannot be read back; its spec, named by its UID, still
    // goes when the kubelet unprepares it.
    assert!(spec_of(&w, &old).exists());
    assert_eq!(unprepare_one(&endpoint, &old).await, "");
    assert!(!spec_of(&w, &old).exists());
    assert!(spec_of(&w, &new).exists());
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_naming_what_is_not_ours_and_a_refusing_api_server_fail_only_their_claim() {
    let w = DraWorld::new("").await;
    let (host, endpoint) = w.serving().await;
    let mut other_pool = claim("other-pool", DRIVER, &[&name_of(GPU_A)]);
    other_pool
        .status
        .as_mut()
        .unwrap()
        .allocation
        .as_mut()
        .unwrap()
        .devices
        .as_mut()
        .unwrap()
        .results
        .as_mut()
        .unwrap()[0]
        .pool = "node-z".into();
    let other_pool = w.api.put_claim(other_pool);
    let unknown = w
        .api
        .put_claim(claim("unknown", DRIVER, &["0000-3a99-3a00-2e0"]));
    let good = w.api.put_claim(claim("good", DRIVER, &[&name_of(GPU_B)]));
    let twice = w
        .api
        .put_claim(claim("twice", DRIVER, &[&name_of(GPU_A), &name_of(GPU_A)]));
    let answer = dra_client(&endpoint)
        .await
        .node_prepare_resources(dra::NodePrepareResourcesRequest {
            claims: [&other_pool, &unknown, &good, &twice]
                .into_iter()
                .map(claim_ref)
                .collect(),
        })
        .await
        .unwrap()
        .into_inner();
    let error = |c: &ResourceClaim| answer.claims[&uid(c)].error.clone();
    assert_eq!(error(&good), "");
    assert!(
        error(&other_pool).contains("pool \"node-z\""),
        "{}",
        error(&other_pool)
    );
    assert!(
        error(&unknown).contains("is not among the devices of example.com/gpu"),
        "{}",
        error(&unknown)
    );
    assert!(
        error(&twice).contains("allocated twice"),
        "{}",
        error(&twice)
    );
    for bad in [&other_pool, &unknown, &twice] {
        assert!(!spec_of(&w, bad).exists());
    }

    // The API server refuses every request for a while: the claim fails
    // naming the API server, and prepares once the server answers again.
    let later = w.api.put_claim(claim("later", DRIVER, &[&name_of(GPU_A)]));
    w.api.set_refusing(true);
    let refused = prepare_one(&endpoint, &later).await.error;
    assert!(
        refused.contains("cannot read it from the API server"),
        "{refused}"
    );
    // What was prepared before is answered from the checkpoint meanwhile.
    assert_eq!(prepare_one(&endpoint, &good).await.error, "");
    w.api.set_refusing(false);
    assert_eq!(prepare_one(&endpoint, &later).await.error, "");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_token_is_picked_up_and_an_unreadable_answer_fails_only_its_claim() {
    let w = DraWorld::new("").await;
    // Authenticated by a projected-token file, as in a pod.
    let token_file = w.world.tmp.path().join("token");
    std::fs::write(&token_file, "token-a").unwrap();
    w.api
        .write_kubeconfig_with_token_file(&w.world.tmp.path().join("kubeconfig"), &token_file)
        .unwrap();
    w.api.require_bearer_tokens(Some(&["token-a"]));
    let (host, endpoint) = w.serving().await;
    let devices = [GPU_A, GPU_B, "0000:07:00.0", "0000:08:00.0"];
    let mut next = 0;
    let mut prepare_new = async |what: &str| {
        let device = devices[next % devices.len()];
        let c = w.api.put_claim(claim(
            &format!("{what}-{next}"),
            DRIVER,
            &[&name_of(device)],
        ));
        next += 1;
        let answer = prepare_one(&endpoint, &c).await.error;
        if answer.is_empty() {
            assert_eq!(unprepare_one(&endpoint, &c).await, "");
        }
        answer
    };
    assert_eq!(prepare_new("first").await, "");

    // A proxy answers a claim read with an error page: that claim fails,
    // naming the read; the next one prepares.
    w.api.answer_claim_reads_with_garbage(true);
    let garbage = prepare_new("garbage").await;
    assert!(
        garbage.contains("cannot read it from the API server"),
        "{garbage}"
    );
    w.api.answer_claim_reads_with_garbage(false);
    assert_eq!(prepare_new("after-garbage").await, "");

    // The kubelet rotates the token; the old one stays valid a while, as
    // the API server's does. The client reads the file again (kube re-reads
    // it at least once a minute), and once only the new token is accepted
    // claims still prepare.
    std::fs::write(&token_file, "token-b").unwrap();
    w.api.require_bearer_tokens(Some(&["token-a", "token-b"]));
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(90);
    while !w.api.bearer_tokens_seen().contains(&"token-b".to_owned()) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the rotated token was never used: {:?}",
            w.api.bearer_tokens_seen()
        );
        assert_eq!(prepare_new("rotating").await, "");
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    w.api.require_bearer_tokens(Some(&["token-b"]));
    assert_eq!(prepare_new("rotated").await, "");
    host.shutdown().await;
}
