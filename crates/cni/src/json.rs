//! Reading JSON objects field by field, so every error names the exact field path
//! (e.g. `prevResult.ips[0].address`) instead of a line and column.

use std::str::FromStr;

use serde_json::{Map, Value};

use crate::error::CniError;

/// A problem with one field; the caller decides which CNI code it deserves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldError {
    message: String,
}

impl FieldError {
    pub(crate) fn missing(path: &str) -> Self {
        Self {
            message: format!("field {path:?} is missing"),
        }
    }

    pub(crate) fn invalid(path: &str, reason: impl std::fmt::Display) -> Self {
        Self {
            message: format!("field {path:?} {reason}"),
        }
    }

    pub(crate) fn into_cni(self, code: u32) -> CniError {
        CniError::new(code, self.message)
    }
}

pub(crate) type FieldResult<T> = Result<T, FieldError>;

pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

pub(crate) fn index(path: &str, position: usize) -> String {
    format!("{path}[{position}]")
}

/// Short JSON type name for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn wrong_type(path: &str, expected: &str, value: &Value) -> FieldError {
    FieldError::invalid(path, format!("must be {expected}, not {}", kind(value)))
}

/// A JSON object being read, with its path for messages. `null` counts as absent everywhere,
/// as Go's decoder treats it. With `case_insensitive`, a key that matches exactly wins, else
/// the first key equal ignoring ASCII case (Go's `encoding/json` rule).
#[derive(Debug, Clone)]
pub(crate) struct Obj<'a> {
    pub(crate) map: &'a Map<String, Value>,
    pub(crate) path: String,
    pub(crate) case_insensitive: bool,
}

impl<'a> Obj<'a> {
    pub(crate) fn new(value: &'a Value, path: impl Into<String>) -> FieldResult<Self> {
        let path = path.into();
        match value {
            Value::Object(map) => Ok(Obj {
                map,
                path,
                case_insensitive: false,
            }),
            other => Err(wrong_type(&path, "an object", other)),
        }
    }

    /// The same object read with case-insensitive keys (and so are objects nested in it).
    pub(crate) fn ignoring_case(self) -> Self {
        Obj {
            case_insensitive: true,
            ..self
        }
    }

    pub(crate) fn path_of(&self, key: &str) -> String {
        join(&self.path, key)
    }

