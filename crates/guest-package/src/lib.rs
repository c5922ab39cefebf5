//! Guests packaged the way a cluster ships the rest of its software: an
//! OCI image whose one layer holds a `guests/` folder (and, optionally, a
//! `config/` folder), written as an OCI archive that `skopeo`, `oras` or
//! `crane` push to a registry, pinned there by digest, and mounted on a
//! node as an image volume (or copied out of it by an init container).
//!
//! [`package`] reads the folders ([`collect`]: regular files only, no
//! symlink leading out of its folder, at least one `.wasm` guest), lays
//! them out as one gzip-compressed layer with every timestamp, owner and
//! mode fixed ([`layer`]), and writes the image config, manifest, index
//! and archive ([`archive`]): the same inputs give the same bytes, so the
//! same digest, on any machine. The archive is written beside its final
//! name and renamed into place: a refused input leaves nothing behind.
//!
//! It builds no container image with a runtime in it, pushes nothing and
//! needs no engine; it knows nothing of what the guests do (the host loads
//! and checks them).

#![warn(missing_docs)]

pub mod archive;
pub mod collect;
mod digest;
mod error;
mod install;
pub mod layer;

use std::path::{Path, PathBuf};

pub use collect::{INSTALLER_PATH, PackagedFile, collect_inputs, read_installer};
pub use error::PackageError;
pub use install::install_guests;

/// What to package and where.
#[derive(Clone, Debug)]
pub struct PackageOptions {
    /// The folder whose files become `guests/` in the image.
    pub guests: PathBuf,
    /// A configuration folder to ship as `config/`, when set.
    pub config: Option<PathBuf>,
    /// A static build of the host binary to ship as
    /// [`INSTALLER_PATH`], the image's entrypoint: an init container
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

/// What [`package`] wrote.
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

/// Packages `options.guests` (and `options.config`) into an OCI archive
/// at `options.output`.
pub fn package(options: &PackageOptions) -> Result<PackageReport, PackageError> {
    let mut files = collect_inputs(&options.guests, options.config.as_deref())?;
    if let Some(installer) = &options.installer {
        files.push(read_installer(installer)?);
        files.sort_by(|a, b| a.path.cmp(&b.path));
    }
    let layer = layer::build(&files, options.epoch)?;
    let image = archive::Image::new(&layer, &files, options);
    write_atomically(&options.output, |out| {
        image.write_archive(out, options.epoch)
    })?;
    Ok(PackageReport {
        manifest_digest: image.manifest_digest().to_owned(),
        layer_digest: layer.digest.clone(),
        layer_bytes: layer.compressed.len() as u64,
        files,
        output: options.output.clone(),
    })
}

/// Writes `path` through a `.partial` file beside it, renamed into place
/// only when `write` succeeded; removed otherwise.
fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut std::fs::File) -> Result<(), PackageError>,
) -> Result<(), PackageError> {
    let io = |source| PackageError::Output {
        path: path.to_owned(),
        source,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    let mut partial_name = path.file_name().unwrap_or_default().to_owned();
    partial_name.push(".partial");
    let partial = path.with_file_name(partial_name);
    let result = std::fs::File::create(&partial)
        .map_err(io)
        .and_then(|mut file| {
            write(&mut file)?;
            file.sync_all().map_err(io)
        })
        .and_then(|()| std::fs::rename(&partial, path).map_err(io));
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    result
}
