//! End-to-end tests: the real `wasm-device-plugin` binary against the
//! simulated kubelet on temporary sockets, with fixture host trees.
//! Every wait is for an event (a registration, a device list), bounded by a
//! generous timeout; no test sleeps for a fixed time.

mod support;

mod api_switch;
mod cdi;
mod core;
mod dra;
mod guests;
mod hardware;
mod hostile_input;
mod last_good;
mod least_privilege;
mod new_guest;
mod ops;
mod package;
mod passthrough;
mod plugin_watcher;
mod polyglot;
mod polyglot_dra;
mod recipes;
mod reload;
mod restart_matrix;
mod visibility;
