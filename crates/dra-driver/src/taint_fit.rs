//! A guest's device taints fitted to the API server that takes them.
//!
//! A `device-taints` guest answers within the WIT limits (the resource
//! checked that: 3 taints a device through `device-taints`, 15 and the
//! `none` effect through `device-taints-v2`, one place always kept for the
//! health taint). The server may take less: a 1.34 API server takes 4
//! taints a device (so 3 of a guest's) and does not know the effect `None`.
//! Once the publisher has learned the server's version, [`TaintFit::fit`]
//! fits each device's taints to it:
//!
//! - a taint with the effect `None` on a server before 1.35 is left out
//!   (it would only have informed: no claim is kept off the device by it);
//! - a device with more taints than the server takes beside the health
//!   taint keeps its last good taints (the last ones that fitted, under the
//!   same server version; none if there never were any): the guest's answer
//!   for that device is refused, the other devices' answers stand.
//!
//! Each comes back as a [`TaintProblem`] naming the resource, the guest,
//! the hook, the device and the numbers, for the caller to log once per
//! change. Before the version is known the taints go as they are (the
//! publisher itself leaves `None` out of a pass to a 1.34 server and a
//! device with too many taints out of the pool, until this fit catches up
//! one pass later).

use std::collections::BTreeMap;
use std::fmt;

use wdp_dra_client::{PublishStatus, ServerVersion};
use wdp_policy::Hook;
use wdp_policy::types::{DeviceTaintV2, TaintEffectV2};
use wdp_resource::{DeviceSet, DraExtras, TaintSource};

use crate::devices::{DraDeviceList, dra_devices_with};

/// What a server of one version takes of a device's taints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaintLimits {
    /// The server's version.
    pub version: ServerVersion,
    /// Taints a device may carry, the health taint included.
    pub max_per_device: usize,
    /// Whether the effect `None` is known.
    pub effect_none: bool,
}

impl TaintLimits {
    /// The limits of a server of `version`.
    pub fn of(version: ServerVersion) -> Self {
        let limits = version.limits();
        Self {
            version,
            max_per_device: limits.max_taints_per_device,
            effect_none: limits.taint_effect_none,
        }
    }

    /// The taints a guest may give one device: one place is kept for the
    /// health taint.
    pub fn max_guest(&self) -> usize {
        self.max_per_device.saturating_sub(1)
    }
}

/// A guest's taint the server could not take as it was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaintProblem {
    /// Taints with the effect `None`, left out on a server before 1.35.
    NoneLeftOut {
        /// Who gave them.
        source: TaintSource,
        /// The advertised device's ID.
        device: String,
        /// The keys left out.
        keys: Vec<String>,
        /// The server's version.
        version: ServerVersion,
    },
    /// More taints than the server takes: the guest's answer for the
    /// device is refused and its last good taints stay.
    TooMany {
        /// Who gave them.
        source: TaintSource,
        /// The advertised device's ID.
        device: String,
        /// How many the guest gave (those with `None` left out first).
        count: usize,
        /// How many a guest may give a device on this server.
        limit: usize,
        /// How many taints the device keeps (its last good ones).
        kept: usize,
        /// The server's version.
        version: ServerVersion,
    },
}

impl fmt::Display for TaintProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoneLeftOut {
                source,
                device,
                keys,
                version,
            } => write!(
                f,
                "{source}: device {device:?}: the taints {} have the effect none, which the API server ({version}) does not know (Kubernetes 1.35 and later do): left out of the ResourceSlice",
                keys.join(", ")
            ),
            Self::TooMany {
                source,
                device,
                count,
                limit,
                kept,
                version,
            } => write!(
                f,
                "{source}: device {device:?}: {count} taints, more than the {limit} the API server ({version}) takes beside the health taint: the guest's answer for this device is refused and its last good taints ({kept}) stay"
            ),
        }
    }
}

