//! The ResourceSlice validation as a client meets it: each rule answers 422 `Invalid` with the
//! offending field named in the message and in `details.causes`, on 1.34 and 1.35 servers for
//! the rules both share, and on the version a rule belongs to for the others.

use std::collections::BTreeMap;

use crate::common::{api_error, device, slice, start};
use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorTerm};
use k8s_openapi::api::resource::v1::{
    CounterSet, DeviceAttribute, DeviceCounterConsumption, DeviceTaint,
};
use kube::api::{Api, PostParams};
use wdp_fake_apiserver::ResourceSlice;

fn attr_string(s: &str) -> DeviceAttribute {
    DeviceAttribute {
        string: Some(s.into()),
        ..Default::default()
    }
}

fn taint(key: &str, value: &str, effect: &str) -> DeviceTaint {
    DeviceTaint {
        key: key.into(),
        value: Some(value.into()),
        effect: effect.into(),
        time_added: None,
    }
}

fn devices(n: usize) -> Vec<k8s_openapi::api::resource::v1::Device> {
    (0..n).map(|i| device(&format!("dev-{i}"))).collect()
}

type Mutation = fn(&mut ResourceSlice);
/// (what is wrong, how to break a valid slice, the field path named, a word of the message).
type Case = (&'static str, Mutation, &'static str, &'static str);

/// Rules of every served version.
const CASES: &[Case] = &[
    (
        "driver not a DNS subdomain",
        |s| s.spec.driver = "Gpu_Driver".into(),
        "spec.driver",
        "RFC 1123 subdomain",
    ),
    (
        "driver too long",
        |s| s.spec.driver = format!("{}.example.com", "a".repeat(60)),
        "spec.driver",
        "Too long",
    ),
    (
        "driver missing",
        |s| s.spec.driver = String::new(),
        "spec.driver",
        "Required value",
    ),
    (
        "pool name empty",
        |s| s.spec.pool.name = String::new(),
        "spec.pool.name",
        "Required value",
    ),
    (
        "pool name too long",
        |s| s.spec.pool.name = "a".repeat(254),
        "spec.pool.name",
        "Too long",
    ),
    (
        "pool name bad segment",
        |s| s.spec.pool.name = "ok/Not_OK".into(),
        "spec.pool.name",
        "segment",
    ),
    (
        "slice count zero",
        |s| s.spec.pool.resource_slice_count = 0,
        "spec.pool.resourceSliceCount",
        "greater than zero",
    ),
    (
        "negative generation",
        |s| s.spec.pool.generation = -1,
        "spec.pool.generation",
        "greater than or equal to zero",
    ),
    (
        "no node selection",
        |s| s.spec.node_name = None,
        "spec",
        "exactly one of",
    ),
    (
        "two node selections",
        |s| s.spec.all_nodes = Some(true),
        "spec",
        "multiple fields are set",
    ),
    (
        "node selector with two terms",
        |s| {
            s.spec.node_name = None;
            s.spec.node_selector = Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm::default(), NodeSelectorTerm::default()],
            });
        },
        "spec.nodeSelector.nodeSelectorTerms",
        "exactly one node selector term",
    ),
    (
        "129 devices",
        |s| s.spec.devices = Some(devices(129)),
        "spec.devices",
        "Too many: 129: must have at most 128",
    ),
    (
        "device name not a DNS label",
        |s| {
            s.spec.devices = Some(vec![
                device("ok"),
                device("ok-2"),
                device("ok-3"),
                device("Foo"),
            ])
        },
        "spec.devices[3].name",
        "Invalid value: \"Foo\": a lowercase RFC 1123 label",
    ),
    (
        "device name too long",
        |s| s.spec.devices = Some(vec![device(&"a".repeat(64))]),
        "spec.devices[0].name",
        "63",
    ),
    (
        "duplicate device name",
        |s| s.spec.devices = Some(vec![device("a"), device("a")]),
        "spec.devices[1].name",
        "Duplicate value",
    ),
    (
        "33 attributes",
        |s| {
            let attributes = (0..33)
                .map(|i| (format!("a{i}"), attr_string("x")))
                .collect();
            s.spec.devices.as_mut().unwrap()[0].attributes = Some(attributes);
        },
        "spec.devices[0]",
        "Invalid value: 33: the total number of attributes and capacities must not exceed 32",
    ),
    (
        "attribute key not a C identifier",
        |s| insert_attribute(s, "example.com/has-dash", attr_string("x")),
        "spec.devices[0].attributes[example.com/has-dash]",
        "C identifier",
    ),
    (
        "attribute key too long",
        |s| insert_attribute(s, &"a".repeat(33), attr_string("x")),
        "spec.devices[0].attributes[aaaa",
        "no more than 32",
    ),
    (
        "attribute domain not a DNS subdomain",
        |s| insert_attribute(s, "Example.com/model", attr_string("x")),
        "spec.devices[0].attributes[Example.com/model]",
        "domain",
    ),
    (
        "attribute with two values",
        |s| {
            insert_attribute(
                s,
                "both",
                DeviceAttribute {
                    int: Some(1),
                    bool: Some(true),
                    ..Default::default()
                },
            )
        },
        "spec.devices[0].attributes[both]",
        "exactly one value",
    ),
    (
        "attribute without a value",
        |s| insert_attribute(s, "none", DeviceAttribute::default()),
        "spec.devices[0].attributes[none]",
        "exactly one value",
    ),
    (
        "attribute string too long",
        |s| insert_attribute(s, "long", attr_string(&"x".repeat(65))),
        "spec.devices[0].attributes[long].string",
        "Too long",
    ),
    (
        "attribute version not semver",
        |s| {
            insert_attribute(
                s,
                "fw",
                DeviceAttribute {
                    version: Some("v1.2".into()),
                    ..Default::default()
                },
            )
        },
        "spec.devices[0].attributes[fw].version",
        "semver",
    ),
    (
        "taint key not a qualified name",
        |s| {
            s.spec.devices.as_mut().unwrap()[0].taints =
                Some(vec![taint("bad key", "v", "NoSchedule")])
        },
        "spec.devices[0].taints[0].key",
        "name part",
    ),
    (
        "taint value not a label value",
        |s| {
            s.spec.devices.as_mut().unwrap()[0].taints =
                Some(vec![taint("example.com/t", "-bad-", "NoSchedule")])
        },
        "spec.devices[0].taints[0].value",
        "valid label",
    ),
    (
        "taint effect unknown",
        |s| {
            s.spec.devices.as_mut().unwrap()[0].taints =
                Some(vec![taint("example.com/t", "v", "PreferNoSchedule")])
        },
        "spec.devices[0].taints[0].effect",
        "Unsupported value: \"PreferNoSchedule\"",
    ),
    (
        "object name not a DNS subdomain",
        |s| s.metadata.name = Some("Bad_Name".into()),
        "metadata.name",
        "RFC 1123 subdomain",
    ),
];

