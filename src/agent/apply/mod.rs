//! Reconcilers: each compares one part of the node with the plan and changes only what
//! differs, so a restarted agent that finds everything in place changes nothing.

pub mod cniconf;
pub mod device;
pub mod lpm;
pub mod nat;
pub mod peers;

use std::fmt;

/// How many objects of each kind a reconcile pass created, updated or removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Changes {
    pub added: u32,
    pub updated: u32,
    pub removed: u32,
}

impl Changes {
    pub fn total(&self) -> u32 {
        self.added + self.updated + self.removed
    }

    pub fn merge(&mut self, other: Changes) {
        self.added += other.added;
        self.updated += other.updated;
        self.removed += other.removed;
    }
}

impl fmt::Display for Changes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "+{} ~{} -{}", self.added, self.updated, self.removed)
    }
}
