//! The pod defaults a client sees on a real server's pods (the ones weft or kubectl read):
//! restart and DNS policy, scheduler, grace period, service account, per-container
//! termination message and pull policy, and a Pending status.

use serde_json::{json, Value};

use super::{Admission, AdmitCtx};
use crate::error::ApiError;

pub struct PodDefaults;

/// Sets `map.key` when absent; leaves anything that is not an object (or null) alone.
fn set_default(map: &mut Value, key: &str, value: Value) {
    if map.is_null() {
        *map = Value::Object(Default::default());
    }
    if let Some(m) = map.as_object_mut() {
        if m.get(key).is_none_or(Value::is_null) {
            m.insert(key.to_string(), value);
        }
    }
}

impl Admission for PodDefaults {
    fn create(&self, _ctx: &AdmitCtx, obj: &mut Value) -> Result<(), ApiError> {
        let Some(spec) = obj
            .as_object_mut()
            .map(|m| m.entry("spec").or_insert(Value::Null))
        else {
            return Ok(());
        };
        set_default(spec, "restartPolicy", json!("Always"));
        set_default(spec, "dnsPolicy", json!("ClusterFirst"));
        set_default(spec, "schedulerName", json!("default-scheduler"));
        set_default(spec, "terminationGracePeriodSeconds", json!(30));
        set_default(spec, "securityContext", json!({}));
        set_default(spec, "enableServiceLinks", json!(true));
        set_default(spec, "priority", json!(0));
        set_default(spec, "serviceAccountName", json!("default"));
        let sa = spec["serviceAccountName"].clone();
        set_default(spec, "serviceAccount", sa);
        for list in ["initContainers", "containers"] {
            if let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) {
                for c in containers {
                    set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
                    set_default(c, "terminationMessagePolicy", json!("File"));
                    let latest = c["image"]
                        .as_str()
                        .is_some_and(|i| !i.contains(':') || i.ends_with(":latest"));
                    set_default(
                        c,
                        "imagePullPolicy",
                        json!(if latest { "Always" } else { "IfNotPresent" }),
                    );
                    set_default(c, "resources", json!({}));
                }
            }
        }
        // A created pod starts Pending whatever status the client sent (the kubelet owns it).
        if let Some(map) = obj.as_object_mut() {
            map.insert(
                "status".into(),
                json!({"phase": "Pending", "qosClass": "BestEffort"}),
            );
        }
        Ok(())
    }
}
