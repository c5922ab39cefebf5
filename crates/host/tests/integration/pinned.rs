//! Guests pinned by digest (`hooks.<hook>.sha256`): a file whose SHA-256
//! is not the pinned one is refused at load and at every reload, naming
//! the file and both digests, while the pinned build keeps answering.

use crate::common::{WAIT, World, allocate_one};

const PINNED: &str = "example.com/pinned";

/// One device node served with `guests/allocate.wasm` (the allocate
/// shaper) as its allocate guest, pinned to `pin`.
fn pinned_world(pin: &str) -> World {
    let world = World::new(None);
    world.install_guest(wdp_guest_artifacts::ALLOCATE_SHAPER, "allocate.wasm");
    world.write_host("/dev/pinned0", "");
    world.write_config(
        "host.toml",
        "version = 1\npoll-interval-ms = 60000\nreload-debounce-ms = 20\n",
    );
    world.write_config(
        "pinned.toml",
        &format!(
            r#"version = 1
resource = "{PINNED}"
[[nodes]]
path = "/dev/pinned0"
[hooks.allocate]
guest = "guests/allocate.wasm"
sha256 = "{pin}"
"#
        ),
    );
    world
}

fn digest_of(path: &str) -> String {
    wdp_policy::guest_file_hash(std::path::Path::new(path)).unwrap()
}

#[test]
fn check_prints_the_digest_a_pin_must_name_and_refuses_another() {
    let shaper = digest_of(wdp_guest_artifacts::ALLOCATE_SHAPER);
    let other = digest_of(wdp_guest_artifacts::CLAIM_ECHO);
    assert_ne!(shaper, other);

    // The right pin (written as OCI tools print a digest, in upper case)
    // loads, and `check` reports the digest it verified.
    let world = pinned_world(&format!("sha256:{}", shaper.to_uppercase()));
    let reports = wdp_host::check(&world.config(), &world.root()).unwrap();
    let hooks = &reports[0].hooks;
    assert_eq!(hooks.len(), 1);
    assert_eq!(hooks[0].sha256, shaper);
    assert!(hooks[0].pinned);

    // Another build under the pinned name: refused, naming the resource
    // file, the guest file and both digests.
    let world = pinned_world(&other);
    let error = wdp_host::check(&world.config(), &world.root())
        .unwrap_err()
        .to_string();
    assert!(error.contains("pinned.toml"), "{error}");
    assert!(error.contains("guests/allocate.wasm"), "{error}");
    assert!(
        error.contains(&format!("its SHA-256 is {shaper}")),
        "{error}"
    );
    assert!(error.contains(&format!("pins {other}")), "{error}");
}

#[test]
fn a_malformed_pin_is_refused_by_file_and_field() {
    for bad in ["", "abc", &"g".repeat(64), &"a".repeat(65), "sha512:00"] {
        let world = pinned_world(bad);
        let error = wdp_host::check(&world.config(), &world.root())
            .unwrap_err()
            .to_string();
        assert!(error.contains("pinned.toml"), "{bad:?}: {error}");
        assert!(
            error.contains("field `hooks.allocate.sha256`"),
            "{bad:?}: {error}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_guest_swapped_for_another_build_is_refused_and_the_pinned_one_keeps_answering() {
    let world = pinned_world(&digest_of(wdp_guest_artifacts::ALLOCATE_SHAPER));
    let kubelet = world.kubelet().await;
    let host = world.start().await;
    let record = kubelet.wait_registered(PINNED, 1, WAIT).await.unwrap();
    let id = record.devices[0].id.clone();
    let shaped = |answer: &wdp_kubelet_api::v1beta1::AllocateResponse| {
        answer.container_responses[0]
            .envs
            .get("WDP_VISIBLE_DEVICES")
            .cloned()
    };
    let mut client = kubelet.client(PINNED).await.unwrap();
    let before = client
        .allocate(allocate_one(&id))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(shaped(&before).as_deref(), Some(id.as_str()));

    // A valid allocate guest, but not the pinned build, dropped in its
    // place: the reload is refused with both digests named...
    world.install_guest(wdp_guest_artifacts::CLAIM_ECHO, "allocate.wasm");
    let error = host.reload().await.unwrap_err().to_string();
    assert!(error.contains("pinned.toml"), "{error}");
    assert!(
        error.contains(&digest_of(wdp_guest_artifacts::CLAIM_ECHO)),
        "{error}"
    );

    // ...and the pinned build keeps answering the kubelet.
    let after = client
        .allocate(allocate_one(&id))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(shaped(&after), shaped(&before));
    host.shutdown().await;
}
