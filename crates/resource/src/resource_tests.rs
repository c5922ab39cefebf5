use super::*;

/// A resource over `count` fixture nodes `/dev/many/dN`.
fn nodes_resource(count: usize) -> (tempfile::TempDir, Arc<Resource>) {
    nodes_resource_with(count, "")
}

/// As [`nodes_resource`], with `settings` (TOML lines) in the resource's
/// file.
fn nodes_resource_with(count: usize, settings: &str) -> (tempfile::TempDir, Arc<Resource>) {
    let (tmp, resource) = unscanned_nodes_resource(count, settings, 0);
    resource.first_scan().unwrap();
    (tmp, resource)
}

/// As [`nodes_resource_with`], not scanned yet, in a root of `numa_nodes`
/// NUMA nodes (none: no `/sys/devices/system/node`).
fn unscanned_nodes_resource(
    count: usize,
    settings: &str,
    numa_nodes: usize,
) -> (tempfile::TempDir, Arc<Resource>) {
    let tmp = tempfile::tempdir().unwrap();
    let (root, config) = (tmp.path().join("root"), tmp.path().join("config"));
    std::fs::create_dir_all(root.join("dev/many")).unwrap();
    std::fs::create_dir_all(&config).unwrap();
    for i in 0..count {
        std::fs::write(root.join(format!("dev/many/d{i}")), b"").unwrap();
    }
    for n in 0..numa_nodes {
        let node = root.join(format!("sys/devices/system/node/node{n}"));
        std::fs::create_dir_all(&node).unwrap();
        std::fs::write(node.join("cpulist"), format!("{n}\n")).unwrap();
    }
    std::fs::write(
        config.join("many.toml"),
        format!(
            "version = 1\nresource = \"example.com/many\"\n{settings}[[nodes]]\npath = \"/dev/many/d*\"\n"
        ),
    )
    .unwrap();
    let config = wdp_config::load_dir(&config).unwrap();
    let engine = crate::loading::new_engine(&config).unwrap();
    let spec = crate::loading::load_specs(&engine, &config)
        .unwrap()
        .into_values()
        .next()
        .unwrap();
    let resource = Resource::unscanned(
        spec,
        HostRoot::new(&root),
        ResourceMetrics::unregistered(),
        None,
    );
    (tmp, resource)
}

#[tokio::test]
async fn an_unscanned_resource_lists_nothing_until_its_first_scan() {
    let (_tmp, resource) = unscanned_nodes_resource(3, "", 0);
    assert!(!resource.is_scanned());
    assert!(resource.devices().is_empty());
    let waiting = {
        let resource = resource.clone();
        tokio::spawn(async move { resource.wait_first_scan().await })
    };
    tokio::task::yield_now().await;
    assert!(!waiting.is_finished(), "resolved before the scan");
    assert!(resource.first_scan().unwrap().is_empty());
    tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("resolved by the scan")
        .unwrap();
    assert!(resource.is_scanned());
    assert_eq!(resource.devices().len(), 3);
}

#[test]
fn only_a_node_of_several_numa_nodes_registers_after_the_scan() {
    // One NUMA node, or none: the built-in never packs, the offer is known.
    for numa_nodes in [0, 1] {
        let (_tmp, resource) = unscanned_nodes_resource(2, "", numa_nodes);
        assert!(
            !resource.registration_waits_for_scan(),
            "{numa_nodes} nodes"
        );
    }
    // Two: only the devices' NUMA nodes can say whether packing helps.
    let (_tmp, resource) = unscanned_nodes_resource(2, "", 2);
    assert!(resource.registration_waits_for_scan());
    resource.first_scan().unwrap();
    assert!(!resource.registration_waits_for_scan(), "scanned");
    // The configuration decides it.
    let (_tmp, resource) = unscanned_nodes_resource(2, "get-preferred-allocation = true\n", 2);
    assert!(!resource.registration_waits_for_scan());
}

/// Makes `change` to the fixture and waits until the resource's hardware
/// watch has seen it, as the refresh loop does before it scans again (a
/// serving scan reads a watched directory again only after its event).
fn change_hardware(resource: &Resource, change: impl FnOnce()) {
    let watcher = resource.hardware.as_ref().expect("inotify is available");
    let mut changes = watcher.subscribe();
    change();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let seen = runtime
        .block_on(async { tokio::time::timeout(Duration::from_secs(10), changes.changed()).await });
    assert_eq!(seen, Ok(true), "the hardware watch saw no change");
}

