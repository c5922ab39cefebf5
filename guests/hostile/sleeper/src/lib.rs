//! `hostile-sleeper`: sleeps for an hour (blocking host calls are refused, since an epoch deadline cannot interrupt a blocked host thread).
//!
//! Exports every hook through [`hostile_common::misbehaving_guest!`]: polite
//! on empty input (so it passes a smoke test and goes into service), this
//! misbehaviour under load.

fn misbehave(hook: &str) -> ! {
    wdp_guest_sdk::debug!("{hook}: sleeping");
    std::thread::sleep(std::time::Duration::from_secs(3600));
    panic!("woke up")
}

hostile_common::misbehaving_guest!(misbehave);
