//! Reserving addresses. The order of the disk writes is what makes a kill at any point
//! recoverable; see the crate docs ("allocate").

use std::net::IpAddr;

use ipnet::IpNet;

use super::fsio;
use super::holdings;
use super::layout::Layout;
use super::records::{self, AddressState};
use super::{io_err, lock, sweep_scratch, Allocation};
use crate::config::{validate_range_sets, RangeSet};
use crate::error::{ConfigError, StoreError};
use crate::owner::Owner;

/// How the address for one range set is obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// Already reserved for the owner and listed in its index.
    Held,
    /// Reserved for the owner but missing from its index (only after a power loss).
    Adopted,
    /// Requested by the caller, free: to be reserved.
    Requested,
    /// Picked round-robin, free: to be reserved.
    Picked,
}

struct Choice {
    address: IpAddr,
    source: Source,
}

pub(crate) fn allocate(
    layout: &Layout,
    owner: &Owner,
    sets: &[RangeSet],
    requested: &[IpAddr],
) -> Result<Vec<Allocation>, StoreError> {
    owner.validate()?;
    validate_range_sets(sets)?;
    let wanted = match_requests(sets, requested)?;

    let _lock = lock(layout, true)?;
    sweep_scratch(layout)?;
    let held = holdings::verified(layout, owner)?;

    // Decide everything before writing anything: with the lock held the picture cannot
    // change, so an exhausted set is found while nothing has been reserved yet.
    let mut choices: Vec<Choice> = Vec::with_capacity(sets.len());
    for (i, set) in sets.iter().enumerate() {
        let held_here = held.iter().copied().find(|a| set.range_for(*a).is_some());
        let choice = match (wanted.get(i).copied().flatten(), held_here) {
            (Some(req), Some(h)) if req == h => Choice {
                address: h,
                source: Source::Held,
            },
            (Some(req), Some(h)) => {
                return Err(StoreError::OwnerHoldsOther {
                    owner: owner.clone(),
                    held: h,
                    requested: req,
                })
            }
            (None, Some(h)) => Choice {
                address: h,
                source: Source::Held,
            },
            (Some(req), None) => requested_choice(layout, owner, req)?,
            (None, None) => {
                let taken: Vec<IpAddr> = choices.iter().map(|c| c.address).collect();
                pick(layout, set, &taken).and_then(|found| {
                    found.ok_or_else(|| StoreError::Exhausted {
                        set_index: i,
                        range_set: set.to_string(),
                    })
                })?
            }
        };
        choices.push(choice);
    }

    let allocations = choices
        .iter()
        .zip(sets)
        .map(|(c, set)| allocation_for(set, c.address))
        .collect::<Result<Vec<_>, _>>()?;
    if choices.iter().all(|c| c.source == Source::Held) {
        return Ok(allocations);
    }

    // 1. Cursors: only a hint for where the next search starts, so writing them first
    //    costs at most a skipped address if we die before reserving.
    for (c, set) in choices.iter().zip(sets) {
        if let (Source::Picked, Some(family)) = (c.source, set.family()) {
            let path = layout.cursor(family);
            fsio::overwrite_hint(&path, &records::cursor_record(c.address))
                .map_err(io_err("write", path))?;
        }
    }

    // 2. The owner's index names every address it may hold *before* any new address record
    //    exists, so release and GC-repair never have to scan for an owner's addresses.
    let mut index_addresses = held.clone();
    index_addresses.extend(
        choices
            .iter()
            .filter(|c| c.source != Source::Held)
            .map(|c| c.address),
    );
    write_index(layout, owner, &index_addresses)?;

    // 3. The reservations themselves, each an atomic create-if-absent.
    let record = records::address_record(owner);
    let mut created: Vec<IpAddr> = Vec::new();
    for c in choices
        .iter()
        .filter(|c| matches!(c.source, Source::Requested | Source::Picked))
    {
        let path = layout.address(c.address);
        let outcome = fsio::create_record(&path, &record);
        let failure = match outcome {
            Ok(true) => {
                created.push(c.address);
                continue;
            }
            // Impossible while everyone honours the lock; refuse rather than share.
            Ok(false) => StoreError::AddressInUse {
                address: c.address,
                owner: match records::read_address(layout, c.address) {
                    Ok(AddressState::Held(o)) => Some(o),
                    _ => None,
                },
            },
            Err(e) => StoreError::io("create", path, e),
        };
        roll_back(layout, owner, &held, &choices, &created);
        return Err(failure);
    }
    Ok(allocations)
}

