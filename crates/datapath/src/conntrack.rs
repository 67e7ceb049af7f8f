//! The connection table (`weft_ct`, `bpf/include/maps/ct.h`), the agent's side: reading
//! it, collecting expired entries in bounded batches, and the purges the services API
//! needs when a backend goes.
//!
//! The programs insert and refresh entries; nothing frees an expired one but the LRU,
//! which only evicts when the table is full. [`Conntrack::gc`] removes expired entries
//! so the table does not run full of dead connections; the LRU stays the backstop (an
//! eviction under pressure is counted as `ct_pair_missing` when the partner of an entry
//! in use is found gone).

use crate::error::{Error, Result};
use crate::layout::{
    CtEntry, CtKey, CT_CLOSED, CT_CLOSING, CT_ESTABLISHED, CT_F_BACKEND_GONE, CT_F_FIN_ORIG,
    CT_F_FIN_REPLY, CT_F_NAT_DST, CT_F_NAT_SRC, CT_F_REPLY, CT_F_RST, CT_F_SEEN_REPLY, CT_OPENING,
    FAMILY_IPV4, FAMILY_IPV6, MAP_CT,
};
use crate::pinned;
use crate::pins::PinLayout;
use crate::sys;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::time::Duration;

/// One direction of a connection: protocol and the two ends (for ICMP echo, the port
/// of both is the echo id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tuple {
    pub proto: u8,
    pub src: SocketAddr,
    pub dst: SocketAddr,
}

impl std::fmt::Display for Tuple {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} -> {} proto {}", self.src, self.dst, self.proto)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtDirection {
    /// As the client sent it.
    Original,
    /// The server's replies.
    Reply,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtState {
    /// Only the original direction seen.
    Opening,
    /// Replied.
    Established,
    /// TCP: a FIN one way.
    Closing,
    /// TCP: FINs both ways, or a RST.
    Closed,
}

/// A connection-table entry, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CtRecord {
    /// The tuple the entry is found under.
    pub key: Tuple,
    pub direction: CtDirection,
    /// What this direction's packets become.
    pub rewritten: Tuple,
    pub rewrites_source: bool,
    pub rewrites_destination: bool,
    pub state: CtState,
    pub seen_reply: bool,
    pub fin_original: bool,
    pub fin_reply: bool,
    pub reset: bool,
    /// Its service backend was removed: the client is answered with a RST.
    pub backend_gone: bool,
    /// Time left; `None` once expired (the entry waits for [`Conntrack::gc`]).
    pub expires_in: Option<Duration>,
    /// The service frontend and backend ids that made it (0: none).
    pub frontend: u32,
    pub backend: u32,
}

/// Where a batched [`Conntrack::gc`] resumes; `Default` starts a new pass.
#[derive(Clone, Debug, Default)]
pub struct GcCursor(Option<CtKey>);

/// What one [`Conntrack::gc`] call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcReport {
    pub visited: usize,
    pub removed: usize,
    /// The pass reached the end of the table (the cursor starts over next time).
    pub done: bool,
}

/// What a purge does with a matching entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Purge {
    Keep,
    /// Forget the entry: the next packet starts a new connection.
    Delete,
    /// Mark its backend gone: TCP clients get a RST.
    MarkGone,
}

/// Connections touched by a purge (counted once each, by their original entry).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PurgeReport {
    pub deleted: usize,
    pub marked_gone: usize,
}

/// The pinned connection table.
pub struct Conntrack {
    path: PathBuf,
    map: OwnedFd,
    capacity: u32,
}

impl Conntrack {
    /// Opens the table pinned under `pin_root`.
    pub fn open(pin_root: impl Into<PathBuf>) -> Result<Conntrack> {
        Conntrack::open_layout(&PinLayout::new(pin_root))
    }

    pub(crate) fn open_layout(pins: &PinLayout) -> Result<Conntrack> {
        let path = pins.map_pin(&MAP_CT);
        let map = pinned::open_map(pins, &MAP_CT)?;
        let info = sys::map_info(map.as_fd())
            .map_err(|e| Error::bpf("BPF_OBJ_GET_INFO_BY_FD", &path, e))?;
        Ok(Conntrack {
            path,
            map,
            capacity: info.shape.max_entries,
        })
    }

    /// The table's size in entries (two per connection).
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    fn next_key(&self, key: Option<&CtKey>) -> Result<Option<CtKey>> {
        sys::map_next_key(self.map.as_fd(), key)
            .map_err(|e| Error::bpf("BPF_MAP_GET_NEXT_KEY", &self.path, e))
    }

    fn lookup(&self, key: &CtKey) -> Result<Option<CtEntry>> {
        sys::map_lookup(self.map.as_fd(), key)
            .map_err(|e| Error::bpf("BPF_MAP_LOOKUP_ELEM", &self.path, e))
    }

    fn delete(&self, key: &CtKey) -> Result<bool> {
        sys::map_delete(self.map.as_fd(), key)
            .map_err(|e| Error::bpf("BPF_MAP_DELETE_ELEM", &self.path, e))
    }

    /// Every key, collected first (a walk that deletes as it goes restarts at the
    /// beginning whenever the key it stands on is deleted).
    fn keys(&self) -> Result<Vec<CtKey>> {
        let mut keys = Vec::new();
        let mut key = self.next_key(None)?;
        while let Some(k) = key {
            key = self.next_key(Some(&k))?;
            keys.push(k);
            // A table never holds more than its capacity: more means the walk looped.
            if keys.len() > self.capacity as usize {
                break;
            }
        }
        Ok(keys)
    }

