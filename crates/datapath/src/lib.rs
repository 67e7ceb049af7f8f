//! weft's eBPF datapath.
//!
//! The programs are C, under `bpf/` at the workspace root, compiled by this crate's
//! build script and embedded ([`Program::object`]):
//!
//! - `from_pod` (tc ingress of each host-side pod veth): anti-spoofing, same-node
//!   delivery with `bpf_redirect_peer`, cross-node steering into the node's fixed-VNI
//!   VXLAN device (inner MACs rewritten, `bpf_check_mtu` guard), everything else to
//!   the kernel unchanged;
//! - `from_overlay` (tc ingress of the VXLAN device): source validation against the
//!   remote pod CIDRs, delivery to local pods, everything else to the kernel.
//!
//! State lives in four pinned maps declared in `bpf/include/weft_maps.h` and mirrored
//! in [`layout`]: `weft_endpoints` (pods on this node, written by the CNI plugin),
//! `weft_routes` (pod CIDRs and VTEP addresses, written by the agent), `weft_config`
//! and `weft_counters` (one counter per outcome and per drop reason). The pin layout
//! is described in [`pins`].
//!
//! Two users:
//! - the agent, through [`Datapath`] ([`Datapath::load_or_adopt`], overlay attach,
//!   routes, config, counters), built on aya;
//! - the CNI plugin, through [`pod`] (`ensure_ready`, endpoints, pod attach/detach),
//!   which only issues a few raw `bpf()` calls on pinned objects (and, for the
//!   clsact hook, `weft-netlink`'s tc requests).
//!
//! Programs are attached at tc ingress through pinned TCX links (Linux 6.6+) or, on
//! older kernels, a clsact qdisc and one cls_bpf filter per device ([`AttachMode`];
//! the `WEFT_ATTACH_MODE` environment variable forces either).

mod clsact;
pub mod conntrack;
mod error;
mod hook;
pub mod layout;
mod loader;
pub mod migrate;
mod mode;
mod model;
mod pinned;
pub mod pins;
pub mod pod;
mod programs;
pub mod services;
mod sys;
mod tables;
mod tcx;

pub use clsact::{FILTER_HANDLE, FILTER_PREF};
pub use conntrack::{
    Conntrack, CtDirection, CtRecord, CtState, GcCursor, GcReport, PurgeReport, Tuple,
};
pub use error::{Error, Result};
pub use layout::{Counter, Event, OutcomeKind};
pub use loader::{Datapath, InstalledProgram, LoadOptions, MapSizes, ProgramChange};
pub use migrate::{MapMigration, MigrationReport};
pub use mode::AttachMode;
pub use model::{Counters, EndpointInfo, Events, NodeConfig, RouteKind};
pub use pins::{PinLayout, DEFAULT_PIN_ROOT};
pub use programs::{Attach, CgroupHook, Devices, Program, ProgramSpec, TcHook, GUARD_LSM};
pub use services::{
    Backend, Frontend, FrontendChange, FrontendSpec, L4Proto, Scope, Services, WhenEmpty,
};
pub use tables::Tables;
pub use tcx::{LinkChange, SweepReport};
