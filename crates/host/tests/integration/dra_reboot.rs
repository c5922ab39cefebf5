//! A node reboot as the DRA driver meets it: the checkpoint (state folder,
//! on disk) survives, the CDI folder (`/var/run/cdi`, tmpfs) comes back
//! empty, or with a spec a power loss left empty, and the kubelet asks to
//! prepare the claims of the pods it starts again.

use crate::common::dra_world::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_reboot_a_repeated_prepare_writes_the_claims_cdi_specs_again() {
    let w = DraWorld::new("").await;
    let (host, endpoint) = w.serving().await;
    let gone = w.api.put_claim(claim("gone", DRIVER, &[&name_of(GPU_A)]));
    let emptied = w
        .api
        .put_claim(claim("emptied", DRIVER, &[&name_of(GPU_B)]));
    let piped = w
        .api
        .put_claim(claim("piped", DRIVER, &[&name_of("0000:08:00.0")]));
    let lost_device = w
        .api
        .put_claim(claim("lost-device", DRIVER, &[&name_of("0000:07:00.0")]));
    let mut answers = Vec::new();
    let mut specs = Vec::new();
    for claim in [&gone, &emptied, &piped, &lost_device] {
        let answer = prepare_one(&endpoint, claim).await;
        assert_eq!(answer.error, "");
        answers.push(answer);
        specs.push(read_cdi_spec(&spec_of(&w, claim)));
    }
    host.shutdown().await;

    // The reboot: one spec gone, one left empty, a pipe in the place of
    // one (a read of it would never end), and one claim's GPU no longer on
    // the node.
    std::fs::remove_file(spec_of(&w, &gone)).unwrap();
    std::fs::write(spec_of(&w, &emptied), b"").unwrap();
    std::fs::remove_file(spec_of(&w, &piped)).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(spec_of(&w, &piped))
        .status()
        .unwrap();
    assert!(made.success());
    std::fs::remove_file(w.world.root().join("sys/bus/pci/devices/0000:07:00.0")).unwrap();
    std::fs::remove_file(spec_of(&w, &lost_device)).unwrap();

    let (host, endpoint) = w.serving_count(7).await;
    for (n, claim) in [&gone, &emptied, &piped].into_iter().enumerate() {
        let again = prepare_one(&endpoint, claim).await;
        assert_eq!(again, answers[n], "the recorded answer, as before");
        assert_eq!(
            read_cdi_spec(&spec_of(&w, claim)),
            specs[n],
            "the spec is written again as it was"
        );
    }
    // A claim whose device is gone cannot get its spec back: a clear error
    // naming the claim, its spec file and the device.
    let refused = prepare_one(&endpoint, &lost_device).await;
    for part in [
        "lost-device",
        &spec_of(&w, &lost_device).display().to_string(),
        &name_of("0000:07:00.0"),
        "no longer among the devices",
    ] {
        assert!(
            refused.error.contains(part),
            "{part:?} in {}",
            refused.error
        );
    }
    assert!(!spec_of(&w, &lost_device).exists());
    // It still unprepares, as do the others.
    for claim in [&gone, &emptied, &piped, &lost_device] {
        assert_eq!(unprepare_one(&endpoint, claim).await, "");
    }
    assert!(
        cdi_specs(&w.cdi_dir()).is_empty(),
        "{:?}",
        cdi_specs(&w.cdi_dir())
    );
    host.shutdown().await;
}
