//! weft: a Kubernetes network plane with an eBPF datapath.
//!
//! The binary's layers live here so integration tests and benchmarks can use them:
//! - [`plugin`]: the CNI entry point, dispatching on the netconf `type` to the `weft` plugin
//!   ([`cni`]) or the chained egress guard (`weft-guard`, crate `weft_guard`);
//! - [`cli`]: the subcommands;
//! - [`chain`]: runs a conflist the way a container runtime does (lab, benchmarks, tests).

pub mod agent;
pub mod bench;
pub mod chain;
pub mod cli;
pub mod cni;
pub mod lab;
pub mod netns_exec;
pub mod plugin;
pub mod status;
