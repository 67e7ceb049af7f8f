//! The state model the weft agent reconciles the datapath from.
//!
//! Several sources fill one model: the standalone source reads a directory of
//! Kubernetes-format YAML (labs, tests, hosts without Kubernetes); Kubernetes watchers will
//! fill the same types in a cluster. Reconcilers see only [`Model`], never the source.
//!
//! Building a model validates every object. An invalid object is left out and reported as
//! an [`Issue`] naming the object and the field, so one bad object never stops the agent
//! and never reaches the datapath half-understood.

mod issue;
mod model;
mod node;
pub mod standalone;

pub use issue::Issue;
pub use model::{ClusterConfig, ConfigError, Model};
pub use node::{NodeSpec, VTEP_MAC_PREFIX};
