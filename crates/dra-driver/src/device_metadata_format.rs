//! The wire format of a device metadata file: `api/metadata/v1beta1` (and
//! `v1alpha1`, the same fields) of k8s.io/dynamic-resource-allocation,
//! field for field, as serde types.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use wdp_dra_client::AttributeValue;

/// One `DeviceMetadata` object of the stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceMetadata {
    /// Always [`KIND`](super::KIND).
    pub kind: String,
    /// One of [`API_VERSIONS`].
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// The claim's identity.
    pub metadata: ObjectMeta,
    /// The pod's name for a claim made from a template.
    #[serde(
        rename = "podClaimName",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub pod_claim_name: Option<String>,
    /// The request of the file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<MetadataRequest>,
}

/// The claim's identity, as `metav1.ObjectMeta` writes it (empty fields
/// left out).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectMeta {
    /// The claim's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Its namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Its UID.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The metadata's generation: 1 when written at prepare.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub generation: i64,
}

fn is_zero(value: &i64) -> bool {
    *value == 0
}

/// One request and its devices.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataRequest {
    /// The request as allocated (`<request>/<subrequest>` for a choice).
    pub name: String,
    /// Its devices of this driver.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<MetadataDevice>,
}

/// One device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataDevice {
    /// The DRA driver.
    pub driver: String,
    /// The ResourceSlice pool.
    pub pool: String,
    /// The DRA device name.
    pub name: String,
    /// Its attributes as the ResourceSlice has them (`DeviceAttribute`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, Attribute>,
}

/// A `resource.k8s.io` `DeviceAttribute`: exactly one value set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attribute {
    /// A number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub int: Option<i64>,
    /// A truth value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bool: Option<bool>,
    /// A string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string: Option<String>,
    /// A semantic version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl From<&AttributeValue> for Attribute {
    fn from(value: &AttributeValue) -> Self {
        match value {
            AttributeValue::Int(n) => Self {
                int: Some(*n),
                ..Self::default()
            },
            AttributeValue::Bool(b) => Self {
                bool: Some(*b),
                ..Self::default()
            },
            AttributeValue::String(s) => Self {
                string: Some(s.clone()),
                ..Self::default()
            },
            AttributeValue::Version(v) => Self {
                version: Some(v.clone()),
                ..Self::default()
            },
        }
    }
}
