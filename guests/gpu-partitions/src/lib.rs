//! `gpu-partitions`: a DRA guest that splits each GPU into partitions
//! (MIG-style profiles) drawing on shared counters, and creates and removes
//! them when claims are prepared and unprepared.
//!
//! `dra-layout`: for each advertised device (a GPU), a counter set named
//! after the GPU's hardware identity, `gpu-<device ID as a DNS label>`
//! (`0000:3b:00.0` → `gpu-0000-3b-00-0`), holding `memory` and `slices`;
//! the whole GPU consumes all of it, so it cannot be allocated beside any
//! of its partitions. Each profile `name=slices:memory` gives
//! `floor(gpu slices / profile slices)` partitions per GPU, with IDs like
//! `gpu-0000-3b-00-0-1g-10gb-0`, attributes `profile` and `memory`, each
//! consuming its slices and memory from its GPU's set. Names never come
//! from a GPU's position: a GPU that goes or comes leaves every other
//! GPU's set and partitions named as they were (a claim may hold them).
//!
//! `dra-prepare`: for each partition of the claim, writes the partition's
//! ID to the `create-attribute` of its GPU's candidate (the candidate whose
//! ID is the GPU's: one device per candidate, as `pci-filter` makes them),
//! and reports every device `Ready`. `dra-unprepare`: writes
//! `-<partition id>` to the `remove-attribute`; a partition that does not
//! exist (the driver answers "no such", "not found" or "does not exist")
//! counts as removed.
//!
//! ```toml
//! [guest-config]
//! memory = "80Gi"                  # per GPU
//! slices = 7                       # per GPU
//! profiles = "1g.10gb=1:10Gi,2g.20gb=2:20Gi,3g.40gb=3:40Gi"
//! create-attribute = "partition_create"   # must be in writable-attributes
//! remove-attribute = "partition_remove"   # must be in writable-attributes
//! # share = "memory"       # whole GPUs shared by several claims, each
//! #                        # consuming part of the memory (consumable
//! #                        # capacity; share-default = "10Gi" when a
//! #                        # claim names no amount)
//! # fail-create = "half"   # load tests: creates fail for claims whose UID
//! #                        # bytes sum to an odd number (about half)
//! ```

use wdp_guest_sdk::{
    Capacity, CapacityRange, ClaimDevice, Config, Counter, CounterConsumption, CounterSet, Device,
    DeviceLayout, DeviceStatus, DraLayout, DraPrepare, DraUnprepare, Layout, Partition,
    RequestPolicy, hardware,
};

const DEFAULT_MEMORY: &str = "80Gi";
const DEFAULT_SLICES: u32 = 7;
const DEFAULT_PROFILES: &str = "1g.10gb=1:10Gi,2g.20gb=2:20Gi,3g.40gb=3:40Gi";
const DEFAULT_CREATE_ATTRIBUTE: &str = "partition_create";
const DEFAULT_REMOVE_ATTRIBUTE: &str = "partition_remove";

struct GpuPartitions;

/// A partition profile: `name=slices:memory`, e.g. `1g.10gb=1:10Gi`.
#[derive(Debug, PartialEq)]
struct Profile {
    name: String,
    slices: u32,
    memory: String,
}

impl Profile {
    /// The profile's name as a DNS label part: `1g.10gb` -> `1g-10gb`.
    fn label(&self) -> String {
        self.name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect()
    }
}

fn parse_profiles(text: &str) -> Result<Vec<Profile>, String> {
    wdp_guest_sdk::split_list(text)
        .into_iter()
        .map(|item| {
            let bad = || format!("guest-config `profiles`: {item:?} is not name=slices:memory");
            let (name, amounts) = item.split_once('=').ok_or_else(bad)?;
            let (slices, memory) = amounts.split_once(':').ok_or_else(bad)?;
            let slices: u32 = slices.trim().parse().map_err(|_| bad())?;
            let (name, memory) = (name.trim(), memory.trim());
            if name.is_empty() || memory.is_empty() || slices == 0 {
                return Err(bad());
            }
            Ok(Profile {
                name: name.to_string(),
                slices,
                memory: memory.to_string(),
            })
        })
        .collect()
}

fn profiles(config: &Config) -> Result<Vec<Profile>, String> {
    parse_profiles(config.get_or("profiles", DEFAULT_PROFILES))
}

/// Whether `name` is a DNS label: at most 63 lower-case letters, digits
/// and `-`, starting and ending with a letter or digit.
fn is_dns_label(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| alnum(c) || c == '-')
        && name.starts_with(alnum)
        && name.ends_with(alnum)
}

