//! The OCI image around the layer (image config, manifest, index) and the
//! OCI archive holding them (`oci-layout`, `index.json`, `blobs/sha256/…`),
//! the form `skopeo copy oci-archive:…` reads. JSON is written compact
//! with its keys in one fixed order, so the digests never drift.

use std::io::Write;

use serde_json::json;

use crate::collect::{INSTALLER_PATH, PackagedFile};
use crate::digest::sha256;
use crate::error::PackageError;
use crate::layer::{Layer, header};
use crate::options::PackageOptions;

/// `mediaType` of an OCI image manifest.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// `mediaType` of an OCI image config.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
/// `mediaType` of a gzip-compressed layer.
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// `mediaType` of an OCI image index.
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
/// The manifest annotation listing every guest with its digest
/// (`guests/a.wasm=sha256:…,guests/b.wasm=sha256:…`), so that pins can be
/// read off a pushed image.
pub const GUESTS_ANNOTATION: &str = "io.wasm-device-plugin.guests";

/// An image ready to be written: its blobs and the digests naming them.
#[derive(Clone, Debug)]
pub struct Image {
    config: Vec<u8>,
    manifest: Vec<u8>,
    manifest_digest: String,
    index: Vec<u8>,
    layer: Layer,
}

impl Image {
    /// The image of `layer` holding `files`.
    pub fn new(layer: &Layer, files: &[PackagedFile], options: &PackageOptions) -> Self {
        let created = rfc3339(options.epoch);
        let installer = files.iter().any(|f| f.path == INSTALLER_PATH);
        let entrypoint = if installer {
            json!({"Entrypoint": [format!("/{INSTALLER_PATH}"), "install-guests"], "User": "65534:65534"})
        } else {
            json!({})
        };
        let config = json!({
            "architecture": options.architecture,
            "config": entrypoint,
            "created": created,
            "history": [{
                "created": created,
                "created_by": "wasm-device-plugin package",
            }],
            "os": "linux",
            "rootfs": {"diff_ids": [layer.diff_id], "type": "layers"},
        });
        let config = serde_json::to_vec(&config).unwrap_or_default();
        let guests: Vec<String> = files
            .iter()
            .filter(|f| f.is_guest())
            .map(|f| format!("{}={}", f.path, f.digest))
            .collect();
        let manifest = json!({
            "annotations": {
                GUESTS_ANNOTATION: guests.join(","),
                "org.opencontainers.image.created": created,
                "org.opencontainers.image.title": "wasm-device-plugin guests",
            },
            "config": {
                "digest": sha256(&config),
                "mediaType": CONFIG_MEDIA_TYPE,
                "size": config.len(),
            },
            "layers": [{
                "digest": layer.digest,
                "mediaType": LAYER_MEDIA_TYPE,
                "size": layer.compressed.len(),
            }],
            "mediaType": MANIFEST_MEDIA_TYPE,
            "schemaVersion": 2,
        });
        let manifest = serde_json::to_vec(&manifest).unwrap_or_default();
        let manifest_digest = sha256(&manifest);
        let index = json!({
            "manifests": [{
                "annotations": {"org.opencontainers.image.ref.name": options.tag},
                "digest": manifest_digest,
                "mediaType": MANIFEST_MEDIA_TYPE,
                "platform": {"architecture": options.architecture, "os": "linux"},
                "size": manifest.len(),
            }],
            "mediaType": INDEX_MEDIA_TYPE,
            "schemaVersion": 2,
        });
        let index = serde_json::to_vec(&index).unwrap_or_default();
        Self {
            config,
            manifest,
            manifest_digest,
            index,
            layer: layer.clone(),
        }
    }

    /// The manifest's digest, `sha256:…`.
    pub fn manifest_digest(&self) -> &str {
        &self.manifest_digest
    }

    /// Writes the OCI archive to `out`, every entry stamped with `epoch`.
    pub fn write_archive(&self, out: &mut impl Write, epoch: u64) -> Result<(), PackageError> {
        let error = |source| PackageError::Output {
            path: "<archive>".into(),
            source,
        };
        let mut blobs = vec![
            (sha256(&self.config), self.config.as_slice()),
            (self.layer.digest.clone(), self.layer.compressed.as_slice()),
            (self.manifest_digest.clone(), self.manifest.as_slice()),
        ];
        blobs.sort();
        let layout = br#"{"imageLayoutVersion":"1.0.0"}"#;
        let mut tar = tar::Builder::new(out);
        let file = |tar: &mut tar::Builder<_>, path: &str, bytes: &[u8]| {
            let mut header = header(tar::EntryType::Regular, 0o644, bytes.len() as u64, epoch);
            tar.append_data(&mut header, path, bytes)
        };
        file(&mut tar, "oci-layout", layout).map_err(error)?;
        file(&mut tar, "index.json", &self.index).map_err(error)?;
        for folder in ["blobs/", "blobs/sha256/"] {
            let mut header = header(tar::EntryType::Directory, 0o755, 0, epoch);
            tar.append_data(&mut header, folder, std::io::empty())
                .map_err(error)?;
        }
        for (digest, bytes) in blobs {
            let hex = digest.trim_start_matches("sha256:");
            file(&mut tar, &format!("blobs/sha256/{hex}"), bytes).map_err(error)?;
        }
        tar.finish().map_err(error)
    }
}

/// `epoch` as an RFC 3339 UTC timestamp, e.g. `1970-01-01T00:00:00Z`.
fn rfc3339(epoch: u64) -> String {
    let days = epoch / 86_400;
    let seconds = epoch % 86_400;
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    )
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's
/// days-to-civil algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
#[path = "archive_tests.rs"]
mod tests;
