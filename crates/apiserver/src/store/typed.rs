//! The decode check of the real server: a body whose fields have the wrong JSON types for
//! a built-in kind is refused with 400 `... cannot be handled as a Pod: ...`. The check
//! decodes into the k8s-openapi type; a missing field or a `null` is not an error here
//! (Go's decoder accepts both and validation answers, if anything).

use serde_json::Value;

use crate::error::ApiError;

fn check<T: serde::de::DeserializeOwned>(v: &Value) -> Result<(), String> {
    serde_json::from_value::<T>(v.clone())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

pub fn decode_check(api_version: &str, kind: &str, v: &Value) -> Result<(), ApiError> {
    use k8s_openapi::api::{coordination, core, discovery, networking};
    let result = match (api_version, kind) {
        ("v1", "Namespace") => check::<core::v1::Namespace>(v),
        ("v1", "Node") => check::<core::v1::Node>(v),
        ("v1", "Pod") => check::<core::v1::Pod>(v),
        ("v1", "Service") => check::<core::v1::Service>(v),
        ("v1", "ConfigMap") => check::<core::v1::ConfigMap>(v),
        ("v1", "ServiceAccount") => check::<core::v1::ServiceAccount>(v),
        ("v1", "Event") => check::<core::v1::Event>(v),
        ("discovery.k8s.io/v1", "EndpointSlice") => check::<discovery::v1::EndpointSlice>(v),
        ("networking.k8s.io/v1", "NetworkPolicy") => check::<networking::v1::NetworkPolicy>(v),
        ("coordination.k8s.io/v1", "Lease") => check::<coordination::v1::Lease>(v),
        _ => Ok(()),
    };
    match result {
        Err(e) if !e.contains("missing field") && !e.contains("null") => {
            let version = api_version.rsplit('/').next().unwrap_or(api_version);
            Err(ApiError::bad_request(format!(
                "{kind} in version \"{version}\" cannot be handled as a {kind}: {e}"
            )))
        }
        _ => Ok(()),
    }
}
