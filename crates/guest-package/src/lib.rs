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

// The size rule for functions (clippy.toml): production code only.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod archive;
pub mod collect;
mod digest;
mod error;
mod install;
pub mod layer;
mod options;

use std::path::Path;

pub use collect::{INSTALLER_PATH, PackagedFile, collect_inputs, read_installer};
pub use error::PackageError;
pub use install::install_guests;
pub use options::{PackageOptions, PackageReport};

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
