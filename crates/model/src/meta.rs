//! The part of `metadata` weft reads. Everything else (managedFields, annotations,
//! ownerReferences, finalizers) is skipped by the decoder without being allocated: on a
//! realistic Pod that is most of the object.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Deserializer};

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default, deserialize_with = "null_default")]
    pub uid: String,
    #[serde(default, deserialize_with = "null_default")]
    pub resource_version: String,
    #[serde(default, deserialize_with = "null_default")]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub creation_timestamp: Option<Time>,
    #[serde(default)]
    pub deletion_timestamp: Option<Time>,
}

/// What the stores need of any kind's metadata: its identity and version. A kind whose wire
/// type has its own metadata struct builds this view from it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetaView<'a> {
    pub name: &'a str,
    pub namespace: Option<&'a str>,
    pub resource_version: &'a str,
}

impl Meta {
    pub fn view(&self) -> MetaView<'_> {
        MetaView {
            name: &self.name,
            namespace: self.namespace.as_deref(),
            resource_version: &self.resource_version,
        }
    }
}

/// `null` reads as the type's default, as the API server's own decoder treats it.
pub fn null_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}
