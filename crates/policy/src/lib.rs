//! weft-policy: Kubernetes NetworkPolicy for weft, as a pure engine (no I/O, no BPF).
//!
//! - [`wire`] reads `networking.k8s.io/v1` NetworkPolicy; [`NetworkPolicy::from_wire`]
//!   validates it into the compact type, naming every refused field.
//! - [`Cluster`] borrows pods, namespaces and nodes from the agent's stores ([`view`]).
//!
//! `docs/policy.md` describes the semantics, the identity model, the tables, the lookup
//! order and how ordered tiers fit.
//!

mod cluster;
mod names;
mod policy;
pub mod selector;
pub mod view;
pub mod wire;

pub use cluster::Cluster;
pub use policy::{
    Direction, IpBlock, NamespaceScope, NetworkPolicy, Peer, PortMatch, PortRule, Rule,
};
pub use selector::Selector;
pub use view::{
    ContainerPort, Labels, NamespaceView, NodeView, PodView, Protocol, SortedLabels,
    NAMESPACE_NAME_LABEL,
};
