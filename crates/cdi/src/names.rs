//! The CDI naming rules, which both the configuration (a resource name
//! must be a CDI kind, `[cdi-edits]` hooks must have a CDI hook name) and
//! the spec writer ([`crate`]) follow: kinds, device names and hook
//! names, as the upstream CDI parser accepts them.

/// The hook names a CDI spec may use.
pub const HOOK_NAMES: [&str; 6] = [
    "prestart",
    "createRuntime",
    "createContainer",
    "startContainer",
    "poststart",
    "poststop",
];

fn label_ok(label: &str, extra: &str) -> bool {
    let bytes = label.as_bytes();
    !label.is_empty()
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && label
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
}

/// A resource name usable as a CDI kind (`vendor/class`), or why not.
pub fn check_kind(kind: &str) -> Result<(), String> {
    let Some((vendor, class)) = kind.split_once('/') else {
        return Err(format!("`{kind}` is not a CDI kind (vendor/class)"));
    };
    // The CDI parser wants a letter first in both parts ("should start
    // with letter"); a digit there would fail every container at start.
    for (part, value) in [("vendor", vendor), ("class", class)] {
        if !value.starts_with(|c: char| c.is_ascii_alphabetic()) || !label_ok(value, "-_.") {
            return Err(format!(
                "`{kind}` cannot be a CDI kind: its {part} `{value}` must start with a letter, end with a letter or digit and hold only letters, digits, '-', '_' and '.'"
            ));
        }
    }
    Ok(())
}

/// A device ID usable as a CDI device name, or why not.
pub fn check_device_name(name: &str) -> Result<(), String> {
    if label_ok(name, "-_.:") {
        Ok(())
    } else {
        Err(format!(
            "device ID `{name}` cannot be a CDI device name: it must start and end with a letter or digit and hold only letters, digits, '-', '_', '.' and ':'"
        ))
    }
}

#[cfg(test)]
#[path = "names_tests.rs"]
mod tests;
