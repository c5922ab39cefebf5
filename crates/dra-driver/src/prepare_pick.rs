//! Which devices a claim's allocation names: its results for this driver,
//! once the claim is checked to be the one named, alive and allocated,
//! each mapped to a device of this node's pool, known, healthy and not
//! held by another claim unless it may be shared.

use super::*;

impl ClaimPreparer {
    /// The allocation results of `object` for this driver, after checking
    /// the claim is the one named, alive and allocated.
    pub(super) fn results_for_us(
        &self,
        claim: &ClaimRef,
        object: &ResourceClaim,
    ) -> Result<Vec<DeviceRequestAllocationResult>, String> {
        let uid = object.metadata.uid.as_deref().unwrap_or_default();
        if uid != claim.uid {
            return Err(format!(
                "claim {claim}: the API server's claim of that name has UID {uid:?}; the claim was deleted and re-created"
            ));
        }
        if object.metadata.deletion_timestamp.is_some() {
            return Err(format!("claim {claim}: it is being deleted"));
        }
        let Some(allocation) = object.status.as_ref().and_then(|s| s.allocation.as_ref()) else {
            return Err(format!("claim {claim}: it is not allocated"));
        };
        Ok(allocation
            .devices
            .iter()
            .flat_map(|d| d.results.iter().flatten())
            .filter(|r| r.driver == self.driver)
            .cloned()
            .collect())
    }

    /// Maps each result to a device of `set` (or a partition of one): this
    /// node's pool, a known and healthy device, not held by another claim
    /// unless it may be shared.
    pub(super) fn pick_devices<'a>(
        &self,
        claim: &ClaimRef,
        results: &'a [DeviceRequestAllocationResult],
        set: &'a DeviceSet,
        checkpoint: &Checkpoint,
        in_flight: &InFlight,
    ) -> Result<Vec<Picked<'a>>, String> {
        let mut seen = BTreeSet::new();
        results
            .iter()
            .map(|result| {
                if result.pool != self.pool {
                    return Err(format!(
                        "claim {claim}: request {:?} was allocated device {:?} of pool {:?}, but this node publishes pool {:?}",
                        result.request, result.device, result.pool, self.pool
                    ));
                }
                let pick = Picked::of(claim, result, set, self.resource.name())?;
                if pick.exclusive() {
                    let reserved = in_flight
                        .reserved
                        .get(&pick.id)
                        .filter(|holder| **holder != claim.uid)
                        .map(String::as_str);
                    if let Some(holder) = checkpoint.holder_of(&pick.id, &claim.uid).or(reserved) {
                        return Err(format!(
                            "claim {claim}: device {:?} (ID {:?}) is already prepared for claim {holder}",
                            result.device, pick.id
                        ));
                    }
                    if !seen.insert(pick.id.clone()) {
                        return Err(format!(
                            "claim {claim}: device {:?} is allocated twice in the claim",
                            result.device
                        ));
                    }
                }
                Ok(pick)
            })
            .collect()
    }
}