/// Rules only a 1.34 server has.
const ONLY_1_34: &[Case] = &[
    (
        "5 taints",
        |s| {
            let taints = (0..5)
                .map(|i| taint(&format!("example.com/t{i}"), "v", "NoSchedule"))
                .collect();
            s.spec.devices.as_mut().unwrap()[0].taints = Some(taints);
        },
        "spec.devices[0].taints",
        "Too many: 5: must have at most 4 items",
    ),
    (
        "17 taints (1.34: at most 4)",
        |s| {
            let taints = (0..17)
                .map(|i| taint(&format!("example.com/t{i}"), "v", "NoSchedule"))
                .collect();
            s.spec.devices.as_mut().unwrap()[0].taints = Some(taints);
        },
        "spec.devices[0].taints",
        "Too many: 17: must have at most 4 items",
    ),
    (
        "taint effect None (1.34: NoExecute or NoSchedule)",
        |s| {
            s.spec.devices.as_mut().unwrap()[0].taints =
                Some(vec![taint("example.com/t", "v", "None")])
        },
        "spec.devices[0].taints[0].effect",
        "Unsupported value: \"None\": supported values: \"NoExecute\", \"NoSchedule\"",
    ),
];

/// Rules a 1.35 and later server has.
const FROM_1_35: &[Case] = &[
    (
        "65 devices with a taint",
        |s| {
            let mut many = devices(65);
            many[3].taints = Some(vec![taint("example.com/t", "v", "NoSchedule")]);
            s.spec.devices = Some(many);
        },
        "spec.devices",
        "at most 64",
    ),
    (
        "65 devices consuming counters",
        |s| {
            let mut many = devices(65);
            many[0].consumes_counters = Some(vec![DeviceCounterConsumption {
                counter_set: "set".into(),
                counters: BTreeMap::new(),
            }]);
            s.spec.devices = Some(many);
        },
        "spec.devices",
        "at most 64",
    ),
    (
        "devices and shared counters together",
        |s| {
            s.spec.shared_counters = Some(vec![CounterSet {
                name: "set".into(),
                counters: BTreeMap::new(),
            }])
        },
        "spec",
        "only one of `sharedCounters` or `devices` is allowed",
    ),
    (
        "17 taints",
        |s| {
            let taints = (0..17)
                .map(|i| taint(&format!("example.com/t{i}"), "v", "NoSchedule"))
                .collect();
            s.spec.devices.as_mut().unwrap()[0].taints = Some(taints);
        },
        "spec.devices[0].taints",
        "Too many: 17: must have at most 16 items",
    ),
];

