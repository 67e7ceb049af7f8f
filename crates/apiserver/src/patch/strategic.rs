//! Strategic merge patch, the semantics of apimachinery's `strategicpatch` for the fields
//! the resource table declares: maps merge recursively and `null` deletes; a list with a
//! merge key merges element by element (new elements first, the rest in server order, as
//! the real merge orders them); a list declared as a set of scalars is a union; every other
//! list is replaced. Directives: `$patch: replace|delete` (in maps and as list elements),
//! `$retainKeys`, `$setElementOrder/<list>` and `$deleteFromPrimitiveList/<list>`. Directive
//! keys never reach the stored object.

use serde_json::{Map, Value};

/// Returns the list strategy at a dotted path: `None` replace, `Some(None)` set of scalars,
/// `Some(Some(key))` merge by `key`.
pub trait MergeKeys {
    fn at(&self, path: &str) -> Option<Option<String>>;
}

impl MergeKeys for crate::resources::ResourceDef {
    fn at(&self, path: &str) -> Option<Option<String>> {
        self.patch_key(path).map(|k| k.map(str::to_string))
    }
}

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ORDER: &str = "$setElementOrder/";
const DELETE_FROM: &str = "$deleteFromPrimitiveList/";

pub fn apply_strategic_merge_patch(
    target: &mut Value,
    patch: &Value,
    keys: &dyn MergeKeys,
) -> Result<(), String> {
    let Value::Object(patch) = patch else {
        return Err("a strategic merge patch must be a JSON object".into());
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(original) = target else {
        return Ok(());
    };
    merge_map(original, patch.clone(), "", keys)
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn merge_map(
    original: &mut Map<String, Value>,
    mut patch: Map<String, Value>,
    path: &str,
    keys: &dyn MergeKeys,
) -> Result<(), String> {
    if let Some(directive) = patch.remove(DIRECTIVE) {
        return match directive.as_str() {
            Some("replace") => {
                *original = Map::new();
                merge_map(original, patch, path, keys)
            }
            Some("delete") => {
                *original = Map::new();
                Ok(())
            }
            _ => Err(format!("unknown patch type {directive} in map")),
        };
    }
    if let Some(retain) = patch.remove(RETAIN_KEYS) {
        let Value::Array(retain) = retain else {
            return Err("$retainKeys must be a list of strings".into());
        };
        let retain: Vec<&str> = retain.iter().filter_map(Value::as_str).collect();
        for (k, v) in &patch {
            if !v.is_null() && !k.starts_with('$') && !retain.contains(&k.as_str()) {
                return Err(format!(
                    "$retainKeys does not contain {k:?}, present in the patch"
                ));
            }
        }
        original.retain(|k, _| retain.contains(&k.as_str()));
    }

    let order_keys: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ORDER))
        .cloned()
        .collect();
    for order_key in order_keys {
        let field = order_key[SET_ORDER.len()..].to_string();
        let Some(Value::Array(order)) = patch.remove(&order_key) else {
            return Err(format!("{order_key} must be a list"));
        };
        let field_path = join(path, &field);
        let strategy = keys.at(&field_path);
        let server: Vec<Value> = match original.get(&field) {
            Some(Value::Array(a)) => a.clone(),
            _ => Vec::new(),
        };
        let merged = match patch.remove(&field) {
            Some(Value::Array(p)) => {
                merge_list(server.clone(), p, strategy.clone(), &field_path, keys)?
            }
            Some(Value::Null) => {
                original.remove(&field);
                continue;
            }
            Some(other) => return Err(format!("{field} must be a list, found {other}")),
            None if original.contains_key(&field) => server.clone(),
            None => continue,
        };
        let key = strategy.flatten();
        original.insert(
            field,
            Value::Array(normalize(merged, &order, &server, key.as_deref())),
        );
    }

    let delete_keys: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(DELETE_FROM))
        .cloned()
        .collect();
    for delete_key in delete_keys {
        let field = &delete_key[DELETE_FROM.len()..];
        let Some(Value::Array(gone)) = patch.remove(&delete_key) else {
            return Err(format!("{delete_key} must be a list"));
        };
        if let Some(Value::Array(list)) = original.get_mut(field) {
            list.retain(|v| !gone.contains(v));
        }
    }

    for (k, pv) in patch {
        if pv.is_null() {
            original.remove(&k);
            continue;
        }
        let field_path = join(path, &k);
        match (original.get_mut(&k), pv) {
            (Some(Value::Object(o)), Value::Object(p)) => merge_map(o, p, &field_path, keys)?,
            (Some(Value::Array(o)), Value::Array(p)) => {
                let strategy = keys.at(&field_path);
                let server = std::mem::take(o);
                let merged = merge_list(
                    server.clone(),
                    p.clone(),
                    strategy.clone(),
                    &field_path,
                    keys,
                )?;
                *o = match strategy {
                    Some(key) => normalize(merged, &p, &server, key.as_deref()),
                    None => merged,
                };
            }
            (_, pv) => {
                original.insert(k.clone(), clean(pv, &field_path, keys)?);
            }
        }
    }
    Ok(())
}

