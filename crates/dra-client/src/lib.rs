//! The Kubernetes API side of the DRA mode (skeleton; see the crate description).
