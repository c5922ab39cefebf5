//! The Dynamic Resource Allocation side of the host: a resource whose
//! config says `api = "dra"` is served as a DRA kubelet plugin instead of
//! through the device-plugin API, driven by the same guests.
//!
//! Map, one job per file: `devices` turns a device set into the DRA
//! devices (names, attributes, health taints) a ResourceSlice carries;
//! `health` serves the kubelet's `DRAResourceHealth` stream; `checkpoint`
//! is the on-disk record of prepared claims; `prepare` and `unprepare` are
//! the per-claim decisions; `service` is the `DRAPlugin` gRPC side (v1 and
//! v1beta1); `driver` runs one driver (sockets, registration, publisher).

pub mod checkpoint;
pub mod claim_cdi;
pub mod driver;
pub mod kube_api;
pub mod prepare;
pub mod publish;
pub mod service;
