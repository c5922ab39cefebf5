//! The API server's failure answers: a `metav1.Status` body with `reason`, `code`, `message` and,
//! for validation failures, `details.causes` naming each field, as kube-rs parses them into
//! `kube::Error::Api`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// One rejected field, rendered the way apimachinery's `field.Error` prints itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldError {
    /// The field path, e.g. `spec.devices[3].name`.
    pub(crate) path: String,
    /// What is wrong with it.
    pub(crate) kind: FieldErrorKind,
}

/// The kinds of field errors the validation uses (apimachinery `field.ErrorType`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FieldErrorKind {
    /// `Invalid value: "<value>": <detail>`.
    Invalid { value: String, detail: String },
    /// `Invalid value: <value>: <detail>`, the value printed as is (numbers, device IDs), as Go
    /// prints values that are not strings.
    InvalidUnquoted { value: String, detail: String },
    /// `Required value` (with an optional detail).
    Required { detail: String },
    /// `Duplicate value: "<value>"`.
    Duplicate { value: String },
    /// `Too many: <actual>: must have at most <max> items`.
    TooMany { actual: usize, max: usize },
    /// `Too long: may not be more than <max> bytes`.
    TooLong { max: usize },
    /// `Unsupported value: "<value>": supported values: ...`.
    NotSupported {
        value: String,
        supported: &'static [&'static str],
    },
    /// `Forbidden: <detail>`.
    Forbidden { detail: String },
}

impl FieldError {
    /// A field error at `path`.
    pub(crate) fn new(path: impl Into<String>, kind: FieldErrorKind) -> Self {
        Self {
            path: path.into(),
            kind,
        }
    }

    /// The `FieldValue…` cause type the real server reports.
    fn cause_reason(&self) -> &'static str {
        match self.kind {
            FieldErrorKind::Invalid { .. } | FieldErrorKind::InvalidUnquoted { .. } => {
                "FieldValueInvalid"
            }
            FieldErrorKind::Required { .. } => "FieldValueRequired",
            FieldErrorKind::Duplicate { .. } => "FieldValueDuplicate",
            FieldErrorKind::TooMany { .. } => "FieldValueTooMany",
            FieldErrorKind::TooLong { .. } => "FieldValueTooLong",
            FieldErrorKind::NotSupported { .. } => "FieldValueNotSupported",
            FieldErrorKind::Forbidden { .. } => "FieldValueForbidden",
        }
    }

    /// The message without the path prefix.
    fn body(&self) -> String {
        match &self.kind {
            FieldErrorKind::Invalid { value, detail } => {
                format!("Invalid value: {value:?}: {detail}")
            }
            FieldErrorKind::InvalidUnquoted { value, detail } => {
                format!("Invalid value: {value}: {detail}")
            }
            FieldErrorKind::Required { detail } if detail.is_empty() => "Required value".into(),
            FieldErrorKind::Required { detail } => format!("Required value: {detail}"),
            FieldErrorKind::Duplicate { value } => format!("Duplicate value: {value:?}"),
            FieldErrorKind::TooMany { actual, max } => {
                format!("Too many: {actual}: must have at most {max} items")
            }
            FieldErrorKind::TooLong { max } => {
                format!("Too long: may not be more than {max} bytes")
            }
            FieldErrorKind::NotSupported { value, supported } => {
                let listed: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
                format!(
                    "Unsupported value: {value:?}: supported values: {}",
                    listed.join(", ")
                )
            }
            FieldErrorKind::Forbidden { detail } => format!("Forbidden: {detail}"),
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.body())
    }
}

/// A failed request: the HTTP code and the `Status` body the real server would send.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub(crate) code: StatusCode,
    pub(crate) reason: &'static str,
    pub(crate) message: String,
    details: Option<Value>,
}

