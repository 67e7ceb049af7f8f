//! What the real server refuses before storing: a body for the wrong kind or namespace
//! (400), wrong JSON types (400, `typed`), and obviously malformed objects (422 Invalid
//! naming the field).

use serde_json::{Map, Value};

use crate::error::{cause, ApiError, Cause};
use crate::resources::ResourceDef;

/// Checks `apiVersion`/`kind` (filling them when absent), the namespace against the URL's,
/// the name against the URL's (`url_name`), and the JSON types.
pub fn prepare(
    def: &ResourceDef,
    body: &mut Value,
    ns: &str,
    url_name: Option<&str>,
) -> Result<(), ApiError> {
    let api_version = def.api_version();
    let Some(map) = body.as_object_mut() else {
        return Err(ApiError::bad_request(format!(
            "{} in version \"{}\" cannot be handled as a {}: the body is not a JSON object",
            def.kind, def.version, def.kind
        )));
    };
    match map.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("apiVersion".into(), Value::String(api_version.clone()));
        }
        Some(v) if v == api_version => {}
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({api_version})"
            )))
        }
    }
    match map.get("kind").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("kind".into(), Value::String(def.kind.clone()));
        }
        Some(k) if k == def.kind => {}
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                def.kind
            )))
        }
    }
    let meta = crate::meta::metadata_mut(body, &def.kind)?;
    if def.namespaced {
        match meta.get("namespace").and_then(Value::as_str) {
            None | Some("") => {
                meta.insert("namespace".into(), Value::String(ns.to_string()));
            }
            Some(n) if n == ns => {}
            Some(_) => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ))
            }
        }
    } else {
        meta.remove("namespace");
    }
    if let Some(url_name) = url_name {
        match meta.get("name").and_then(Value::as_str) {
            None | Some("") => {
                meta.insert("name".into(), Value::String(url_name.to_string()));
            }
            Some(n) if n == url_name => {}
            Some(n) => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({url_name})"
                )))
            }
        }
    }
    super::typed::decode_check(&api_version, &def.kind, body)
}

fn arr<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Vec<Value>> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_array()
}

fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn required(field: &str) -> Cause {
    cause("FieldValueRequired", field, "Required value")
}

/// Per-kind checks of obviously malformed objects; an empty result means valid.
pub fn validate_kind(def: &ResourceDef, obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(meta) = obj.get("metadata").and_then(Value::as_object) {
        causes.extend(crate::meta::validate_labels(meta));
    }
    match (def.group.as_str(), def.kind.as_str()) {
        ("", "Pod") => pod(obj, &mut causes),
        ("", "Service") => service(obj, &mut causes),
        ("discovery.k8s.io", "EndpointSlice") => endpoint_slice(obj, &mut causes),
        _ => {}
    }
    causes
}

fn pod(obj: &Value, causes: &mut Vec<Cause>) {
    match arr(obj, &["spec", "containers"]) {
        Some(c) if !c.is_empty() => {
            for (i, c) in c.iter().enumerate() {
                if str_at(c, "name").is_empty() {
                    causes.push(required(&format!("spec.containers[{i}].name")));
                }
                if str_at(c, "image").is_empty() {
                    causes.push(required(&format!("spec.containers[{i}].image")));
                }
            }
        }
        _ => causes.push(required("spec.containers")),
    }
}

fn valid_port(v: &Value) -> bool {
    v.as_i64().is_some_and(|p| (1..=65535).contains(&p))
}

fn service(obj: &Value, causes: &mut Vec<Cause>) {
    let spec = obj
        .get("spec")
        .cloned()
        .unwrap_or(Value::Object(Map::new()));
    let ty = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    if !["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"].contains(&ty) {
        causes.push(cause(
            "FieldValueNotSupported",
            "spec.type",
            format!("Unsupported value: {ty:?}: supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\""),
        ));
    }
    let headless = spec.get("clusterIP").and_then(Value::as_str) == Some("None");
    let ports = arr(&spec, &["ports"]).cloned().unwrap_or_default();
    if ports.is_empty() && ty != "ExternalName" && !headless {
        causes.push(required("spec.ports"));
    }
    for (i, p) in ports.iter().enumerate() {
        if !valid_port(p.get("port").unwrap_or(&Value::Null)) {
            causes.push(cause(
                "FieldValueInvalid",
                &format!("spec.ports[{i}].port"),
                format!(
                    "Invalid value: {}: must be between 1 and 65535, inclusive",
                    p.get("port").unwrap_or(&Value::Null)
                ),
            ));
        }
        let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
        if !["TCP", "UDP", "SCTP"].contains(&proto) {
            causes.push(cause(
                "FieldValueNotSupported",
                &format!("spec.ports[{i}].protocol"),
                format!(
                    "Unsupported value: {proto:?}: supported values: \"SCTP\", \"TCP\", \"UDP\""
                ),
            ));
        }
        if ports.len() > 1 && str_at(p, "name").is_empty() {
            causes.push(required(&format!("spec.ports[{i}].name")));
        }
    }
    if ty == "ExternalName" && str_at(&spec, "externalName").is_empty() {
        causes.push(required("spec.externalName"));
    }
}

fn endpoint_slice(obj: &Value, causes: &mut Vec<Cause>) {
    let at = str_at(obj, "addressType");
    if !["IPv4", "IPv6", "FQDN"].contains(&at) {
        causes.push(cause(
            "FieldValueNotSupported",
            "addressType",
            format!("Unsupported value: {at:?}: supported values: \"FQDN\", \"IPv4\", \"IPv6\""),
        ));
    }
    for (i, e) in arr(obj, &["endpoints"])
        .cloned()
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        if arr(e, &["addresses"]).is_none_or(|a| a.is_empty()) {
            causes.push(required(&format!("endpoints[{i}].addresses")));
        }
    }
}
