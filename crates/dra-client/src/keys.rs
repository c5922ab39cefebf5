//! The names of attributes and capacities: `[domain/]identifier`.
//!
//! The identifier is a C identifier of at most [`MAX_ATTRIBUTE_ID_LEN`]
//! characters; the domain, when given, a DNS subdomain of at most 63. An
//! unqualified name is written with the driver's domain
//! ([`qualified_attribute_key`]).

use wdp_k8s_naming::dns_subdomain_problem;

/// The longest attribute identifier (the part after the domain).
pub const MAX_ATTRIBUTE_ID_LEN: usize = 32;

/// The attribute key as written: unqualified keys get the driver's domain.
pub fn qualified_attribute_key(driver: &str, key: &str) -> String {
    if key.contains('/') {
        key.to_owned()
    } else {
        format!("{driver}/{key}")
    }
}

/// Why `key` is not `[domain/]identifier`, or `None`.
pub(crate) fn attribute_key_problem(key: &str) -> Option<String> {
    let (domain, identifier) = match key.split_once('/') {
        Some((domain, identifier)) => (Some(domain), identifier),
        None => (None, key),
    };
    if let Some(domain) = domain {
        if domain.len() > 63 {
            return Some(format!(
                "the domain {domain:?} is longer than 63 characters"
            ));
        }
        if let Some(problem) = dns_subdomain_problem(domain) {
            return Some(format!(
                "the domain {domain:?} is not a DNS subdomain: {problem}"
            ));
        }
    }
    if identifier.contains('/') {
        return Some("more than one '/': the key must be [domain/]identifier".to_owned());
    }
    c_identifier_problem(identifier)
}

fn c_identifier_problem(identifier: &str) -> Option<String> {
    let mut characters = identifier.chars();
    let Some(first) = characters.next() else {
        return Some("the identifier is empty".to_owned());
    };
    if identifier.len() > MAX_ATTRIBUTE_ID_LEN {
        return Some(format!(
            "the identifier {identifier:?} is longer than {MAX_ATTRIBUTE_ID_LEN} characters"
        ));
    }
    let valid_rest = characters.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !(first.is_ascii_alphabetic() || first == '_') || !valid_rest {
        return Some(format!(
            "the identifier {identifier:?} is not a C identifier ([A-Za-z_][A-Za-z0-9_]*)"
        ));
    }
    None
}
