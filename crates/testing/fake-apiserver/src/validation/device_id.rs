//! The names that identify a device, wherever they appear (a slice's spec, a claim's allocation
//! results and device statuses): the driver (a DNS subdomain of at most 63 characters), the pool
//! (at most 253 characters of `/`-separated DNS subdomains) and the device (a DNS label).

use super::field::{invalid, required, too_long};
use super::names::{dns_label_problem, dns_subdomain_problem};
use crate::status::FieldError;

/// A driver name at `path`.
pub(crate) fn validate_driver_name(name: &str, path: &str, errors: &mut Vec<FieldError>) {
    if name.is_empty() {
        errors.push(required(path, ""));
    } else if name.len() > 63 {
        errors.push(too_long(path, 63));
    } else if let Some(detail) = dns_subdomain_problem(name) {
        errors.push(invalid(path, name, detail));
    }
}

/// A pool name at `path`.
pub(crate) fn validate_pool_name(name: &str, path: &str, errors: &mut Vec<FieldError>) {
    if name.is_empty() {
        errors.push(required(path, ""));
    } else if name.len() > 253 {
        errors.push(too_long(path, 253));
    } else if let Some(detail) = name.split('/').find_map(dns_subdomain_problem) {
        errors.push(invalid(
            path,
            name,
            format!("each '/'-separated segment: {detail}"),
        ));
    }
}

/// A device name at `path`.
pub(crate) fn validate_device_name(name: &str, path: &str, errors: &mut Vec<FieldError>) {
    if name.is_empty() {
        errors.push(required(path, ""));
    } else if let Some(detail) = dns_label_problem(name) {
        errors.push(invalid(path, name, detail));
    }
}
