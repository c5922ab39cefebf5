//! The store's writes: create, replace, delete and delete-collection as clients send them,
//! with the API server's checks, and the test-side `put`/`remove` that skip those checks.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::{Filter, Preconditions, Store, not_found};
use crate::collection::{Change, ChangeKind, ObjectKey, State};
use crate::identity::{generated_name_suffix, new_uid, now};
use crate::kinds::StoredKind;
use crate::status::{ApiError, FieldError, FieldErrorKind};
use crate::validation::dns_subdomain_problem;

impl Store {
    /// Creates `object` in `namespace` ("" for cluster-scoped kinds); `dry_run` checks only.
    pub(crate) fn create<K: StoredKind>(
        &self,
        namespace: &str,
        mut object: K,
        dry_run: bool,
    ) -> Result<K, ApiError> {
        let policy = self.policy();
        let mut state = self.lock();
        let meta = object.metadata_mut();
        if meta
            .resource_version
            .as_deref()
            .is_some_and(|rv| !rv.is_empty())
        {
            return Err(ApiError::internal(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        check_namespace(meta.namespace.as_deref(), namespace)?;
        meta.namespace = (!namespace.is_empty()).then(|| namespace.to_string());
        let name = match (meta.name.as_deref(), meta.generate_name.as_deref()) {
            (Some(name), _) if !name.is_empty() => name.to_string(),
            (_, Some(prefix)) if !prefix.is_empty() => loop {
                let candidate = format!("{prefix}{}", generated_name_suffix());
                let key = (namespace.to_string(), candidate.clone());
                if !K::collection(&state).objects.contains_key(&key) {
                    break candidate;
                }
            },
            _ => {
                return Err(invalid::<K>(
                    "",
                    vec![FieldError::new(
                        "metadata.name",
                        FieldErrorKind::Required {
                            detail: "name or generateName is required".into(),
                        },
                    )],
                ));
            }
        };
        meta.name = Some(name.clone());
        let mut errors = name_errors(&name);
        if let Err(more) = object.admit(None, &policy) {
            errors.extend(more);
        }
        if !errors.is_empty() {
            return Err(invalid::<K>(&name, errors));
        }
        let key = (namespace.to_string(), name.clone());
        if K::collection(&state).objects.contains_key(&key) {
            return Err(ApiError::already_exists(
                K::URL_PATH_SEGMENT,
                K::GROUP,
                &name,
            ));
        }
        let version = if dry_run {
            state.resource_version
        } else {
            self.next_version(&mut state)
        };
        let meta = object.metadata_mut();
        meta.uid = Some(new_uid());
        meta.creation_timestamp = Some(Time(policy.now));
        meta.resource_version = (!dry_run).then(|| version.to_string());
        meta.generation = K::TRACKS_GENERATION.then_some(1);
        meta.deletion_timestamp = None;
        meta.deletion_grace_period_seconds = None;
        if dry_run {
            return Ok(object);
        }
        let collection = K::collection_mut(&mut state);
        collection.objects.insert(key, object.clone());
        collection.record(Change {
            kind: ChangeKind::Added,
            resource_version: version,
            object: object.clone(),
            previous: None,
        });
        drop(state);
        self.announce::<K>(version);
        Ok(object)
    }

    /// Replaces the object `namespace/name` with `object` (PUT semantics).
    pub(crate) fn replace<K: StoredKind>(
        &self,
        namespace: &str,
        name: &str,
        mut object: K,
        dry_run: bool,
    ) -> Result<K, ApiError> {
        let policy = self.policy();
        let mut state = self.lock();
        let meta = object.metadata_mut();
        check_namespace(meta.namespace.as_deref(), namespace)?;
        if meta.name.as_deref() != Some(name) {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                meta.name.as_deref().unwrap_or("")
            )));
        }
        let key = (namespace.to_string(), name.to_string());
        let old = K::collection(&state)
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| not_found::<K>(name))?;
        let old_meta = old.metadata();
        check_versions::<K>(name, meta, old_meta)?;
        meta.namespace = old_meta.namespace.clone();
        meta.uid = old_meta.uid.clone();
        meta.creation_timestamp = old_meta.creation_timestamp.clone();
        meta.resource_version = old_meta.resource_version.clone();
        meta.generation = old_meta.generation;
        meta.generate_name = meta
            .generate_name
            .take()
            .or_else(|| old_meta.generate_name.clone());
        meta.deletion_timestamp = old_meta.deletion_timestamp.clone();
        if let Err(errors) = object.admit(Some(&old), &policy) {
            return Err(invalid::<K>(name, errors));
        }
        if K::TRACKS_GENERATION && object.spec_differs(&old) {
            object.metadata_mut().generation = Some(old.metadata().generation.unwrap_or(0) + 1);
        }
        if object == old || dry_run {
            // A no-op update writes nothing and keeps the resourceVersion, like the real server.
            return Ok(object);
        }
        let version = self.next_version(&mut state);
        object.metadata_mut().resource_version = Some(version.to_string());
        let collection = K::collection_mut(&mut state);
        collection.objects.insert(key, object.clone());
        collection.record(Change {
            kind: ChangeKind::Modified,
            resource_version: version,
            object: object.clone(),
            previous: Some(old),
        });
        drop(state);
        self.announce::<K>(version);
        Ok(object)
    }

    /// Deletes `namespace/name` (immediately: the fake has no finalizers) and returns it.
    pub(crate) fn delete<K: StoredKind>(
        &self,
        namespace: &str,
        name: &str,
        preconditions: &Preconditions,
    ) -> Result<K, ApiError> {
        let mut state = self.lock();
        let key = (namespace.to_string(), name.to_string());
        let current = K::collection(&state)
            .objects
            .get(&key)
            .ok_or_else(|| not_found::<K>(name))?;
        let meta = current.metadata();
        if let Some(uid) = &preconditions.uid
            && Some(uid.as_str()) != meta.uid.as_deref()
        {
            let why = format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                meta.uid.as_deref().unwrap_or("")
            );
            return Err(ApiError::conflict(
                K::URL_PATH_SEGMENT,
                K::GROUP,
                name,
                &why,
            ));
        }
        if let Some(rv) = &preconditions.resource_version
            && Some(rv.as_str()) != meta.resource_version.as_deref()
        {
            let why = format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                meta.resource_version.as_deref().unwrap_or("")
            );
            return Err(ApiError::conflict(
                K::URL_PATH_SEGMENT,
                K::GROUP,
                name,
                &why,
            ));
        }
        let removed = self.remove_locked::<K>(&mut state, &key);
        let version = state.resource_version;
        drop(state);
        self.announce::<K>(version);
        Ok(removed)
    }

    /// Deletes every selected object; returns them in key order.
    pub(crate) fn delete_collection<K: StoredKind>(&self, filter: &Filter) -> Vec<K> {
        let mut state = self.lock();
        let keys: Vec<ObjectKey> = K::collection(&state)
            .objects
            .iter()
            .filter(|(_, o)| filter.matches(*o))
            .map(|(k, _)| k.clone())
            .collect();
        let removed: Vec<K> = keys
            .iter()
            .map(|key| self.remove_locked::<K>(&mut state, key))
            .collect();
        let version = state.resource_version;
        drop(state);
        if !removed.is_empty() {
            self.announce::<K>(version);
        }
        removed
    }

    fn remove_locked<K: StoredKind>(&self, state: &mut State, key: &ObjectKey) -> K {
        let version = self.next_version(state);
        let collection = K::collection_mut(state);
        let mut object = collection
            .objects
            .remove(key)
            .expect("the caller checked the key under the same lock");
        object.metadata_mut().resource_version = Some(version.to_string());
        collection.record(Change {
            kind: ChangeKind::Deleted,
            resource_version: version,
            object: object.clone(),
            previous: None,
        });
        object
    }

    /// Creates or replaces an object on behalf of the test (no validation, no version checks).
    pub(crate) fn put<K: StoredKind>(&self, mut object: K) -> K {
        let mut state = self.lock();
        let meta = object.metadata();
        let key = (
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
        );
        let old = K::collection(&state).objects.get(&key).cloned();
        let version = self.next_version(&mut state);
        let stamped = now();
        let generation = match &old {
            Some(old) if object.spec_differs(old) => old.metadata().generation.unwrap_or(0) + 1,
            Some(old) => old.metadata().generation.unwrap_or(1),
            None => 1,
        };
        let meta = object.metadata_mut();
        if meta.uid.as_deref().unwrap_or("").is_empty() {
            meta.uid = Some(
                old.as_ref()
                    .and_then(|o| o.metadata().uid.clone())
                    .unwrap_or_else(new_uid),
            );
        }
        if meta.creation_timestamp.is_none() {
            meta.creation_timestamp = Some(
                old.as_ref()
                    .and_then(|o| o.metadata().creation_timestamp.clone())
                    .unwrap_or(Time(stamped)),
            );
        }
        meta.resource_version = Some(version.to_string());
        meta.generation = K::TRACKS_GENERATION.then_some(generation);
        let kind = if old.is_some() {
            ChangeKind::Modified
        } else {
            ChangeKind::Added
        };
        let collection = K::collection_mut(&mut state);
        collection.objects.insert(key, object.clone());
        collection.record(Change {
            kind,
            resource_version: version,
            object: object.clone(),
            previous: old,
        });
        drop(state);
        self.announce::<K>(version);
        object
    }

    /// Deletes an object on behalf of the test; whether it existed.
    pub(crate) fn remove<K: StoredKind>(&self, namespace: &str, name: &str) -> bool {
        self.delete::<K>(namespace, name, &Preconditions::default())
            .is_ok()
    }
}

