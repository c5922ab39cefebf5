//! The five hooks of the WIT package.

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
}

impl Hook {
    /// Every hook, in WIT order.
    pub const ALL: [Hook; 5] = [
        Hook::Discovery,
        Hook::Health,
        Hook::PreferredAllocation,
        Hook::Allocate,
        Hook::PreStart,
    ];

    /// The WIT interface name, e.g. `preferred-allocation`.
    pub fn interface(self) -> &'static str {
        match self {
            Hook::Discovery => "discovery",
            Hook::Health => "health",
            Hook::PreferredAllocation => "preferred-allocation",
            Hook::Allocate => "allocate",
            Hook::PreStart => "pre-start",
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
    "unknown hook {0:?} (expected one of discovery, health, preferred-allocation, allocate, pre-start)"
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
mod tests {
    use super::*;

    #[test]
    fn display_round_trips() {
        for hook in Hook::ALL {
            assert_eq!(hook.to_string().parse::<Hook>(), Ok(hook));
        }
        assert_eq!(
            Hook::PreferredAllocation.to_string(),
            "preferred-allocation"
        );
        assert!("preferred_allocation".parse::<Hook>().is_err());
    }
}
