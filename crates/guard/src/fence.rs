//! Installing and removing the fence: one nftables transaction each, over a socket bound
//! to the pod's namespace. No `nft` binary is involved, so nothing depends on what the
//! host (or a minimal node image) has installed.
//!
//! The fence is two tables (the inet fence and the netdev frame fence, see
//! [`crate::frames`]), always written together. A table missing from the namespace gets
//! create-only messages. Replacing goes through create-delete-add, and any transaction
//! that deletes something makes the kernel wait for an RCU grace period when the socket is
//! closed (the netlink release flushes nf_tables' destroy work). That is 10-20 ms on a
//! busy node, for every ADD, so it is only paid when a table really has to be replaced. A
//! table that appears between the check and the transaction cannot slip through either:
//! ADD then reads the result back and compares it exactly, and a merged or duplicated
//! table fails that comparison.

use weft_nft::{Batch, Family, NftSocket, Table, TableSpec};

use crate::error::GuardError;
use crate::fault::Step;
use crate::frames;
use crate::ruleset::{FenceSpec, FAMILY, TABLE};

/// The families a fence has tables in (both named [`TABLE`]).
const FAMILIES: [Family; 2] = [FAMILY, frames::FAMILY];

/// Installs `spec` in one transaction, replacing an existing fence: the kernel applies all
/// of it or none. A frame table left from an earlier fence is removed when `spec` has none.
pub fn install(sock: &NftSocket, spec: &FenceSpec, fault: Option<Step>) -> Result<(), GuardError> {
    let present = present(sock)?;
    let mut batch = Batch::new();
    for table in spec.tables() {
        let exists = present.contains(&table.table.family);
        add_table(&mut batch, table, exists);
    }
    if spec.frames.is_none() && present.contains(&frames::FAMILY) {
        batch.delete_table(frames::FAMILY, TABLE);
    }
    if fault == Some(Step::InBatch) {
        // Deleting a table that does not exist: the kernel refuses the whole transaction.
        batch.delete_table(FAMILY, "weft_guard_injected_fault");
    }
    batch
        .send(sock)
        .map_err(|e| GuardError::nft(format!("install table {FAMILY} {TABLE}"), e))
}

/// Create-only messages for a table that is not there, create-delete-add for one that is.
fn add_table(batch: &mut Batch, spec: &TableSpec, exists: bool) {
    let table = &spec.table;
    if exists {
        batch
            .add_table(&Table::new(table.family, &table.name))
            .delete_table(table.family, &table.name);
    }
    batch.add_table(table);
    for c in &spec.chains {
        batch.add_chain(table.family, &table.name, &c.chain);
    }
    for c in &spec.chains {
        for rule in &c.rules {
            batch.add_rule(table.family, &table.name, &c.chain.name, rule);
        }
    }
}

/// Removes the fence's tables that are there (idempotent). With none there it costs one
/// listing and no transaction (so no grace-period wait either).
pub fn remove(sock: &NftSocket) -> Result<(), GuardError> {
    let present = present(sock)?;
    if present.is_empty() {
        return Ok(());
    }
    let mut batch = Batch::new();
    for family in &present {
        batch.delete_table(*family, TABLE);
    }
    match batch.send(sock) {
        Ok(()) => Ok(()),
        // Removed by someone else since the listing: the goal is reached.
        Err(e) if e.errno() == Some(libc::ENOENT) => Ok(()),
        Err(e) => Err(GuardError::nft(format!("delete tables {TABLE}"), e)),
    }
}

/// The families in which a table of the fence exists.
fn present(sock: &NftSocket) -> Result<Vec<Family>, GuardError> {
    Ok(sock
        .list_tables()
        .map_err(|e| GuardError::nft("list tables", e))?
        .iter()
        .filter(|t| t.name == TABLE && FAMILIES.contains(&t.family))
        .map(|t| t.family)
        .collect())
}

/// The inet fence as installed, normalised, or `None` when there is no table.
pub fn read(sock: &NftSocket) -> Result<Option<TableSpec>, GuardError> {
    read_family(sock, FAMILY)
}

/// The frame fence as installed, normalised, or `None` when there is no table.
pub fn read_frames(sock: &NftSocket) -> Result<Option<TableSpec>, GuardError> {
    read_family(sock, frames::FAMILY)
}

fn read_family(sock: &NftSocket, family: Family) -> Result<Option<TableSpec>, GuardError> {
    sock.read_table(family, TABLE)
        .map_err(|e| GuardError::nft(format!("read table {family} {TABLE}"), e))
}
