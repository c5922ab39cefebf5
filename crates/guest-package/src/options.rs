//! What [`crate::package`] is asked to do, and what it did.

use std::path::PathBuf;

use crate::collect::PackagedFile;

/// What to package and where.
#[derive(Clone, Debug)]
pub struct PackageOptions {
    /// The folder whose files become `guests/` in the image.
    pub guests: PathBuf,
    /// A configuration folder to ship as `config/`, when set.
    pub config: Option<PathBuf>,
    /// A static build of the host binary to ship as
    /// [`crate::INSTALLER_PATH`], the image's entrypoint: an init container
    /// running the image copies the guests out of it
    /// (`install-guests`) where image volumes are not available.
    pub installer: Option<PathBuf>,
    /// The OCI archive to write (`.oci.tar`).
    pub output: PathBuf,
    /// The name the archive's index gives the image
    /// (`org.opencontainers.image.ref.name`), e.g. `0.1.0`.
    pub tag: String,
    /// The image config's architecture (`amd64`, `arm64`, ...). Wasm runs
    /// anywhere, but container runtimes match an image to the node's
    /// platform before mounting it.
    pub architecture: String,
    /// Seconds since the Unix epoch stamped on every file and the image
    /// (`SOURCE_DATE_EPOCH` by convention; 0 when unset).
    pub epoch: u64,
}

/// What [`crate::package`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackageReport {
    /// The manifest's digest, `sha256:…`: what an image reference pins
    /// (`registry/name@sha256:…`) once pushed without conversion.
    pub manifest_digest: String,
    /// The compressed layer's digest and size in bytes.
    pub layer_digest: String,
    /// The compressed layer's size in bytes.
    pub layer_bytes: u64,
    /// Every file in the layer, in layer order.
    pub files: Vec<PackagedFile>,
    /// The archive written.
    pub output: PathBuf,
}
