//! weft-apiserver: an in-memory Kubernetes API server that kube-rs and kubectl cannot tell
//! from the real one for what weft uses (docs/apiserver.md).
//!
//! ```no_run
//! # async fn demo() -> Result<(), weft_apiserver::Error> {
//! use weft_apiserver::{ApiServer, Config, Listen};
//! let server = ApiServer::new(Config::default())
//!     .start(vec![Listen::Addr("127.0.0.1:0".parse().unwrap())], None)
//!     .await?;
//! server.handle().create(serde_json::json!({
//!     "apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}
//! }))?;
//! println!("kubectl --server {}", server.url());
//! server.shutdown().await;
//! # Ok(()) }
//! ```

// An ApiError (a whole Status: message, details, causes) is returned at most once per
// request; boxing it would only add noise to every handler.
#![allow(clippy::result_large_err)]

pub mod admission;
pub mod allocators;
pub mod auth;
pub mod config;
mod control;
pub mod discovery;
pub mod error;
pub mod faults;
mod handle;
mod http;
pub mod meta;
pub mod openapi;
pub mod patch;
pub mod recorder;
pub mod resources;
pub mod reviews;
pub mod selectors;
mod server;
mod shared;
pub mod store;
pub mod table;

pub use admission::{Admission, AdmitCtx};
pub use auth::Authorizer;
pub use config::{Config, User};
pub use error::{ApiError, Error, Reason};
pub use faults::{Action, FaultRule, Match};
pub use handle::Handle;
pub use recorder::{Attributes, Grant, RequestRecord};
pub use resources::ResourceDef;
pub use reviews::Reviewer;
pub use server::{run, ApiServer, Listen, RunningServer};
