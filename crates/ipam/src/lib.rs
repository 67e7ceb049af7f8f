//! Node-local IP address management for the weft CNI plugin.
//!
//! The plugin is a short-lived process: many run at once, and any may be SIGKILLed at any
//! instruction (runtime timeouts, OOM). There is no daemon and no API call on the ADD
//! path: a directory on the node's disk is the whole truth. This crate parses the `ipam`
//! configuration ([`IpamConfig`], in the shape of the reference `host-local` plugin) and
//! keeps reservations in a [`Store`].
//!
//! # On-disk format (version `weft-ipam 1`)
//!
//! Everything for one network lives under `<dataDir>/<network name>/`:
//!
//! | path | what it is |
//! |---|---|
//! | `lock` | empty file; every operation holds an `flock` on it (exclusive to write, shared to read) |
//! | `format` | `weft-ipam 1`, written last when the directory is created; a directory without it that holds other files is refused (it may be `host-local`'s) |
//! | `addresses/<address>` | one **record** per reserved address, named by the address's canonical text (`10.244.1.7`, `fd00:10:244:1::7`), holding `<containerId>@<ifname>` |
//! | `owners/<containerId>@<ifname>` | the owner's index: a record holding the comma-separated addresses the owner may hold |
//! | `cursors/ipv4`, `cursors/ipv6` | a small regular file with the last address handed out in that family (where the round-robin search resumes) |
//! | `tmp/` | scratch names; anything here belongs to a process that died mid-operation |
//!
//! A **record** is a symbolic link whose target text is the content (it points at nothing
//! and is never followed; `ls -l addresses/` reads as `10.244.1.7 -> <id>@eth0`). The one
//! system call `symlink()` creates the name together with its whole content and fails if
//! the name exists, so a record is published atomically, "only if absent", without a
//! scratch file: that makes it the cheapest correct primitive here, since creating inodes
//! dominates an allocation's cost. A valid container id never contains `@`, so
//! `<containerId>@<ifname>` splits unambiguously.
//!
//! The **address records are the truth**: an address is taken exactly when its record
//! exists, so two owners can never hold one address (one name, one record). The owner index
//! is a shortcut that makes release and idempotent allocate cost a few `readlink`s instead
//! of a scan. It may list *more* than the owner holds, never less; every reader checks
//! each entry against the address record before trusting it.
//!
//! # Why a kill at any point is safe
//!
//! Four invariants hold at every instant, for any process that takes the lock:
//!
//! 1. **No partial record.** Records appear whole (`symlink()`), are replaced whole (a
//!    record made under a scratch name in `tmp/`, then `rename()`d over the old one), or
//!    vanish whole (`unlink()`). The `format` file is written under a scratch name and
//!    hard-linked into place. The cursor is the only file written in place, and it is only
//!    a hint: a torn or stale cursor costs a few extra `stat`s, never a wrong answer.
//! 2. **One owner per address.** An address is only chosen when its record is absent, under
//!    the exclusive lock, and created with `symlink()`, which never replaces.
//! 3. **The index covers the truth.** Every address record naming owner O is listed in O's
//!    index: allocate writes the index (listing the addresses it is about to reserve)
//!    *before* creating their records; release removes the address records *before* the
//!    index; rollback keeps listed whatever it fails to remove; GC only ever grows a valid
//!    owner's index.
//! 4. **Scratch names are transient.** They are only made under the exclusive lock, so
//!    whoever takes it finds only leftovers of dead processes, and sweeps `tmp/` first.
//!
//! `flock` is released by the kernel when its holder dies, so a killed process never
//! blocks the others. The test suite kills a child process at every one of these steps
//! and checks the store after each; what a kill leaves behind:
//!
//! **allocate** (lock, sweep, read index and verify it, decide every set, then write)
//! - before the first write: nothing changed (an exhausted set is detected here, so an
//!   allocation that cannot complete reserves nothing);
//! - after a cursor write: a moved cursor; it is only where the next search starts;
//! - after the index is created (or, for an owner completing a partial holding, after the
//!   scratch index is made, or renamed into place): a leftover scratch name (swept), or an
//!   index naming addresses that have no record yet. Readers verify entries, so those are
//!   invisible; a retried allocate decides afresh; release and GC delete the index;
//! - after an address record is created: the address is reserved and already listed in the
//!   index, so a retried allocate returns it (idempotent), release removes it, and GC
//!   removes it unless its owner is valid.
//!
//! **release** (lock, sweep, read index, remove each address record the owner holds, remove
//! the index): any prefix of the removals; the index still lists what is left, so the next
//! release or GC finishes the job.
//!
//! **GC** (`release_all_except`) lists `addresses/` (the truth) rather than trusting
//! indexes, removes every record whose owner is not valid (and every unreadable one), then
//! deletes the indexes of owners that are not valid and adds missing entries to valid
//! owners'. Killed half-way, a re-run finishes. So wherever a process was killed, GC with
//! the runtime's valid attachments brings the store back to exactly those attachments'
//! reservations.
//!
//! # fsync policy: none
//!
//! The threat model is a killed process, not a lost machine. After SIGKILL every completed
//! system call is visible to the next process through the page cache, so the ordering
//! above holds without `fsync`, and an ADD costs microseconds instead of disk flushes.
//! A power loss or kernel crash can leave records missing or damaged and undo the write
//! ordering — but every pod on the node died with it, and the runtime recreates sandboxes
//! and calls CNI GC with the attachments that are valid. Records that do not parse count
//! as taken (never handed out twice) and are reported by [`Store::reservations`] with no
//! owner; GC releases them and repairs indexes; an unreadable index falls back to a scan.
//!
//! # Cost
//!
//! An allocate reads the owner's index (usually absent) and the cursors, `lstat`s
//! candidates starting after the cursor (usually the first is free), overwrites the
//! cursors in place, and creates the index and one address record per set: no scan of
//! existing reservations, two or three new inodes. Release reads the index and removes
//! records. Only GC and [`Store::reservations`] list the directory; [`Store::check_ready`]
//! lists it once and counts, however large the ranges are. `examples/alloc_bench.rs`
//! measures it against the cost of publishing one file.

mod addr;
pub mod config;
mod error;
mod fault;
mod owner;
mod range;
mod store;

pub use addr::Family;
pub use config::{validate_range_sets, IpamConfig, Range, RangeSet};
pub use error::{ConfigError, StoreError};
pub use owner::Owner;
pub use store::{Allocation, GcReport, Reservation, Store};

/// Where reservations live when the configuration names no `dataDir`.
pub const DEFAULT_DATA_DIR: &str = "/var/lib/weft/ipam";

#[cfg(test)]
mod tests;
