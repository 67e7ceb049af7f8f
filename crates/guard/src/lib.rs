//! weft-guard: a chained CNI plugin that confines a sandboxed pod's egress to a proxy UID.
//!
//! Chained after any primary plugin, it passes `prevResult` through and, for pods that opt
//! in through annotations, installs an nftables fence in the pod's network namespace: only
//! the proxy UID may open new flows to anything but loopback and the allowed CIDRs, and
//! everything else is refused at once (TCP reset, EPERM on send). `docs/guard.md` is the
//! contract; this crate is organised by concern:
//!
//! - [`config`]: the plugin's netconf fields, validated;
//! - [`contract`]: the pod annotations and what they ask for;
//! - [`annotations`]: where the annotations come from (runtimeConfig or the API server);
//! - [`kube`]: a small blocking Kubernetes client (kubeconfig, one GET);
//! - [`pod_security`]: what a fenced pod's containers may hold (capabilities, UIDs);
//! - [`ruleset`]: the canonical fence for a contract;
//! - [`frames`]: the netdev egress fence that drops raw frames the inet fence never sees;
//! - [`netns`], [`fence`], [`verify`], [`probe`], [`bpf_links`]: installing the fence,
//!   reading it back and proving it works;
//! - [`state`]: what ADD recorded per attachment, for DEL and GC;
//! - [`commands`]: ADD, CHECK, DEL, GC and STATUS; [`plugin`] dispatches to them;
//! - [`lsm`]: the BPF LSM programs, probed (loaded, never attached) by `weft status`;
//! - [`selftest`]: the node-level checks `weft status` runs.

pub mod annotations;
pub mod bpf_links;
pub mod commands;
pub mod config;
pub mod contract;
pub mod describe;
pub mod error;
pub mod fault;
pub mod fence;
pub mod frames;
pub mod kube;
pub mod lsm;
pub mod netns;
pub mod plugin;
pub mod pod_security;
pub mod probe;
pub mod ruleset;
pub mod selftest;
pub mod state;
pub mod verify;

pub use config::GuardConfig;
pub use contract::{Contract, Decision, CONTRACT_VERSION};
pub use error::GuardError;