/// What consuming `slices` and `memory` of counter set `set` looks like.
fn consumption(set: &str, slices: u32, memory: &str) -> Vec<CounterConsumption> {
    vec![CounterConsumption {
        counter_set: set.to_string(),
        counters: vec![
            Counter::new("memory", memory),
            Counter::new("slices", slices.to_string()),
        ],
    }]
}

impl DraLayout for GpuPartitions {
    fn describe(devices: Vec<Device>) -> Result<Layout, String> {
        let config = wdp_guest_sdk::config();
        let memory = config.get_or("memory", DEFAULT_MEMORY);
        let slices = config.parse::<u32>("slices")?.unwrap_or(DEFAULT_SLICES);
        let profiles = profiles(&config)?;
        let shared_memory = shared_memory(&config, memory)?;

        let mut layout = Layout {
            counter_sets: Vec::new(),
            devices: Vec::new(),
            partitions: Vec::new(),
        };
        for gpu in &devices {
            let set = format!("gpu-{}", dns_label(&gpu.id));
            let whole = consumption(&set, slices, memory);
            layout.counter_sets.push(CounterSet {
                name: set.clone(),
                counters: whole[0].counters.clone(),
            });
            layout.devices.push(DeviceLayout {
                id: gpu.id.clone(),
                consumes_counters: whole,
                capacity: shared_memory.iter().cloned().collect(),
                allow_multiple_allocations: shared_memory.is_some(),
            });
            for profile in &profiles {
                for index in 0..slices / profile.slices {
                    let id = format!("{set}-{}-{index}", profile.label());
                    if !is_dns_label(&id) {
                        return Err(format!(
                            "partition ID {id:?} (profile {:?}) is not a DNS label of at most 63 characters",
                            profile.name
                        ));
                    }
                    layout.partitions.push(Partition {
                        id,
                        parent: gpu.id.clone(),
                        attributes: vec![
                            ("profile".to_string(), profile.name.clone()),
                            ("memory".to_string(), profile.memory.clone()),
                        ],
                        consumes_counters: consumption(&set, profile.slices, &profile.memory),
                        capacity: Vec::new(),
                    });
                }
            }
        }
        wdp_guest_sdk::debug!(
            "{} GPUs, {} partitions",
            layout.devices.len(),
            layout.partitions.len()
        );
        Ok(layout)
    }
}

/// With `share = "memory"`: the whole GPU's memory as a capacity several
/// claims consume parts of (consumable capacity), `share-default` (10Gi
/// unless set) when a claim names no amount, in steps of 1Gi.
fn shared_memory(config: &Config, memory: &str) -> Result<Option<Capacity>, String> {
    match config.get("share") {
        None => Ok(None),
        Some("memory") => Ok(Some(Capacity {
            name: "memory".to_string(),
            value: memory.to_string(),
            request_policy: Some(RequestPolicy {
                default: Some(config.get_or("share-default", "10Gi").to_string()),
                valid_values: Vec::new(),
                valid_range: Some(CapacityRange {
                    min: "1Gi".to_string(),
                    max: Some(memory.to_string()),
                    step: Some("1Gi".to_string()),
                }),
            }),
        })),
        Some(other) => Err(format!(
            "guest-config `share`: {other:?} is not \"memory\" (the only capacity shared)"
        )),
    }
}

/// A device ID as a piece of a DNS label: lower case, every character
/// but a letter or digit a `-` (`0000:3b:00.0` → `0000-3b-00-0`).
fn dns_label(id: &str) -> String {
    id.chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_alphanumeric() { c } else { '-' }
        })
        .collect()
}

/// The profile a partition ID (`gpu-<GPU>-<label>-<index>`) was made from.
fn profile_of<'a>(id: &str, profiles: &'a [Profile]) -> Option<&'a Profile> {
    let rest = id.strip_prefix("gpu-")?;
    let (rest, index) = rest.rsplit_once('-')?;
    if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    profiles.iter().find(|profile| {
        rest.strip_suffix(&profile.label())
            .is_some_and(|gpu| gpu.len() > 1 && gpu.ends_with('-'))
    })
}

/// `text` as a JSON string literal.
fn json_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether the current claim is one whose creates fail under
/// `fail-create = "half"`: its UID's bytes sum to an odd number.
fn create_fails_on_purpose(config: &Config) -> bool {
    config.get("fail-create") == Some("half")
        && wdp_guest_sdk::current_claim()
            .is_some_and(|claim| claim.uid.bytes().map(u32::from).sum::<u32>() % 2 == 1)
}

/// The candidate of GPU `device_id`: the one with the same ID.
fn gpu_candidate(device_id: &str) -> Result<String, String> {
    hardware::candidates()
        .into_iter()
        .find(|candidate| candidate.id == device_id)
        .map(|candidate| candidate.id)
        .ok_or_else(|| {
            format!("GPU {device_id:?} is not a candidate (one device per candidate expected)")
        })
}

