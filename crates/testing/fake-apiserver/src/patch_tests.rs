use super::*;
use serde_json::json;

#[test]
fn merge_patch_follows_rfc_7386() {
    let mut target = json!({"a": "b", "c": {"d": "e", "f": "g"}, "list": [1, 2]});
    merge_patch(
        &mut target,
        &json!({"a": "z", "c": {"f": null}, "list": [3], "new": {"x": 1}}),
    );
    assert_eq!(
        target,
        json!({"a": "z", "c": {"d": "e"}, "list": [3], "new": {"x": 1}})
    );
}

#[test]
fn json_patch_operations() {
    let mut target = json!({"labels": {"a/b": "1"}, "list": [1, 2], "keep": true});
    json_patch(
        &mut target,
        &json!([
            {"op": "test", "path": "/keep", "value": true},
            {"op": "add", "path": "/list/-", "value": 3},
            {"op": "add", "path": "/list/0", "value": 0},
            {"op": "remove", "path": "/labels/a~1b"},
            {"op": "replace", "path": "/keep", "value": false},
            {"op": "copy", "from": "/list", "path": "/copy"},
            {"op": "move", "from": "/copy", "path": "/moved"},
        ]),
    )
    .unwrap();
    assert_eq!(
        target,
        json!({"labels": {}, "list": [0, 1, 2, 3], "keep": false, "moved": [0, 1, 2, 3]})
    );
}

#[test]
fn json_patch_failures_name_the_operation() {
    let mut target = json!({"a": 1});
    let err = json_patch(
        &mut target,
        &json!([{"op": "add", "path": "/b", "value": 2}, {"op": "test", "path": "/a", "value": 2}]),
    )
    .unwrap_err();
    assert_eq!(err, "operation 1: test failed at \"/a\"");
    assert!(json_patch(&mut target, &json!([{"op": "remove", "path": "/missing"}])).is_err());
    assert!(json_patch(&mut target, &json!({"op": "add"})).is_err());
}
