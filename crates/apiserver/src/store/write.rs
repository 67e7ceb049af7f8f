//! Writes: create, update (main resource or status), patch, delete and deletecollection,
//! with the metadata the real server owns (uid, creationTimestamp, resourceVersion from the
//! global counter, generation on spec changes), optimistic concurrency (409 on a stale
//! resourceVersion), finalizers, and no event for a write that changes nothing.

use serde_json::{json, Value};
use std::sync::Arc;

use super::history::{Event, EventKind};
use super::validate::{prepare, validate_kind};
use super::{ListOptions, ObjRef, Store, StoredObject};
use crate::admission::{Admission, AdmitCtx};
use crate::error::{cause, ApiError};
use crate::meta;
use crate::patch::{apply_json_patch, apply_merge_patch, apply_strategic_merge_patch, PatchType};
use crate::resources::ResourceDef;

/// Who writes and how (`?dryRun=All`).
#[derive(Debug, Clone, Default)]
pub struct WriteCtx {
    pub user: String,
    pub dry_run: bool,
}

impl WriteCtx {
    fn admit(&self) -> AdmitCtx {
        AdmitCtx {
            user: self.user.clone(),
            dry_run: self.dry_run,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
}

#[derive(Debug, Clone)]
pub enum DeleteOutcome {
    /// Gone; the object as it was, stamped with the deletion's resourceVersion.
    Deleted(ObjRef),
    /// Finalizers remain: `deletionTimestamp` is set and the object stays.
    Finalizing(ObjRef),
}

/// Kinds the real server creates on PUT of a missing object.
fn create_on_update(def: &ResourceDef) -> bool {
    matches!(
        (def.group.as_str(), def.kind.as_str()),
        ("", "Event") | ("coordination.k8s.io", "Lease") | ("discovery.k8s.io", "EndpointSlice")
    )
}

/// The part of an object whose change bumps `metadata.generation`.
fn spec_part(def: &ResourceDef, v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
        if def.has_status() {
            m.remove("status");
        }
    }
    v
}

fn set_rv(obj: &mut Value, rv: Option<u64>) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        match rv {
            Some(rv) => {
                meta.insert("resourceVersion".into(), json!(rv.to_string()));
            }
            None => {
                meta.remove("resourceVersion");
            }
        }
    }
}

fn build(def: &ResourceDef, obj: &Value, rv: u64) -> Result<ObjRef, ApiError> {
    StoredObject::build(def, obj, rv)
        .map(Arc::new)
        .map_err(|e| ApiError::internal(format!("encoding the object: {e}")))
}

