//! `vfio-guard`: a DRA guest for devices handed to virtual machines
//! through VFIO (WIT 0.1.3).
//!
//! `device-taints-v2`: a device whose candidate reports itself degraded
//! (the candidate attribute `degraded-attribute`, default `degraded`, set
//! to anything but empty, `0`, `false` or `no`) gets the taint
//! `degraded=<what it reported>` with effect `degraded-effect` (default
//! `none`: the device stays in service, the taint only informs; Kubernetes
//! 1.35+). `notes = N` adds N taints `note-1=info` … `note-N=info` (effect
//! `notes-effect`, default `none`) to every device: a knob for trying the
//! host's limits (16 taints a device on 1.35+, 4 on 1.34, the health taint
//! included).
//!
//! `passthrough`: refuses to bind an IOMMU group holding a function bound
//! to one of `refuse-drivers` (default `nvme,ahci`: the node's own disks)
//! or whose PCI class starts with one of `refuse-classes` (default `0x01`,
//! mass storage controllers), naming the function; any other group may
//! be bound. The host's own refusals (the boot display, a network
//! interface that is up, a mounted disk, a group shared with another
//! claim) come before this hook and need no repeating here.
//!
//! ```toml
//! [guest-config]
//! degraded-attribute = "degraded"   # candidate attribute to read
//! degraded-effect = "none"          # none | no-schedule | no-execute
//! notes = 0                         # informational taints per device
//! notes-effect = "none"             # none | no-schedule | no-execute
//! refuse-drivers = "nvme,ahci"
//! refuse-classes = "0x01"
//! ```

use wdp_guest_sdk::{
    BindRequest, Config, DeviceFacts, DeviceTaintV2, DeviceTaintsV2, Passthrough, TaintEffectV2,
    TaintedV2, split_list,
};

const DEFAULT_DEGRADED_ATTRIBUTE: &str = "degraded";
const DEFAULT_REFUSE_DRIVERS: &str = "nvme,ahci";
const DEFAULT_REFUSE_CLASSES: &str = "0x01";
/// The longest label value, and so the longest taint value.
const MAX_LABEL_VALUE: usize = 63;

struct VfioGuard;

/// The effect setting `key` (default `none`).
fn effect(config: &Config, key: &str) -> Result<TaintEffectV2, String> {
    match config.get_or(key, "none") {
        "none" => Ok(TaintEffectV2::None),
        "no-schedule" => Ok(TaintEffectV2::NoSchedule),
        "no-execute" => Ok(TaintEffectV2::NoExecute),
        other => Err(format!(
            "{key} = {other:?}: expected none, no-schedule or no-execute"
        )),
    }
}

/// What `notes` asks for: how many, with which effect.
struct Notes {
    count: u32,
    effect: TaintEffectV2,
}

/// Whether a reported value says the device is degraded.
fn is_degraded(value: &str) -> bool {
    !matches!(value.trim(), "" | "0" | "false" | "no")
}

/// What a candidate reported, as a label value: runs of other characters
/// than `[A-Za-z0-9_.-]` become one `-`, at most 63 characters, starting
/// and ending with a letter or digit; `yes` when nothing is left.
fn label_value(reported: &str) -> String {
    let mut value = String::new();
    let mut dash = false;
    for c in reported.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
            if dash && !value.is_empty() {
                value.push('-');
            }
            dash = false;
            value.push(c);
        } else {
            dash = true;
        }
    }
    value.truncate(MAX_LABEL_VALUE);
    let value = value.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if value.is_empty() {
        "yes".to_owned()
    } else {
        value.to_owned()
    }
}

/// The taints of one device under `config`.
fn device_taints(
    device: &DeviceFacts,
    attribute: &str,
    degraded_effect: TaintEffectV2,
    notes: &Notes,
) -> Vec<DeviceTaintV2> {
    let mut taints = Vec::new();
    let reported = device
        .candidates
        .iter()
        .find_map(|c| c.attr(attribute).filter(|v| is_degraded(v)));
    if let Some(reported) = reported {
        taints.push(DeviceTaintV2::new(
            "degraded",
            label_value(reported),
            degraded_effect,
        ));
    }
    for n in 1..=notes.count {
        taints.push(DeviceTaintV2::new(
            format!("note-{n}"),
            "info",
            notes.effect,
        ));
    }
    taints
}

