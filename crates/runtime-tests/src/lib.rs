//! Real container runtimes calling a CNI plugin exactly as a kubelet's runtime would:
//! containerd 1.6 through its CRI plugin (driven over gRPC, like the kubelet) and podman
//! 4.3 with its CNI backend, both from Debian. Test-only.
//!
//! Each runtime instance is private: its own root, state, socket, storage and config
//! dirs under a `weft…` scratch directory, never the system's. Started with
//! `start_in_netns`/`new_in_netns`, a runtime runs inside a test network namespace that
//! plays the node: the plugins it execs create their host-side interfaces there, so
//! nothing touches the root namespace and tests run in parallel.
//!
//! Drop order matters and follows declaration order in reverse, so declare in this
//! order: node `Netns`, then `CniDirs`, then the runtime. The runtime must go first: it
//! removes its pods (CNI DEL) using the conf and bin dirs, inside the node namespace.
//!
//! Every test starts its own containerd or podman rather than sharing one per test
//! binary: the CRI plugin serves exactly one network (the first conflist of its conf
//! dir), so tests with their own networks cannot share an instance, and a private
//! instance costs only 0.3-1 s here while keeping one test's failure out of the others.
//!
//! The conflists declare cniVersion 1.0.0, not 1.1.0: both runtimes embed libcni 1.1,
//! which rejects 1.1.0 results (see [`cni::RUNTIME_CNI_VERSION`]).
//!
//! Images are built locally (busybox-static, umoci, gcc -static), cached in
//! `<workspace>/target/weft-images`; see [`images`].

pub mod cni;
mod command;
pub mod containerd;
pub mod cri;
mod error;
pub mod fs;
pub mod images;
pub mod podman;
pub mod procs;
pub mod recorder;
pub mod wait;
pub mod workload;

pub use cni::{
    bridge_conflist, reservations_in, weft_conflist, weft_plugin_bin, CniDirs, TestSubnets,
};
pub use command::Output;
pub use containerd::Containerd;
pub use cri::{CriClient, ExecResult, PodSpec};
pub use error::{HarnessError, Result};
pub use images::{Images, BUSYBOX_IMAGE, INDEX_HTML, PAUSE_IMAGE};
pub use podman::Podman;
pub use recorder::{RecordedCall, Recorder};

/// The CRI protobuf types, for callers that need a full `PodSandboxConfig`.
pub use k8s_cri::v1 as cri_api;
