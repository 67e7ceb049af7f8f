//! CNI STATUS: can an ADD succeed right now?

use std::collections::HashSet;
use std::net::IpAddr;

use super::fsio;
use super::holdings;
use super::layout::Layout;
use super::lock;
use crate::config::{validate_range_sets, RangeSet};
use crate::error::StoreError;

const PROBE: &str = ".status-probe";

pub(crate) fn check_ready(layout: &Layout, sets: &[RangeSet]) -> Result<(), StoreError> {
    validate_range_sets(sets)?;
    let _lock = lock(layout, true)?;
    let tmp = layout.tmp_dir();
    fsio::empty_dir(&tmp).map_err(|source| StoreError::NotWritable { path: tmp, source })?;
    // What an ADD does to the disk, on a throw-away name in each directory it creates
    // names in. The name is not an address or an owner key, so nothing else reads it; a
    // probe left by a killed STATUS is removed by the next.
    for dir in [layout.addresses_dir(), layout.owners_dir()] {
        let probe = dir.join(PROBE);
        let probed = fsio::remove_if_exists(&probe)
            .and_then(|_| fsio::create_record(&probe, "probe"))
            .and_then(|_| fsio::remove_if_exists(&probe));
        if let Err(source) = probed {
            return Err(StoreError::NotWritable { path: dir, source });
        }
    }

    // Counting beats searching: one directory listing, however large the ranges are.
    let reserved: HashSet<IpAddr> = holdings::reserved_addresses(layout)?.into_iter().collect();
    for (i, set) in sets.iter().enumerate() {
        let taken = reserved
            .iter()
            .filter(|a| set.usable_range_for(**a).is_some())
            .count() as u128;
        if taken >= set.usable_count() {
            return Err(StoreError::Exhausted {
                set_index: i,
                range_set: set.to_string(),
            });
        }
    }
    Ok(())
}