/// Every device's taints under `config`; devices without any are left out.
fn taints_of(config: &Config, devices: &[DeviceFacts]) -> Result<Vec<TaintedV2>, String> {
    let attribute = config.get_or("degraded-attribute", DEFAULT_DEGRADED_ATTRIBUTE);
    let degraded_effect = effect(config, "degraded-effect")?;
    let notes = Notes {
        count: config.parse("notes")?.unwrap_or(0),
        effect: effect(config, "notes-effect")?,
    };
    Ok(devices
        .iter()
        .map(|device| TaintedV2 {
            id: device.device.id.clone(),
            taints: device_taints(device, attribute, degraded_effect, &notes),
        })
        .filter(|tainted| !tainted.taints.is_empty())
        .collect())
}

/// Ok, or why the group of `request` must not be bound under `config`.
fn may_bind(config: &Config, request: &BindRequest) -> Result<(), String> {
    let drivers = config.get_or("refuse-drivers", DEFAULT_REFUSE_DRIVERS);
    let drivers = split_list(drivers);
    let classes = config.get_or("refuse-classes", DEFAULT_REFUSE_CLASSES);
    let classes = split_list(classes);
    for function in &request.functions {
        if let Some(driver) = &function.driver
            && drivers.contains(&driver.as_str())
        {
            return Err(format!(
                "function {} of IOMMU group {} is bound to {driver}, which vfio-guard keeps (refuse-drivers)",
                function.address, request.iommu_group
            ));
        }
        if let Some(class) = function.attr("class")
            && let Some(prefix) = classes.iter().find(|p| class.starts_with(**p))
        {
            return Err(format!(
                "function {} of IOMMU group {} has PCI class {class}, which vfio-guard keeps (refuse-classes {prefix})",
                function.address, request.iommu_group
            ));
        }
    }
    Ok(())
}

impl DeviceTaintsV2 for VfioGuard {
    fn taints(devices: Vec<DeviceFacts>) -> Result<Vec<TaintedV2>, String> {
        taints_of(&wdp_guest_sdk::config(), &devices)
    }
}

impl Passthrough for VfioGuard {
    fn may_bind(request: BindRequest) -> Result<(), String> {
        may_bind(&wdp_guest_sdk::config(), &request)
    }
}

wdp_guest_sdk::export_device_taints_v2!(VfioGuard);
wdp_guest_sdk::export_passthrough!(VfioGuard);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reported_value_becomes_a_label_value() {
        assert_eq!(label_value("ECC: 12 corrected"), "ECC-12-corrected");
        assert_eq!(label_value("!!"), "yes");
        assert_eq!(label_value(&"a".repeat(80)).len(), MAX_LABEL_VALUE);
        assert!(!is_degraded(" 0 "));
        assert!(is_degraded("1"));
    }

    fn function(address: &str, driver: Option<&str>, class: &str) -> wdp_guest_sdk::PciFunction {
        wdp_guest_sdk::PciFunction {
            address: address.into(),
            driver: driver.map(str::to_owned),
            attributes: vec![("class".into(), class.into())],
        }
    }

    fn request(functions: Vec<wdp_guest_sdk::PciFunction>) -> BindRequest {
        BindRequest {
            claim: "vm/a".into(),
            claim_uid: "u".into(),
            device_id: "0000:17:00.0".into(),
            driver: "vfio-pci".into(),
            iommu_group: "7".into(),
            functions,
        }
    }

    #[test]
    fn binds_are_refused_by_driver_or_class_as_configured() {
        let defaults = Config::from_pairs(Vec::new());
        let gpu = request(vec![function("0000:17:00.0", Some("nvidia"), "0x030200")]);
        assert_eq!(may_bind(&defaults, &gpu), Ok(()));
        let disk = request(vec![function("0000:17:00.1", Some("nvme"), "0x010802")]);
        let refusal = may_bind(&defaults, &disk).unwrap_err();
        assert!(
            refusal.contains("0000:17:00.1") && refusal.contains("nvme"),
            "{refusal}"
        );
        let keep_gpus = Config::from_pairs(vec![("refuse-drivers".into(), "nvidia".into())]);
        assert!(may_bind(&keep_gpus, &gpu).is_err());
        assert_eq!(may_bind(&defaults, &request(Vec::new())), Ok(()));
    }

    #[test]
    fn a_bad_effect_setting_is_an_error_naming_the_key() {
        let config = Config::from_pairs(vec![("notes-effect".into(), "evict".into())]);
        let error = taints_of(&config, &[]).unwrap_err();
        assert!(
            error.contains("notes-effect") && error.contains("evict"),
            "{error}"
        );
    }
}
