//! CNI GC: release everything not held by a valid attachment, and repair owner indexes.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs;
use std::net::IpAddr;

use super::allocate::write_index;
use super::fsio;
use super::layout::{address_from_file_name, Layout};
use super::records::{self, AddressState, IndexState};
use super::{io_err, lock, sweep_scratch, GcReport};
use crate::error::StoreError;
use crate::owner::Owner;

pub(crate) fn release_all_except(layout: &Layout, valid: &[Owner]) -> Result<GcReport, StoreError> {
    let _lock = lock(layout, true)?;
    let mut report = GcReport::default();
    if let Err(e) = sweep_scratch(layout) {
        report.errors.push(e);
    }
    let valid: HashSet<&Owner> = valid.iter().collect();

    // Pass 1: the address records, which are the truth.
    let mut kept: BTreeMap<Owner, BTreeSet<IpAddr>> = BTreeMap::new();
    // Owners whose record could not be removed keep their index (invariant 3).
    let mut stuck: HashSet<String> = HashSet::new();
    let dir = layout.addresses_dir();
    for entry in fs::read_dir(&dir).map_err(io_err("list", dir.clone()))? {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                report.errors.push(StoreError::io("list", &dir, e));
                continue;
            }
        };
        let Some(address) = address_from_file_name(&entry.file_name()) else {
            continue;
        };
        let path = entry.path();
        let state = match records::read_address_file(&path) {
            Ok(state) => state,
            Err(e) => {
                report.errors.push(StoreError::io("read", &path, e));
                continue;
            }
        };
        match state {
            AddressState::Free => {}
            AddressState::Held(owner) if valid.contains(&owner) => {
                kept.entry(owner).or_default().insert(address);
            }
            AddressState::Held(owner) => match fsio::remove_if_exists(&path) {
                Ok(true) => report.released.push((owner, address)),
                Ok(false) => {}
                Err(e) => {
                    stuck.insert(owner.file_key());
                    report.errors.push(StoreError::io("remove", &path, e));
                }
            },
            AddressState::Unreadable => match fsio::remove_if_exists(&path) {
                Ok(true) => report.released_unreadable.push(address),
                Ok(false) => {}
                Err(e) => report.errors.push(StoreError::io("remove", &path, e)),
            },
        }
    }

    // Pass 2: owner indexes. Invalid owners' go; valid owners' must list (at least) what
    // they hold, which only a power loss can break. Indexes only ever grow here: an entry
    // for an address the owner does not hold is harmless, a missing one is not, and a
    // read error in pass 1 must not shrink an index.
    let valid_by_key: HashMap<String, &Owner> = valid
        .iter()
        .filter(|o| o.validate().is_ok())
        .map(|o| (o.file_key(), *o))
        .collect();
    let mut indexed: HashSet<Owner> = HashSet::new();
    let dir = layout.owners_dir();
    for entry in fs::read_dir(&dir).map_err(io_err("list", dir.clone()))? {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                report.errors.push(StoreError::io("list", &dir, e));
                continue;
            }
        };
        let path = entry.path();
        let key = entry.file_name().to_string_lossy().into_owned();
        let state = match records::read_index_file(&path) {
            Ok(state) => state,
            Err(e) => {
                report.errors.push(StoreError::io("read", &path, e));
                continue;
            }
        };
        let owner = valid_by_key.get(&key).copied();
        let listed: BTreeSet<IpAddr> = match (&state, owner) {
            (IndexState::Listed(addresses), Some(_)) => addresses.iter().copied().collect(),
            (IndexState::Unreadable, Some(_)) => BTreeSet::new(),
            (IndexState::Absent, _) => continue,
            _ if stuck.contains(&key) => continue,
            _ => {
                if let Err(e) = fsio::remove_if_exists(&path) {
                    report.errors.push(StoreError::io("remove", &path, e));
                }
                continue;
            }
        };
        let Some(owner) = owner else { continue };
        indexed.insert(owner.clone());
        let holds = kept.get(owner).cloned().unwrap_or_default();
        if !holds.is_subset(&listed) || matches!(state, IndexState::Unreadable) {
            let all: Vec<IpAddr> = listed.union(&holds).copied().collect();
            let repaired = if all.is_empty() {
                fsio::remove_if_exists(&path)
                    .map(|_| ())
                    .map_err(|e| StoreError::io("remove", &path, e))
            } else {
                write_index(layout, owner, &all)
            };
            if let Err(e) = repaired {
                report.errors.push(e);
            }
        }
    }
    for (owner, holds) in &kept {
        if indexed.contains(owner) || owner.validate().is_err() {
            continue;
        }
        let all: Vec<IpAddr> = holds.iter().copied().collect();
        if let Err(e) = write_index(layout, owner, &all) {
            report.errors.push(e);
        }
    }
    report.released.sort();
    report.released_unreadable.sort();
    Ok(report)
}
