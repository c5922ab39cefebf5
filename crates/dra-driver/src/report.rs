//! What `check` prints of a DRA resource: each device's DRA name, the
//! attributes the API server would drop and the slice fields it would
//! refuse, computed with the same code that publishes.

use wdp_resource::Resource;

use crate::error::DraError;

/// What `check` prints of a DRA resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DraReport {
    /// The driver name.
    pub driver: String,
    /// Each published device: (device ID, DRA device name).
    pub names: Vec<(String, String)>,
    /// Attributes left out, and the slice rejections `validate` predicts.
    pub problems: Vec<String>,
}

/// The DRA report of `resource` served as `driver`; refuses (naming the
/// file and the device) a device ID that cannot become a DRA name.
pub fn dra_report(resource: &Resource, driver: &str) -> Result<DraReport, DraError> {
    let set = resource.devices();
    let list = crate::devices::dra_devices(driver, &set);
    let file = resource.spec().config.file.clone();
    if let Some(unnamed) = list
        .problems
        .iter()
        .find(|p| matches!(p, crate::devices::DeviceProblem::Unnamed { .. }))
    {
        return Err(DraError::UnnamedDevice {
            file,
            problem: unnamed.to_string(),
        });
    }
    let names = set
        .devices()
        .iter()
        .filter_map(|d| {
            let name = wdp_dra_client::naming::device_name(d.id()).ok()?;
            Some((d.id().to_owned(), name))
        })
        .collect();
    let mut problems: Vec<String> = list.problems.iter().map(ToString::to_string).collect();
    problems.extend(wdp_dra_client::validate(driver, &list.devices).iter().map(
        |p| match &p.device {
            Some(device) => format!("device {device}: {}: {}", p.field, p.message),
            None => format!("{}: {}", p.field, p.message),
        },
    ));
    Ok(DraReport {
        driver: driver.to_owned(),
        names,
        problems,
    })
}
