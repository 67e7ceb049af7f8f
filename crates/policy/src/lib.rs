//! weft-policy: Kubernetes NetworkPolicy for weft, as a pure engine (no I/O, no BPF).
//!
//! - [`wire`] reads `networking.k8s.io/v1` NetworkPolicy; [`NetworkPolicy::from_wire`]
//!   validates it into the compact type, naming every refused field.
//! - [`Cluster`] borrows pods, namespaces and nodes from the agent's stores ([`view`]).
//! - [`reference::evaluate`] decides one connection straight from the API semantics.
//! - [`Compiler`] produces one node's tables ([`table`]), the form the datapath holds;
//!   [`simulate`] performs exactly the datapath's lookups on them, and [`conntrack`] adds
//!   the connection table around those lookups.
//! - [`explain`] words decisions and drop events; [`scenario`] carries the upstream Netpol
//!   e2e cases as data; [`bench`] times the compiler.
//!
//! `docs/policy.md` describes the semantics, the identity model, the tables, the lookup
//! order and how ordered tiers fit.
//!
//! ```
//! use std::collections::BTreeMap;
//! use std::net::IpAddr;
//! use weft_policy::{wire, Cluster, Compiler, NetworkPolicy, PodView, NodeView, Protocol};
//! use weft_policy::simulate::{path, Simulator};
//!
//! let policy: wire::NetworkPolicy = serde_yaml::from_str(
//!     "metadata: {name: deny-all, namespace: x}\nspec: {podSelector: {}}",
//! ).unwrap();
//! let policy = NetworkPolicy::from_wire(&policy).unwrap();
//! let labels = BTreeMap::from([("pod".to_string(), "a".to_string())]);
//! let (ips_a, ips_b): ([IpAddr; 1], [IpAddr; 1]) =
//!     (["10.0.0.1".parse().unwrap()], ["10.0.0.2".parse().unwrap()]);
//! let a = PodView {
//!     namespace: "x", name: "a", labels: &labels, ips: &ips_a, host_network: false,
//!     terminal: false, node: "n1", ports: &[],
//! };
//! let b = PodView { name: "b", ips: &ips_b, ..a };
//! let cluster = Cluster {
//!     pods: vec![a, b],
//!     nodes: vec![NodeView { name: "n1", addresses: &[] }],
//!     policies: vec![&policy],
//!     ..Cluster::default()
//! };
//! let tables = Compiler::new().compile(&cluster, "n1").tables;
//! let nodes = [Simulator::new(tables)];
//! let tcp = Protocol::Tcp.number();
//! assert!(!path(&nodes, ips_a[0], ips_b[0], tcp, 80).allowed());
//! let why = weft_policy::explain::explain(&cluster, ips_a[0], ips_b[0], tcp, 80);
//! assert!(why.to_string().contains("denied by default: selected by x/deny-all"));
//! ```

pub mod bench;
mod cluster;
mod compile;
pub mod conntrack;
pub mod explain;
mod ids;
mod names;
pub mod owned;
mod policy;
mod ports;
pub mod reference;
pub mod scenario;
pub mod selector;
pub mod simulate;
pub mod table;
pub mod view;
pub mod wire;

pub use cluster::Cluster;
pub use compile::{Compiled, Compiler};
pub use policy::{
    Direction, IpBlock, NamespaceScope, NetworkPolicy, Peer, PortMatch, PortRule, Rule,
};
pub use ports::{range_blocks, PortBlock, PortSel};
pub use selector::Selector;
pub use view::{
    ContainerPort, Labels, NamespaceView, NodeView, PodView, Protocol, SortedLabels,
    NAMESPACE_NAME_LABEL,
};
