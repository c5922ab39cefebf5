//! An in-process fake Kubernetes API server (skeleton; see the crate description).