/// A patch value for a field the original lacks: directives are applied against nothing.
fn clean(value: Value, path: &str, keys: &dyn MergeKeys) -> Result<Value, String> {
    match value {
        Value::Object(p) => {
            let mut out = Map::new();
            merge_map(&mut out, p, path, keys)?;
            Ok(Value::Object(out))
        }
        Value::Array(p) => Ok(Value::Array(merge_list(
            Vec::new(),
            p,
            keys.at(path),
            path,
            keys,
        )?)),
        other => Ok(other),
    }
}

fn merge_list(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    strategy: Option<Option<String>>,
    path: &str,
    keys: &dyn MergeKeys,
) -> Result<Vec<Value>, String> {
    let Some(merge_key) = strategy else {
        return patch.into_iter().map(|v| clean(v, path, keys)).collect();
    };
    let Some(merge_key) = merge_key.as_deref() else {
        for v in patch {
            if !original.contains(&v) {
                original.push(v);
            }
        }
        return Ok(original);
    };
    let is_directive = |v: &Value, d: &str| v.get(DIRECTIVE).and_then(Value::as_str) == Some(d);
    if patch.iter().any(|v| is_directive(v, "replace")) {
        return patch
            .into_iter()
            .filter(|v| v.get(DIRECTIVE).is_none())
            .map(|v| clean(v, path, keys))
            .collect();
    }
    let mut items = Vec::new();
    for v in patch {
        let Value::Object(m) = v else {
            return Err(format!(
                "list {path} merges by {merge_key:?}: its elements must be maps"
            ));
        };
        let Some(id) = m.get(merge_key).cloned() else {
            return Err(format!(
                "map: {m:?} does not contain declared merge key: {merge_key}"
            ));
        };
        match m.get(DIRECTIVE).and_then(Value::as_str) {
            Some("delete") => original.retain(|o| o.get(merge_key) != Some(&id)),
            Some(other) => return Err(format!("unknown patch type {other:?} in list {path}")),
            None => items.push((id, m)),
        }
    }
    for (id, p) in items {
        match original.iter_mut().find(|o| o.get(merge_key) == Some(&id)) {
            Some(Value::Object(o)) => merge_map(o, p, path, keys)?,
            _ => original.push(clean(Value::Object(p), path, keys)?),
        }
    }
    Ok(original)
}

