//! Shorthands for the field errors the validation reports, one per apimachinery `field.*`
//! constructor it uses (`field.Invalid`, `field.Required`, `field.TooMany`, …), so that the rule
//! modules read like the checks they model.

use crate::status::{FieldError, FieldErrorKind};

/// `field.Invalid` with a string value (printed quoted).
pub(crate) fn invalid(
    path: impl Into<String>,
    value: impl Into<String>,
    detail: impl Into<String>,
) -> FieldError {
    FieldError::new(
        path,
        FieldErrorKind::Invalid {
            value: value.into(),
            detail: detail.into(),
        },
    )
}

/// `field.Invalid` with a value that is not a string (a count, a device ID), printed as is.
pub(crate) fn invalid_unquoted(
    path: impl Into<String>,
    value: impl std::fmt::Display,
    detail: impl Into<String>,
) -> FieldError {
    FieldError::new(
        path,
        FieldErrorKind::InvalidUnquoted {
            value: value.to_string(),
            detail: detail.into(),
        },
    )
}

/// `field.Required`.
pub(crate) fn required(path: impl Into<String>, detail: impl Into<String>) -> FieldError {
    FieldError::new(
        path,
        FieldErrorKind::Required {
            detail: detail.into(),
        },
    )
}

/// `field.TooMany`.
pub(crate) fn too_many(path: impl Into<String>, actual: usize, max: usize) -> FieldError {
    FieldError::new(path, FieldErrorKind::TooMany { actual, max })
}

/// `field.TooLong`.
pub(crate) fn too_long(path: impl Into<String>, max: usize) -> FieldError {
    FieldError::new(path, FieldErrorKind::TooLong { max })
}

/// `field.Duplicate`.
pub(crate) fn duplicate(path: impl Into<String>, value: impl Into<String>) -> FieldError {
    FieldError::new(
        path,
        FieldErrorKind::Duplicate {
            value: value.into(),
        },
    )
}

/// `field.Forbidden`.
pub(crate) fn forbidden(path: impl Into<String>, detail: impl Into<String>) -> FieldError {
    FieldError::new(
        path,
        FieldErrorKind::Forbidden {
            detail: detail.into(),
        },
    )
}

/// `field.NotSupported`.
pub(crate) fn not_supported(
    path: impl Into<String>,
    value: impl Into<String>,
    supported: &'static [&'static str],
) -> FieldError {
    FieldError::new(
        path,
        FieldErrorKind::NotSupported {
            value: value.into(),
            supported,
        },
    )
}
