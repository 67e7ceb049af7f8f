//! Releasing an owner's addresses (CNI DEL).

use std::net::IpAddr;

use super::fsio;
use super::holdings;
use super::layout::Layout;
use super::{io_err, lock, sweep_scratch};
use crate::error::StoreError;
use crate::owner::Owner;

pub(crate) fn release(layout: &Layout, owner: &Owner) -> Result<Vec<IpAddr>, StoreError> {
    owner.validate()?;
    let _lock = lock(layout, true)?;
    sweep_scratch(layout)?;
    let Some(listed) = holdings::listed(layout, owner)? else {
        return Ok(Vec::new());
    };

    // Address files first, index last: until the index is gone it still names every
    // address that might be left, so a release killed half-way is finished by the next.
    let mut released = Vec::new();
    for a in listed {
        // The index may name addresses that were never reserved, or have since gone to
        // someone else; only the owner's own records are removed.
        if holdings::is_held_by(layout, a, owner)? {
            let path = layout.address(a);
            if fsio::remove_if_exists(&path).map_err(io_err("remove", path))? {
                released.push(a);
            }
        }
    }
    let index = layout.owner_index(owner);
    fsio::remove_if_exists(&index).map_err(io_err("remove", index))?;
    released.sort();
    released.dedup();
    Ok(released)
}
