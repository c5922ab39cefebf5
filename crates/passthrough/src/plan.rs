//! Planning a bind: the IOMMU group of a function, every function in it
//! with its driver and identity ([`BindPlan`]), and the host's refusals
//! applied to each of them.

use serde::{Deserialize, Serialize};

use crate::checks::{ProcCache, check_block, check_network, is_boot_display};
use crate::error::{Refusal, RefusalReason};
use crate::journal::{GroupRecord, Phase, RecordedFunction};
use crate::sysfs::{Root, link_name, read_text};

/// One function of the group to bind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedFunction {
    /// PCI address (`0000:17:00.0`).
    pub address: String,
    /// Its driver when planned (`None`: unbound).
    pub driver: Option<String>,
    /// PCI class (`0x030000`).
    pub class: u32,
    /// PCI vendor ID.
    pub vendor: u16,
    /// PCI device ID.
    pub device: u16,
    /// A PCI bridge (class `0x0604xx` or `0x0609xx`): left on its driver
    /// (`pcieport`) and not moved, as vfio allows.
    pub bridge: bool,
}

/// What a bind of one IOMMU group will do; serialisable, to be recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindPlan {
    /// The function the claim asked for.
    pub device: String,
    /// Its IOMMU group (`30`).
    pub group: String,
    /// The driver to bind to (`vfio-pci`).
    pub target: String,
    /// Every function of the group, by address.
    pub functions: Vec<PlannedFunction>,
}

impl BindPlan {
    /// The functions the bind is about: every one but bridges.
    pub fn endpoints(&self) -> impl Iterator<Item = &PlannedFunction> {
        self.functions.iter().filter(|f| !f.bridge)
    }

    /// The functions the bind moves: endpoints not on the target already.
    pub fn moves(&self) -> impl Iterator<Item = &PlannedFunction> {
        self.endpoints()
            .filter(|f| f.driver.as_deref() != Some(self.target.as_str()))
    }

    /// The journal record of this plan for claim `claim_uid`, in phase
    /// [`Phase::Binding`]: every endpoint with the driver it has now.
    pub fn record(&self, claim_uid: &str) -> GroupRecord {
        GroupRecord {
            group: self.group.clone(),
            claim_uid: claim_uid.to_owned(),
            target: self.target.clone(),
            phase: Phase::Binding,
            functions: self
                .endpoints()
                .map(|f| RecordedFunction {
                    address: f.address.clone(),
                    previous_driver: f.driver.clone(),
                })
                .collect(),
        }
    }

    /// The host paths of the device nodes a container gets once the group
    /// is bound: `/dev/vfio/<group>` and `/dev/vfio/vfio`.
    pub fn nodes(&self) -> Vec<String> {
        vec![
            format!("/dev/vfio/{}", self.group),
            "/dev/vfio/vfio".to_owned(),
        ]
    }
}

/// True for a name that can only be a PCI address or a driver (no path
/// separators or dot-dot), so that it may be joined to a sysfs path.
pub(crate) fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains('/')
        && !name.contains('\0')
        && !name.contains('\n')
}

/// Reads the group of `device` and every function in it; refuses what
/// the host never binds.
pub(crate) fn plan(
    root: &Root,
    device: &str,
    target: &str,
    held_by_other: &dyn Fn(&str) -> Option<String>,
) -> Result<BindPlan, Refusal> {
    let refuse = |function: &str, group: Option<&str>, reason| Refusal {
        device: device.to_owned(),
        function: function.to_owned(),
        group: group.map(str::to_owned),
        reason: Box::new(reason),
    };
    let dir = root.real(&format!("/sys/bus/pci/devices/{device}"));
    if !plain_name(device) || std::fs::symlink_metadata(&dir).is_err() {
        return Err(refuse(
            device,
            None,
            RefusalReason::NoSuchDevice(device.to_owned()),
        ));
    }
    let group = match link_name(&dir.join("iommu_group")) {
        Ok(Some(group)) => group,
        Ok(None) => return Err(refuse(device, None, RefusalReason::NoIommuGroup)),
        Err(e) => {
            return Err(refuse(
                device,
                None,
                RefusalReason::Unknown(format!(
                    "reading its iommu_group link: {}",
                    wdp_regular_file::io_words(&e)
                )),
            ));
        }
    };
    let group_ref = Some(group.as_str());
    if !plain_name(target)
        || !root
            .real(&format!("/sys/bus/pci/drivers/{target}"))
            .is_dir()
    {
        return Err(refuse(
            device,
            group_ref,
            RefusalReason::DriverNotLoaded(target.to_owned()),
        ));
    }
    let members =
        group_members(root, &group).map_err(|reason| refuse(device, group_ref, reason))?;
    let mut functions = Vec::with_capacity(members.len());
    for address in members.iter().chain(
        // A group listing that misses the device itself (a damaged tree)
        // still plans the device.
        (!members.iter().any(|m| m == device))
            .then_some(device.to_owned())
            .iter(),
    ) {
        let function =
            read_function(root, address).map_err(|reason| refuse(address, group_ref, reason))?;
        functions.push(function);
    }
    let mut proc = ProcCache::default();
    for function in functions.iter().filter(|f| !f.bridge) {
        let at = |reason| refuse(&function.address, group_ref, reason);
        let fdir = root.real(&format!("/sys/bus/pci/devices/{}", function.address));
        if is_boot_display(&fdir) {
            return Err(at(RefusalReason::BootDisplay));
        }
        check_network(root, &fdir, &mut proc).map_err(at)?;
        check_block(root, &fdir, &mut proc).map_err(at)?;
        if let Some(claim) = held_by_other(&function.address) {
            return Err(at(RefusalReason::HeldByClaim(claim)));
        }
    }
    Ok(BindPlan {
        device: device.to_owned(),
        group,
        target: target.to_owned(),
        functions,
    })
}

/// The addresses in `/sys/kernel/iommu_groups/<group>/devices`, sorted.
pub(crate) fn group_members(root: &Root, group: &str) -> Result<Vec<String>, RefusalReason> {
    let host = format!("/sys/kernel/iommu_groups/{group}/devices");
    let entries = std::fs::read_dir(root.real(&host)).map_err(|e| {
        RefusalReason::Unknown(format!(
            "reading {host}: {}",
            wdp_regular_file::io_words(&e)
        ))
    })?;
    let mut members: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| plain_name(name))
        .collect();
    members.sort();
    Ok(members)
}

/// One function's driver, class and IDs.
fn read_function(root: &Root, address: &str) -> Result<PlannedFunction, RefusalReason> {
    let dir = root.real(&format!("/sys/bus/pci/devices/{address}"));
    let hex = |name: &str| {
        read_text(&dir.join(name))
            .ok()
            .and_then(|v| u32::from_str_radix(v.trim_start_matches("0x"), 16).ok())
    };
    let class = hex("class").ok_or_else(|| {
        RefusalReason::Unknown(format!(
            "/sys/bus/pci/devices/{address}/class cannot be read"
        ))
    })?;
    let driver = link_name(&dir.join("driver")).map_err(|e| {
        RefusalReason::Unknown(format!(
            "reading its driver link: {}",
            wdp_regular_file::io_words(&e)
        ))
    })?;
    Ok(PlannedFunction {
        address: address.to_owned(),
        driver,
        class,
        vendor: hex("vendor").unwrap_or(0) as u16,
        device: hex("device").unwrap_or(0) as u16,
        bridge: matches!(class >> 8, 0x0604 | 0x0609),
    })
}
