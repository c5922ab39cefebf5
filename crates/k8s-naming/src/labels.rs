//! Kubernetes label names (`[prefix/]name`) and label values, as the API
//! server checks them (taint keys and values, condition types, node
//! labels).

use crate::names::dns_subdomain_problem;

/// Why `key` is not a label name (`[prefix/]name`), or `None`.
pub fn label_name_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && let Some(problem) = dns_subdomain_problem(prefix)
    {
        return Some(format!(
            "the prefix {prefix:?} is not a DNS subdomain: {problem}"
        ));
    }
    if name.is_empty() {
        return Some("the name part is empty".to_owned());
    }
    label_name_part_problem(name)
}

/// Why `value` is not a label value (empty, or as the name part of a label
/// key), or `None`.
pub fn label_value_problem(value: &str) -> Option<String> {
    if value.is_empty() {
        None
    } else {
        label_name_part_problem(value)
    }
}

/// Why `part` is not the name part of a label key, nor a label value, or `None`:
/// at most 63 characters, alphanumerics with `-`, `_`, `.` between them.
fn label_name_part_problem(part: &str) -> Option<String> {
    if part.len() > 63 {
        return Some(format!("{} characters, more than 63", part.len()));
    }
    let alphanumeric_at = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let valid_characters = part
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !valid_characters
        || !alphanumeric_at(part.chars().next())
        || !alphanumeric_at(part.chars().last())
    {
        return Some(
            "only letters, digits, '-', '_' and '.' are allowed, starting and ending with a letter or digit"
                .to_owned(),
        );
    }
    None
}

#[cfg(test)]
#[path = "labels_tests.rs"]
mod tests;
