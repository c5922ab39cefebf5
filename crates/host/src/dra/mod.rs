//! The Dynamic Resource Allocation side of the host: a resource whose
//! config says `api = "dra"` is served as a DRA kubelet plugin instead of
//! through the device-plugin API, driven by the same guests.
//!
//! Map, one job per file: `devices` turns a device set into the DRA
//! devices (names, attributes, health taints) a ResourceSlice carries;
//! `publish` keeps the driver's slices following the device set;
//! `health` serves the kubelet's `DRAResourceHealth` stream; `checkpoint`
//! is the on-disk record of prepared claims; `prepare` holds the per-claim
//! prepare and unprepare decisions and `claim_cdi` the CDI spec of one
//! claim; `service` is the `DRAPlugin` gRPC side (v1 and v1beta1);
//! `kube_api` connects to the API server; `driver` runs one driver
//! (sockets, registration, slice publishing, health stream).

pub mod checkpoint;
pub mod claim_cdi;
pub mod devices;
pub mod driver;
pub mod health;
pub mod kube_api;
pub mod prepare;
pub mod publish;
pub mod service;
