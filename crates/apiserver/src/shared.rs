//! The state every connection shares: configuration, the store, fault rules, the request
//! record, and the signals watches and connections follow (store changes, dropped
//! watches, up/down).

use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::watch;

use crate::auth::Authorizer;
use crate::config::Config;
use crate::faults::Faults;
use crate::recorder::Recorder;
use crate::resources::ResourceDef;
use crate::reviews::Reviewer;
use crate::store::Store;

/// A "drop watches" order: every watch of the resource (or of all) ends, cleanly or by
/// resetting its connection.
#[derive(Debug, Clone, Default)]
pub struct WatchDrop {
    pub epoch: u64,
    /// `(group, plural)`; `None` for every resource.
    pub resource: Option<(String, String)>,
    pub abort: bool,
}

impl WatchDrop {
    pub fn applies(&self, def: &ResourceDef) -> bool {
        self.resource
            .as_ref()
            .is_none_or(|(g, p)| *g == def.group && *p == def.plural)
    }
}

pub struct Shared {
    pub config: Config,
    pub store: Mutex<Store>,
    pub changed: watch::Sender<u64>,
    pub faults: Mutex<Faults>,
    pub recorder: Mutex<Recorder>,
    pub drops: watch::Sender<WatchDrop>,
    pub up: watch::Sender<bool>,
    pub authorizer: Arc<dyn Authorizer>,
    pub reviewer: Arc<dyn Reviewer>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a lock leaves consistent data here (every write is one step).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    pub fn store(&self) -> MutexGuard<'_, Store> {
        lock(&self.store)
    }

    pub fn faults(&self) -> MutexGuard<'_, Faults> {
        lock(&self.faults)
    }

    pub fn recorder(&self) -> MutexGuard<'_, Recorder> {
        lock(&self.recorder)
    }

    /// Wakes the watches after a write.
    pub fn notify(&self, rv: u64) {
        self.changed.send_replace(rv);
    }
}
