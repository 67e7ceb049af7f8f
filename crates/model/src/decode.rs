//! One object's JSON to its store key and compact value, for every source. A malformed
//! object becomes an [`Issue`] naming it and the field at fault, never an error that
//! takes its list or its watch down with it.

use serde_json::Value;

use crate::issue::Issue;
use crate::kind::{ObjectKey, Watched};
use crate::meta::Meta;

/// One decoded object.
#[derive(Debug, Clone)]
pub struct Decoded<T> {
    /// `None` when the object has no usable name (it cannot be stored or deleted).
    pub key: Option<ObjectKey>,
    pub resource_version: String,
    pub value: Result<T, Vec<Issue>>,
}

/// Decodes one object from its JSON text (the API server's, a file's).
pub fn decode_str<T: Watched>(text: &str) -> Decoded<T> {
    let mut de = serde_json::Deserializer::from_str(text);
    match serde_path_to_error::deserialize::<_, T::Wire>(&mut de) {
        Ok(wire) => from_wire(&wire),
        Err(e) => {
            let probe = serde_json::from_str::<Probe>(text).unwrap_or_default();
            malformed::<T>(probe, e.path().to_string(), e.inner().to_string())
        }
    }
}

/// Decodes one object from a JSON value (the directory source's YAML documents).
pub fn decode_value<T: Watched>(value: Value) -> Decoded<T> {
    let probe = Probe {
        metadata: value.get("metadata").cloned().unwrap_or_default(),
    };
    match serde_path_to_error::deserialize::<_, T::Wire>(value) {
        Ok(wire) => from_wire(&wire),
        Err(e) => malformed::<T>(probe, e.path().to_string(), e.inner().to_string()),
    }
}

fn from_wire<T: Watched>(wire: &T::Wire) -> Decoded<T> {
    let meta = T::meta(wire);
    let key = ObjectKey::of(meta, T::KIND.namespaced);
    let value = match &key {
        None => Err(vec![Issue::new(
            format!("{}/<unnamed>", T::KIND.kind),
            "metadata.name",
            "missing",
        )]),
        Some(_) => T::from_wire(wire),
    };
    Decoded {
        key,
        resource_version: meta.resource_version.to_string(),
        value,
    }
}

/// Just enough of a malformed object to name it.
#[derive(Debug, Default, serde::Deserialize)]
struct Probe {
    #[serde(default)]
    metadata: Value,
}

fn malformed<T: Watched>(probe: Probe, path: String, error: String) -> Decoded<T> {
    let text = |field: &str| {
        probe
            .metadata
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let meta = Meta {
        name: text("name"),
        namespace: Some(text("namespace")).filter(|n| !n.is_empty()),
        resource_version: text("resourceVersion"),
        ..Meta::default()
    };
    let key = ObjectKey::of(meta.view(), T::KIND.namespaced);
    let object = match &key {
        Some(key) => T::KIND.object_name(key),
        None => format!("{}/<unnamed>", T::KIND.kind),
    };
    // serde_path_to_error names the root ".", and serde_json appends the position.
    let field = if path == "." { String::new() } else { path };
    let message = match error.rfind(" at line ") {
        Some(cut) => error[..cut].to_string(),
        None => error,
    };
    Decoded {
        key,
        resource_version: meta.resource_version,
        value: Err(vec![Issue::new(object, field, message)]),
    }
}
