//! Hardware facts for the device-plugin host, read from the real Linux
//! sysfs/devfs layouts beneath a *host root* (`/` on a node, `/host` in a
//! DaemonSet, a fixture tree in tests): PCI functions ([`scan_pci`]), USB
//! devices ([`scan_usb`]), device nodes by glob ([`glob_nodes`]) and NUMA
//! nodes ([`numa_nodes`]); which nodes are administrative ([`AdminNodes`]);
//! the built-in selectors of a resource's config and
//! [`discover`], which applies them; attribute access confined to a selected
//! device's sysfs directory, writes only where granted ([`read_attribute`],
//! [`write_attribute`]); and a [`ChangeWatcher`] that turns inotify events
//! into wake-ups for health checks; and [`record`], which copies what
//! discovery reads into a snapshot tree usable as a host root. Reads go
//! through the root; every path reported is a host path (root stripped).
//! Odd sysfs entries never fail a scan: they are skipped or left out with a
//! warning naming the path.
//!
//! It does not run guests, talk to the kubelet, decide health or poll (the
//! host does those), does not follow uevents/netlink, and never changes the
//! hardware except through [`write_attribute`].

// The size rule for functions (clippy.toml): production code only.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

mod access;
pub mod admin_nodes;
mod attributes;
mod candidate;
mod error;
mod fsat;
mod listing;
pub mod nodes;
pub mod numa;
pub mod pci;
mod record;
mod root;
mod selectors;
mod sysfs;
pub mod usb;
mod watch;

pub use access::{
    ATTRIBUTE_SIZE_LIMIT, AccessError, list_attributes, read_attribute, read_attribute_bytes,
    write_attribute,
};
pub use admin_nodes::{AdminNode, AdminNodeKind, AdminNodes};
pub use attributes::Attributes;
pub use candidate::{Candidate, CandidateKind, DeviceNode, NodeType, Scan};
pub use error::HardwareError;
pub use listing::{LISTING_MAX_AGE, ListingCache};
pub use nodes::glob_nodes;
pub use numa::{NumaNode, numa_nodes};
pub use pci::scan_pci;
pub use record::{RecordSummary, record};
pub use root::HostRoot;
pub use selectors::{
    NodeSelector, PciSelector, Selector, UsbSelector, discover, discover_cached, node_id,
};
pub use sysfs::parse_cpulist;
pub use usb::scan_usb;
pub use watch::{ChangeReceiver, ChangeWatcher, OWN_WRITE_ECHO, watch_paths};
