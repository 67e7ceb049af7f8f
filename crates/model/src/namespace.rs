//! Namespaces: policy selects them by label.

use serde::Deserialize;

use crate::intern::Labels;
use crate::issue::Issue;
use crate::kind::{KindInfo, Watched};
use crate::meta::{null_default, Meta, MetaView};

#[derive(Debug, Clone, Default, Deserialize)]
pub struct NamespaceWire {
    #[serde(default, deserialize_with = "null_default")]
    pub metadata: Meta,
}

/// A namespace as weft keeps it (its name is the store key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    pub labels: Labels,
}

impl Watched for Namespace {
    const KIND: KindInfo = KindInfo {
        group: "",
        version: "v1",
        kind: "Namespace",
        plural: "namespaces",
        namespaced: false,
    };
    type Wire = NamespaceWire;

    fn meta(wire: &NamespaceWire) -> MetaView<'_> {
        wire.metadata.view()
    }

    fn from_wire(wire: &NamespaceWire) -> Result<Namespace, Vec<Issue>> {
        Ok(Namespace {
            labels: Labels::new(&wire.metadata.labels),
        })
    }
}