fn has_finalizers(obj: &Value) -> bool {
    obj["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty())
}

impl Store {
    fn hooks_of(&self, def: &ResourceDef) -> Vec<Arc<dyn Admission>> {
        self.hooks.get(self.idx(def)).cloned().unwrap_or_default()
    }

    fn settle(
        hooks: &[Arc<dyn Admission>],
        old: Option<&Value>,
        new: Option<&Value>,
        committed: bool,
    ) {
        for h in hooks {
            h.settle(old, new, committed);
        }
    }

    fn check_namespace(&self, def: &ResourceDef, ns: &str) -> Result<(), ApiError> {
        if !def.namespaced {
            return Ok(());
        }
        let Some(nsdef) = self.resources.find("", "v1", "namespaces").cloned() else {
            return Ok(());
        };
        if self.exists(&nsdef, "", ns) {
            Ok(())
        } else {
            Err(ApiError::not_found("", "namespaces", ns))
        }
    }

    pub fn create(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        mut body: Value,
        ctx: &WriteCtx,
    ) -> Result<ObjRef, ApiError> {
        prepare(def, &mut body, ns, None)?;
        if self.idx(def) == usize::MAX {
            return Err(ApiError::internal(format!(
                "resource {} is not stored",
                def.plural
            )));
        }
        let meta_map = meta::metadata_mut(&mut body, &def.kind)?;
        if !meta::str_field(meta_map, "resourceVersion").is_empty() {
            return Err(ApiError::internal(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let mut name = meta::str_field(meta_map, "name").to_string();
        let generate = meta::str_field(meta_map, "generateName").to_string();
        if name.is_empty() && !generate.is_empty() {
            name = (0..8)
                .map(|_| format!("{generate}{}", meta::name_suffix()))
                .find(|n| !self.exists(def, ns, n))
                .unwrap_or_else(|| format!("{generate}{}", meta::name_suffix()));
            meta_map.insert("name".into(), json!(name));
        }
        if name.is_empty() {
            return Err(ApiError::invalid(
                &def.group,
                &def.kind,
                "",
                vec![cause(
                    "FieldValueRequired",
                    "metadata.name",
                    "Required value: name or generateName is required",
                )],
            ));
        }
        if let Some(c) = meta::validate_name(&def.kind, &name) {
            return Err(ApiError::invalid(&def.group, &def.kind, &name, vec![c]));
        }
        meta_map.insert("uid".into(), json!(meta::new_uid()));
        meta_map.insert("creationTimestamp".into(), json!(meta::now()));
        for owned in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            meta_map.remove(owned);
        }
        if def.generation {
            meta_map.insert("generation".into(), json!(1));
        } else {
            meta_map.remove("generation");
        }
        let causes = validate_kind(def, &body);
        if !causes.is_empty() {
            return Err(ApiError::invalid(&def.group, &def.kind, &name, causes));
        }
        self.check_namespace(def, ns)?;
        if self.exists(def, ns, &name) {
            return Err(ApiError::already_exists(&def.group, &def.plural, &name));
        }
        let hooks = self.hooks_of(def);
        let actx = ctx.admit();
        for (i, h) in hooks.iter().enumerate() {
            if let Err(e) = h.create(&actx, &mut body) {
                Self::settle(&hooks[..i], None, Some(&body), false);
                return Err(e);
            }
        }
        if ctx.dry_run {
            Self::settle(&hooks, None, Some(&body), false);
            return build(def, &body, 0);
        }
        let committed = self.commit(def, &mut body, EventKind::Added, None);
        Self::settle(&hooks, None, Some(&body), committed.is_ok());
        committed
    }

    /// PUT of the main resource (`status == false`: status is kept) or of `/status`
    /// (only status changes). Returns the object and whether it was created.
    pub fn update(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        mut body: Value,
        status: bool,
        ctx: &WriteCtx,
    ) -> Result<(ObjRef, bool), ApiError> {
        prepare(def, &mut body, ns, Some(name))?;
        let old = match self.get(def, ns, name) {
            Ok(o) => o,
            Err(e) if create_on_update(def) && !status => {
                if let Some(m) = body.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.remove("resourceVersion");
                }
                return self
                    .create(def, ns, body, ctx)
                    .map(|o| (o, true))
                    .map_err(|_| e);
            }
            Err(e) => return Err(e),
        };
        let old_v = old.value();
        let body_rv = body["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if !body_rv.is_empty() && body_rv != old.rv.to_string() {
            return Err(ApiError::conflict(
                &def.group,
                &def.plural,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            ));
        }
        let mut new = if status {
            let mut n = old_v.clone();
            match body.get("status") {
                Some(s) => n["status"] = s.clone(),
                None => {
                    if let Some(m) = n.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
            // managedFields follow the writer even on status writes.
            if let Some(mf) = body["metadata"].get("managedFields") {
                n["metadata"]["managedFields"] = mf.clone();
            }
            n
        } else {
            let mut n = body;
            if def.has_status() {
                match old_v.get("status") {
                    Some(s) => n["status"] = s.clone(),
                    None => {
                        if let Some(m) = n.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
            n
        };
        {
            let meta_map = meta::metadata_mut(&mut new, &def.kind)?;
            for owned in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ] {
                match old_v["metadata"].get(owned) {
                    Some(v) => {
                        meta_map.insert(owned.into(), v.clone());
                    }
                    None => {
                        meta_map.remove(owned);
                    }
                }
            }
        }
        if def.generation && spec_part(def, &new) != spec_part(def, &old_v) {
            let gen = old_v["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            new["metadata"]["generation"] = json!(gen);
        }
        let causes = validate_kind(def, &new);
        if !causes.is_empty() {
            return Err(ApiError::invalid(&def.group, &def.kind, name, causes));
        }
        let hooks = self.hooks_of(def);
        let actx = ctx.admit();
        for (i, h) in hooks.iter().enumerate() {
            if let Err(e) = h.update(&actx, &old_v, &mut new) {
                Self::settle(&hooks[..i], Some(&old_v), Some(&new), false);
                return Err(e);
            }
        }
        set_rv(&mut new, Some(old.rv));
        if new == old_v || ctx.dry_run {
            Self::settle(&hooks, Some(&old_v), Some(&new), false);
            return if new == old_v {
                Ok((old, false))
            } else {
                build(def, &new, old.rv).map(|o| (o, false))
            };
        }
        let finished = new["metadata"].get("deletionTimestamp").is_some() && !has_finalizers(&new);
        let kind = if finished {
            EventKind::Deleted
        } else {
            EventKind::Modified
        };
        let obj = self.commit(def, &mut new, kind, Some(old))?;
        Self::settle(
            &hooks,
            Some(&old_v),
            if finished { None } else { Some(&new) },
            true,
        );
        Ok((obj, false))
    }

    /// Applies a patch to the current object and stores the result as an update.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        patch_type: PatchType,
        patch: &[u8],
        status: bool,
        ctx: &WriteCtx,
    ) -> Result<ObjRef, ApiError> {
        let old = self.get(def, ns, name)?;
        let mut doc = old.value();
        let parse = || {
            serde_json::from_slice::<Value>(patch)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))
        };
        match patch_type {
            PatchType::Merge => {
                let p = parse()?;
                if !p.is_object() {
                    return Err(ApiError::bad_request(
                        "error decoding patch: a merge patch must be a JSON object",
                    ));
                }
                apply_merge_patch(&mut doc, &p);
            }
            PatchType::StrategicMerge => {
                if !def.strategic_merge {
                    return Err(ApiError::unsupported_media_type(
                        "application/strategic-merge-patch+json",
                    ));
                }
                let p = parse()?;
                apply_strategic_merge_patch(&mut doc, &p, def).map_err(ApiError::bad_request)?;
            }
            PatchType::Json => {
                let p = parse()?;
                apply_json_patch(&mut doc, &p).map_err(|e| {
                    ApiError::new(
                        crate::error::Reason::Invalid,
                        format!(
                            "the server rejected our request due to an error in our request: {e}"
                        ),
                    )
                })?;
            }
            PatchType::Apply => {
                return Err(ApiError::unsupported_media_type(
                    "application/apply-patch+yaml",
                ));
            }
        }
        self.update(def, ns, name, doc, status, ctx).map(|(o, _)| o)
    }

    pub fn delete(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
        ctx: &WriteCtx,
    ) -> Result<DeleteOutcome, ApiError> {
        let old = self.get(def, ns, name)?;
        if let Some(uid) = opts.precondition_uid.as_deref().filter(|u| !u.is_empty()) {
            if uid != old.uid {
                return Err(ApiError::conflict(
                    &def.group,
                    &def.plural,
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        old.uid
                    ),
                ));
            }
        }
        if let Some(rv) = opts.precondition_rv.as_deref().filter(|r| !r.is_empty()) {
            if rv != old.rv.to_string() {
                return Err(ApiError::conflict(
                    &def.group,
                    &def.plural,
                    name,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                        old.rv
                    ),
                ));
            }
        }
        let mut v = old.value();
        if has_finalizers(&v) {
            if v["metadata"].get("deletionTimestamp").is_some() || ctx.dry_run {
                return Ok(DeleteOutcome::Finalizing(old));
            }
            v["metadata"]["deletionTimestamp"] = json!(meta::now());
            v["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            return self
                .commit(def, &mut v, EventKind::Modified, Some(old))
                .map(DeleteOutcome::Finalizing);
        }
        if ctx.dry_run {
            return Ok(DeleteOutcome::Deleted(old));
        }
        if def.group.is_empty() && def.plural == "namespaces" {
            self.delete_namespace_contents(name);
        }
        self.remove_now(def, old).map(DeleteOutcome::Deleted)
    }

    /// Removes `old` with a DELETED event carrying the deletion's resourceVersion.
    fn remove_now(&mut self, def: &ResourceDef, old: ObjRef) -> Result<ObjRef, ApiError> {
        let old_v = old.value();
        let obj = self.commit(def, &mut old_v.clone(), EventKind::Deleted, Some(old))?;
        Self::settle(&self.hooks_of(def), Some(&old_v), None, true);
        Ok(obj)
    }

    /// Stamps `v` with the next resourceVersion and records the event.
    fn commit(
        &mut self,
        def: &ResourceDef,
        v: &mut Value,
        kind: EventKind,
        prev: Option<ObjRef>,
    ) -> Result<ObjRef, ApiError> {
        let rv = self.next_rv();
        set_rv(v, Some(rv));
        let obj = build(def, v, rv)?;
        let idx = self.idx(def);
        self.record(
            idx,
            Event {
                rv,
                kind,
                object: obj.clone(),
                prev,
            },
        );
        Ok(obj)
    }

    /// The namespace controller's work, done at once: every namespaced object in `ns` goes
    /// (finalizers included: no controller here would ever remove them).
    fn delete_namespace_contents(&mut self, ns: &str) {
        let defs: Vec<_> = self
            .resources
            .all()
            .iter()
            .filter(|d| d.namespaced && d.storage == crate::resources::Storage::Stored)
            .cloned()
            .collect();
        for def in defs {
            for obj in self.snapshot(&def, Some(ns)) {
                let _ = self.remove_now(&def, obj);
            }
        }
    }

    /// DELETE on a collection: every object matching the selectors.
    pub fn delete_collection(
        &mut self,
        def: &ResourceDef,
        ns: Option<&str>,
        opts: &ListOptions,
        ctx: &WriteCtx,
    ) -> Result<Vec<ObjRef>, ApiError> {
        let page = self.list(
            def,
            ns,
            &ListOptions {
                limit: None,
                continue_token: None,
                ..opts.clone()
            },
        )?;
        let mut out = Vec::new();
        for obj in page.items {
            match self.delete(
                def,
                &obj.namespace,
                &obj.name,
                &DeleteOptions::default(),
                ctx,
            ) {
                Ok(DeleteOutcome::Deleted(o)) | Ok(DeleteOutcome::Finalizing(o)) => out.push(o),
                Err(_) => {}
            }
        }
        Ok(out)
    }
}
