//! The host against the upstream Kubernetes control plane, built from its Go
//! modules (`tests/cluster/README.md`): tier 1, the real kube-apiserver
//! (validation, RBAC, watches, restarts); tier 2, the real kube-scheduler
//! and kube-controller-manager allocating claims on the host's slices;
//! tier 3, a real kubelet with containerd and runc starting pods with what
//! the host granted.
//!
//! Every test here is ignored in the ordinary run (`cargo nextest run
//! --workspace` builds them but has no control plane to run them against);
//! `bash tests/cluster/run.sh` builds the control plane and runs them.

mod api_server;
mod control_plane;
mod handovers;
mod kubelet;
mod node;
mod passthrough;
mod scheduler;
