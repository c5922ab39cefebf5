//! `hostile-infinite-loop`: spins forever (the host's epoch deadline must stop it).
//!
//! Exports every hook through [`hostile_common::misbehaving_guest!`]: polite
//! on empty input (so it passes a smoke test and goes into service), this
//! misbehaviour under load.

fn misbehave(hook: &str) -> ! {
    wdp_guest_sdk::debug!("{hook}: spinning forever");
    let mut counter: u64 = 0;
    loop {
        counter = core::hint::black_box(counter.wrapping_add(1));
    }
}

hostile_common::misbehaving_guest!(misbehave);
