//! Writes of the ResourceClaim `status` subresource: the request's `status` replaces the stored
//! one and nothing else changes (spec, labels and the rest of the metadata stay as stored, as the
//! real server's status strategy resets them), after the resourceVersion check and the status
//! admission. A write that changes nothing keeps the resourceVersion.

use k8s_openapi::api::resource::v1::ResourceClaim;

use super::writes::{check_namespace, check_versions, invalid};
use super::{Store, not_found};
use crate::collection::{Change, ChangeKind};
use crate::kinds::StoredKind;
use crate::status::ApiError;
use crate::validation::admit_claim_status;

impl Store {
    /// Replaces the status of the claim `namespace/name` with `claim.status`; `dry_run` checks
    /// only. Returns the claim as stored.
    pub(crate) fn replace_claim_status(
        &self,
        namespace: &str,
        name: &str,
        claim: ResourceClaim,
        dry_run: bool,
    ) -> Result<ResourceClaim, ApiError> {
        let mut state = self.lock();
        let meta = &claim.metadata;
        check_namespace(meta.namespace.as_deref(), namespace)?;
        if meta.name.as_deref() != Some(name) {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                meta.name.as_deref().unwrap_or("")
            )));
        }
        let key = (namespace.to_string(), name.to_string());
        let old = ResourceClaim::collection(&state)
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| not_found::<ResourceClaim>(name))?;
        check_versions::<ResourceClaim>(name, meta, &old.metadata)?;
        let mut updated = old.clone();
        updated.status = claim.status;
        admit_claim_status(&mut updated, &old)
            .map_err(|errors| invalid::<ResourceClaim>(name, errors))?;
        if updated == old || dry_run {
            return Ok(updated);
        }
        let version = self.next_version(&mut state);
        updated.metadata.resource_version = Some(version.to_string());
        let collection = ResourceClaim::collection_mut(&mut state);
        collection.objects.insert(key, updated.clone());
        collection.record(Change {
            kind: ChangeKind::Modified,
            resource_version: version,
            object: updated.clone(),
            previous: Some(old),
        });
        drop(state);
        self.announce::<ResourceClaim>(version);
        Ok(updated)
    }
}
