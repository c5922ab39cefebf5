//! Partitionable devices per served version, through kube-rs: on 1.34 counter sets sit next to
//! the devices consuming them and every reference is checked in the slice; on 1.35+ a slice has
//! either devices or counter sets, with per-set and per-device limits, and references to sets in
//! other slices of the pool are not checked (as the real server does not).

use crate::common::{assert_invalid, counters, device, numbered, slice, start};
use k8s_openapi::api::resource::v1::{CounterSet, DeviceCounterConsumption, ResourceSlice};
use kube::api::{Api, PostParams};

fn set(name: &str, counter_names: Vec<String>) -> CounterSet {
    CounterSet {
        name: name.into(),
        counters: counters(counter_names, "1Gi"),
    }
}

fn consume(set: &str, counter_names: Vec<String>) -> DeviceCounterConsumption {
    DeviceCounterConsumption {
        counter_set: set.into(),
        counters: counters(counter_names, "512Mi"),
    }
}

/// A 1.34 slice: one set `gpu-0` of counters `c0`…`c31`, and `n` devices consuming `per_device`
/// of them each.
fn slice_1_34(name: &str, n: usize, per_device: usize) -> ResourceSlice {
    let mut s = slice(name, "node-1", "gpu.example.com", &[]);
    s.spec.shared_counters = Some(vec![set("gpu-0", numbered("c", 32))]);
    s.spec.devices = Some(
        (0..n)
            .map(|i| {
                let mut d = device(&format!("dev-{i}"));
                d.consumes_counters = Some(vec![consume("gpu-0", numbered("c", per_device))]);
                d
            })
            .collect(),
    );
    s
}

#[tokio::test]
async fn a_1_34_slice_keeps_its_counters_next_to_its_devices() {
    let h = start().await;
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    let post = PostParams::default();

    // 128 devices × 8 counters = 1024, 32 counters in all sets, 32 per device: all at the limit.
    let full = slice_1_34("full", 128, 8);
    api.create(&post, &full)
        .await
        .expect("1.34 limits are inclusive");
    let mut wide = slice_1_34("wide", 1, 32);
    // 1.34 has no limit on sets per slice or consumptions per device, only on counters.
    wide.spec.shared_counters = Some(
        (0..9)
            .map(|i| set(&format!("set-{i}"), numbered("x", 1)))
            .chain([set("gpu-0", numbered("c", 23))])
            .collect(),
    );
    wide.spec.devices.as_mut().unwrap()[0].consumes_counters = Some(
        (0..3)
            .map(|i| consume(&format!("set-{i}"), numbered("x", 1)))
            .collect(),
    );
    api.create(&post, &wide)
        .await
        .expect("10 sets, 3 consumptions on 1.34");

    type Break = fn(&mut ResourceSlice);
    let cases: &[(&str, Break, &str, &str)] = &[
        (
            "a set that is not in the slice",
            |s| {
                s.spec.devices.as_mut().unwrap()[3].consumes_counters =
                    Some(vec![consume("gpu-9", numbered("c", 1))])
            },
            "spec.devices[3].consumesCounters[0].counterSet",
            "Invalid value: \"gpu-9\": must reference a counterSet defined in the ResourceSlice sharedCounters",
        ),
        (
            "a counter that is not in the set",
            |s| {
                s.spec.devices.as_mut().unwrap()[0].consumes_counters =
                    Some(vec![consume("gpu-0", vec!["c99".into()])])
            },
            "spec.devices[0].consumesCounters[0].counters",
            "Invalid value: \"c99\": must reference a counter defined in the ResourceSlice sharedCounters",
        ),
        (
            "1025 counters consumed in the slice",
            |s| {
                s.spec.devices.as_mut().unwrap()[0].consumes_counters =
                    Some(vec![consume("gpu-0", numbered("c", 9))])
            },
            "spec.devices",
            "Invalid value: 1025: the total number of counters in devices must not exceed 1024",
        ),
        (
            "33 counters in all sets",
            |s| {
                s.spec
                    .shared_counters
                    .as_mut()
                    .unwrap()
                    .push(set("more", numbered("m", 1)))
            },
            "spec.sharedCounters",
            "Invalid value: 33: the total number of shared counters must not exceed 32",
        ),
        (
            "33 counters consumed by a device",
            |s| {
                s.spec
                    .shared_counters
                    .as_mut()
                    .unwrap()
                    .push(set("other", vec!["o0".into()]));
                s.spec.devices = Some(vec![device("d")]);
                s.spec.devices.as_mut().unwrap()[0].consumes_counters = Some(vec![
                    consume("gpu-0", numbered("c", 32)),
                    consume("other", vec!["o0".into()]),
                ]);
            },
            "spec.devices[0]",
            "Invalid value: 33: the total number of counters must not exceed 32",
        ),
        (
            "a set name twice",
            |s| {
                s.spec.shared_counters = Some(vec![
                    set("gpu-0", numbered("c", 8)),
                    set("gpu-0", numbered("c", 8)),
                ])
            },
            "spec.sharedCounters[1].name",
            "Duplicate value: \"gpu-0\"",
        ),
        (
            "a set twice in a device",
            |s| {
                s.spec.devices.as_mut().unwrap()[0].consumes_counters = Some(vec![
                    consume("gpu-0", numbered("c", 1)),
                    consume("gpu-0", numbered("c", 1)),
                ])
            },
            "spec.devices[0].consumesCounters[1].counterSet",
            "Duplicate value: \"gpu-0\"",
        ),
        (
            "a set name that is not a DNS label",
            |s| s.spec.shared_counters.as_mut().unwrap()[0].name = "GPU_0".into(),
            "spec.sharedCounters[0].name",
            "a lowercase RFC 1123 label",
        ),
        (
            "a counter name that is not a DNS label",
            |s| s.spec.shared_counters = Some(vec![set("gpu-0", vec!["Mem_0".into()])]),
            "spec.sharedCounters[0].counters[Mem_0]",
            "a lowercase RFC 1123 label",
        ),
        (
            "a set without counters",
            |s| s.spec.shared_counters.as_mut().unwrap()[0].counters.clear(),
            "spec.sharedCounters[0].counters",
            "Required value",
        ),
        (
            "a consumption without a set",
            |s| {
                s.spec.devices.as_mut().unwrap()[0].consumes_counters =
                    Some(vec![consume("", numbered("c", 1))])
            },
            "spec.devices[0].consumesCounters[0].counterSet",
            "Required value",
        ),
    ];
    for (i, (what, mutate, path, words)) in cases.iter().enumerate() {
        let mut broken = slice_1_34(&format!("case-{i}"), 128, 8);
        mutate(&mut broken);
        assert_invalid(api.create(&post, &broken).await, path, words, what);
    }
    assert_eq!(
        h.server.slices().len(),
        2,
        "only the valid slices are stored"
    );
}

