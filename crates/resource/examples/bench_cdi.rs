//! CDI spec build + atomic write time for 8 and 1,024 devices (run with
//! `cargo run --release -p wdp-resource --example bench_cdi`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use wdp_config::{CdiEdits, CdiMode};
use wdp_hardware::{Candidate, CandidateKind, DeviceNode, NodeType};
use wdp_policy::types::Device;
use wdp_resource::{DeviceSet, cdi_spec};

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let text = "version = 1\nresource = \"bench.example.com/gpu\"\ncdi = \"both\"\n[[nodes]]\npath = \"/dev/x\"\n[cdi-edits]\nenv = [\"A=b\"]\n";
    std::fs::write(dir.path().join("gpu.toml"), text).unwrap();
    let config = wdp_config::load_dir(dir.path()).unwrap();
    let resource = config.resources.values().next().unwrap().clone();
    assert_eq!(resource.cdi, CdiMode::Both);
    assert_eq!(
        resource.cdi_edits,
        CdiEdits {
            env: vec!["A=b".into()],
            ..CdiEdits::default()
        }
    );
    let out = dir.path().join("cdi");
    std::fs::create_dir(&out).unwrap();
    for n in [8usize, 1024] {
        let mut candidates = BTreeMap::new();
        let devices: Vec<Device> = (0..n)
            .map(|i| {
                let id = format!("0000:{:02x}:{:02x}.0", i / 32, i % 32);
                candidates.insert(
                    id.clone(),
                    Candidate {
                        id: id.clone(),
                        kind: CandidateKind::Pci,
                        sysfs_dir: None,
                        numa_nodes: vec![(i % 2) as i64],
                        attributes: Default::default(),
                        nodes: vec![DeviceNode {
                            path: format!("/dev/accel{i}").into(),
                            node_type: NodeType::Char,
                            major: 195,
                            minor: i as u32,
                        }],
                    },
                );
                Device {
                    id: id.clone(),
                    candidates: vec![id],
                    ..Device::default()
                }
            })
            .collect();
        let set = DeviceSet::build(&devices, &BTreeMap::new(), &candidates);
        let mut samples = Vec::new();
        for _ in 0..200 {
            let started = Instant::now();
            let spec = cdi_spec(&resource, &set);
            wdp_cdi::write(&out, &resource.resource, &spec).unwrap();
            samples.push(started.elapsed());
        }
        let bytes = std::fs::metadata(wdp_cdi::spec_file(&out, &resource.resource))
            .unwrap()
            .len();
        println!(
            "CDI spec for {n:>5} devices ({bytes} bytes): build + atomic write p50 {:.1} µs, p99 {:.1} µs",
            percentile(&mut samples, 0.5).as_secs_f64() * 1e6,
            percentile(&mut samples, 0.99).as_secs_f64() * 1e6
        );
    }
}
