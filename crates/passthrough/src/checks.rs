//! The host's checks that a function is not in use by the host itself: the
//! boot display, a network interface that is up, addressed or routed, a
//! block device (or a partition or holder of one) that is mounted or used
//! as swap.
//!
//! What is read, beneath the host root:
//! - `boot_vga`, `net/<if>/flags` (`IFF_UP`; `operstate` where `flags`
//!   is missing) and block devices found below the function's sysfs
//!   directory (a directory with a `dev` file that `uevent` calls a disk or
//!   partition, or that sits in a `block/` directory), their partitions
//!   (subdirectories) and `holders/` (device-mapper, md), recursively.
//! - The network namespace and mount namespace of the host's first
//!   process: `/proc/1/net/if_inet6` (IPv6 addresses), `/proc/1/net/route`
//!   and `/proc/1/net/ipv6_route` (routes), `/proc/1/mountinfo` (mounts, by
//!   `major:minor` and by source `/dev/<name>` or `/dev/mapper/<name>`, as
//!   btrfs reports an anonymous device number), `/proc/swaps`. `/proc/self`
//!   would be the reading process's own namespaces, which in a DaemonSet
//!   are the pod's and not the node's; `/proc/1` under the node's procfs
//!   is the node's init. An IPv4 address is seen through the connected
//!   route the kernel adds for it: an address on an interface that is down
//!   (which then has no route) is not visible under a host root without
//!   netlink, and not checked.
//!
//! A file a check needs that cannot be read refuses the bind
//! ([`RefusalReason::Unknown`]) rather than guessing that nothing uses
//! the function; a function without network interfaces or block devices
//! needs none of the `/proc` files.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use crate::error::RefusalReason;
use crate::sysfs::{Root, read_text};

/// `IFF_UP` in `net/<if>/flags`.
const IFF_UP: u32 = 0x1;
/// How deep below a function's sysfs directory block devices are looked
/// for (`nvme/nvme0/nvme0n1/nvme0n1p1` is 4, SCSI
/// `host0/target0:0:0/0:0:0:0/block/sda/sda1` is 6).
const BLOCK_DEPTH: usize = 7;
/// At most this many directory entries are walked per function.
const WALK_LIMIT: usize = 20_000;
/// Holders of holders are followed this deep.
const HOLDER_DEPTH: usize = 4;

/// `/proc` files read at most once per plan.
#[derive(Default)]
pub(crate) struct ProcCache {
    files: Vec<(&'static str, Result<String, String>)>,
}

impl ProcCache {
    /// The content of host path `host`; `Ok("")` for a missing file when
    /// `missing_is_empty` (IPv6 disabled has no IPv6 files).
    fn get(
        &mut self,
        root: &Root,
        host: &'static str,
        missing_is_empty: bool,
    ) -> Result<&str, RefusalReason> {
        if !self.files.iter().any(|(h, _)| *h == host) {
            let read = match read_text(&root.real(host)) {
                Ok(text) => Ok(text),
                Err(e) if missing_is_empty && e.kind() == std::io::ErrorKind::NotFound => {
                    Ok(String::new())
                }
                Err(e) => Err(format!(
                    "reading {host}: {}",
                    wdp_regular_file::io_words(&e)
                )),
            };
            self.files.push((host, read));
        }
        match self.files.iter().find(|(h, _)| *h == host).map(|(_, r)| r) {
            Some(Ok(text)) => Ok(text),
            Some(Err(e)) => Err(RefusalReason::Unknown(e.clone())),
            None => Err(RefusalReason::Unknown(format!("reading {host}"))),
        }
    }
}

/// True when the function at `dir` (real path) is the boot display.
pub(crate) fn is_boot_display(dir: &Path) -> bool {
    read_text(&dir.join("boot_vga")).is_ok_and(|v| v == "1")
}

/// Refuses when a network interface of the function at `dir` is up,
/// addressed or routed.
pub(crate) fn check_network(
    root: &Root,
    dir: &Path,
    proc: &mut ProcCache,
) -> Result<(), RefusalReason> {
    let Ok(entries) = std::fs::read_dir(dir.join("net")) else {
        return Ok(());
    };
    let mut interfaces: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    interfaces.sort();
    for interface in interfaces {
        let if_dir = dir.join("net").join(&interface);
        if interface_up(&if_dir, &interface)? {
            return Err(RefusalReason::NetworkUp(interface));
        }
        let inet6 = proc.get(root, "/proc/1/net/if_inet6", true)?;
        if let Some(address) = ipv6_address_of(inet6, &interface) {
            return Err(RefusalReason::NetworkAddress { interface, address });
        }
        let route = proc.get(root, "/proc/1/net/route", false)?;
        if let Some(route) = ipv4_route_of(route, &interface) {
            return Err(RefusalReason::NetworkRoute { interface, route });
        }
        let route6 = proc.get(root, "/proc/1/net/ipv6_route", true)?;
        if let Some(route) = ipv6_route_of(route6, &interface) {
            return Err(RefusalReason::NetworkRoute { interface, route });
        }
    }
    Ok(())
}

/// Whether the interface whose sysfs directory is `if_dir` is up:
/// `IFF_UP` in `flags`, else an `operstate` other than down.
fn interface_up(if_dir: &Path, interface: &str) -> Result<bool, RefusalReason> {
    if let Ok(flags) = read_text(&if_dir.join("flags")) {
        let digits = flags.trim_start_matches("0x");
        if let Ok(flags) = u32::from_str_radix(digits, 16) {
            return Ok(flags & IFF_UP != 0);
        }
    }
    match read_text(&if_dir.join("operstate")) {
        Ok(state) => Ok(!matches!(
            state.as_str(),
            "down" | "lowerlayerdown" | "notpresent"
        )),
        Err(_) => Err(RefusalReason::Unknown(format!(
            "the state of network interface {interface} cannot be read (no flags or operstate)"
        ))),
    }
}

/// The first IPv6 address `/proc/net/if_inet6` lists for `interface`.
fn ipv6_address_of(if_inet6: &str, interface: &str) -> Option<String> {
    if_inet6.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 6 || fields[5] != interface {
            return None;
        }
        let address = u128::from_str_radix(fields[0], 16)
            .map(|bits| Ipv6Addr::from(bits).to_string())
            .unwrap_or_else(|_| fields[0].to_owned());
        Some(format!(
            "{address}/{}",
            u8::from_str_radix(fields[2], 16).unwrap_or(128)
        ))
    })
}

