//! What the workspace's tests, the end-to-end tests (`tests/e2e`), the
//! benches and the bench examples share, kept in one place instead of a
//! copy in each: the repository's fixture host trees and files written
//! under a host root ([`fixtures`]), the check a container runtime makes
//! of a CDI spec (`read_cdi_spec`, with feature `cdi`), a bounded wait for a
//! condition ([`eventually`]), a stand-in of the kernel's PCI driver
//! binding in sysfs (`kernel_standin`, with feature `kernel-standin`), and
//! the figures benches print
//! ([`measure`]: percentiles, a process's memory and CPU time from
//! `/proc`).
//!
//! A dev-dependency only: nothing the image ships links it. It depends on
//! no crate of the workspace, so any crate's tests may use it.

#[cfg(feature = "cdi")]
mod cdi;
pub mod fixtures;
#[cfg(feature = "kernel-standin")]
pub mod kernel_standin;
pub mod measure;
mod wait;

#[cfg(feature = "cdi")]
pub use cdi::read_cdi_spec;
pub use wait::eventually;
