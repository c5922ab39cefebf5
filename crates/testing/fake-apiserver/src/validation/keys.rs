//! Attribute and capacity keys: a C identifier of at most 32 characters, optionally after a
//! `domain/` that is a DNS subdomain of at most 63 characters (`example.com/model`).

use super::field::{invalid, required};
use super::names::{c_identifier_problem, dns_subdomain_problem};
use crate::status::FieldError;

/// Validates the key `key` of a device's `attributes` or `capacity`, reported at `path`.
pub(crate) fn validate_qualified_key(key: &str, path: &str, errors: &mut Vec<FieldError>) {
    let (domain, id) = match key.split_once('/') {
        Some((domain, id)) => (Some(domain), id),
        None => (None, key),
    };
    if let Some(domain) = domain {
        if domain.len() > 63 {
            errors.push(invalid(
                path,
                key,
                "the domain must be no more than 63 characters",
            ));
        } else if let Some(detail) = dns_subdomain_problem(domain) {
            errors.push(invalid(path, key, format!("the domain: {detail}")));
        }
    }
    if id.is_empty() {
        errors.push(required(path, "the name after the domain is required"));
    } else if id.len() > 32 {
        errors.push(invalid(
            path,
            key,
            "the name must be no more than 32 characters",
        ));
    } else if let Some(detail) = c_identifier_problem(id) {
        errors.push(invalid(path, key, detail));
    }
}
