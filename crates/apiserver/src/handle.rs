//! The in-process control handle: seed and read objects without HTTP, inject faults,
//! drop watches, expire versions, take the server down and up, and read the request record.

use serde_json::Value;
use std::sync::Arc;

use crate::error::{ApiError, Reason};
use crate::faults::{ActiveFault, FaultRule};
use crate::recorder::{Grant, RequestRecord};
use crate::resources::ResourceDef;
use crate::shared::Shared;
use crate::store::{DeleteOptions, ListOptions, WriteCtx};

/// Cloneable; every method is synchronous and cheap unless it says otherwise.
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
}

const SEEDER: &str = "system:weft-control";

impl Handle {
    fn def_of(&self, api_version: &str, kind: &str) -> Result<Arc<ResourceDef>, ApiError> {
        self.shared
            .store()
            .resources()
            .by_kind(api_version, kind)
            .cloned()
            .ok_or_else(|| {
                ApiError::new(
                    Reason::NotFound,
                    format!("no kind {kind:?} in {api_version:?}"),
                )
            })
    }

    fn def_of_object(&self, obj: &Value) -> Result<Arc<ResourceDef>, ApiError> {
        let av = obj["apiVersion"].as_str().unwrap_or("");
        let kind = obj["kind"].as_str().unwrap_or("");
        self.def_of(av, kind)
    }

    fn ctx() -> WriteCtx {
        WriteCtx {
            user: SEEDER.into(),
            dry_run: false,
        }
    }

    /// Creates an object (its `apiVersion` and `kind` pick the resource) through the same
    /// path as a POST: defaults, validation, admission, events.
    ///
    /// As on the real server, a Pod's or Service's status is reset on create; use
    /// [`Handle::apply`] to seed objects with a status.
    pub fn create(&self, obj: Value) -> Result<Value, ApiError> {
        let def = self.def_of_object(&obj)?;
        let ns = obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        let ns = if def.namespaced { ns } else { String::new() };
        let mut store = self.shared.store();
        let created = store.create(&def, &ns, obj, &Self::ctx())?;
        self.shared.notify(store.current_rv());
        Ok(created.value())
    }

    /// Creates the object, or replaces the existing one, ignoring resourceVersion; a status
    /// it carries is written too (through the status subresource), so seeded pods keep
    /// their phase, IPs and conditions.
    pub fn apply(&self, mut obj: Value) -> Result<Value, ApiError> {
        let def = self.def_of_object(&obj)?;
        let ns = if def.namespaced {
            obj["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_string()
        } else {
            String::new()
        };
        let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
        let mut store = self.shared.store();
        if !store.exists(&def, &ns, &name) {
            let status = obj.get("status").cloned();
            let mut created = store.create(&def, &ns, obj.clone(), &Self::ctx())?;
            if let (Some(status), true) = (status, def.has_status()) {
                let mut v = created.value();
                v["status"] = status;
                created = store.update(&def, &ns, &name, v, true, &Self::ctx())?.0;
            }
            self.shared.notify(store.current_rv());
            return Ok(created.value());
        }
        if let Some(m) = obj["metadata"].as_object_mut() {
            m.remove("resourceVersion");
        }
        let status = obj.get("status").cloned();
        let (mut out, _) = store.update(&def, &ns, &name, obj.clone(), false, &Self::ctx())?;
        if let (Some(_), true) = (status, def.has_status()) {
            out = store.update(&def, &ns, &name, obj, true, &Self::ctx())?.0;
        }
        self.shared.notify(store.current_rv());
        Ok(out.value())
    }

    pub fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Value, ApiError> {
        let def = self.def_of(api_version, kind)?;
        let ns = if def.namespaced { namespace } else { "" };
        Ok(self.shared.store().get(&def, ns, name)?.value())
    }

    /// Every object of a kind (in one namespace, or all).
    pub fn list(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<Vec<Value>, ApiError> {
        let def = self.def_of(api_version, kind)?;
        let page = self
            .shared
            .store()
            .list(&def, namespace, &ListOptions::default())?;
        Ok(page.items.iter().map(|o| o.value()).collect())
    }

    pub fn delete(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        let def = self.def_of(api_version, kind)?;
        let ns = if def.namespaced { namespace } else { "" };
        let mut store = self.shared.store();
        store.delete(&def, ns, name, &DeleteOptions::default(), &Self::ctx())?;
        self.shared.notify(store.current_rv());
        Ok(())
    }

    /// The current (global) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.store().current_rv()
    }

    pub fn inject(&self, rule: FaultRule) -> u64 {
        self.shared.faults().add(rule)
    }

    pub fn remove_fault(&self, id: u64) -> bool {
        self.shared.faults().remove(id)
    }

    pub fn clear_faults(&self) {
        self.shared.faults().clear()
    }

    pub fn faults(&self) -> Vec<ActiveFault> {
        self.shared.faults().list()
    }

    /// Ends every watch of `resource` (`(group, plural)`, `None`: all): cleanly, or by
    /// resetting its connection mid-stream (`abort`).
    pub fn drop_watches(&self, resource: Option<(&str, &str)>, abort: bool) {
        self.shared.drops.send_modify(|d| {
            d.epoch += 1;
            d.resource = resource.map(|(g, p)| (g.to_string(), p.to_string()));
            d.abort = abort;
        });
    }

    /// Expires every resourceVersion up to now: watches and paged lists from them get 410.
    pub fn expire(&self, resource: Option<(&str, &str)>) {
        let mut store = self.shared.store();
        let def = resource.and_then(|(g, p)| {
            store
                .resources()
                .all()
                .iter()
                .find(|d| d.group == g && d.plural == p)
                .cloned()
        });
        if resource.is_some() && def.is_none() {
            return;
        }
        store.expire(def.as_deref());
    }

    /// `false`: the API listeners refuse connections (and open ones are closed); `true`:
    /// they accept again. The store is untouched either way.
    pub fn set_up(&self, up: bool) {
        self.shared.up.send_replace(up);
    }

    pub fn is_up(&self) -> bool {
        *self.shared.up.borrow()
    }

    /// Recorded requests with `seq > since` (0: all kept).
    pub fn requests(&self, since: u64) -> Vec<RequestRecord> {
        self.shared.recorder().since(since)
    }

    /// Distinct (user, verb, group, resource, subresource, namespace) with counts.
    pub fn request_summary(&self) -> Vec<(Grant, u64)> {
        self.shared.recorder().summary()
    }

    pub fn clear_requests(&self) {
        self.shared.recorder().clear()
    }
}