/// A 1.35 counters-only slice of the pool `node-1`: `sets` sets of `per_set` counters.
fn counter_slice(name: &str, sets: usize, per_set: usize) -> ResourceSlice {
    let mut s = slice(name, "node-1", "gpu.example.com", &[]);
    s.spec.pool.resource_slice_count = 2;
    s.spec.devices = None;
    s.spec.shared_counters = Some(
        (0..sets)
            .map(|i| set(&format!("gpu-{i}"), numbered("c", per_set)))
            .collect(),
    );
    s
}

/// A 1.35 devices-only slice of the pool `node-1`: `n` devices consuming `c0` of `gpu-0` and
/// of `gpu-1` each.
fn device_slice(name: &str, n: usize) -> ResourceSlice {
    let mut s = slice(name, "node-1", "gpu.example.com", &[]);
    s.spec.pool.resource_slice_count = 2;
    s.spec.devices = Some(
        (0..n)
            .map(|i| {
                let mut d = device(&format!("dev-{i}"));
                d.consumes_counters = Some(vec![
                    consume("gpu-0", numbered("c", 1)),
                    consume("gpu-1", numbered("c", 1)),
                ]);
                d
            })
            .collect(),
    );
    s
}

#[tokio::test]
async fn a_1_35_pool_keeps_its_counters_in_slices_of_their_own() {
    for minor in [35, 36, 37] {
        let h = start().await;
        h.server.set_served_minor(minor);
        let api: Api<ResourceSlice> = Api::all(h.client.clone());
        let post = PostParams::default();
        api.create(&post, &counter_slice("counters", 8, 32))
            .await
            .expect("8 sets of 32 counters");
        api.create(&post, &device_slice("devices", 64))
            .await
            .expect("64 devices consuming 2 sets each");
        // The real server validates each slice on its own: references into sets that no slice of
        // the pool has, and a set name the pool already has, are its scheduler's problem.
        let mut dangling = device_slice("dangling", 1);
        dangling.spec.devices.as_mut().unwrap()[0].consumes_counters =
            Some(vec![consume("nowhere", vec!["nothing".into()])]);
        api.create(&post, &dangling)
            .await
            .expect("a reference to a set of no slice is not checked");
        api.create(&post, &counter_slice("counters-again", 1, 1))
            .await
            .expect("a set name twice in the pool is not checked");

        type Build = fn(&str) -> ResourceSlice;
        type Break = fn(&mut ResourceSlice);
        let cases: &[(&str, Build, Break, &str, &str)] = &[
            (
                "devices next to counter sets",
                |n| counter_slice(n, 1, 1),
                |s| s.spec.devices = Some(vec![device("d")]),
                "spec",
                "Invalid value: \"\": only one of `sharedCounters` or `devices` is allowed",
            ),
            (
                "9 sets",
                |n| counter_slice(n, 9, 1),
                |_| {},
                "spec.sharedCounters",
                "Too many: 9: must have at most 8 items",
            ),
            (
                "33 counters in a set",
                |n| counter_slice(n, 1, 33),
                |_| {},
                "spec.sharedCounters[0].counters",
                "Too many: 33: must have at most 32 items",
            ),
            (
                "a set name twice in the slice",
                |n| counter_slice(n, 2, 1),
                |s| s.spec.shared_counters.as_mut().unwrap()[1].name = "gpu-0".into(),
                "spec.sharedCounters[1]",
                "Duplicate value: \"gpu-0\"",
            ),
            (
                "a counter name that is not a DNS label",
                |n| counter_slice(n, 1, 1),
                |s| {
                    s.spec.shared_counters = Some(vec![set("gpu-0", vec!["-bad".into()])]);
                },
                "spec.sharedCounters[0].counters[-bad]",
                "a lowercase RFC 1123 label",
            ),
            (
                "3 consumptions",
                |n| device_slice(n, 1),
                |s| {
                    s.spec.devices.as_mut().unwrap()[0]
                        .consumes_counters
                        .as_mut()
                        .unwrap()
                        .push(consume("gpu-2", numbered("c", 1)))
                },
                "spec.devices[0].consumesCounters",
                "Too many: 3: must have at most 2 items",
            ),
            (
                "a set twice in a device",
                |n| device_slice(n, 1),
                |s| {
                    s.spec.devices.as_mut().unwrap()[0].consumes_counters = Some(vec![
                        consume("gpu-0", numbered("c", 1)),
                        consume("gpu-0", numbered("d", 1)),
                    ])
                },
                "spec.devices[0].consumesCounters[1]",
                "Duplicate value: \"gpu-0\"",
            ),
            (
                "33 counters in a consumption",
                |n| device_slice(n, 1),
                |s| {
                    s.spec.devices.as_mut().unwrap()[0].consumes_counters =
                        Some(vec![consume("gpu-0", numbered("c", 33))])
                },
                "spec.devices[0].consumesCounters[0].counters",
                "Too many: 33: must have at most 32 items",
            ),
            (
                "a consumed set name that is not a DNS label",
                |n| device_slice(n, 1),
                |s| {
                    s.spec.devices.as_mut().unwrap()[0].consumes_counters =
                        Some(vec![consume("Gpu.0", numbered("c", 1))])
                },
                "spec.devices[0].consumesCounters[0].counterSet",
                "a lowercase RFC 1123 label",
            ),
            (
                "65 devices consuming counters",
                |n| device_slice(n, 65),
                |_| {},
                "spec.devices",
                "Too many: 65: must have at most 64 items",
            ),
        ];
        for (i, (what, build, mutate, path, words)) in cases.iter().enumerate() {
            let mut broken = build(&format!("case-{i}"));
            mutate(&mut broken);
            assert_invalid(
                api.create(&post, &broken).await,
                path,
                words,
                &format!("1.{minor} {what}"),
            );
        }
        assert_eq!(
            h.server.slices().len(),
            4,
            "only the valid slices are stored"
        );

        // The 1.34 shape, devices next to their counters, is refused from 1.35 on.
        assert_invalid(
            api.create(&post, &slice_1_34("old-shape", 1, 1)).await,
            "spec",
            "only one of `sharedCounters` or `devices` is allowed",
            &format!("1.{minor} 1.34 shape"),
        );
    }
}