/// The first IPv4 route `/proc/net/route` lists through `interface`.
fn ipv4_route_of(route: &str, interface: &str) -> Option<String> {
    route.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 8 || fields[0] != interface {
            return None;
        }
        // Destination and mask are the network-order words printed as
        // host integers: their bytes in memory order are the address.
        let word = |s: &str| u32::from_str_radix(s, 16).ok();
        match (word(fields[1]), word(fields[7])) {
            (Some(dest), Some(mask)) => Some(format!(
                "{}/{}",
                Ipv4Addr::from(dest.to_ne_bytes()),
                mask.count_ones()
            )),
            _ => Some(fields[1].to_owned()),
        }
    })
}

/// The first IPv6 route `/proc/net/ipv6_route` lists through `interface`.
fn ipv6_route_of(route6: &str, interface: &str) -> Option<String> {
    route6.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 10 || fields[9] != interface {
            return None;
        }
        let dest = u128::from_str_radix(fields[0], 16)
            .map(|bits| Ipv6Addr::from(bits).to_string())
            .unwrap_or_else(|_| fields[0].to_owned());
        Some(format!(
            "{dest}/{}",
            u8::from_str_radix(fields[1], 16).unwrap_or(128)
        ))
    })
}

/// A block device: its name, `major:minor` and device-mapper name.
struct BlockDevice {
    name: String,
    dev: String,
    mapper: Option<String>,
}

/// Refuses when a block device of the function at `dir`, a partition or a
/// holder of one, is mounted or used as swap.
pub(crate) fn check_block(
    root: &Root,
    dir: &Path,
    proc: &mut ProcCache,
) -> Result<(), RefusalReason> {
    let mut found = Vec::new();
    let mut budget = WALK_LIMIT;
    find_block_devices(dir, 0, &mut budget, &mut found);
    if found.is_empty() {
        return Ok(());
    }
    let mut devices = Vec::new();
    for disk in &found {
        collect_with_holders(root, disk, 0, &mut devices);
    }
    let mountinfo = proc.get(root, "/proc/1/mountinfo", false)?;
    for device in &devices {
        if let Some(mount_point) = mounted(mountinfo, device) {
            return Err(RefusalReason::Mounted {
                device: device.name.clone(),
                mount_point,
            });
        }
    }
    let swaps = proc.get(root, "/proc/swaps", true)?;
    for device in &devices {
        let sources = sources_of(device);
        if swaps.lines().skip(1).any(|line| {
            line.split_whitespace()
                .next()
                .is_some_and(|f| sources.iter().any(|s| s == f))
        }) {
            return Err(RefusalReason::Swap(device.name.clone()));
        }
    }
    Ok(())
}

