//! `fieldSelector` and `labelSelector` query parameters: parsing and matching.
//!
//! Field selectors are `key=value`, `key==value` or `key!=value` terms joined by commas, over
//! the fields each kind indexes (`metadata.name`, `metadata.namespace`, and for ResourceSlices
//! `spec.nodeName` and `spec.driver`). Label selectors take the equality forms plus `key`,
//! `!key`, `key in (a,b)` and `key notin (a,b)`.

use std::collections::BTreeMap;

use crate::status::ApiError;

/// One `key=value` / `key!=value` term of a field selector.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldTerm {
    key: String,
    value: String,
    equal: bool,
}

/// A parsed field selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector {
    terms: Vec<FieldTerm>,
}

impl FieldSelector {
    /// Parses `spec.nodeName=a,spec.driver=b`; `supported` says which keys the kind indexes.
    pub(crate) fn parse(text: &str, supported: &[&str]) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for raw in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (key, value, equal) = if let Some((k, v)) = raw.split_once("!=") {
                (k, v, false)
            } else if let Some((k, v)) = raw.split_once("==") {
                (k, v, true)
            } else if let Some((k, v)) = raw.split_once('=') {
                (k, v, true)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{text}'; can't understand '{raw}'"
                )));
            };
            let key = key.trim();
            if !supported.contains(&key) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {key}"
                )));
            }
            terms.push(FieldTerm {
                key: key.to_string(),
                value: value.trim().to_string(),
                equal,
            });
        }
        Ok(Self { terms })
    }

    /// Whether the object's field values (via `field`, absent fields read as "") match.
    pub(crate) fn matches(&self, field: impl Fn(&str) -> String) -> bool {
        self.terms
            .iter()
            .all(|term| (field(&term.key) == term.value) == term.equal)
    }
}

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelRequirement {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector {
    requirements: Vec<LabelRequirement>,
}

impl LabelSelector {
    /// Parses a label selector in the query-string syntax.
    pub(crate) fn parse(text: &str) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for raw in split_outside_parens(text) {
            let raw = raw.trim();
            if raw.is_empty() {
                continue;
            }
            let bad = || ApiError::bad_request(format!("unable to parse requirement: {raw:?}"));
            let requirement = if let Some((k, v)) = raw.split_once("!=") {
                LabelRequirement::NotIn(k.trim().into(), vec![v.trim().into()])
            } else if let Some((k, v)) = raw.split_once("==") {
                LabelRequirement::In(k.trim().into(), vec![v.trim().into()])
            } else if let Some((k, v)) = raw.split_once('=') {
                LabelRequirement::In(k.trim().into(), vec![v.trim().into()])
            } else if let Some((k, set)) = raw.split_once(" notin ") {
                LabelRequirement::NotIn(k.trim().into(), parse_set(set).ok_or_else(bad)?)
            } else if let Some((k, set)) = raw.split_once(" in ") {
                LabelRequirement::In(k.trim().into(), parse_set(set).ok_or_else(bad)?)
            } else if let Some(k) = raw.strip_prefix('!') {
                LabelRequirement::DoesNotExist(k.trim().into())
            } else if raw.contains(char::is_whitespace) || raw.contains(['(', ')']) {
                return Err(bad());
            } else {
                LabelRequirement::Exists(raw.into())
            };
            requirements.push(requirement);
        }
        Ok(Self { requirements })
    }

    /// Whether `labels` satisfy every requirement.
    pub(crate) fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let get = |key: &str| labels.and_then(|l| l.get(key));
        self.requirements.iter().all(|req| match req {
            LabelRequirement::In(k, values) => get(k).is_some_and(|v| values.contains(v)),
            LabelRequirement::NotIn(k, values) => get(k).is_none_or(|v| !values.contains(v)),
            LabelRequirement::Exists(k) => get(k).is_some(),
            LabelRequirement::DoesNotExist(k) => get(k).is_none(),
        })
    }
}

/// `(a, b)` → `["a", "b"]`.
fn parse_set(text: &str) -> Option<Vec<String>> {
    let inner = text.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

/// Splits on commas that are not inside `( … )`.
fn split_outside_parens(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

#[cfg(test)]
#[path = "selectors_tests.rs"]
mod tests;
