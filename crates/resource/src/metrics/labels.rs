//! The label sets of the resource pipeline's metric families, one struct
//! per set of labels a family carries.

use prometheus_client::encoding::EncodeLabelSet;

/// Label set: the resource.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabel {
    /// Extended resource name.
    pub resource: String,
}

/// Label set: the resource and `healthy` / `unhealthy`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct HealthLabels {
    /// Extended resource name.
    pub resource: String,
    /// `healthy` or `unhealthy`.
    pub health: String,
}

/// Label set: the resource, the guest and the hook.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GuestLabels {
    /// Extended resource name.
    pub resource: String,
    /// The guest's name.
    pub guest: String,
    /// The hook, e.g. `health`.
    pub hook: String,
}

/// Label set: the resource, the guest, the hook and the call's result.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct GuestResultLabels {
    /// Extended resource name.
    pub resource: String,
    /// The guest's name.
    pub guest: String,
    /// The hook, e.g. `health`.
    pub hook: String,
    /// The outcome.
    pub result: String,
}
