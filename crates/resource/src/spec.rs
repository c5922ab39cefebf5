//! A resource's configuration with its guests loaded and smoke-tested: the
//! unit a reload swaps in.

use std::collections::BTreeMap;
use std::sync::Arc;

use wdp_policy::signature::{self, TrustedKey};
use wdp_policy::{CallContext, CallLimits, Guest, Hook, NoHardware, PolicyEngine};

use crate::error::{GuestProblem, ResourceError};
use wdp_config::{HookBinding, ResourceConfig};

/// A resource's configuration with its guests loaded and smoke-tested.
#[derive(Clone)]
pub struct ResourceSpec {
    /// The validated resource file.
    pub config: ResourceConfig,
    /// The guest of each bound hook.
    pub guests: BTreeMap<Hook, Arc<Guest>>,
    /// Who signed each guest, where the resource requires signatures: the
    /// trusted key that verified it, and the signature file's content as
    /// verified (a reload with another signature file verifies again).
    pub signers: BTreeMap<Hook, (TrustedKey, Option<Vec<u8>>)>,
}

impl std::fmt::Debug for ResourceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceSpec")
            .field("resource", &self.config.resource)
            .field("hooks", &self.guests.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ResourceSpec {
    /// Loads every guest `config` binds (compiling it, or taking it from
    /// the engine's cache), checks it exports its hook and smoke-tests it.
    /// Blocking.
    pub fn load(engine: &PolicyEngine, config: &ResourceConfig) -> Result<Self, ResourceError> {
        let mut guests = BTreeMap::new();
        let mut signers = BTreeMap::new();
        for binding in &config.hooks {
            let fail = |source: GuestProblem| ResourceError::Guest {
                file: config.file.clone(),
                hook: binding.hook,
                guest: binding.guest.clone(),
                source: Box::new(source),
            };
            let (guest, signer) = engine
                .load_verified_file(
                    &binding.guest,
                    binding.sha256.as_deref(),
                    &config.trusted_keys,
                )
                .map_err(|e| fail(e.into()))?;
            if let Some(key) = signer {
                // Read again for the reload's comparison; a file changed in
                // between only makes the next reload verify once more.
                let signature = signature::read_signature(&binding.guest).ok().flatten();
                signers.insert(binding.hook, (key, signature));
            }
            // A `device-taints` binding is served by `device-taints-v2` too.
            if !guest.serves(binding.hook) {
                let exported: Vec<String> = guest.hooks().iter().map(|h| h.to_string()).collect();
                return Err(fail(GuestProblem::NotExported {
                    hook: binding.hook,
                    exported: exported.join(", "),
                }));
            }
            let ctx = CallContext {
                limits: limits(binding),
                services: Arc::new(NoHardware),
                config: Arc::new(config.guest_config.clone()),
                resource: config.resource.clone(),
                generation: None,
                claim: None,
            };
            guest
                .smoke_test(&ctx)
                .map_err(|e| fail(GuestProblem::SmokeTest(e)))?;
            guests.insert(binding.hook, guest);
        }
        Ok(Self {
            config: config.clone(),
            guests,
            signers,
        })
    }

    /// The binding and guest of `hook`, when a guest implements it.
    pub fn bound(&self, hook: Hook) -> Option<(&HookBinding, &Arc<Guest>)> {
        Some((self.config.hook(hook)?, self.guests.get(&hook)?))
    }

    /// Whether `config` describes this very spec: the same configuration
    /// and, for every hook, a guest file whose content is the build this
    /// spec loaded (and, where signatures are required, the signature file
    /// it verified). A reload keeps such a resource as it is, without
    /// loading or smoke-testing its guests again. A guest file that cannot
    /// be read counts as changed (the full load then says why).
    pub fn unchanged_for(&self, config: &ResourceConfig) -> bool {
        self.config == *config
            && config.hooks.len() == self.guests.len()
            && config.hooks.iter().all(|binding| {
                self.guests.get(&binding.hook).is_some_and(|guest| {
                    wdp_policy::guest_file_hash(&binding.guest)
                        .is_ok_and(|hash| hash == guest.content_hash())
                })
            })
            && self.signers.iter().all(|(hook, (_, verified))| {
                config.hook(*hook).is_some_and(|binding| {
                    signature::read_signature(&binding.guest).ok().flatten() == *verified
                })
            })
    }

    /// Whether `other` has the same configuration and the same guest
    /// builds (by content hash), signed by the same keys.
    pub fn same_as(&self, other: &ResourceSpec) -> bool {
        self.config == other.config
            && self.guests.len() == other.guests.len()
            && self.guests.iter().all(|(hook, g)| {
                other
                    .guests
                    .get(hook)
                    .is_some_and(|h| h.content_hash() == g.content_hash())
            })
            && self.signers == other.signers
    }

    /// Whether `other` serves exactly as this spec does, read from other
    /// files: the same resource in another configuration set, whose
    /// resource file, guest files and key files lie elsewhere with the
    /// same content. Swapping it in changes nothing a kubelet or a
    /// container sees.
    pub fn serves_as(&self, other: &ResourceSpec) -> bool {
        fn placeless(config: &ResourceConfig) -> ResourceConfig {
            let mut config = config.clone();
            config.file = std::path::PathBuf::new();
            for binding in &mut config.hooks {
                binding.guest = std::path::PathBuf::new();
            }
            config.trusted_keys = signature::TrustedKeys::default();
            config
        }
        fn fingerprints(config: &ResourceConfig) -> Vec<&str> {
            let keys = config.trusted_keys.keys();
            keys.iter().map(TrustedKey::fingerprint).collect()
        }
        let signed_alike = self.signers.len() == other.signers.len()
            && self.signers.iter().all(|(hook, (key, signature))| {
                other
                    .signers
                    .get(hook)
                    .is_some_and(|(k, s)| k.fingerprint() == key.fingerprint() && s == signature)
            });
        placeless(&self.config) == placeless(&other.config)
            && fingerprints(&self.config) == fingerprints(&other.config)
            && self.guests.len() == other.guests.len()
            && self.guests.iter().all(|(hook, g)| {
                other
                    .guests
                    .get(hook)
                    .is_some_and(|h| h.content_hash() == g.content_hash())
            })
            && signed_alike
    }
}

/// The call limits of a hook binding.
pub(crate) fn limits(binding: &HookBinding) -> CallLimits {
    CallLimits {
        timeout: binding.timeout,
        memory_bytes: binding.memory_limit_bytes,
    }
}