/// The last good taints of each device, under one server version.
#[derive(Debug, Default)]
pub struct TaintFit {
    limits: Option<TaintLimits>,
    last_good: BTreeMap<String, Vec<DeviceTaintV2>>,
}

impl TaintFit {
    /// `extras` with its taints fitted to a server with `limits` (`None`
    /// while the version is unknown: as they are), and what did not fit
    /// (see the module docs). Remembers what fitted, per device.
    pub fn fit(
        &mut self,
        extras: &DraExtras,
        limits: Option<TaintLimits>,
    ) -> (DraExtras, Vec<TaintProblem>) {
        let mut fitted = extras.clone();
        let Some(limits) = limits else {
            return (fitted, Vec::new());
        };
        if self.limits != Some(limits) {
            // What fitted another server says nothing of this one.
            self.limits = Some(limits);
            self.last_good.clear();
        }
        let source = extras.taint_source.clone().unwrap_or_else(|| TaintSource {
            resource: String::new(),
            guest: String::new(),
            hook: Hook::DeviceTaints,
        });
        let mut problems = Vec::new();
        let mut last_good = BTreeMap::new();
        for (device, taints) in &mut fitted.taints {
            if !limits.effect_none && taints.iter().any(|t| t.effect == TaintEffectV2::None) {
                let keys = taints
                    .iter()
                    .filter(|t| t.effect == TaintEffectV2::None)
                    .map(|t| t.key.clone())
                    .collect();
                taints.retain(|t| t.effect != TaintEffectV2::None);
                problems.push(TaintProblem::NoneLeftOut {
                    source: source.clone(),
                    device: device.clone(),
                    keys,
                    version: limits.version,
                });
            }
            if taints.len() > limits.max_guest() {
                let kept = self.last_good.get(device).cloned().unwrap_or_default();
                problems.push(TaintProblem::TooMany {
                    source: source.clone(),
                    device: device.clone(),
                    count: taints.len(),
                    limit: limits.max_guest(),
                    kept: kept.len(),
                    version: limits.version,
                });
                *taints = kept;
            }
            last_good.insert(device.clone(), taints.clone());
        }
        fitted.taints.retain(|_, taints| !taints.is_empty());
        self.last_good = last_good;
        (fitted, problems)
    }
}

/// The publishing loop's side of the fit: the server's version as a
/// publisher learned it, the fit, and the problems last logged.
#[derive(Debug, Default)]
pub(crate) struct ServerFit {
    version: Option<ServerVersion>,
    fit: TaintFit,
    logged: Vec<TaintProblem>,
}

impl ServerFit {
    /// The DRA devices of `set` for `driver`, the guest's taints fitted to
    /// the server; what did not fit is logged (WARN) once per change.
    pub(crate) fn devices(&mut self, driver: &str, set: &DeviceSet) -> DraDeviceList {
        let (list, news) = self.fitted(driver, set);
        for problem in &news {
            tracing::warn!(driver = %driver, "{problem}");
        }
        list
    }

    /// The DRA devices of `set`, the guest's taints fitted, and what to
    /// log: every problem when they differ from those logged last, else
    /// nothing (a poll that changes nothing logs nothing).
    fn fitted(&mut self, driver: &str, set: &DeviceSet) -> (DraDeviceList, Vec<TaintProblem>) {
        let limits = self.version.map(TaintLimits::of);
        let (extras, problems) = self.fit.fit(set.dra(), limits);
        let news = if problems == self.logged {
            Vec::new()
        } else {
            self.logged.clone_from(&problems);
            problems
        };
        (dra_devices_with(driver, set, &extras), news)
    }

    /// Takes the server's version from a publisher's `status`: true when
    /// it is newly known or changed (the devices must be fitted again).
    pub(crate) fn learn(&mut self, status: &PublishStatus) -> bool {
        let known = status.server_version.is_some() && status.server_version != self.version;
        if known {
            self.version = status.server_version;
        }
        known
    }
}

#[cfg(test)]
#[path = "taint_fit_tests.rs"]
mod tests;