impl DraPrepare for GpuPartitions {
    fn prepare(devices: Vec<ClaimDevice>) -> Result<Vec<DeviceStatus>, String> {
        let config = wdp_guest_sdk::config();
        let attribute = config.get_or("create-attribute", DEFAULT_CREATE_ATTRIBUTE);
        let profiles = profiles(&config)?;
        let fail_on_purpose = create_fails_on_purpose(&config);

        let mut statuses = Vec::new();
        for device in &devices {
            let admin = if device.admin_access {
                Some("\"adminAccess\":true")
            } else {
                None
            };
            if !device.partition {
                let mut data: Vec<String> = device
                    .consumed_capacity
                    .iter()
                    .map(|(name, amount)| format!("{}:{}", json_string(name), json_string(amount)))
                    .collect();
                data.extend(admin.map(str::to_string));
                let status = DeviceStatus::ready(&device.id, "DeviceReady", "whole GPU");
                statuses.push(if data.is_empty() {
                    status
                } else {
                    status.with_data(format!("{{{}}}", data.join(",")))
                });
                continue;
            }
            let created = if fail_on_purpose {
                Err("failed on purpose (fail-create = \"half\")".to_string())
            } else {
                gpu_candidate(&device.device_id).and_then(|candidate| {
                    hardware::write_attribute(&candidate, attribute, &device.id)
                })
            };
            if let Err(error) = created {
                return Err(format!(
                    "creating partition {} of GPU {}: {error}",
                    device.id, device.device_id
                ));
            }
            wdp_guest_sdk::info!(
                "created partition {} of GPU {}",
                device.id,
                device.device_id
            );
            let mut data = Vec::new();
            if let Some(profile) = profile_of(&device.id, &profiles) {
                data.push(format!("\"profile\":{}", json_string(&profile.name)));
                data.push(format!("\"memory\":{}", json_string(&profile.memory)));
            }
            data.extend(admin.map(str::to_string));
            let message = format!("created on GPU {}", device.device_id);
            statuses.push(
                DeviceStatus::ready(&device.id, "PartitionCreated", message)
                    .with_data(format!("{{{}}}", data.join(","))),
            );
        }
        Ok(statuses)
    }
}

/// Whether a driver's error says the partition is not there.
fn is_absent(error: &str) -> bool {
    let error = error.to_ascii_lowercase();
    ["no such", "not found", "does not exist"]
        .iter()
        .any(|absent| error.contains(absent))
}

impl DraUnprepare for GpuPartitions {
    fn unprepare(devices: Vec<ClaimDevice>) -> Result<(), String> {
        let config = wdp_guest_sdk::config();
        let attribute = config.get_or("remove-attribute", DEFAULT_REMOVE_ATTRIBUTE);
        for device in devices.iter().filter(|device| device.partition) {
            let removed = gpu_candidate(&device.device_id).and_then(|candidate| {
                hardware::write_attribute(&candidate, attribute, &format!("-{}", device.id))
            });
            match removed {
                Ok(()) => wdp_guest_sdk::info!("removed partition {}", device.id),
                Err(error) if is_absent(&error) => {
                    wdp_guest_sdk::debug!("partition {} was not there: {error}", device.id);
                }
                Err(error) => {
                    return Err(format!(
                        "removing partition {} of GPU {}: {error}",
                        device.id, device.device_id
                    ));
                }
            }
        }
        Ok(())
    }
}

wdp_guest_sdk::export_dra_layout!(GpuPartitions);
wdp_guest_sdk::export_dra_prepare!(GpuPartitions);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_parse_and_name_their_partitions() {
        let profiles = parse_profiles(DEFAULT_PROFILES).unwrap();
        assert_eq!(profiles.len(), 3);
        assert_eq!(
            profiles[1],
            Profile {
                name: "2g.20gb".into(),
                slices: 2,
                memory: "20Gi".into()
            }
        );
        assert_eq!(profiles[0].label(), "1g-10gb");
        assert_eq!(
            profile_of("gpu-0000-3b-00-0-2g-20gb-1", &profiles),
            Some(&profiles[1])
        );
        assert_eq!(profile_of("gpu-0000-3b-00-0", &profiles), None);
        assert_eq!(dns_label("0000:3B:00.0"), "0000-3b-00-0");
        assert!(parse_profiles("1g=0:10Gi").is_err());
        assert!(parse_profiles("1g=1").is_err());
    }

    #[test]
    fn dns_labels_and_json() {
        assert!(is_dns_label("gpu-0000-3b-00-0-1g-10gb-0"));
        assert!(!is_dns_label("gpu-0-"));
        assert!(!is_dns_label(&"a".repeat(64)));
        assert_eq!(json_string("a\"b"), "\"a\\\"b\"");
    }
}
