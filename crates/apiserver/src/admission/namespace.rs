//! Namespaces as the real server fills them: the immutable `kubernetes.io/metadata.name`
//! label, the `kubernetes` finalizer and phase Active.

use serde_json::{json, Value};

use super::{Admission, AdmitCtx};
use crate::error::ApiError;

pub struct NamespaceDefaults;

fn fill(obj: &mut Value) {
    let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
    if !obj["metadata"]["labels"].is_object() {
        obj["metadata"]["labels"] = json!({});
    }
    obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
    if !obj["spec"].is_object() {
        obj["spec"] = json!({});
    }
    if obj["spec"].get("finalizers").is_none() {
        obj["spec"]["finalizers"] = json!(["kubernetes"]);
    }
    if !obj["status"].is_object() {
        obj["status"] = json!({});
    }
    if obj["status"].get("phase").is_none() {
        obj["status"]["phase"] = json!("Active");
    }
}

impl Admission for NamespaceDefaults {
    fn create(&self, _ctx: &AdmitCtx, obj: &mut Value) -> Result<(), ApiError> {
        fill(obj);
        Ok(())
    }

    fn update(&self, _ctx: &AdmitCtx, _old: &Value, new: &mut Value) -> Result<(), ApiError> {
        fill(new);
        Ok(())
    }
}
