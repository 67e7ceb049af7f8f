//! The bounded watch history of one resource: a ring of recent events. Anything older
//! than the ring is "compacted" (410 Gone for a watch or a paged list that needs it), the
//! way etcd compaction and the watch cache's window behave on the real server.

use std::collections::{BTreeMap, VecDeque};

use super::object::{Key, ObjRef};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Added,
    Modified,
    Deleted,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Added => "ADDED",
            EventKind::Modified => "MODIFIED",
            EventKind::Deleted => "DELETED",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Event {
    pub rv: u64,
    pub kind: EventKind,
    /// The new state; for DELETED the last state, stamped with the deletion's version.
    pub object: ObjRef,
    /// The state before the event (`None` for ADDED).
    pub prev: Option<ObjRef>,
}

#[derive(Debug, Default)]
pub struct History {
    events: VecDeque<Event>,
    /// Every event with `rv <= compacted` may be gone.
    compacted: u64,
}

impl History {
    pub fn push(&mut self, event: Event, limit: usize) {
        self.events.push_back(event);
        while self.events.len() > limit.max(1) {
            if let Some(old) = self.events.pop_front() {
                self.compacted = old.rv;
            }
        }
    }

    pub fn compacted(&self) -> u64 {
        self.compacted
    }

    /// Drops everything up to `rv` (the "expire versions" fault, or a compaction).
    pub fn compact(&mut self, rv: u64) {
        while self.events.front().is_some_and(|e| e.rv <= rv) {
            self.events.pop_front();
        }
        self.compacted = self.compacted.max(rv);
    }

    /// The oldest version a watch can still start from.
    pub fn oldest_available(&self) -> u64 {
        self.compacted + 1
    }

    /// Events with `rv > after`, at most `max`; `None` when some were compacted away.
    pub fn since(&self, after: u64, max: usize) -> Option<Vec<Event>> {
        if after < self.compacted {
            return None;
        }
        let start = self.events.partition_point(|e| e.rv <= after);
        Some(self.events.iter().skip(start).take(max).cloned().collect())
    }

    /// What must be undone to see the state at `at`: for each key changed later, its
    /// state at `at` (`None`: it did not exist). `None` when `at` was compacted away.
    pub fn overrides_at(&self, at: u64) -> Option<BTreeMap<Key, Option<ObjRef>>> {
        if at < self.compacted {
            return None;
        }
        let mut out = BTreeMap::new();
        let start = self.events.partition_point(|e| e.rv <= at);
        for e in self.events.iter().skip(start) {
            out.entry(e.object.key()).or_insert_with(|| e.prev.clone());
        }
        Some(out)
    }
}