/// Paths a mount table may name the device by.
fn sources_of(device: &BlockDevice) -> Vec<String> {
    let mut sources = vec![format!("/dev/{}", device.name)];
    if let Some(mapper) = &device.mapper {
        sources.push(format!("/dev/mapper/{mapper}"));
    }
    sources
}

/// The mount point of the first mount of `device` in `mountinfo`.
fn mounted(mountinfo: &str, device: &BlockDevice) -> Option<String> {
    let sources = sources_of(device);
    mountinfo.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let by_number = fields.get(2).is_some_and(|d| *d == device.dev);
        // After the optional fields, " - fstype source options".
        let source = fields
            .iter()
            .position(|f| *f == "-")
            .and_then(|at| fields.get(at + 2));
        let by_source = source.is_some_and(|s| sources.iter().any(|x| x == s));
        (by_number || by_source).then(|| fields.get(4).map_or("?", |m| *m).to_owned())
    })
}

/// Collects block device directories below `dir` (not following links,
/// skipping other PCI functions' directories).
fn find_block_devices(dir: &Path, depth: usize, budget: &mut usize, out: &mut Vec<PathBuf>) {
    if depth > BLOCK_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if !kind.is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        if looks_like_pci_address(&name) || name == "holders" || name == "slaves" {
            continue;
        }
        let path = entry.path();
        if is_block_device(&path) {
            out.push(path.clone());
        }
        find_block_devices(&path, depth + 1, budget, out);
    }
}

fn looks_like_pci_address(name: &str) -> bool {
    name.len() >= 12
        && name.contains(':')
        && name.contains('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
}

/// A directory with a `dev` file that is a disk or partition.
fn is_block_device(path: &Path) -> bool {
    if !path.join("dev").is_file() {
        return false;
    }
    let in_block_dir = path
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|n| n == "block");
    let devtype = read_text(&path.join("uevent")).is_ok_and(|u| {
        u.lines()
            .any(|l| l == "DEVTYPE=disk" || l == "DEVTYPE=partition")
    });
    let subsystem = std::fs::read_link(path.join("subsystem"))
        .ok()
        .is_some_and(|t| t.file_name().is_some_and(|n| n == "block"));
    in_block_dir || devtype || subsystem
}

/// Adds the block device at `dir` and, recursively, its holders.
fn collect_with_holders(root: &Root, dir: &Path, depth: usize, out: &mut Vec<BlockDevice>) {
    let Some(name) = dir.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return;
    };
    if out.iter().any(|d| d.name == name) {
        return;
    }
    out.push(BlockDevice {
        name,
        dev: read_text(&dir.join("dev")).unwrap_or_default(),
        mapper: read_text(&dir.join("dm/name")).ok(),
    });
    if depth >= HOLDER_DEPTH {
        return;
    }
    let Ok(holders) = std::fs::read_dir(dir.join("holders")) else {
        return;
    };
    for holder in holders.flatten() {
        // Holders are relative links into /sys/devices/virtual/block.
        if let Ok(target) = std::fs::canonicalize(holder.path())
            && target.starts_with(root.path())
        {
            collect_with_holders(root, &target, depth + 1, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_and_addresses_are_read_as_the_kernel_lists_them() {
        let route = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                     eno1\t0002A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n";
        assert_eq!(
            ipv4_route_of(route, "eno1").as_deref(),
            Some("192.168.2.0/24")
        );
        assert_eq!(ipv4_route_of(route, "eno2"), None);
        let inet6 = "fe800000000000000000000000000001 02 40 20 80     eno1\n";
        assert_eq!(
            ipv6_address_of(inet6, "eno1").as_deref(),
            Some("fe80::1/64")
        );
        let route6 = "fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eno1\n";
        assert_eq!(ipv6_route_of(route6, "eno1").as_deref(), Some("fe80::/64"));
    }

    #[test]
    fn a_btrfs_mount_is_found_by_its_source() {
        let device = BlockDevice {
            name: "nvme0n1p2".into(),
            dev: "259:2".into(),
            mapper: None,
        };
        let info = "29 1 0:26 / / rw,relatime shared:1 - btrfs /dev/nvme0n1p2 rw\n";
        assert_eq!(mounted(info, &device).as_deref(), Some("/"));
        let other = "29 1 259:3 / /data rw - ext4 /dev/nvme0n1p3 rw\n";
        assert_eq!(mounted(other, &device), None);
    }
}
