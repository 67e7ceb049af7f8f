//! Reading an object's identity, the same way for every kind.

use weft_model::Issue;

use crate::wire::WireMeta;

pub(crate) struct Identity {
    /// `default` when absent, as kubectl would have set it (standalone YAML).
    pub namespace: String,
    /// `<unnamed>` when absent (and then an issue is reported).
    pub name: String,
    /// How issues name the object: `Kind/namespace/name`.
    pub object: String,
}

pub(crate) fn identify(meta: &WireMeta, kind: &str, issues: &mut Vec<Issue>) -> Identity {
    let namespace = meta
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_string());
    let name = meta
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "<unnamed>".to_string());
    let object = format!("{kind}/{namespace}/{name}");
    if meta.name.as_deref().unwrap_or("").is_empty() {
        issues.push(Issue::new(&object, "metadata.name", "missing"));
    }
    Identity {
        namespace,
        name,
        object,
    }
}
