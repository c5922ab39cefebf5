//! The two patch formats the fake applies: JSON merge patch (RFC 7386,
//! `application/merge-patch+json`) and JSON patch (RFC 6902, `application/json-patch+json`).

use serde_json::Value;

/// RFC 7386: objects merge key by key, `null` removes, anything else replaces.
pub(crate) fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch_fields) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    let Value::Object(target_fields) = target else {
        return;
    };
    for (key, value) in patch_fields {
        if value.is_null() {
            target_fields.remove(key);
        } else {
            merge_patch(
                target_fields.entry(key.clone()).or_insert(Value::Null),
                value,
            );
        }
    }
}

/// RFC 6902: applies every operation in order; the first failing one stops with its reason.
pub(crate) fn json_patch(target: &mut Value, operations: &Value) -> Result<(), String> {
    let operations = operations
        .as_array()
        .ok_or("a JSON patch must be an array of operations")?;
    for (index, operation) in operations.iter().enumerate() {
        apply_operation(target, operation).map_err(|why| format!("operation {index}: {why}"))?;
    }
    Ok(())
}

fn apply_operation(target: &mut Value, operation: &Value) -> Result<(), String> {
    let field = |name: &str| {
        operation
            .get(name)
            .and_then(Value::as_str)
            .ok_or(format!("missing {name:?}"))
    };
    let op = field("op")?;
    let path = field("path")?;
    let value = || {
        operation
            .get("value")
            .cloned()
            .ok_or_else(|| "missing \"value\"".to_string())
    };
    match op {
        "add" => add(target, path, value()?),
        "remove" => remove(target, path).map(drop),
        "replace" => {
            let slot = target
                .pointer_mut(path)
                .ok_or(format!("path {path:?} does not exist"))?;
            *slot = value()?;
            Ok(())
        }
        "move" => {
            let from = field("from")?;
            let moved = remove(target, from)?;
            add(target, path, moved)
        }
        "copy" => {
            let from = field("from")?;
            let copied = target
                .pointer(from)
                .cloned()
                .ok_or(format!("path {from:?} does not exist"))?;
            add(target, path, copied)
        }
        "test" => {
            let actual = target
                .pointer(path)
                .ok_or(format!("path {path:?} does not exist"))?;
            if *actual == value()? {
                Ok(())
            } else {
                Err(format!("test failed at {path:?}"))
            }
        }
        other => Err(format!("unknown operation {other:?}")),
    }
}

/// `/a/b/c` → (`/a/b`, `c`), with `~1` and `~0` unescaped in the last token.
fn split_parent(path: &str) -> Result<(&str, String), String> {
    let cut = path
        .rfind('/')
        .ok_or(format!("path {path:?} does not start with '/'"))?;
    let token = path[cut + 1..].replace("~1", "/").replace("~0", "~");
    Ok((&path[..cut], token))
}

fn add(target: &mut Value, path: &str, value: Value) -> Result<(), String> {
    if path.is_empty() {
        *target = value;
        return Ok(());
    }
    let (parent, token) = split_parent(path)?;
    match target.pointer_mut(parent) {
        Some(Value::Object(fields)) => {
            fields.insert(token, value);
            Ok(())
        }
        Some(Value::Array(items)) => {
            let index = if token == "-" {
                items.len()
            } else {
                array_index(&token, items.len() + 1)?
            };
            items.insert(index, value);
            Ok(())
        }
        Some(_) => Err(format!("the parent of {path:?} is not an object or array")),
        None => Err(format!("the parent of {path:?} does not exist")),
    }
}

fn remove(target: &mut Value, path: &str) -> Result<Value, String> {
    let (parent, token) = split_parent(path)?;
    match target.pointer_mut(parent) {
        Some(Value::Object(fields)) => fields
            .remove(&token)
            .ok_or(format!("path {path:?} does not exist")),
        Some(Value::Array(items)) => {
            let index = array_index(&token, items.len())?;
            Ok(items.remove(index))
        }
        _ => Err(format!("path {path:?} does not exist")),
    }
}

/// A decimal index below `bound`.
fn array_index(token: &str, bound: usize) -> Result<usize, String> {
    let index: usize = token
        .parse()
        .map_err(|_| format!("{token:?} is not an array index"))?;
    if index < bound {
        Ok(index)
    } else {
        Err(format!("index {index} is out of range"))
    }
}

#[cfg(test)]
#[path = "patch_tests.rs"]
mod tests;