fn insert_attribute(s: &mut ResourceSlice, key: &str, value: DeviceAttribute) {
    s.spec.devices.as_mut().unwrap()[0]
        .attributes
        .get_or_insert_default()
        .insert(key.into(), value);
}

/// Creates a broken slice per case on a server serving `1.<minor>` and checks the answer.
async fn check_rejections(minor: u32, cases: &[Case]) {
    let h = start().await;
    h.server.set_served_minor(minor);
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    for (i, (what, mutate, path, words)) in cases.iter().enumerate() {
        let mut broken = slice(
            &format!("case-{i}"),
            "node-1",
            "gpu.example.com",
            &["dev-0"],
        );
        mutate(&mut broken);
        let status = api_error(api.create(&PostParams::default(), &broken).await);
        assert_eq!(
            (status.code, status.reason.as_str()),
            (422, "Invalid"),
            "1.{minor} {what}: {}",
            status.message
        );
        assert!(
            status.message.contains(*path),
            "1.{minor} {what}: {path} not named in {:?}",
            status.message
        );
        assert!(
            status.message.contains(words),
            "1.{minor} {what}: {words:?} not in {:?}",
            status.message
        );
        let causes = status.details.expect("details").causes;
        assert!(
            causes.iter().any(|c| c.field.starts_with(path)),
            "1.{minor} {what}: no cause for {path}: {causes:?}"
        );
    }
    assert!(h.server.slices().is_empty(), "nothing invalid was stored");
    assert_eq!(h.server.stats().rejected.len(), cases.len());
}

#[tokio::test]
async fn every_rule_rejects_with_its_field_named() {
    for minor in [34, 35, 36, 37] {
        check_rejections(minor, CASES).await;
    }
    check_rejections(34, ONLY_1_34).await;
    for minor in [35, 36, 37] {
        check_rejections(minor, FROM_1_35).await;
    }
}

/// What 1.35 refuses and 1.34 accepts: many devices with taints or counters, and devices next
/// to counter sets.
#[tokio::test]
async fn a_1_34_server_accepts_what_only_later_versions_refuse() {
    let h = start().await;
    assert_eq!(h.server.served_minor(), 34, "1.34 is the default");
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    let mut tainted = slice("tainted", "node-1", "gpu.example.com", &[]);
    tainted.spec.devices = Some(devices(128));
    tainted.spec.devices.as_mut().unwrap()[7].taints = Some(
        (0..4)
            .map(|i| taint(&format!("example.com/t{i}"), "", "NoExecute"))
            .collect(),
    );
    api.create(&PostParams::default(), &tainted)
        .await
        .expect("1.34: 128 devices with 4 taints");
    h.server.set_served_minor(35);
    tainted.metadata.name = Some("tainted-135".into());
    let status = api_error(api.create(&PostParams::default(), &tainted).await);
    assert!(
        status
            .message
            .contains("spec.devices: Too many: 128: must have at most 64 items"),
        "{}",
        status.message
    );
}

