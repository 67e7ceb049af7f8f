//! weft-cni: the CNI 1.1 protocol as types.
//!
//! Parsing and validation of what a runtime hands a plugin (environment, `CNI_ARGS`, the
//! request config with `runtimeConfig` and `prevResult`, conflists), version negotiation,
//! results convertible between 0.4.0, 1.0.0 and 1.1.0, and the error object with the spec's
//! codes. It does no I/O: callers pass bytes and an environment lookup in, and print what they
//! get back.
//!
//! A plugin's flow:
//! ```
//! use weft_cni::{Command, Env, NetConf, CniResult};
//!
//! let vars = [("CNI_COMMAND", "ADD"), ("CNI_CONTAINERID", "c1"),
//!             ("CNI_NETNS", "/run/netns/x"), ("CNI_IFNAME", "eth0")];
//! let env = Env::from_lookup(|name| {
//!     vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
//! })?;
//! let stdin = br#"{"cniVersion":"1.0.0","name":"weft","type":"weft"}"#;
//! let config = NetConf::from_slice_for(env.command, stdin)?;
//! let result = CniResult::new(config.version);
//! let stdout = result.to_json(config.version);
//! # assert_eq!(stdout, r#"{"cniVersion":"1.0.0"}"#);
//! # Ok::<(), weft_cni::CniError>(())
//! ```
//! On failure print `error.to_json(<declared cniVersion or Version::LATEST>)` on stdout and
//! exit with `error.exit_code()`.

mod addr;
pub mod args;
mod command;
mod config;
mod conflist;
mod env;
pub mod error;
pub mod gc;
mod json;
mod result;
mod runtime_config;
mod version;

pub use addr::{AddrParseError, IpRequest, MacAddr};
pub use args::CniArgs;
pub use command::Command;
pub use config::{Ipam, NetConf};
pub use conflist::NetConfList;
pub use env::{validate_container_id, validate_ifname, Attachment, Env, MAX_IFNAME_LEN};
pub use error::CniError;
pub use gc::GcAttachment;
pub use result::{CniResult, Dns, Interface, IpConfig, Route};
pub use runtime_config::{Bandwidth, PortMapping, Protocol, RuntimeConfig, POD_ANNOTATIONS_KEY};
pub use version::{
    negotiate, negotiate_request, requested_version, require_command_support, version_response,
    Version, SUPPORTED_VERSIONS,
};
