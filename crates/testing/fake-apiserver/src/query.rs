//! A request's query string: as a map, and as the [`Filter`] of a list, watch or collection
//! delete (its `fieldSelector` checked against the kind's indexed fields, and its
//! `labelSelector`).

use std::collections::HashMap;

use crate::kinds::StoredKind;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::store::Filter;

/// The query string as a map (later repeats win).
pub(crate) fn query_map(query: Option<&str>) -> HashMap<String, String> {
    form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

/// The filter of a list, watch or collection delete.
pub(crate) fn filter_from<K: StoredKind>(
    namespace: Option<String>,
    query: &HashMap<String, String>,
) -> Result<Filter, ApiError> {
    Ok(Filter {
        namespace,
        fields: FieldSelector::parse(
            query.get("fieldSelector").map_or("", String::as_str),
            &K::selectable_fields(),
        )?,
        labels: LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str))?,
    })
}