#[tokio::test]
async fn the_valid_limits_are_accepted() {
    let h = start().await;
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    let mut full = slice("full", "node-1", "gpu.example.com", &[]);
    full.spec.devices = Some(devices(128));
    full.spec.pool.name = "pool.example.com/node-1".into();
    let first = &mut full.spec.devices.as_mut().unwrap()[0];
    let mut attributes: BTreeMap<_, _> = (0..31)
        .map(|i| (format!("example.com/a{i}"), attr_string(&"x".repeat(64))))
        .collect();
    attributes.insert(
        "fw".into(),
        DeviceAttribute {
            version: Some("1.2.3-rc.1+build.7".into()),
            ..Default::default()
        },
    );
    first.attributes = Some(attributes);
    api.create(&PostParams::default(), &full)
        .await
        .expect("128 devices, 32 attributes, long strings");

    h.server.set_served_minor(35);
    let mut tainted = slice("tainted", "node-1", "gpu.example.com", &[]);
    tainted.spec.devices = Some(devices(64));
    tainted.spec.devices.as_mut().unwrap()[0].taints = Some(
        (0..16)
            .map(|i| taint(&format!("example.com/t{i}"), "", "NoExecute"))
            .collect(),
    );
    api.create(&PostParams::default(), &tainted)
        .await
        .expect("1.35: 64 devices with 16 taints");
}

#[tokio::test]
async fn updates_are_validated_and_node_driver_and_pool_are_immutable() {
    let h = start().await;
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    let created = api
        .create(
            &PostParams::default(),
            &slice("a", "node-1", "gpu.example.com", &["x"]),
        )
        .await
        .unwrap();
    let mut moved = created.clone();
    moved.spec.node_name = Some("node-2".into());
    let status = api_error(api.replace("a", &PostParams::default(), &moved).await);
    assert_eq!(status.code, 422);
    assert!(
        status
            .message
            .contains("spec.nodeName: Invalid value: \"node-2\": field is immutable"),
        "{}",
        status.message
    );

    let mut repooled = created.clone();
    repooled.spec.pool.name = "other-pool".into();
    let status = api_error(api.replace("a", &PostParams::default(), &repooled).await);
    assert!(
        status
            .message
            .contains("spec.pool.name: Invalid value: \"other-pool\": field is immutable"),
        "{}",
        status.message
    );

    let mut bad = created.clone();
    bad.spec.devices = Some(vec![device("Bad")]);
    let status = api_error(api.replace("a", &PostParams::default(), &bad).await);
    assert!(
        status.message.contains("spec.devices[0].name"),
        "{}",
        status.message
    );
    assert_eq!(
        api.get("a").await.unwrap(),
        created,
        "the stored slice is unchanged"
    );
}

/// 1.35 and later take 16 taints a device, the `None` effect among them.
#[tokio::test]
async fn from_1_35_a_device_takes_sixteen_taints_and_the_none_effect() {
    for minor in [35, 37] {
        let h = start().await;
        h.server.set_served_minor(minor);
        let api: Api<ResourceSlice> = Api::all(h.client.clone());
        let mut full = slice("full", "node-1", "gpu.example.com", &["dev-0"]);
        full.spec.devices.as_mut().unwrap()[0].taints = Some(
            (0..16)
                .map(|i| {
                    let effect = if i % 2 == 0 { "None" } else { "NoSchedule" };
                    taint(&format!("example.com/t{i}"), "v", effect)
                })
                .collect(),
        );
        let created = api
            .create(&PostParams::default(), &full)
            .await
            .unwrap_or_else(|e| panic!("1.{minor}: {e}"));
        let taints = created.spec.devices.as_ref().unwrap()[0]
            .taints
            .clone()
            .unwrap();
        assert_eq!(taints.len(), 16, "1.{minor}");
        assert_eq!(taints[0].effect, "None");
        assert!(taints.iter().all(|t| t.time_added.is_some()), "1.{minor}");
    }
}
