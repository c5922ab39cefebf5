//! The label sets of the host's metric families, one struct per set of
//! labels a family carries.

use prometheus_client::encoding::EncodeLabelSet;

/// Label set: the resource.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabel {
    /// Extended resource name.
    pub resource: String,
}

/// Label set: the resource and `healthy` / `unhealthy`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HealthLabels {
    /// Extended resource name.
    pub resource: String,
    /// `healthy` or `unhealthy`.
    pub health: String,
}

/// Label set: the resource and the kubelet RPC.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcLabels {
    /// Extended resource name.
    pub resource: String,
    /// The RPC, e.g. `Allocate`.
    pub rpc: String,
}

/// Label set: the resource, the kubelet RPC and its gRPC status code.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcResultLabels {
    /// Extended resource name.
    pub resource: String,
    /// The RPC, e.g. `Allocate`.
    pub rpc: String,
    /// The gRPC status code, e.g. `Ok`.
    pub code: String,
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
pub struct GuestResultLabels {
    /// Extended resource name.
    pub resource: String,
    /// The guest's name.
    pub guest: String,
    /// The hook, e.g. `health`.
    pub hook: String,
    /// The outcome.
    pub result: String,
}

/// Label set: `success` or `failure`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// The outcome.
    pub result: String,
}

/// Label set: the resource and the registration's result.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RegistrationLabels {
    /// Extended resource name.
    pub resource: String,
    /// The outcome.
    pub result: String,
}

/// Label set: the DRA driver.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DriverLabel {
    /// The DRA driver name.
    pub driver: String,
}

/// Label set: a configuration set and the digest of its files.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConfigSetLabels {
    /// The set's name (`default` for the top-level one).
    pub set: String,
    /// `sha256:<hex>` of its files.
    pub digest: String,
}

/// Label set: a resource and the DRA driver serving it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceDriverLabels {
    /// The resource name.
    pub resource: String,
    /// The DRA driver name.
    pub driver: String,
}

/// Label set: the DRA driver and the claim operation.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DraClaimLabels {
    /// The DRA driver name.
    pub driver: String,
    /// `prepare` or `unprepare`.
    pub operation: String,
}

/// Label set: the DRA driver, the claim operation and its outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DraClaimResultLabels {
    /// The DRA driver name.
    pub driver: String,
    /// `prepare` or `unprepare`.
    pub operation: String,
    /// `success` or `failure`.
    pub result: String,
}

/// What the kubelet asked a DRA driver to do with one claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DraOperation {
    /// `NodePrepareResources`, one claim of it.
    Prepare,
    /// `NodeUnprepareResources`, one claim of it.
    Unprepare,
}

impl DraOperation {
    /// The label value: `prepare` or `unprepare`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prepare => "prepare",
            Self::Unprepare => "unprepare",
        }
    }
}
