//! One stored object: its serialized JSON (served as is, never re-encoded for a list or a
//! watch) plus the few fields selectors and the store read without parsing it.

use bytes::Bytes;
use serde_json::Value;
use std::sync::Arc;

use crate::resources::ResourceDef;

#[derive(Debug)]
pub struct StoredObject {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub rv: u64,
    /// Sorted by key.
    pub labels: Vec<(String, String)>,
    /// Every selectable field label of the resource with the object's value.
    pub fields: Vec<(String, String)>,
    pub bytes: Bytes,
}

pub type ObjRef = Arc<StoredObject>;

/// `(namespace, name)`; `""` namespace for cluster-scoped kinds. Ordered like etcd keys.
pub type Key = (String, String);

impl StoredObject {
    /// Builds the stored form of `obj`, whose metadata the store already filled.
    pub fn build(def: &ResourceDef, obj: &Value, rv: u64) -> Result<Self, serde_json::Error> {
        let meta = &obj["metadata"];
        let s = |v: &Value| v.as_str().unwrap_or("").to_string();
        let mut labels: Vec<(String, String)> = meta["labels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                    .collect()
            })
            .unwrap_or_default();
        labels.sort();
        let fields = def
            .field_labels()
            .into_iter()
            .map(|(label, default)| {
                let value = crate::meta::path_string(obj, &label).unwrap_or(default);
                (label, value)
            })
            .collect();
        Ok(StoredObject {
            namespace: s(&meta["namespace"]),
            name: s(&meta["name"]),
            uid: s(&meta["uid"]),
            rv,
            labels,
            fields,
            bytes: Bytes::from(serde_json::to_vec(obj)?),
        })
    }

    pub fn key(&self) -> Key {
        (self.namespace.clone(), self.name.clone())
    }

    pub fn value(&self) -> Value {
        // The bytes were produced by serde_json from a Value; they always parse.
        serde_json::from_slice(&self.bytes).unwrap_or(Value::Null)
    }
}
