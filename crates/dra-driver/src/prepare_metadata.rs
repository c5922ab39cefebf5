//! A claim's device metadata files as the preparer writes, keeps and
//! removes them (the format and the files themselves are
//! `device_metadata`'s).

use super::*;

/// A claim's device metadata files (the bulk is in `device_metadata`).
impl ClaimPreparer {
    /// Writes `claim`'s metadata files for its `picked` devices of `set`,
    /// when this preparer writes them and the resource has them on;
    /// answers what to record (`None`: none written, a failure logged).
    pub(super) fn write_metadata(
        &self,
        claim: &ClaimRef,
        pod_claim: Option<&str>,
        picked: &[Picked<'_>],
        set: &DeviceSet,
    ) -> Option<MetadataRecord> {
        let writer = self.metadata.as_ref()?;
        if !self.resource.spec().config.device_metadata {
            return None;
        }
        device_metadata::write_for_claim(writer, &self.driver, claim, pod_claim, picked, set)
    }

    /// Removes the metadata files of a prepare that failed after writing
    /// them; a failure is logged (the claim fails either way).
    pub(super) fn remove_metadata(&self, claim: &ClaimRef, metadata: Option<&MetadataRecord>) {
        let Some(metadata) = metadata else {
            return;
        };
        if let Err(error) = device_metadata::remove(metadata, &claim.uid) {
            tracing::warn!(driver = %self.driver, %claim, %error, "cannot remove the device metadata of a claim whose prepare failed");
        }
    }

    /// Writes `claim`'s recorded metadata files again if one is missing or
    /// damaged (a repeated prepare). The error names the claim and file.
    pub(super) fn keep_metadata(
        &self,
        claim: &ClaimRef,
        metadata: &MetadataRecord,
        devices: &[PreparedDevice],
    ) -> Result<(), String> {
        if device_metadata::is_intact(metadata, &claim.uid) {
            return Ok(());
        }
        let set = self.resource.devices();
        device_metadata::rewrite(&self.driver, claim, metadata, &set, devices).map_err(|error| {
            format!("claim {claim}: its device metadata was missing or damaged and cannot be written again: {error}")
        })?;
        tracing::warn!(driver = %self.driver, %claim, dir = %metadata.dir.display(), "the claim's device metadata files were missing or damaged: written again from the checkpoint");
        Ok(())
    }

    /// The device metadata files no prepared claim records, last modified
    /// more than `age` ago (see `device_metadata::unrecorded_files`).
    pub async fn unrecorded_metadata(&self, age: std::time::Duration) -> Vec<PathBuf> {
        let Some(writer) = &self.metadata else {
            return Vec::new();
        };
        let recorded = self
            .checkpoint
            .read()
            .await
            .claims()
            .values()
            .flat_map(|claim| claim.device_metadata.iter())
            .flat_map(|metadata| &metadata.files)
            .map(|file| file.host_path.clone())
            .collect();
        device_metadata::unrecorded_files(writer.root(), &recorded, age)
    }

    /// Removes what a claim the checkpoint does not record left in its
    /// metadata folder (files naming its UID).
    pub(super) fn remove_unrecorded_metadata(&self, claim: &ClaimRef) -> Result<(), String> {
        let Some(writer) = &self.metadata else {
            return Ok(());
        };
        let dir = writer.claim_dir(&claim.namespace, &claim.name);
        let removed = device_metadata::remove_unrecorded(&dir, &claim.uid)
            .map_err(|error| format!("claim {claim}: {error}"))?;
        if removed {
            tracing::warn!(driver = %self.driver, %claim, dir = %dir.display(), "claim unprepared that the checkpoint does not record: its device metadata files were removed");
        }
        Ok(())
    }
}