/// Undoes this call's reservations after a failure, best effort: whatever cannot be
/// removed stays listed in the index, which keeps the index a superset of the truth.
fn roll_back(
    layout: &Layout,
    owner: &Owner,
    held: &[IpAddr],
    choices: &[Choice],
    created: &[IpAddr],
) {
    let mut keep: Vec<IpAddr> = held.to_vec();
    keep.extend(
        choices
            .iter()
            .filter(|c| c.source == Source::Adopted)
            .map(|c| c.address),
    );
    for a in created {
        if fsio::remove_if_exists(&layout.address(*a)).is_err() {
            keep.push(*a);
        }
    }
    if keep.is_empty() {
        let _ = fsio::remove_if_exists(&layout.owner_index(owner));
    } else {
        let _ = write_index(layout, owner, &keep);
    }
}

pub(crate) fn write_index(
    layout: &Layout,
    owner: &Owner,
    addresses: &[IpAddr],
) -> Result<(), StoreError> {
    let mut addresses = addresses.to_vec();
    addresses.sort();
    addresses.dedup();
    let record = records::index_record(&addresses);
    let path = layout.owner_index(owner);
    // A new owner's index is created in one step; only an existing one needs a scratch
    // name and a rename.
    let written = match fsio::create_record(&path, &record) {
        Ok(true) => Ok(()),
        Ok(false) => fsio::replace_record(&layout.new_tmp(), &path, &record),
        Err(e) => Err(e),
    };
    written.map_err(io_err("write", path))
}

/// For each set, the requested address that falls in it, if any.
fn match_requests(
    sets: &[RangeSet],
    requested: &[IpAddr],
) -> Result<Vec<Option<IpAddr>>, StoreError> {
    let mut wanted: Vec<Option<IpAddr>> = vec![None; sets.len()];
    for &address in requested {
        let in_bounds = sets
            .iter()
            .enumerate()
            .find_map(|(i, s)| s.range_for(address).map(|r| (i, r)));
        // The network and broadcast addresses usually lie just outside the default
        // bounds; name them rather than calling them "outside every range".
        let in_subnet = || {
            sets.iter()
                .flat_map(|s| &s.ranges)
                .find(|r| r.subnet.contains(&address))
        };
        let excluded_by = in_bounds
            .map(|(_, r)| r)
            .or_else(in_subnet)
            .and_then(|range| {
                if Some(address) == range.gateway {
                    Some("it is the gateway")
                } else if address == range.subnet.network() {
                    Some("it is the subnet's network (subnet-router anycast) address")
                } else if range.is_excluded(address) {
                    Some("it is the subnet's broadcast address")
                } else {
                    None
                }
            });
        if let Some(reason) = excluded_by {
            return Err(StoreError::RequestedNotUsable { address, reason });
        }
        let Some((i, _)) = in_bounds else {
            return Err(StoreError::RequestedOutsideRanges { address });
        };
        match wanted.get_mut(i) {
            Some(Some(first)) if *first != address => {
                return Err(StoreError::RequestedTwiceInSet {
                    set_index: i,
                    first: *first,
                    second: address,
                })
            }
            Some(slot) => *slot = Some(address),
            None => {}
        }
    }
    Ok(wanted)
}

fn requested_choice(layout: &Layout, owner: &Owner, req: IpAddr) -> Result<Choice, StoreError> {
    let state = records::read_address(layout, req).map_err(io_err("read", layout.address(req)))?;
    match state {
        AddressState::Free => Ok(Choice {
            address: req,
            source: Source::Requested,
        }),
        AddressState::Held(o) if &o == owner => Ok(Choice {
            address: req,
            source: Source::Adopted,
        }),
        AddressState::Held(o) => Err(StoreError::AddressInUse {
            address: req,
            owner: Some(o),
        }),
        AddressState::Unreadable => Err(StoreError::AddressInUse {
            address: req,
            owner: None,
        }),
    }
}

/// The first free usable address of `set` after the set's cursor, skipping `taken`.
fn pick(layout: &Layout, set: &RangeSet, taken: &[IpAddr]) -> Result<Option<Choice>, StoreError> {
    let cursor = match set.family() {
        Some(family) => {
            records::read_cursor(layout, family).map_err(io_err("read", layout.cursor(family)))?
        }
        None => None,
    };
    for a in set.candidates_after(cursor) {
        if taken.contains(&a) {
            continue;
        }
        let path = layout.address(a);
        if !fsio::exists(&path).map_err(io_err("stat", path))? {
            return Ok(Some(Choice {
                address: a,
                source: Source::Picked,
            }));
        }
    }
    Ok(None)
}

pub(crate) fn allocation_for(set: &RangeSet, a: IpAddr) -> Result<Allocation, StoreError> {
    let range = set
        .range_for(a)
        .ok_or(StoreError::RequestedOutsideRanges { address: a })?;
    let address = IpNet::new(a, range.subnet.prefix_len()).map_err(|_| {
        StoreError::InvalidRanges(ConfigError::FamilyMismatch {
            field: "ranges".into(),
            address: a,
            subnet: range.subnet,
        })
    })?;
    Ok(Allocation {
        address,
        gateway: range.gateway,
        subnet: range.subnet,
    })
}
