//! Carrying the datapath's state over from maps of an earlier layout, under traffic.
//!
//! Every map is pinned as `maps/<name>_v<layout>`, so a build whose layout of a map
//! differs from the pinned one finds nothing under its own name and creates a fresh map;
//! the pinned maps of earlier layouts it knows ([`PREDECESSORS`]) are then migrated:
//!
//! 1. before any program changes, every entry of the old map is converted into the new
//!    one (the programs that will run on the new maps are not attached yet, so the old
//!    programs keep forwarding on the old maps meanwhile);
//! 2. the new programs replace the old ones new-before-old on every pinned link and
//!    cls_bpf filter (the loader's usual replacement), so each hook switches from old
//!    maps to new maps, already filled, in one atomic step;
//! 3. the old maps are swept again: what an old CNI plugin added, changed or removed
//!    since step 1 is applied to the new maps (a removal only if the new entry is still
//!    the one copied, so a newer plugin's write is never undone), and what the old
//!    programs counted meanwhile is added to the new counters;
//! 4. the old pins are removed last; a plugin that opened an old map before that may
//!    still write to it, so the loader waits (bounded) until no other process holds an
//!    old map open, and sweeps once more.
//!
//! A new-layout plugin writes only the new maps, which exist from step 1 on; its DEL also
//! deletes the address from any old map still pinned, so a sweep cannot bring it back.

use crate::error::{Error, Result};
use crate::layout::{
    MapShape, MapSpec, BPF_F_NO_PREALLOC, BPF_MAP_TYPE_ARRAY, BPF_MAP_TYPE_HASH,
    BPF_MAP_TYPE_LPM_TRIE, BPF_MAP_TYPE_PERCPU_ARRAY, MAP_CONFIG, MAP_COUNTERS, MAP_ENDPOINTS,
    MAP_ROUTES,
};
use crate::pins::PinLayout;
use crate::sys;
use std::collections::BTreeMap;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How entries of an earlier layout become entries of the current one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Convert {
    /// The key and value bytes are the same; only the pinned name changed.
    Same,
    /// A per-CPU array whose indexes keep their meaning (append-only counters): each
    /// CPU's value moves to the same index, and later increments of the old map are
    /// added.
    PerCpuSameIndex,
}

/// A map of an earlier layout that this build migrates.
#[derive(Clone, Copy, Debug)]
pub struct Predecessor {
    /// The current map it becomes.
    pub into: MapSpec,
    /// Its file name under `maps/`.
    pub pin_name: &'static str,
    /// Its layout version (0: the first release, whose pins had no version).
    pub version: u32,
    /// Its shape, as that release created it (a pinned map of another shape under that
    /// name is not migrated, and refused).
    pub shape: MapShape,
    pub convert: Convert,
}

/// Every earlier layout this build can migrate from. Their shapes are history: they
/// describe what an earlier release pinned and never change (`tests/layout.rs` checks
/// them against that release's objects, kept under `bpf/tests/legacy_v0/`).
pub const PREDECESSORS: &[Predecessor] = &[
    Predecessor {
        into: MAP_ENDPOINTS,
        pin_name: "weft_endpoints",
        version: 0,
        shape: MapShape {
            map_type: BPF_MAP_TYPE_HASH,
            key_size: 20,
            value_size: 12,
            max_entries: 16384,
            flags: 0,
        },
        convert: Convert::Same,
    },
    Predecessor {
        into: MAP_ROUTES,
        pin_name: "weft_routes",
        version: 0,
        shape: MapShape {
            map_type: BPF_MAP_TYPE_LPM_TRIE,
            key_size: 24,
            value_size: 12,
            max_entries: 65536,
            flags: BPF_F_NO_PREALLOC,
        },
        convert: Convert::Same,
    },
    Predecessor {
        into: MAP_CONFIG,
        pin_name: "weft_config",
        version: 0,
        shape: MapShape {
            map_type: BPF_MAP_TYPE_ARRAY,
            key_size: 4,
            value_size: 12,
            max_entries: 1,
            flags: 0,
        },
        convert: Convert::Same,
    },
    Predecessor {
        into: MAP_COUNTERS,
        pin_name: "weft_counters",
        version: 0,
        shape: MapShape {
            map_type: BPF_MAP_TYPE_PERCPU_ARRAY,
            key_size: 4,
            value_size: 8,
            max_entries: 10,
            flags: 0,
        },
        convert: Convert::PerCpuSameIndex,
    },
];

