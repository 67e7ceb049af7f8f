//! What makes a Kubernetes kind watchable by the agent: its API identity, the slim "wire"
//! type its JSON is decoded into, and the conversion to the compact type a store keeps.
//!
//! A kind lives wherever its reader lives: Node, Namespace and Pod here, Service and
//! EndpointSlice in `weft-services`, NetworkPolicy in `weft-policy`. The agent registers
//! each kind once (`src/agent/kinds.rs`); both sources and every store work from this
//! trait alone.

use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;

use crate::issue::Issue;
use crate::meta::MetaView;

/// A kind's identity in the Kubernetes API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KindInfo {
    /// API group; empty for the core group.
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    /// The resource name in URLs (`pods`, `endpointslices`).
    pub plural: &'static str,
    pub namespaced: bool,
}

impl KindInfo {
    /// `v1` or `discovery.k8s.io/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// How an issue names an object of this kind: `Pod/ns/name`, `Node/name`.
    pub fn object_name(&self, key: &ObjectKey) -> String {
        format!("{}/{key}", self.kind)
    }
}

/// A compact type the agent keeps one store of. Implement it on the compact type itself:
/// the store holds `Self`, decoded from `Self::Wire`.
pub trait Watched: Clone + PartialEq + fmt::Debug + Send + Sync + 'static {
    const KIND: KindInfo;
    /// Only the fields weft reads, decoded straight from the API server's JSON (unknown
    /// fields, managedFields and statuses are skipped by the decoder, never allocated).
    type Wire: DeserializeOwned + Clone + fmt::Debug + Send + Sync + 'static;

    /// The object's identity, read from its wire type (whatever metadata type it uses).
    fn meta(wire: &Self::Wire) -> MetaView<'_>;

    /// Validates and compacts one object. Every problem is an [`Issue`] naming the object
    /// and the field; an object with issues is left out of the store.
    fn from_wire(wire: &Self::Wire) -> Result<Self, Vec<Issue>>;
}

/// An object's identity in its store: namespace (interned) and name.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub namespace: Option<Arc<str>>,
    pub name: Arc<str>,
}

impl ObjectKey {
    pub fn cluster(name: &str) -> ObjectKey {
        ObjectKey {
            namespace: None,
            name: Arc::from(name),
        }
    }

    pub fn namespaced(namespace: &str, name: &str) -> ObjectKey {
        ObjectKey {
            namespace: Some(crate::intern::str(namespace)),
            name: Arc::from(name),
        }
    }

    /// The key of an object with this metadata (`None` without a name). A namespaced
    /// object without a namespace is in `default`, as kubectl would have put it (YAML files
    /// of the directory source often leave it out).
    pub fn of(meta: MetaView<'_>, namespaced: bool) -> Option<ObjectKey> {
        if meta.name.is_empty() {
            return None;
        }
        Some(if namespaced {
            let ns = meta
                .namespace
                .filter(|n| !n.is_empty())
                .unwrap_or("default");
            ObjectKey::namespaced(ns, meta.name)
        } else {
            ObjectKey::cluster(meta.name)
        })
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
