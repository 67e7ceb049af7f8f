//! Who holds what: the address records are the truth, owner indexes are a verified shortcut.

use std::fs;
use std::net::IpAddr;

use super::layout::{address_from_file_name, Layout};
use super::records::{self, AddressState, IndexState};
use super::{io_err, lock, Reservation};
use crate::error::StoreError;
use crate::owner::Owner;

/// The addresses `owner` holds right now. Reads the owner's index and keeps only the
/// entries whose address record names the owner (the index may list more; never less, except
/// after a power loss). An unreadable index falls back to scanning every address record.
/// Call with the lock held.
pub(crate) fn verified(layout: &Layout, owner: &Owner) -> Result<Vec<IpAddr>, StoreError> {
    let listed = match listed(layout, owner)? {
        Some(listed) => listed,
        None => return Ok(Vec::new()),
    };
    let mut held = Vec::new();
    for a in listed {
        if is_held_by(layout, a, owner)? && !held.contains(&a) {
            held.push(a);
        }
    }
    held.sort();
    Ok(held)
}

/// The addresses the owner's index names, or a scan's result when the index cannot be
/// read; `None` when there is no index.
pub(crate) fn listed(layout: &Layout, owner: &Owner) -> Result<Option<Vec<IpAddr>>, StoreError> {
    let path = layout.owner_index(owner);
    match records::read_index_file(&path).map_err(io_err("read", path.clone()))? {
        IndexState::Absent => Ok(None),
        IndexState::Listed(addresses) => Ok(Some(addresses)),
        IndexState::Unreadable => Ok(Some(
            scan(layout)?
                .into_iter()
                .filter(|r| r.owner.as_ref() == Some(owner))
                .map(|r| r.address)
                .collect(),
        )),
    }
}

pub(crate) fn is_held_by(layout: &Layout, a: IpAddr, owner: &Owner) -> Result<bool, StoreError> {
    let state = records::read_address(layout, a).map_err(io_err("read", layout.address(a)))?;
    Ok(matches!(state, AddressState::Held(o) if &o == owner))
}

/// Every address record, read. Call with the lock held.
pub(crate) fn scan(layout: &Layout) -> Result<Vec<Reservation>, StoreError> {
    let dir = layout.addresses_dir();
    let mut out = Vec::new();
    for entry in fs::read_dir(&dir).map_err(io_err("list", dir.clone()))? {
        let entry = entry.map_err(io_err("list", dir.clone()))?;
        let Some(address) = address_from_file_name(&entry.file_name()) else {
            continue;
        };
        let path = entry.path();
        match records::read_address_file(&path).map_err(io_err("read", path))? {
            AddressState::Free => {}
            AddressState::Held(owner) => out.push(Reservation {
                address,
                owner: Some(owner),
            }),
            AddressState::Unreadable => out.push(Reservation {
                address,
                owner: None,
            }),
        }
    }
    out.sort_by_key(|r| r.address);
    Ok(out)
}

pub(crate) fn reservations(layout: &Layout) -> Result<Vec<Reservation>, StoreError> {
    let _lock = lock(layout, false)?;
    scan(layout)
}

pub(crate) fn reserved_by(layout: &Layout, owner: &Owner) -> Result<Vec<IpAddr>, StoreError> {
    owner.validate()?;
    let _lock = lock(layout, false)?;
    verified(layout, owner)
}

/// Every reserved address, by name only (an unreadable record is still a reservation).
/// Call with the lock held.
pub(crate) fn reserved_addresses(layout: &Layout) -> Result<Vec<IpAddr>, StoreError> {
    let dir = layout.addresses_dir();
    let mut out = Vec::new();
    for entry in fs::read_dir(&dir).map_err(io_err("list", dir.clone()))? {
        let entry = entry.map_err(io_err("list", dir.clone()))?;
        out.extend(address_from_file_name(&entry.file_name()));
    }
    Ok(out)
}