/// How long the loader waits for other processes (CNI plugins of the old layout) to
/// close the old maps after their pins are gone. A plugin holds a map for a few
/// microseconds; the bound only keeps a stuck process from stalling the agent.
const HOLDER_WAIT: Duration = Duration::from_secs(5);

/// What a migration did, per old map.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MigrationReport {
    pub maps: Vec<MapMigration>,
}

impl MigrationReport {
    pub fn is_empty(&self) -> bool {
        self.maps.is_empty()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapMigration {
    /// The old pin (removed by now).
    pub from: PathBuf,
    /// The new pin.
    pub into: PathBuf,
    /// Entries converted before the programs were swapped.
    pub copied: usize,
    /// Entries added, changed or removed by the sweeps after the swap.
    pub swept: usize,
    /// Whether other processes still held the old map when the wait ran out (their
    /// later writes are lost).
    pub holders_timed_out: bool,
}

/// One old map being migrated.
struct Source {
    pred: &'static Predecessor,
    from: PathBuf,
    into: PathBuf,
    old: OwnedFd,
    old_id: u32,
    new: OwnedFd,
    /// The old map's content at the last copy or sweep.
    snapshot: Entries,
    copied: usize,
    swept: usize,
}

type Entries = BTreeMap<Vec<u8>, Vec<u8>>;

/// A migration in progress: the old maps found, opened and copied (step 1).
pub(crate) struct Migration {
    sources: Vec<Source>,
}

/// Refuses a map pinned under an earlier layout's name whose shape is not that layout's
/// (it is nothing this build knows how to read), before the load creates anything.
pub(crate) fn check_predecessors(pins: &PinLayout) -> Result<()> {
    for pred in PREDECESSORS {
        let path = pins.map(pred.pin_name);
        if let Some(old) = sys::obj_get_opt(&path)? {
            let info = sys::map_info(old.as_fd())
                .map_err(|e| Error::bpf("BPF_OBJ_GET_INFO_BY_FD", &path, e))?;
            if info.shape != pred.shape {
                return Err(Error::MapMismatch {
                    path,
                    expected: pred.shape,
                    found: info.shape,
                });
            }
        }
    }
    Ok(())
}

impl Migration {
    /// Step 1, once the new maps are pinned: copies every old map found under a
    /// predecessor's name into its new map. `created` are the maps this load created (a
    /// map that already existed was filled by an interrupted earlier migration: only
    /// keys it lacks are copied).
    pub fn begin(pins: &PinLayout, created: &[&str]) -> Result<Migration> {
        let mut sources = Vec::new();
        for pred in PREDECESSORS {
            let from = pins.map(pred.pin_name);
            let Some(old) = sys::obj_get_opt(&from)? else {
                continue;
            };
            let info = sys::map_info(old.as_fd())
                .map_err(|e| Error::bpf("BPF_OBJ_GET_INFO_BY_FD", &from, e))?;
            if info.shape != pred.shape {
                return Err(Error::MapMismatch {
                    path: from,
                    expected: pred.shape,
                    found: info.shape,
                });
            }
            let into = pins.map_pin(&pred.into);
            let new = crate::pinned::open_map(pins, &pred.into)?;
            let mut source = Source {
                pred,
                from,
                into,
                old,
                old_id: info.id,
                new,
                snapshot: Entries::new(),
                copied: 0,
                swept: 0,
            };
            source.copy_initial(created.contains(&pred.into.name))?;
            sources.push(source);
        }
        Ok(Migration { sources })
    }

    /// Steps 3 and 4, once every program runs on the new maps.
    pub fn finish(mut self) -> Result<MigrationReport> {
        for source in &mut self.sources {
            source.sweep()?;
        }
        for source in &self.sources {
            crate::tcx::unlink_pin(&source.from)?;
        }
        let ids: Vec<u32> = self.sources.iter().map(|s| s.old_id).collect();
        let holders_timed_out = !ids.is_empty() && !wait_for_other_holders(&ids, HOLDER_WAIT);
        let mut report = MigrationReport::default();
        for mut source in self.sources {
            source.sweep()?;
            report.maps.push(MapMigration {
                from: source.from,
                into: source.into,
                copied: source.copied,
                swept: source.swept,
                holders_timed_out,
            });
        }
        Ok(report)
    }
}

impl Source {
    fn is_array(&self) -> bool {
        matches!(
            self.pred.shape.map_type,
            BPF_MAP_TYPE_ARRAY | BPF_MAP_TYPE_PERCPU_ARRAY
        )
    }

    fn copy_initial(&mut self, created: bool) -> Result<()> {
        let old = read_all(self.old.as_fd(), &self.pred.shape, &self.from)?;
        // Arrays always hold every index: only a map made now has nothing to keep.
        if !self.is_array() || created {
            // Presence by the new map's own keys: a lookup in an LPM trie matches the
            // longest prefix, not the exact key.
            let present = read_all(self.new.as_fd(), &self.pred.into.shape, &self.into)?;
            for (key, value) in &old {
                if !self.is_array() && present.contains_key(key) {
                    continue;
                }
                self.write(key, value)?;
                self.copied += 1;
            }
        }
        self.snapshot = old;
        Ok(())
    }

    /// Applies what changed in the old map since the last snapshot.
    fn sweep(&mut self) -> Result<()> {
        let now = read_all(self.old.as_fd(), &self.pred.shape, &self.from)?;
        for (key, value) in &now {
            let before = self.snapshot.get(key);
            if before == Some(value) {
                continue;
            }
            match self.pred.convert {
                Convert::Same => self.write(key, value)?,
                Convert::PerCpuSameIndex => self.add_per_cpu(key, value, before)?,
            }
            self.swept += 1;
        }
        if !self.is_array() {
            for (key, value) in &self.snapshot {
                if now.contains_key(key) {
                    continue;
                }
                // (In an LPM trie the lookup may answer with a shorter prefix; deleting
                // the exact key is then a no-op.)
                if self.new_value(key)?.as_deref() == Some(value.as_slice()) {
                    sys::map_delete_raw(self.new.as_fd(), key)
                        .map_err(|e| Error::bpf("BPF_MAP_DELETE_ELEM", &self.into, e))?;
                    self.swept += 1;
                }
            }
        }
        self.snapshot = now;
        Ok(())
    }

    fn write(&self, key: &[u8], value: &[u8]) -> Result<()> {
        // Convert::Same and PerCpuSameIndex both keep key and value bytes.
        sys::map_update_raw(self.new.as_fd(), key, value, sys::BPF_ANY)
            .map_err(|e| Error::bpf("BPF_MAP_UPDATE_ELEM", &self.into, e))
    }

    fn new_value(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut value = vec![0u8; stored_value_size(&self.pred.into.shape)?];
        let found = sys::map_lookup_raw(self.new.as_fd(), key, &mut value)
            .map_err(|e| Error::bpf("BPF_MAP_LOOKUP_ELEM", &self.into, e))?;
        Ok(found.then_some(value))
    }

    /// Adds `value - before`, CPU by CPU, to the new map's entry (a counter the old
    /// programs kept incrementing until they were swapped out).
    fn add_per_cpu(&self, key: &[u8], value: &[u8], before: Option<&Vec<u8>>) -> Result<()> {
        let mut current = self.new_value(key)?.unwrap_or_else(|| vec![0; value.len()]);
        for (i, slot) in current.chunks_exact_mut(8).enumerate() {
            let word = |bytes: Option<&[u8]>| {
                bytes
                    .and_then(|b| b.get(i * 8..i * 8 + 8))
                    .and_then(|b| <[u8; 8]>::try_from(b).ok())
                    .map_or(0, u64::from_ne_bytes)
            };
            let delta = word(Some(value)).wrapping_sub(word(before.map(Vec::as_slice)));
            let sum = word(Some(slot)).wrapping_add(delta);
            slot.copy_from_slice(&sum.to_ne_bytes());
        }
        self.write(key, &current)
    }
}

/// Bytes of one value as the kernel hands it to user space: per-CPU maps return one
/// 8-byte-aligned slot per possible CPU.
pub(crate) fn stored_value_size(shape: &MapShape) -> Result<usize> {
    let size = shape.value_size as usize;
    if shape.map_type != BPF_MAP_TYPE_PERCPU_ARRAY {
        return Ok(size);
    }
    let cpus = aya::util::nr_cpus()
        .map_err(|(what, e)| Error::bpf("count possible CPUs", PathBuf::from(what), e))?;
    Ok(size.div_ceil(8) * 8 * cpus)
}

/// Every entry of a map, by raw bytes.
fn read_all(fd: std::os::fd::BorrowedFd<'_>, shape: &MapShape, path: &PathBuf) -> Result<Entries> {
    let mut out = Entries::new();
    let value_size = stored_value_size(shape)?;
    let mut key: Option<Vec<u8>> = None;
    loop {
        let mut next = vec![0u8; shape.key_size as usize];
        let more = sys::map_next_key_raw(fd, key.as_deref(), &mut next)
            .map_err(|e| Error::bpf("BPF_MAP_GET_NEXT_KEY", path, e))?;
        if !more {
            return Ok(out);
        }
        // A key we already have means the kernel restarted the walk (the previous key
        // was deleted meanwhile): the map has been seen whole.
        if out.contains_key(&next) {
            return Ok(out);
        }
        let mut value = vec![0u8; value_size];
        if sys::map_lookup_raw(fd, &next, &mut value)
            .map_err(|e| Error::bpf("BPF_MAP_LOOKUP_ELEM", path, e))?
        {
            out.insert(next.clone(), value);
        }
        key = Some(next);
    }
}

/// Waits until no process but this one holds any of the maps `ids` open (read from
/// `/proc/<pid>/fdinfo`), or `timeout` passes. `true` when none does.
fn wait_for_other_holders(ids: &[u32], timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if !other_process_holds(ids) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn other_process_holds(ids: &[u32]) -> bool {
    let me = std::process::id();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return false;
    };
    for proc_entry in procs.flatten() {
        let Some(pid) = proc_entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(proc_entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let is_map = std::fs::read_link(fd.path())
                .map(|target| target.as_os_str() == "anon_inode:bpf-map")
                .unwrap_or(false);
            if !is_map {
                continue;
            }
            let info = proc_entry.path().join("fdinfo").join(fd.file_name());
            let Ok(text) = std::fs::read_to_string(info) else {
                continue;
            };
            let held = text
                .lines()
                .filter_map(|l| l.strip_prefix("map_id:"))
                .filter_map(|v| v.trim().parse::<u32>().ok())
                .any(|id| ids.contains(&id));
            if held {
                return true;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::MAPS;

    #[test]
    fn every_predecessor_is_an_earlier_layout_of_a_current_map() {
        for pred in PREDECESSORS {
            let current = MAPS
                .iter()
                .find(|m| m.name == pred.into.name)
                .expect("migrates into a current map");
            assert!(pred.version < current.version, "{}", pred.pin_name);
            assert_ne!(pred.pin_name, current.pin_name().as_str());
            assert_eq!(pred.shape.map_type, current.shape.map_type);
            if pred.convert == Convert::Same {
                assert_eq!(pred.shape.key_size, current.shape.key_size);
                assert_eq!(pred.shape.value_size, current.shape.value_size);
            }
        }
    }
}
