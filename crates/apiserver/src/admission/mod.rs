//! Admission and defaulting hooks, one or more per resource: the local piece of code where
//! a kind's server-side behaviour lives (namespace labels, pod defaults, Service IP and
//! port allocation). A hook may refuse a write with an [`ApiError`]; whatever it reserved
//! is released through [`Admission::settle`] once the store knows whether the write
//! committed.

mod namespace;
mod pod;
mod service;

pub use namespace::NamespaceDefaults;
pub use pod::PodDefaults;
pub use service::ServiceAllocation;

use serde_json::Value;

use crate::error::ApiError;

/// Who writes, and whether the write is a dry run (`?dryRun=All`).
#[derive(Debug, Clone, Default)]
pub struct AdmitCtx {
    pub user: String,
    pub dry_run: bool,
}

pub trait Admission: Send + Sync {
    /// Defaults and checks a new object; metadata (name, uid, timestamps) is already set.
    fn create(&self, _ctx: &AdmitCtx, _obj: &mut Value) -> Result<(), ApiError> {
        Ok(())
    }

    /// Defaults and checks a replacement of `old` (main resource or status).
    fn update(&self, _ctx: &AdmitCtx, _old: &Value, _new: &mut Value) -> Result<(), ApiError> {
        Ok(())
    }

    /// The write from `old` to `new` (`None`: absent) committed (`true`) or did not. A hook
    /// holding allocations releases those of the state that did not survive.
    fn settle(&self, _old: Option<&Value>, _new: Option<&Value>, _committed: bool) {}
}
