//! `hostile-memory-bomb`: allocates without end (the host's memory cap must stop it).
//!
//! Exports every hook through [`hostile_common::misbehaving_guest!`]: polite
//! on empty input (so it passes a smoke test and goes into service), this
//! misbehaviour under load.

fn misbehave(hook: &str) -> ! {
    wdp_guest_sdk::debug!("{hook}: allocating without end");
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        // Touch the memory so nothing is optimised away.
        hoard.push(core::hint::black_box(vec![0xa5; 1 << 20]));
    }
}

hostile_common::misbehaving_guest!(misbehave);
