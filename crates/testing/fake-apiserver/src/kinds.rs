//! The object kinds the fake serves and what differs between them: which collection of the
//! store's [`State`] holds them, which fields a field selector may name, whether
//! `metadata.generation` is kept, and the admission step run on writes (validation and field
//! dropping for ResourceSlices; nothing for claims and nodes).

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{Metadata, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::admission::AdmissionPolicy;
use crate::collection::{Collection, State};
use crate::status::FieldError;
use crate::validation;

/// An object kind stored and served by the fake.
pub(crate) trait StoredKind:
    Resource
    + Metadata<Ty = ObjectMeta>
    + Serialize
    + DeserializeOwned
    + Clone
    + PartialEq
    + Send
    + Sync
    + 'static
{
    /// Field-selector keys this kind indexes besides `metadata.name`/`metadata.namespace`.
    const EXTRA_FIELDS: &'static [&'static str];
    /// Whether the server keeps `metadata.generation` (bumped when the spec changes).
    const TRACKS_GENERATION: bool;

    /// This kind's objects in the state.
    fn collection(state: &State) -> &Collection<Self>;
    /// This kind's objects in the state, for writing.
    fn collection_mut(state: &mut State) -> &mut Collection<Self>;
    /// The value of one of [`Self::EXTRA_FIELDS`] ("" when absent).
    fn extra_field(&self, key: &str) -> String;
    /// Whether the desired state (the spec) differs, which bumps `generation`.
    fn spec_differs(&self, other: &Self) -> bool;
    /// Validates and normalises an object being created (`old` is `None`) or updated.
    fn admit(
        &mut self,
        old: Option<&Self>,
        policy: &AdmissionPolicy,
    ) -> Result<(), Vec<FieldError>>;

    /// The value of a field-selector key for this object ("" when absent).
    fn field_value(&self, key: &str) -> String {
        let meta = self.metadata();
        match key {
            "metadata.name" => meta.name.clone().unwrap_or_default(),
            "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
            other => self.extra_field(other),
        }
    }

    /// Field-selector keys this kind accepts.
    fn selectable_fields() -> Vec<&'static str> {
        let mut keys = vec!["metadata.name", "metadata.namespace"];
        keys.extend_from_slice(Self::EXTRA_FIELDS);
        keys
    }
}

impl StoredKind for ResourceSlice {
    const EXTRA_FIELDS: &'static [&'static str] = &["spec.nodeName", "spec.driver"];
    const TRACKS_GENERATION: bool = true;

    fn collection(state: &State) -> &Collection<Self> {
        &state.slices
    }
    fn collection_mut(state: &mut State) -> &mut Collection<Self> {
        &mut state.slices
    }
    fn extra_field(&self, key: &str) -> String {
        match key {
            "spec.nodeName" => self.spec.node_name.clone().unwrap_or_default(),
            "spec.driver" => self.spec.driver.clone(),
            _ => String::new(),
        }
    }
    fn spec_differs(&self, other: &Self) -> bool {
        self.spec != other.spec
    }
    fn admit(
        &mut self,
        old: Option<&Self>,
        policy: &AdmissionPolicy,
    ) -> Result<(), Vec<FieldError>> {
        validation::admit_slice(self, old, policy)
    }
}

impl StoredKind for ResourceClaim {
    const EXTRA_FIELDS: &'static [&'static str] = &[];
    const TRACKS_GENERATION: bool = true;

    fn collection(state: &State) -> &Collection<Self> {
        &state.claims
    }
    fn collection_mut(state: &mut State) -> &mut Collection<Self> {
        &mut state.claims
    }
    fn extra_field(&self, _key: &str) -> String {
        String::new()
    }
    fn spec_differs(&self, other: &Self) -> bool {
        self.spec != other.spec
    }
    fn admit(
        &mut self,
        _old: Option<&Self>,
        _policy: &AdmissionPolicy,
    ) -> Result<(), Vec<FieldError>> {
        Ok(())
    }
}

impl StoredKind for Node {
    const EXTRA_FIELDS: &'static [&'static str] = &["spec.unschedulable"];
    const TRACKS_GENERATION: bool = false;

    fn collection(state: &State) -> &Collection<Self> {
        &state.nodes
    }
    fn collection_mut(state: &mut State) -> &mut Collection<Self> {
        &mut state.nodes
    }
    fn extra_field(&self, key: &str) -> String {
        match key {
            "spec.unschedulable" => self
                .spec
                .as_ref()
                .and_then(|s| s.unschedulable)
                .unwrap_or(false)
                .to_string(),
            _ => String::new(),
        }
    }
    fn spec_differs(&self, other: &Self) -> bool {
        self.spec != other.spec
    }
    fn admit(
        &mut self,
        _old: Option<&Self>,
        _policy: &AdmissionPolicy,
    ) -> Result<(), Vec<FieldError>> {
        Ok(())
    }
}
