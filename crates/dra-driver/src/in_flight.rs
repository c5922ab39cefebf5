//! What a driver's claims are doing right now: a gate per claim UID so
//! calls for the same claim run one after the other
//! ([`one_at_a_time`]), and the devices picked for a claim the checkpoint
//! does not record yet ([`Reservation`]), so two claims never take one.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError};

use tokio::sync::Mutex;
use wdp_resource::HeldDevice;

use crate::allocation::Picked;

/// Claims being prepared or unprepared right now, and the devices picked
/// for a claim that the checkpoint does not record yet.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    /// One gate per claim UID in progress: calls for the same claim run
    /// one after the other.
    pub(crate) claims: HashMap<String, Arc<Mutex<()>>>,
    /// Device ID → the UID of the claim that picked it.
    pub(crate) reserved: HashMap<String, String>,
    /// Claim UID → the devices and partitions picked for it, held (see
    /// `wdp_resource::held`) from the pick on, like recorded ones.
    pub(crate) holding: HashMap<String, Vec<HeldDevice>>,
}

/// Devices reserved for a claim until it is recorded or fails; released
/// when dropped, whichever way the prepare ends (a cancelled call
/// included).
pub(crate) struct Reservation<'a> {
    pub(crate) in_flight: &'a std::sync::Mutex<InFlight>,
    /// The claim's UID.
    pub(crate) uid: String,
    pub(crate) ids: Vec<String>,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for id in &self.ids {
            in_flight.reserved.remove(id);
        }
        in_flight.holding.remove(&self.uid);
    }
}

/// Runs `work` for claim `uid` after every earlier call for the same
/// claim (through `in_flight`) finished.
pub(crate) async fn one_at_a_time<T>(
    in_flight: &std::sync::Mutex<InFlight>,
    uid: &str,
    work: impl Future<Output = T>,
) -> T {
    let gate = {
        let mut in_flight = in_flight.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(in_flight.claims.entry(uid.to_owned()).or_default())
    };
    let result = {
        let _turn = gate.lock().await;
        work.await
    };
    let mut in_flight = in_flight.lock().unwrap_or_else(PoisonError::into_inner);
    // Clones are only taken under this lock: two means the map's and
    // ours, so no other call waits and the gate can go.
    if Arc::strong_count(&gate) == 2 {
        in_flight.claims.remove(uid);
    }
    result
}

/// Reserves the exclusive devices `picked` for claim `uid` in `locked`
/// (the caller's guard of `in_flight`) until the claim is recorded or
/// fails, and notes what it holds; released when the reservation drops.
pub(crate) fn reserve<'a>(
    in_flight: &'a std::sync::Mutex<InFlight>,
    locked: &mut InFlight,
    uid: &str,
    picked: &[Picked<'_>],
) -> Reservation<'a> {
    let mut ids: Vec<String> = Vec::new();
    for pick in picked.iter().filter(|p| p.exclusive()) {
        if !ids.contains(&pick.id) {
            ids.push(pick.id.clone());
        }
    }
    for id in &ids {
        locked.reserved.insert(id.clone(), uid.to_owned());
    }
    let holding = picked
        .iter()
        .map(|pick| HeldDevice {
            device_id: pick.id.clone(),
            partition_of: pick.partition.then(|| pick.device.id().to_owned()),
        })
        .collect();
    locked.holding.insert(uid.to_owned(), holding);
    Reservation {
        in_flight,
        uid: uid.to_owned(),
        ids,
    }
}
