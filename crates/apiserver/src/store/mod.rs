//! The object store: every resource's objects in key order, one global resourceVersion
//! counter, and a bounded event history per resource. All access is under one lock held
//! by the server (never across an await), so a write and its event are one atomic step.

mod history;
mod list;
mod object;
mod typed;
mod validate;
mod write;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use history::{Event, EventKind};
pub use list::{ListOptions, ListPage};
pub use object::{Key, ObjRef, StoredObject};
pub use write::{DeleteOptions, DeleteOutcome, WriteCtx};

use crate::admission::Admission;
use crate::error::ApiError;
use crate::resources::{ResourceDef, Resources};
use history::History;

#[derive(Default)]
struct ResourceState {
    objects: BTreeMap<Key, ObjRef>,
    history: History,
}

pub struct Store {
    resources: Resources,
    states: Vec<ResourceState>,
    hooks: Vec<Vec<Arc<dyn Admission>>>,
    rv: u64,
    history_limit: usize,
}

impl Store {
    pub fn new(resources: Resources, history_limit: usize) -> Self {
        let n = resources.all().len();
        Store {
            states: (0..n).map(|_| ResourceState::default()).collect(),
            hooks: (0..n).map(|_| Vec::new()).collect(),
            resources,
            rv: 0,
            history_limit,
        }
    }

    pub fn resources(&self) -> &Resources {
        &self.resources
    }

    /// Adds an admission/defaulting hook for one resource (run in registration order).
    pub fn add_hook(&mut self, group: &str, plural: &str, hook: Arc<dyn Admission>) {
        if let Some(i) = self
            .resources
            .all()
            .iter()
            .position(|d| d.group == group && d.plural == plural)
        {
            self.hooks[i].push(hook);
        }
    }

    fn idx(&self, def: &ResourceDef) -> usize {
        self.resources
            .all()
            .iter()
            .position(|d| d.group == def.group && d.plural == def.plural)
            .unwrap_or(usize::MAX)
    }

    fn state(&self, def: &ResourceDef) -> Result<&ResourceState, ApiError> {
        self.states
            .get(self.idx(def))
            .ok_or_else(|| ApiError::internal(format!("resource {} is not stored", def.plural)))
    }

    pub fn current_rv(&self) -> u64 {
        self.rv
    }

    pub fn get(&self, def: &ResourceDef, ns: &str, name: &str) -> Result<ObjRef, ApiError> {
        self.state(def)?
            .objects
            .get(&(ns.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))
    }

    pub fn exists(&self, def: &ResourceDef, ns: &str, name: &str) -> bool {
        self.get(def, ns, name).is_ok()
    }

    /// Number of objects of a resource (all namespaces).
    pub fn count(&self, def: &ResourceDef) -> usize {
        self.state(def).map(|s| s.objects.len()).unwrap_or(0)
    }

    /// Events after `after`, at most `max`; `Err(oldest available)` when compacted away.
    pub fn events_since(
        &self,
        def: &ResourceDef,
        after: u64,
        max: usize,
    ) -> Result<Vec<Event>, ApiError> {
        let state = self.state(def)?;
        state.history.since(after, max).ok_or_else(|| {
            ApiError::expired(format!(
                "too old resource version: {after} ({})",
                state.history.oldest_available()
            ))
            .with_code(410)
        })
    }

    /// The current objects of a resource, in key order, optionally in one namespace.
    pub fn snapshot(&self, def: &ResourceDef, ns: Option<&str>) -> Vec<ObjRef> {
        let Ok(state) = self.state(def) else {
            return Vec::new();
        };
        match ns {
            Some(ns) => state
                .objects
                .range((ns.to_string(), String::new())..)
                .take_while(|(k, _)| k.0 == ns)
                .map(|(_, o)| o.clone())
                .collect(),
            None => state.objects.values().cloned().collect(),
        }
    }

    /// Expires every version up to now for `def` (or every resource): watches and paged
    /// lists from older versions get 410 Gone.
    pub fn expire(&mut self, def: Option<&ResourceDef>) {
        // Every version a client holds becomes older than the compaction point.
        let rv = self.next_rv();
        match def.map(|d| self.idx(d)) {
            Some(i) => {
                if let Some(s) = self.states.get_mut(i) {
                    s.history.compact(rv);
                }
            }
            None => self.states.iter_mut().for_each(|s| s.history.compact(rv)),
        }
    }

    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn record(&mut self, i: usize, event: Event) {
        let limit = self.history_limit;
        let state = &mut self.states[i];
        match event.kind {
            EventKind::Deleted => {
                state.objects.remove(&event.object.key());
            }
            _ => {
                state
                    .objects
                    .insert(event.object.key(), event.object.clone());
            }
        }
        state.history.push(event, limit);
    }
}
