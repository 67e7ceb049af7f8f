//! Installing and removing the fence: one nftables transaction each, over a socket bound
//! to the pod's namespace. No `nft` binary is involved, so nothing depends on what the
//! host (or a minimal node image) has installed.
//!
//! A fresh namespace gets a create-only transaction. Replacing goes through
//! create-delete-add, and any transaction that deletes something makes the kernel wait
//! for an RCU grace period when the socket is closed (the netlink release flushes
//! nf_tables' destroy work). That is 10-20 ms on a busy node, for every ADD, so it is only
//! paid when a table really has to be replaced. A table that appears between the check and
//! the transaction cannot slip through either: ADD then reads the result back and compares
//! it exactly, and a merged or duplicated table fails that comparison.

use weft_nft::{Batch, NftSocket, TableSpec};

use crate::error::GuardError;
use crate::fault::Step;
use crate::ruleset::{FAMILY, TABLE};

/// Installs `spec` in one transaction, replacing an existing fence: the kernel applies all
/// of it or none.
pub fn install(sock: &NftSocket, spec: &TableSpec, fault: Option<Step>) -> Result<(), GuardError> {
    let exists = sock
        .list_tables()
        .map_err(|e| GuardError::nft("list tables", e))?
        .iter()
        .any(|t| t.family == spec.table.family && t.name == spec.table.name);
    let mut batch = if exists {
        weft_nft::replace_batch(spec)
    } else {
        weft_nft::create_batch(spec)
    };
    if fault == Some(Step::InBatch) {
        // Deleting a table that does not exist: the kernel refuses the whole transaction.
        batch.delete_table(FAMILY, "weft_guard_injected_fault");
    }
    batch
        .send(sock)
        .map_err(|e| GuardError::nft(format!("install table {FAMILY} {TABLE}"), e))
}

/// Removes the fence if it is there (idempotent). An absent table costs one listing and
/// no transaction (so no grace-period wait either).
pub fn remove(sock: &NftSocket) -> Result<(), GuardError> {
    let what = format!("delete table {FAMILY} {TABLE}");
    let exists = sock
        .list_tables()
        .map_err(|e| GuardError::nft("list tables", e))?
        .iter()
        .any(|t| t.family == FAMILY && t.name == TABLE);
    if !exists {
        return Ok(());
    }
    let mut batch = Batch::new();
    batch.delete_table(FAMILY, TABLE);
    match batch.send(sock) {
        Ok(()) => Ok(()),
        // Removed by someone else since the listing: the goal is reached.
        Err(e) if e.errno() == Some(libc::ENOENT) => Ok(()),
        Err(e) => Err(GuardError::nft(what, e)),
    }
}

/// The fence as installed, normalised, or `None` when there is no table.
pub fn read(sock: &NftSocket) -> Result<Option<TableSpec>, GuardError> {
    sock.read_table(FAMILY, TABLE)
        .map_err(|e| GuardError::nft(format!("read table {FAMILY} {TABLE}"), e))
}