impl ApiError {
    fn plain(code: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// 404 `NotFound`, e.g. `resourceslices.resource.k8s.io "a" not found`.
    pub(crate) fn not_found(resource: &str, group: &str, name: &str) -> Self {
        let mut error = Self::plain(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("{} {name:?} not found", qualified(resource, group)),
        );
        error.details = Some(json!({"name": name, "group": group, "kind": resource}));
        error
    }

    /// 404 for a path this server does not serve.
    pub(crate) fn no_route(path: &str) -> Self {
        Self::plain(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    /// 409 `AlreadyExists`.
    pub(crate) fn already_exists(resource: &str, group: &str, name: &str) -> Self {
        let mut error = Self::plain(
            StatusCode::CONFLICT,
            "AlreadyExists",
            format!("{} {name:?} already exists", qualified(resource, group)),
        );
        error.details = Some(json!({"name": name, "group": group, "kind": resource}));
        error
    }

    /// 409 `Conflict`: a stale `resourceVersion` or a failed precondition.
    pub(crate) fn conflict(resource: &str, group: &str, name: &str, why: &str) -> Self {
        let mut error = Self::plain(
            StatusCode::CONFLICT,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} {name:?}: {why}",
                qualified(resource, group)
            ),
        );
        error.details = Some(json!({"name": name, "group": group, "kind": resource}));
        error
    }

    /// 422 `Invalid` listing every field error, as `apierrors.NewInvalid` does.
    pub(crate) fn invalid(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> Self {
        let rendered: Vec<String> = errors.iter().map(ToString::to_string).collect();
        let list = if rendered.len() == 1 {
            rendered[0].clone()
        } else {
            format!("[{}]", rendered.join(", "))
        };
        let qualified_kind = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let causes: Vec<Value> = errors
            .iter()
            .map(|e| json!({"reason": e.cause_reason(), "message": e.body(), "field": e.path}))
            .collect();
        Self {
            code: StatusCode::UNPROCESSABLE_ENTITY,
            reason: "Invalid",
            message: format!("{qualified_kind} {name:?} is invalid: {list}"),
            details: Some(json!({"name": name, "group": group, "kind": kind, "causes": causes})),
        }
    }

    /// 400 `BadRequest`.
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::plain(StatusCode::BAD_REQUEST, "BadRequest", message)
    }

    /// 422 `UnprocessableEntity` without field causes (e.g. a JSON patch that does not apply).
    pub(crate) fn unprocessable(message: impl Into<String>) -> Self {
        Self::plain(
            StatusCode::UNPROCESSABLE_ENTITY,
            "UnprocessableEntity",
            message,
        )
    }

    /// 405 `MethodNotAllowed`.
    pub(crate) fn method_not_allowed(method: &str) -> Self {
        Self::plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({method})"),
        )
    }

    /// 415 `UnsupportedMediaType`.
    pub(crate) fn unsupported_media_type(content_type: &str) -> Self {
        Self::plain(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format: {content_type}"),
        )
    }

    /// 410 `Expired`: a watch from a compacted resourceVersion.
    pub(crate) fn expired(requested: u64, oldest: u64) -> Self {
        Self::plain(
            StatusCode::GONE,
            "Expired",
            format!("too old resource version: {requested} ({oldest})"),
        )
    }

    /// 500 `InternalError`, as the storage layer answers requests it cannot carry out.
    pub(crate) fn internal(why: &str) -> Self {
        Self::plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            format!("Internal error occurred: {why}"),
        )
    }

    /// 401 `Unauthorized`: no bearer token, or one the server does not accept.
    pub(crate) fn unauthorized() -> Self {
        Self::plain(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized")
    }

    /// 503 `ServiceUnavailable` while the server refuses requests.
    pub(crate) fn unavailable() -> Self {
        Self::plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
        )
    }

    /// The `metav1.Status` object.
    pub(crate) fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code.as_u16(),
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = self.to_status().to_string();
        (
            self.code,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response()
    }
}

/// `resource.group`, or `resource` for the core group.
fn qualified(resource: &str, group: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}