/// 409 when `meta` names a resourceVersion or uid other than the stored object's (`stored`).
pub(super) fn check_versions<K: StoredKind>(
    name: &str,
    meta: &ObjectMeta,
    stored: &ObjectMeta,
) -> Result<(), ApiError> {
    if let Some(rv) = meta.resource_version.as_deref().filter(|rv| !rv.is_empty())
        && Some(rv) != stored.resource_version.as_deref()
    {
        return Err(ApiError::conflict(
            K::URL_PATH_SEGMENT,
            K::GROUP,
            name,
            STALE,
        ));
    }
    if let Some(uid) = meta.uid.as_deref().filter(|u| !u.is_empty())
        && Some(uid) != stored.uid.as_deref()
    {
        let why = format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
            stored.uid.as_deref().unwrap_or("")
        );
        return Err(ApiError::conflict(
            K::URL_PATH_SEGMENT,
            K::GROUP,
            name,
            &why,
        ));
    }
    Ok(())
}

/// The message of a stale-resourceVersion conflict.
const STALE: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

pub(super) fn invalid<K: StoredKind>(name: &str, errors: Vec<FieldError>) -> ApiError {
    ApiError::invalid(K::KIND, K::GROUP, name, &errors)
}

/// A body namespace must match the URL's (or be empty).
pub(super) fn check_namespace(body: Option<&str>, url: &str) -> Result<(), ApiError> {
    match body {
        Some(ns) if !ns.is_empty() && ns != url => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        _ => Ok(()),
    }
}

/// Object names are DNS subdomains.
fn name_errors(name: &str) -> Vec<FieldError> {
    dns_subdomain_problem(name)
        .map(|detail| {
            FieldError::new(
                "metadata.name",
                FieldErrorKind::Invalid {
                    value: name.into(),
                    detail,
                },
            )
        })
        .into_iter()
        .collect()
}