#[test]
fn an_unchanged_refresh_keeps_the_advertised_set_itself() {
    let (tmp, resource) = nodes_resource(3);
    let first = resource.devices();
    assert_eq!(first.len(), 3);
    assert!(!resource.refresh());
    // The very same set: no second copy, and its generation (which
    // warm guest instances and their device tables are kept by) stays.
    assert!(Arc::ptr_eq(&first, &resource.devices()));

    // Hardware gone: listed Unhealthy, read back from the last set.
    change_hardware(&resource, || {
        std::fs::remove_file(tmp.path().join("root/dev/many/d1")).unwrap();
    });
    assert!(resource.refresh());
    let gone = resource.devices();
    assert_ne!(gone.generation(), first.generation());
    let d1 = gone.get("many-d1").unwrap();
    assert!(!d1.healthy);
    assert!(d1.reason.contains("many-d1"), "{}", d1.reason);
    assert!(!resource.refresh());
    assert!(Arc::ptr_eq(&gone, &resource.devices()));
    assert_eq!(resource.devices().healthy_count(), 2);
}

#[test]
fn a_settled_resource_still_sees_new_hardware_and_a_new_config() {
    let (tmp, resource) = nodes_resource(2);
    let settled = || {
        resource
            .discovery
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .settled
            .is_some()
    };
    assert!(!resource.refresh());
    assert!(
        settled(),
        "an unchanged run of a guest-free resource settles"
    );
    assert!(!resource.refresh());

    // New hardware: the scan differs, the set is built again.
    change_hardware(&resource, || {
        std::fs::write(tmp.path().join("root/dev/many/d2"), b"").unwrap();
    });
    assert!(resource.refresh());
    assert!(resource.devices().get("many-d2").is_some());
    assert!(!resource.refresh());
    assert!(settled());

    // The same hardware under a new config: the set follows the config.
    let mut spec = (*resource.spec()).clone();
    spec.config.replicas.insert(0, 2);
    resource.replace_spec(spec);
    assert!(resource.refresh());
    assert_eq!(resource.devices().len(), 6);
    assert!(resource.devices().get("many-d2::1").is_some());
}

#[tokio::test]
async fn a_change_before_the_refresh_loop_starts_is_not_lost() {
    // Polls an hour apart: only the hardware event can refresh in time.
    let (tmp, resource) = nodes_resource_with(1, "poll-interval-ms = 3600000\n");
    let root = tmp.path().join("root");
    let watcher = resource.hardware.as_ref().expect("inotify is available");
    let before = watcher.generation();

    // A node appears after the first scan, before the loop runs.
    std::fs::write(root.join("dev/many/d1"), b"").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while watcher.generation() == before && Instant::now() < deadline {
        tokio::task::yield_now().await;
    }
    assert_ne!(watcher.generation(), before, "no event for the new node");

    let mut devices = resource.subscribe();
    let shutdown = CancellationToken::new();
    let lp = tokio::spawn(resource.clone().refresh_loop(shutdown.clone()));
    let seen = tokio::time::timeout(
        Duration::from_secs(10),
        devices.wait_for(|set| set.get("many-d1").is_some()),
    )
    .await;
    shutdown.cancel();
    lp.await.unwrap();
    assert!(seen.is_ok(), "the new node waited for the next poll");
}

#[test]
fn slow_refreshes_poll_less_often() {
    let interval = Duration::from_secs(2);
    assert_eq!(poll_wait(interval, Duration::from_millis(3)), interval);
    assert_eq!(
        poll_wait(interval, Duration::from_millis(150)),
        Duration::from_secs(15)
    );
}

#[test]
fn a_stopping_resource_watches_no_hardware() {
    let (_tmp, resource) = nodes_resource(2);
    let watcher = resource.hardware.as_ref().expect("inotify is available");
    assert!(!watcher.watched().is_empty());
    resource.stop_watching();
    assert_eq!(watcher.watched(), Vec::<std::path::PathBuf>::new());
}