    /// Every entry, decoded. An entry whose key this build cannot read is an error
    /// naming it, never skipped.
    pub fn records(&self) -> Result<Vec<CtRecord>> {
        let now = sys::monotonic_ns();
        let mut out = Vec::new();
        for key in self.keys()? {
            if let Some(entry) = self.lookup(&key)? {
                out.push(
                    decode(&key, &entry, now).ok_or_else(|| Error::UnknownEntry {
                        path: self.path.clone(),
                        detail: format!("key {key:?}"),
                    })?,
                );
            }
        }
        out.sort_by_key(|r| r.key);
        Ok(out)
    }

    /// Removes expired entries, visiting at most `budget` entries from `cursor` (and
    /// moving it on), so a large table is collected in batches without holding the
    /// agent for long. Call again with the same cursor until a report says `done`.
    pub fn gc(&self, cursor: &mut GcCursor, budget: usize) -> Result<GcReport> {
        let now = sys::monotonic_ns();
        let mut report = GcReport::default();
        let mut kept = cursor.0.take();
        let mut next = self.next_key(kept.as_ref())?;
        while let Some(key) = next {
            if report.visited >= budget {
                cursor.0 = kept;
                return Ok(report);
            }
            // Fetched before `key` may go.
            next = self.next_key(Some(&key))?;
            report.visited += 1;
            match self.lookup(&key)? {
                Some(entry) if entry.expires <= now => {
                    report.removed += usize::from(self.delete(&key)?);
                }
                Some(_) => kept = Some(key),
                None => {}
            }
        }
        report.done = true;
        Ok(report)
    }

    /// Runs [`Conntrack::gc`] passes until one completes.
    pub fn gc_all(&self) -> Result<GcReport> {
        let mut cursor = GcCursor::default();
        let mut total = GcReport::default();
        loop {
            let r = self.gc(&mut cursor, 4096)?;
            total.visited += r.visited;
            total.removed += r.removed;
            if r.done {
                total.done = true;
                return Ok(total);
            }
        }
    }

    /// Applies `decide` to every entry: deletes or marks (both entries of a connection
    /// carry the same frontend and backend, so both are decided the same way).
    pub(crate) fn purge(&self, decide: impl Fn(&CtKey, &CtEntry) -> Purge) -> Result<PurgeReport> {
        let mut report = PurgeReport::default();
        for key in self.keys()? {
            let Some(mut entry) = self.lookup(&key)? else {
                continue;
            };
            let original = entry.flags & CT_F_REPLY == 0;
            match decide(&key, &entry) {
                Purge::Keep => {}
                Purge::Delete => {
                    if self.delete(&key)? && original {
                        report.deleted += 1;
                    }
                }
                Purge::MarkGone => {
                    if entry.flags & CT_F_BACKEND_GONE != 0 {
                        continue;
                    }
                    entry.flags |= CT_F_BACKEND_GONE;
                    match sys::map_update(self.map.as_fd(), &key, &entry, sys::BPF_EXIST) {
                        Ok(()) => report.marked_gone += usize::from(original),
                        // Gone meanwhile (expired, evicted): nothing to mark.
                        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                        Err(e) => return Err(Error::bpf("BPF_MAP_UPDATE_ELEM", &self.path, e)),
                    }
                }
            }
        }
        Ok(report)
    }
}

impl std::fmt::Debug for Conntrack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conntrack")
            .field("path", &self.path)
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

fn addr(family: u8, bytes: &[u8; 16], port: [u8; 2]) -> Option<SocketAddr> {
    let ip = match family {
        FAMILY_IPV4 => {
            let [a, b, c, d, ..] = *bytes;
            IpAddr::V4(Ipv4Addr::new(a, b, c, d))
        }
        FAMILY_IPV6 => IpAddr::V6(Ipv6Addr::from(*bytes)),
        _ => return None,
    };
    Some(SocketAddr::new(ip, u16::from_be_bytes(port)))
}

fn decode(key: &CtKey, e: &CtEntry, now: u64) -> Option<CtRecord> {
    let f = key.family;
    let state = match e.state {
        CT_OPENING => CtState::Opening,
        CT_ESTABLISHED => CtState::Established,
        CT_CLOSING => CtState::Closing,
        CT_CLOSED => CtState::Closed,
        _ => return None,
    };
    let has = |flag: u16| e.flags & flag != 0;
    Some(CtRecord {
        key: Tuple {
            proto: key.proto,
            src: addr(f, &key.saddr, key.sport)?,
            dst: addr(f, &key.daddr, key.dport)?,
        },
        direction: if has(CT_F_REPLY) {
            CtDirection::Reply
        } else {
            CtDirection::Original
        },
        rewritten: Tuple {
            proto: key.proto,
            src: addr(f, &e.nat_saddr, e.nat_sport)?,
            dst: addr(f, &e.nat_daddr, e.nat_dport)?,
        },
        rewrites_source: has(CT_F_NAT_SRC),
        rewrites_destination: has(CT_F_NAT_DST),
        state,
        seen_reply: has(CT_F_SEEN_REPLY),
        fin_original: has(CT_F_FIN_ORIG),
        fin_reply: has(CT_F_FIN_REPLY),
        reset: has(CT_F_RST),
        backend_gone: has(CT_F_BACKEND_GONE),
        expires_in: e.expires.checked_sub(now).map(Duration::from_nanos),
        frontend: e.frontend,
        backend: e.backend,
    })
}