    /// The raw value of `key` (null = absent).
    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        let exact = self.map.get(key);
        let found = match exact {
            Some(value) => Some(value),
            None if self.case_insensitive => self
                .map
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(key))
                .map(|(_, value)| value),
            None => None,
        };
        found.filter(|value| !value.is_null())
    }

    pub(crate) fn opt_str(&self, key: &str) -> FieldResult<Option<&'a str>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(other) => Err(wrong_type(&self.path_of(key), "a string", other)),
        }
    }

    pub(crate) fn req_str(&self, key: &str) -> FieldResult<&'a str> {
        self.opt_str(key)?
            .ok_or_else(|| FieldError::missing(&self.path_of(key)))
    }

    /// A string where empty means absent (Go `omitempty` strings).
    pub(crate) fn opt_nonempty_string(&self, key: &str) -> FieldResult<Option<String>> {
        Ok(self
            .opt_str(key)?
            .filter(|text| !text.is_empty())
            .map(str::to_owned))
    }

    pub(crate) fn opt_bool(&self, key: &str) -> FieldResult<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(flag)) => Ok(Some(*flag)),
            Some(other) => Err(wrong_type(&self.path_of(key), "a boolean", other)),
        }
    }

    pub(crate) fn opt_u64(&self, key: &str) -> FieldResult<Option<u64>> {
        match self.get(key) {
            None => Ok(None),
            Some(value) => value.as_u64().map(Some).ok_or_else(|| {
                FieldError::invalid(
                    &self.path_of(key),
                    format!("must be a non-negative integer, not {value}"),
                )
            }),
        }
    }

    pub(crate) fn opt_u32(&self, key: &str) -> FieldResult<Option<u32>> {
        match self.opt_u64(key)? {
            None => Ok(None),
            Some(number) => u32::try_from(number).map(Some).map_err(|_| {
                FieldError::invalid(&self.path_of(key), format!("{number} is out of range"))
            }),
        }
    }

    pub(crate) fn opt_object(&self, key: &str) -> FieldResult<Option<Obj<'a>>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Object(map)) => Ok(Some(Obj {
                map,
                path: self.path_of(key),
                case_insensitive: self.case_insensitive,
            })),
            Some(other) => Err(wrong_type(&self.path_of(key), "an object", other)),
        }
    }

    pub(crate) fn opt_array(&self, key: &str) -> FieldResult<Option<&'a [Value]>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => Ok(Some(items)),
            Some(other) => Err(wrong_type(&self.path_of(key), "an array", other)),
        }
    }

    /// A list of strings; absent is empty.
    pub(crate) fn string_list(&self, key: &str) -> FieldResult<Vec<String>> {
        let Some(items) = self.opt_array(key)? else {
            return Ok(Vec::new());
        };
        let path = self.path_of(key);
        items
            .iter()
            .enumerate()
            .map(|(position, item)| match item {
                Value::String(text) => Ok(text.clone()),
                other => Err(wrong_type(&index(&path, position), "a string", other)),
            })
            .collect()
    }

    /// A string parsed with `FromStr`; `what` names the expected form in messages.
    pub(crate) fn opt_parsed<T: FromStr>(&self, key: &str, what: &str) -> FieldResult<Option<T>> {
        match self.opt_str(key)? {
            None => Ok(None),
            Some(text) => text.parse().map(Some).map_err(|_| {
                FieldError::invalid(&self.path_of(key), format!("{text:?} is not {what}"))
            }),
        }
    }
}

/// Decodes bytes as JSON; invalid JSON (including invalid UTF-8 and over-deep nesting, which
/// serde_json bounds) is code 6.
pub(crate) fn decode(bytes: &[u8], what: &str) -> Result<Value, CniError> {
    serde_json::from_slice(bytes)
        .map_err(|error| CniError::decoding(format!("cannot decode {what} as JSON: {error}")))
}

/// Decodes bytes that must hold a JSON object; anything else is code 6.
pub(crate) fn decode_object(bytes: &[u8], what: &str) -> Result<Map<String, Value>, CniError> {
    match decode(bytes, what)? {
        Value::Object(map) => Ok(map),
        other => Err(CniError::decoding(format!(
            "{what} must be a JSON object, not {}",
            kind(&other)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn null_is_absent_and_paths_are_named() {
        let value = json!({"a": null, "b": 5, "c": "x", "Mixed": 1});
        let obj = Obj::new(&value, "root").unwrap();
        assert_eq!(obj.opt_str("a").unwrap(), None);
        let error = obj.opt_str("b").unwrap_err().into_cni(7);
        assert_eq!(error.msg, "field \"root.b\" must be a string, not a number");
        assert_eq!(obj.opt_u32("mixed").unwrap(), None);
        let insensitive = obj.ignoring_case();
        assert_eq!(insensitive.opt_u32("mixed").unwrap(), Some(1));
    }

    #[test]
    fn integers_are_checked() {
        let value = json!({"neg": -1, "float": 1.5, "big": 4294967296u64});
        let obj = Obj::new(&value, "").unwrap();
        assert!(obj.opt_u64("neg").is_err());
        assert!(obj.opt_u64("float").is_err());
        assert!(obj.opt_u32("big").is_err());
        assert_eq!(obj.opt_u64("big").unwrap(), Some(4294967296));
    }

    #[test]
    fn decode_codes() {
        assert_eq!(decode(b"{", "x").unwrap_err().code, 6);
        assert_eq!(decode_object(b"[]", "x").unwrap_err().code, 6);
        assert_eq!(decode_object(b"\xff", "x").unwrap_err().code, 6);
        let deep = "[".repeat(10_000);
        assert_eq!(decode(deep.as_bytes(), "x").unwrap_err().code, 6);
    }
}
