//! Shared copies of the strings and label sets that repeat across objects (namespaces,
//! node names, label keys and values, whole label sets of a ReplicaSet's pods), so a store
//! of 50,000 pods holds each once. Process-wide, so a kind's `from_wire` needs no context.
//!
//! Entries nobody else holds any more are dropped by [`prune`] (the agent calls it on every
//! resync), so the tables stay bounded by what the stores hold.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Mutex, OnceLock};

use crate::pod::NamedPort;

/// One interning table.
struct Table<T: ?Sized + Eq + Hash> {
    entries: Mutex<HashSet<Arc<T>>>,
}

impl<T: ?Sized + Eq + Hash> Table<T> {
    fn new() -> Table<T> {
        Table {
            entries: Mutex::new(HashSet::new()),
        }
    }

    fn get_or_insert(&self, value: &T, make: impl FnOnce() -> Arc<T>) -> Arc<T> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(found) = entries.get(value) {
            return found.clone();
        }
        let new = make();
        entries.insert(new.clone());
        new
    }

    fn prune(&self) -> usize {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let before = entries.len();
        entries.retain(|e| Arc::strong_count(e) > 1);
        before - entries.len()
    }

    fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

fn strings() -> &'static Table<str> {
    static TABLE: OnceLock<Table<str>> = OnceLock::new();
    TABLE.get_or_init(Table::new)
}

/// A label set's pairs, sorted by key.
type Pairs = [(Arc<str>, Arc<str>)];

fn label_sets() -> &'static Table<Pairs> {
    static TABLE: OnceLock<Table<Pairs>> = OnceLock::new();
    TABLE.get_or_init(Table::new)
}

fn port_sets() -> &'static Table<[NamedPort]> {
    static TABLE: OnceLock<Table<[NamedPort]>> = OnceLock::new();
    TABLE.get_or_init(Table::new)
}

/// The shared copy of `s`.
pub fn str(s: &str) -> Arc<str> {
    strings().get_or_insert(s, || Arc::from(s))
}

/// The shared copy of a pod's named ports (equal for every pod of a template).
pub fn ports(ports: Vec<NamedPort>) -> Arc<[NamedPort]> {
    port_sets().get_or_insert(&ports[..], || Arc::from(ports.clone()))
}

/// Drops every entry only the tables hold; returns how many went.
pub fn prune() -> usize {
    // Sets first: they hold strings.
    label_sets().prune() + port_sets().prune() + strings().prune()
}

/// Entries held (strings, label sets): for metrics and tests.
pub fn sizes() -> (usize, usize) {
    (strings().len(), label_sets().len())
}

/// An object's labels, sorted by key, shared between every object with the same set.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Labels(Arc<Pairs>);

impl Labels {
    pub fn new(labels: &BTreeMap<String, String>) -> Labels {
        let pairs: Vec<(&str, &str)> = labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        Labels::from_sorted(&pairs)
    }

    fn from_sorted(pairs: &[(&str, &str)]) -> Labels {
        // Look the set up without allocating it: build the candidate from shared strings
        // (cheap, usually already present) and let the table keep the first copy.
        let candidate: Vec<(Arc<str>, Arc<str>)> =
            pairs.iter().map(|(k, v)| (str(k), str(v))).collect();
        Labels(label_sets().get_or_insert(&candidate[..], || Arc::from(candidate.clone())))
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| &*self.0[i].1)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Default for Labels {
    fn default() -> Labels {
        Labels::from_sorted(&[])
    }
}

impl fmt::Debug for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_sets_share_one_copy_and_lookups_work() {
        let map: BTreeMap<String, String> = [("app", "web"), ("tier", "front")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let a = Labels::new(&map);
        let b = Labels::new(&map.clone());
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert_eq!(a.get("app"), Some("web"));
        assert_eq!(a.get("tier"), Some("front"));
        assert_eq!(a.get("nope"), None);
        assert_eq!(a.len(), 2);
        assert!(Arc::ptr_eq(&str("web"), &a.0[0].1));
    }

    #[test]
    fn prune_drops_what_nobody_holds() {
        let unique = format!("weft-intern-test-{}", std::process::id());
        let held = str(&unique);
        prune();
        assert!(Arc::ptr_eq(&held, &str(&unique)), "held entries stay");
        drop(held);
        prune();
        let (strings, _) = sizes();
        let again = str(&unique);
        assert_eq!(Arc::strong_count(&again), 2, "a fresh entry after pruning");
        assert!(sizes().0 >= strings);
    }
}
