//! RFC 6902 JSON patch over JSON pointers (RFC 6901): add, remove, replace, move, copy, test.

use serde_json::Value;

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn split_pointer(path: &str) -> Result<Vec<String>, String> {
    if path.is_empty() {
        return Ok(vec![]);
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(format!("invalid JSON pointer {path:?}"));
    };
    Ok(rest.split('/').map(unescape).collect())
}

fn index(token: &str, len: usize, allow_end: bool) -> Result<usize, String> {
    if allow_end && token == "-" {
        return Ok(len);
    }
    let i: usize = token
        .parse()
        .map_err(|_| format!("invalid array index {token:?}"))?;
    if i > len || (!allow_end && i == len) {
        return Err(format!("array index {i} out of bounds"));
    }
    Ok(i)
}

fn parent<'a>(doc: &'a mut Value, tokens: &[String]) -> Result<&'a mut Value, String> {
    let mut cur = doc;
    for t in tokens {
        cur = match cur {
            Value::Object(m) => m
                .get_mut(t)
                .ok_or_else(|| format!("missing path element {t:?}"))?,
            Value::Array(a) => {
                let i = index(t, a.len(), false)?;
                &mut a[i]
            }
            _ => return Err(format!("cannot traverse into {t:?}")),
        };
    }
    Ok(cur)
}

fn get(doc: &Value, path: &str) -> Result<Value, String> {
    doc.pointer(path)
        .cloned()
        .ok_or_else(|| format!("path {path:?} does not exist"))
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let tokens = split_pointer(path)?;
    let Some((last, init)) = tokens.split_last() else {
        *doc = value;
        return Ok(());
    };
    match parent(doc, init)? {
        Value::Object(m) => {
            m.insert(last.clone(), value);
        }
        Value::Array(a) => {
            let i = index(last, a.len(), true)?;
            a.insert(i, value);
        }
        _ => return Err(format!("cannot add at {path:?}")),
    }
    Ok(())
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, String> {
    let tokens = split_pointer(path)?;
    let Some((last, init)) = tokens.split_last() else {
        return Err("cannot remove the root".into());
    };
    match parent(doc, init)? {
        Value::Object(m) => m
            .remove(last)
            .ok_or_else(|| format!("path {path:?} does not exist")),
        Value::Array(a) => {
            let i = index(last, a.len(), false)?;
            Ok(a.remove(i))
        }
        _ => Err(format!("cannot remove at {path:?}")),
    }
}

/// Applies the operations in order; any failure leaves `doc` unspecified (callers patch a copy).
pub fn apply_json_patch(doc: &mut Value, patch: &Value) -> Result<(), String> {
    let Value::Array(ops) = patch else {
        return Err("a JSON patch must be an array of operations".into());
    };
    for op in ops {
        let name = op.get("op").and_then(Value::as_str).unwrap_or("");
        let path = op
            .get("path")
            .and_then(Value::as_str)
            .ok_or("operation without a path")?;
        let value = || {
            op.get("value")
                .cloned()
                .ok_or(format!("{name} without a value"))
        };
        let from = || {
            op.get("from")
                .and_then(Value::as_str)
                .ok_or(format!("{name} without from"))
        };
        match name {
            "add" => add(doc, path, value()?)?,
            "remove" => {
                remove(doc, path)?;
            }
            "replace" => {
                remove(doc, path)?;
                add(doc, path, value()?)?;
            }
            "move" => {
                let v = remove(doc, from()?)?;
                add(doc, path, v)?;
            }
            "copy" => {
                let v = get(doc, from()?)?;
                add(doc, path, v)?;
            }
            "test" => {
                if get(doc, path)? != value()? {
                    return Err(format!("testing value {path:?} failed"));
                }
            }
            other => return Err(format!("unknown operation {other:?}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn operations() {
        let mut doc = json!({"spec": {"taints": [{"key": "a"}]}, "x": 1});
        apply_json_patch(
            &mut doc,
            &json!([
                {"op": "add", "path": "/spec/taints/-", "value": {"key": "b"}},
                {"op": "replace", "path": "/x", "value": 2},
                {"op": "copy", "from": "/x", "path": "/y"},
                {"op": "move", "from": "/y", "path": "/z"},
                {"op": "remove", "path": "/spec/taints/0"},
                {"op": "test", "path": "/z", "value": 2},
                {"op": "add", "path": "/a~1b", "value": true}
            ]),
        )
        .unwrap();
        assert_eq!(
            doc,
            json!({"spec": {"taints": [{"key": "b"}]}, "x": 2, "z": 2, "a/b": true})
        );
        assert!(
            apply_json_patch(&mut doc, &json!([{"op": "test", "path": "/x", "value": 3}])).is_err()
        );
        assert!(apply_json_patch(&mut doc, &json!([{"op": "remove", "path": "/nope"}])).is_err());
    }
}
