//! Device IDs ↔ DRA device names, and the DNS name forms the API server checks.
//!
//! A DRA device name must be a DNS label (`[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at
//! most 63 characters), while the host's device IDs are free-form (`0000:3b:00.0`,
//! `GPU-ab`). [`device_name`] maps one to the other reversibly, so a name read
//! back from a ResourceClaim's allocation always leads to the device it came from:
//!
//! 1. every byte in `[a-z0-9]` is kept, except an `x` at the very start; every
//!    other byte (and that leading `x`) becomes `-` followed by its two
//!    lowercase hex digits;
//! 2. if the result starts with `-`, an `x` is put in front.
//!
//! [`device_id`] strips one leading `x` and undoes step 1; it refuses any name
//! that [`device_name`] could not have produced, so the two are exact inverses.

use thiserror::Error;

/// The longest DNS label, and so the longest device name and driver name.
pub const MAX_DNS_LABEL_LEN: usize = 63;

/// Why a device ID, device name or driver name was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NameError {
    /// The device ID is empty, so it has no device name.
    #[error("device ID is empty")]
    EmptyId,
    /// The encoded name would be longer than a DNS label allows.
    #[error(
        "device ID {id:?} encodes to the {encoded_len}-character DRA device name {encoded:?}, longer than the {MAX_DNS_LABEL_LEN} a DNS label allows"
    )]
    NameTooLong {
        /// The device ID given.
        id: String,
        /// What it encodes to.
        encoded: String,
        /// The length of `encoded`.
        encoded_len: usize,
    },
    /// The name is not one [`device_name`] produces, so it names no device ID.
    #[error("{name:?} is not a DRA device name made from a device ID: {reason}")]
    NotADeviceName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The driver name is not a DNS subdomain of at most 63 characters.
    #[error("driver name {driver:?} is invalid: {reason}")]
    InvalidDriver {
        /// The driver name given.
        driver: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Encodes a device ID as a DRA device name (see the module docs for the rule).
pub fn device_name(id: &str) -> Result<String, NameError> {
    if id.is_empty() {
        return Err(NameError::EmptyId);
    }
    let mut encoded = String::with_capacity(id.len() + 1);
    for (index, byte) in id.bytes().enumerate() {
        let kept = matches!(byte, b'a'..=b'z' | b'0'..=b'9') && !(index == 0 && byte == b'x');
        if kept {
            encoded.push(char::from(byte));
        } else {
            encoded.push('-');
            encoded.push_str(&format!("{byte:02x}"));
        }
    }
    if encoded.starts_with('-') {
        encoded.insert(0, 'x');
    }
    if encoded.len() > MAX_DNS_LABEL_LEN {
        return Err(NameError::NameTooLong {
            id: id.to_owned(),
            encoded_len: encoded.len(),
            encoded,
        });
    }
    Ok(encoded)
}

/// Decodes a DRA device name made by [`device_name`] back into the device ID.
pub fn device_id(name: &str) -> Result<String, NameError> {
    let refuse = |reason: &str| NameError::NotADeviceName {
        name: name.to_owned(),
        reason: reason.to_owned(),
    };
    let body = name.strip_prefix('x').unwrap_or(name);
    let mut bytes = Vec::with_capacity(body.len());
    let mut rest = body.as_bytes();
    while let Some((&first, tail)) = rest.split_first() {
        match first {
            b'a'..=b'z' | b'0'..=b'9' => {
                bytes.push(first);
                rest = tail;
            }
            b'-' => {
                let [high, low, after @ ..] = tail else {
                    return Err(refuse("a '-' is not followed by two hex digits"));
                };
                let (Some(high), Some(low)) = (lower_hex_value(*high), lower_hex_value(*low))
                else {
                    return Err(refuse("a '-' is not followed by two lowercase hex digits"));
                };
                bytes.push(high << 4 | low);
                rest = after;
            }
            _ => return Err(refuse("it holds a character other than [a-z0-9-]")),
        }
    }
    let id = String::from_utf8(bytes).map_err(|_| refuse("the decoded bytes are not UTF-8"))?;
    // Only the canonical encoding decodes: this refuses e.g. "-41", "xab" or
    // "-61" (an escaped byte that would have been kept), keeping the mapping one to one.
    match device_name(&id) {
        Ok(canonical) if canonical == name => Ok(id),
        _ => Err(refuse("it is not the encoding of any device ID")),
    }
}

fn lower_hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        _ => None,
    }
}

/// Checks a driver name as the API server checks `spec.driver`: a DNS
/// subdomain of at most 63 characters.
pub fn check_driver_name(driver: &str) -> Result<(), NameError> {
    let refuse = |reason: String| NameError::InvalidDriver {
        driver: driver.to_owned(),
        reason,
    };
    if driver.is_empty() {
        return Err(refuse("it is empty".to_owned()));
    }
    if driver.len() > MAX_DNS_LABEL_LEN {
        return Err(refuse(format!(
            "it is {} characters long, more than {MAX_DNS_LABEL_LEN}",
            driver.len()
        )));
    }
    dns_subdomain_problem(driver).map_or(Ok(()), |reason| Err(refuse(reason)))
}

/// Why `label` is not a DNS label (RFC 1123, at most 63 characters), or `None`.
pub fn dns_label_problem(label: &str) -> Option<String> {
    if label.is_empty() {
        return Some("it is empty".to_owned());
    }
    if label.len() > MAX_DNS_LABEL_LEN {
        return Some(format!(
            "it is {} characters long, more than {MAX_DNS_LABEL_LEN}",
            label.len()
        ));
    }
    label_characters_problem(label)
}

/// Why `label` does not have the characters of a DNS label, whatever its length.
fn label_characters_problem(label: &str) -> Option<String> {
    if label.is_empty() {
        return Some("it is empty".to_owned());
    }
    if let Some(bad) = label
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Some(format!(
            "it holds {bad:?}; only lowercase letters, digits and '-' are allowed"
        ));
    }
    if label.starts_with('-') || label.ends_with('-') {
        return Some("it must start and end with a lowercase letter or digit".to_owned());
    }
    None
}

/// Why `name` is not a DNS subdomain (dot-separated DNS labels, at most 253
/// characters), or `None`.
pub fn dns_subdomain_problem(name: &str) -> Option<String> {
    const MAX_DNS_SUBDOMAIN_LEN: usize = 253;
    if name.is_empty() {
        return Some("it is empty".to_owned());
    }
    if name.len() > MAX_DNS_SUBDOMAIN_LEN {
        return Some(format!(
            "it is {} characters long, more than {MAX_DNS_SUBDOMAIN_LEN}",
            name.len()
        ));
    }
    name.split('.').find_map(|part| {
        label_characters_problem(part)
            .map(|problem| format!("its part {part:?} is not a DNS label: {problem}"))
    })
}

#[cfg(test)]
#[path = "names_tests.rs"]
mod tests;
