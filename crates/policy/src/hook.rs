//! The eleven hooks of the WIT package: the five every resource may use,
//! the four of resources served through DRA added in WIT 0.1.2, and the two
//! added in 0.1.3 (`device-taints-v2`, `passthrough`).

use std::fmt;
use std::str::FromStr;

/// A hook interface of `wasm-device-plugin:policy`. Displays (and parses)
/// as its kebab-case WIT interface name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hook {
    /// `discovery.discover`: candidates in, devices out.
    Discovery,
    /// `health.check`: devices with facts in, verdicts out.
    Health,
    /// `preferred-allocation.choose`: the kubelet's request in, IDs out.
    PreferredAllocation,
    /// `allocate.allocate`: one container's devices in, its response out.
    Allocate,
    /// `pre-start.pre-start`: one container's devices in, ok or error out.
    PreStart,
    /// `dra-layout.describe`: devices in, their DRA layout (counter sets,
    /// partitions, capacity) out (WIT 0.1.2).
    DraLayout,
    /// `dra-prepare.prepare`: a claim's devices in, their status out
    /// (WIT 0.1.2).
    DraPrepare,
    /// `dra-unprepare.unprepare`: a claim's devices in, ok or error out
    /// (WIT 0.1.2).
    DraUnprepare,
    /// `device-taints.taints`: devices with facts in, taints out
    /// (WIT 0.1.2).
    DeviceTaints,
    /// `device-taints-v2.taints`: devices with facts in, taints out, with
    /// the `none` effect and up to 16 taints a device (WIT 0.1.3); asked
    /// instead of `device-taints` when a guest exports both.
    DeviceTaintsV2,
    /// `passthrough.may-bind`: a bind to another kernel driver in, ok or
    /// the reason not to out (WIT 0.1.3).
    Passthrough,
}

impl Hook {
    /// Every hook, in WIT order.
    pub const ALL: [Hook; 11] = [
        Hook::Discovery,
        Hook::Health,
        Hook::PreferredAllocation,
        Hook::Allocate,
        Hook::PreStart,
        Hook::DraLayout,
        Hook::DraPrepare,
        Hook::DraUnprepare,
        Hook::DeviceTaints,
        Hook::DeviceTaintsV2,
        Hook::Passthrough,
    ];

    /// How many hooks there are.
    pub(crate) const COUNT: usize = Hook::ALL.len();

    /// The WIT interface name, e.g. `preferred-allocation`.
    pub fn interface(self) -> &'static str {
        match self {
            Hook::Discovery => "discovery",
            Hook::Health => "health",
            Hook::PreferredAllocation => "preferred-allocation",
            Hook::Allocate => "allocate",
            Hook::PreStart => "pre-start",
            Hook::DraLayout => "dra-layout",
            Hook::DraPrepare => "dra-prepare",
            Hook::DraUnprepare => "dra-unprepare",
            Hook::DeviceTaints => "device-taints",
            Hook::DeviceTaintsV2 => "device-taints-v2",
            Hook::Passthrough => "passthrough",
        }
    }

    /// The name of the hook's one function inside its interface.
    pub fn function(self) -> &'static str {
        match self {
            Hook::Discovery => "discover",
            Hook::Health => "check",
            Hook::PreferredAllocation => "choose",
            Hook::Allocate => "allocate",
            Hook::PreStart => "pre-start",
            Hook::DraLayout => "describe",
            Hook::DraPrepare => "prepare",
            Hook::DraUnprepare => "unprepare",
            Hook::DeviceTaints | Hook::DeviceTaintsV2 => "taints",
            Hook::Passthrough => "may-bind",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.interface())
    }
}

/// The error of parsing an unknown hook name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown hook {0:?} (expected one of discovery, health, preferred-allocation, allocate, \
     pre-start, dra-layout, dra-prepare, dra-unprepare, device-taints, device-taints-v2, \
     passthrough)"
)]
pub struct UnknownHook(pub String);

impl FromStr for Hook {
    type Err = UnknownHook;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Hook::ALL
            .into_iter()
            .find(|hook| hook.interface() == s)
            .ok_or_else(|| UnknownHook(s.to_string()))
    }
}

#[cfg(test)]
#[path = "hook_tests.rs"]
mod tests;
