//! `hostile-trap`: panics (a trap; its message reaches the host through stderr).
//!
//! Exports every hook through [`hostile_common::misbehaving_guest!`]: polite
//! on empty input (so it passes a smoke test and goes into service), this
//! misbehaviour under load.

fn misbehave(hook: &str) -> ! {
    panic!("hostile guest panics on purpose in hook {hook}")
}

hostile_common::misbehaving_guest!(misbehave);