/// The element order apimachinery produces: elements named in `order` (the patch list or a
/// `$setElementOrder` list) in that order, the server-only elements in `server` order, the
/// two interleaved by their positions in `server`, patch elements first when unknown there.
fn normalize(
    merged: Vec<Value>,
    order: &[Value],
    server: &[Value],
    key: Option<&str>,
) -> Vec<Value> {
    let id = |v: &Value| -> Value {
        match key {
            Some(k) => v.get(k).cloned().unwrap_or(Value::Null),
            None => v.clone(),
        }
    };
    let position = |list: &[Value], v: &Value| {
        let wanted = id(v);
        list.iter()
            .filter(|o| o.get(DIRECTIVE).is_none())
            .position(|o| id(o) == wanted)
    };
    let (mut mine, mut theirs): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|v| position(order, v).is_some());
    mine.sort_by_key(|v| position(order, v).unwrap_or(usize::MAX));
    theirs.sort_by_key(|v| position(server, v).unwrap_or(usize::MAX));
    let mut out = Vec::with_capacity(mine.len() + theirs.len());
    let (mut left, mut right) = (theirs.into_iter().peekable(), mine.into_iter().peekable());
    loop {
        match (left.peek(), right.peek()) {
            (Some(l), Some(r)) => {
                let take_left = matches!(
                    (position(server, l), position(server, r)),
                    (Some(li), Some(ri)) if li < ri
                );
                let next = if take_left { left.next() } else { right.next() };
                out.extend(next);
            }
            (Some(_), None) => out.extend(left.next()),
            (None, Some(_)) => out.extend(right.next()),
            (None, None) => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Keys;

    impl MergeKeys for Keys {
        fn at(&self, path: &str) -> Option<Option<String>> {
            let key = match path {
                "status.conditions" | "status.addresses" => Some(Some("type")),
                "status.podIPs" => Some(Some("ip")),
                "spec.ports" => Some(Some("port")),
                "metadata.finalizers" => Some(None),
                _ => None,
            };
            key.map(|k| k.map(str::to_string))
        }
    }

    fn patch(doc: Value, p: Value) -> Value {
        let mut doc = doc;
        apply_strategic_merge_patch(&mut doc, &p, &Keys).unwrap();
        doc
    }

    #[test]
    fn node_conditions_merge_by_type() {
        let node = json!({"status": {"conditions": [
            {"type": "Ready", "status": "False"},
            {"type": "MemoryPressure", "status": "False"}
        ]}});
        let out = patch(
            node.clone(),
            json!({"status": {"conditions": [
                {"type": "MemoryPressure", "status": "True"}
            ]}}),
        );
        assert_eq!(
            out,
            json!({"status": {"conditions": [
                {"type": "Ready", "status": "False"},
                {"type": "MemoryPressure", "status": "True"}
            ]}})
        );
        // A new condition goes first, as apimachinery orders it.
        let out = patch(
            node.clone(),
            json!({"status": {"conditions": [
                {"type": "NetworkUnavailable", "status": "False"}
            ]}}),
        );
        let types: Vec<_> = out["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(types, ["NetworkUnavailable", "Ready", "MemoryPressure"]);
        let out = patch(
            node,
            json!({"status": {"conditions": [
                {"type": "Ready", "$patch": "delete"}
            ]}}),
        );
        assert_eq!(
            out,
            json!({"status": {"conditions": [{"type": "MemoryPressure", "status": "False"}]}})
        );
    }

    #[test]
    fn taints_without_merge_key_are_replaced() {
        let out = patch(
            json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}}),
            json!({"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}}),
        );
        assert_eq!(
            out,
            json!({"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}})
        );
        let out = patch(
            json!({"spec": {"taints": [{"key": "a"}]}}),
            json!({"spec": {"taints": null}}),
        );
        assert_eq!(out, json!({"spec": {}}));
    }

    #[test]
    fn set_element_order_and_primitive_sets() {
        let svc = json!({"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]}});
        let out = patch(
            svc,
            json!({"spec": {
                "$setElementOrder/ports": [{"port": 443}, {"port": 80}],
                "ports": [{"port": 80, "targetPort": 8080}]
            }}),
        );
        assert_eq!(
            out,
            json!({"spec": {"ports": [
                {"port": 443, "name": "https"},
                {"port": 80, "name": "http", "targetPort": 8080}
            ]}})
        );
        let out = patch(
            json!({"metadata": {"finalizers": ["a", "b"]}}),
            json!({"metadata": {"finalizers": ["c", "a"], "$deleteFromPrimitiveList/finalizers": ["b"]}}),
        );
        assert_eq!(out, json!({"metadata": {"finalizers": ["c", "a"]}}));
    }

    #[test]
    fn map_directives_and_pod_ips() {
        let out = patch(
            json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "status": {"podIPs": [{"ip": "10.0.0.1"}]}}),
            json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}},
                   "status": {"podIPs": [{"ip": "fd00::1"}, {"ip": "10.0.0.1"}]}}),
        );
        assert_eq!(
            out,
            json!({"metadata": {"labels": {"c": "3"}},
            "status": {"podIPs": [{"ip": "fd00::1"}, {"ip": "10.0.0.1"}]}})
        );
        let out = patch(
            json!({"spec": {"x": {"y": 1}}}),
            json!({"spec": {"x": {"$patch": "delete"}}}),
        );
        assert_eq!(out, json!({"spec": {"x": {}}}));
        let out = patch(
            json!({}),
            json!({"spec": {"ports": [{"port": 1, "$patch": "delete"}], "$setElementOrder/ports": []}}),
        );
        assert_eq!(out, json!({"spec": {"ports": []}}));
    }
}
