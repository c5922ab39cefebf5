//! Syntax checks for the names and values the API server validates (apimachinery's
//! `IsDNS1123Label`, `IsDNS1123Subdomain`, `IsQualifiedName`, `IsValidLabelValue`, C identifiers
//! and semver 2.0 versions). Each returns `None` when fine, else the detail the real server prints.

const DNS_LABEL_REGEX: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS_SUBDOMAIN_REGEX: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const QUALIFIED_NAME_REGEX: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const C_IDENTIFIER_REGEX: &str = "[A-Za-z_][A-Za-z0-9_]*";

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
fn is_dns_label(s: &str) -> bool {
    let bytes = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !bytes.is_empty()
        && alnum(&bytes[0])
        && alnum(&bytes[bytes.len() - 1])
        && bytes.iter().all(|c| alnum(c) || *c == b'-')
}

/// A lowercase RFC 1123 label of at most 63 characters.
pub(crate) fn dns_label_problem(s: &str) -> Option<String> {
    if s.len() > 63 {
        return Some("must be no more than 63 characters".into());
    }
    (!is_dns_label(s)).then(|| {
        format!(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '{DNS_LABEL_REGEX}')"
        )
    })
}

/// A lowercase RFC 1123 subdomain of at most 253 characters.
pub(crate) fn dns_subdomain_problem(s: &str) -> Option<String> {
    if s.len() > 253 {
        return Some("must be no more than 253 characters".into());
    }
    (s.is_empty() || !s.split('.').all(is_dns_label)).then(|| {
        format!(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '{DNS_SUBDOMAIN_REGEX}')"
        )
    })
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn c_identifier_problem(s: &str) -> Option<String> {
    let mut chars = s.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    (!ok).then(|| {
        format!(
            "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation is '{C_IDENTIFIER_REGEX}')"
        )
    })
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, the name part of qualified names and label values.
fn is_qualified_name_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A qualified name: `[prefix/]name`, the prefix a DNS subdomain, the name ≤ 63 characters.
pub(crate) fn qualified_name_problem(s: &str) -> Option<String> {
    let (prefix, name) = match s.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, s),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Some("prefix part must be non-empty".into());
        }
        if let Some(problem) = dns_subdomain_problem(prefix) {
            return Some(format!("prefix part {problem}"));
        }
    }
    if name.is_empty() {
        return Some("name part must be non-empty".into());
    }
    if name.len() > 63 {
        return Some("name part must be no more than 63 characters".into());
    }
    (!is_qualified_name_part(name) || name.contains('/')).then(|| {
        format!(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{QUALIFIED_NAME_REGEX}')"
        )
    })
}

/// A label value: empty, or ≤ 63 characters of the qualified-name-part syntax.
pub(crate) fn label_value_problem(s: &str) -> Option<String> {
    if s.len() > 63 {
        return Some("must be no more than 63 characters".into());
    }
    (!s.is_empty() && !is_qualified_name_part(s)).then(|| {
        format!(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(({QUALIFIED_NAME_REGEX})?')"
        )
    })
}

/// A semantic version per semver.org 2.0.0.
pub(crate) fn is_semver(s: &str) -> bool {
    let (rest, build) = match s.split_once('+') {
        Some((rest, build)) => (rest, Some(build)),
        None => (s, None),
    };
    let (core, pre) = match rest.split_once('-') {
        Some((core, pre)) => (core, Some(pre)),
        None => (rest, None),
    };
    let numeric = |p: &str| {
        !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()) && (p == "0" || !p.starts_with('0'))
    };
    let identifier =
        |p: &str| !p.is_empty() && p.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-');
    let core_parts: Vec<&str> = core.split('.').collect();
    core_parts.len() == 3
        && core_parts.iter().all(|p| numeric(p))
        && pre.is_none_or(|pre| {
            pre.split('.')
                .all(|p| identifier(p) && (!p.bytes().all(|c| c.is_ascii_digit()) || numeric(p)))
        })
        && build.is_none_or(|b| b.split('.').all(identifier))
}

#[cfg(test)]
#[path = "names_tests.rs"]
mod tests;
