//! The state model the weft agent reconciles the datapath from.
//!
//! Sources fill one store per kind ([`Stores`], [`Store`]) with compact values: the
//! Kubernetes watchers in a cluster, a directory of Kubernetes-format YAML on hosts without
//! Kubernetes ([`standalone`]). Both decode objects with the same code ([`decode`]) into the
//! kind's slim wire type and convert it with [`Watched::from_wire`]. Reconcilers read the
//! stores and never know which source filled them; each store tells a reconciler which
//! keys changed since it last ran ([`Changed`]).
//!
//! Every object is validated on its own. An invalid object is left out of its store and
//! reported as an [`Issue`] naming the object and the field, so one bad object never stops
//! the agent and never reaches the datapath half-understood. [`Model`] then checks the
//! nodes against each other and the cluster configuration.
//!
//! Node, Namespace and Pod are defined here; other crates define their kinds the same way
//! (implement [`Watched`] on the compact type) and the agent registers them.

pub mod decode;
pub mod intern;
mod issue;
mod kind;
mod meta;
mod model;
mod namespace;
mod node;
mod pod;
pub mod standalone;
mod store;
mod stores;

pub use intern::Labels;
pub use issue::Issue;
pub use kind::{KindInfo, ObjectKey, Watched};
pub use meta::{null_default, Meta, MetaView};
pub use model::{ClusterConfig, ConfigError, Model};
pub use namespace::{Namespace, NamespaceWire};
pub use node::{
    NodeSpec, NodeWire, ReadinessMarks, AGENT_NOT_READY_EFFECT, AGENT_NOT_READY_TAINT,
    NETWORK_UNAVAILABLE, NETWORK_UP_REASON, VTEP_MAC_PREFIX,
};
pub use pod::{NamedPort, Pod, PodWire, Protocol, Uid};
pub use store::{Applied, Changed, Generation, Store, Update};
pub use stores::{AnyStore, KindId, NotRegistered, Stores};
