//! One store per kind: the compact value of every valid object, the issues of every
//! refused one, and a bounded log of which keys changed, so a reconciler learns what
//! changed since its last successful run instead of rereading the cluster.
//!
//! Sources feed a store the way a reflector does: `Init`, objects, `InitDone` for a
//! (re)list, then single changes. A store compares compact values, so a relist after
//! `410 Gone` reports only the objects that really differ, and objects missing from the
//! relist (deleted while the watch was down) are removed when it completes.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

use crate::issue::Issue;
use crate::kind::{ObjectKey, Watched};

/// A position in a store's history; reconcilers keep one per kind they read.
pub type Generation = u64;

/// Fewest log entries kept, whatever the store's size.
const MIN_LOG: usize = 1024;

/// What changed in a store since a reconciler's last successful run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changed {
    /// Everything may have changed: first run, resync, after an error, or the log no
    /// longer reaches back that far.
    All,
    /// These keys were added, updated or removed (look them up to tell which).
    Keys(BTreeSet<ObjectKey>),
}

impl Changed {
    pub fn is_empty(&self) -> bool {
        matches!(self, Changed::Keys(keys) if keys.is_empty())
    }

    /// Whether `key` may have changed.
    pub fn contains(&self, key: &ObjectKey) -> bool {
        match self {
            Changed::All => true,
            Changed::Keys(keys) => keys.contains(key),
        }
    }
}

/// One source event, already decoded and compacted.
#[derive(Debug, Clone)]
pub enum Update<T> {
    /// A (re)list starts: objects not seen again before [`Update::InitDone`] go.
    Init,
    /// An object of the (re)list, or a single add or change.
    Apply(ObjectKey, Result<T, Vec<Issue>>),
    Delete(ObjectKey),
    InitDone,
}

/// What applying an update did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Applied {
    /// Objects added, changed or removed.
    pub changed: usize,
    /// Whether the set of issues changed.
    pub issues_changed: bool,
    /// This update completed the first full list.
    pub synced_now: bool,
}

#[derive(Debug)]
pub struct Store<T: Watched> {
    objects: HashMap<ObjectKey, T>,
    issues: BTreeMap<ObjectKey, Vec<Issue>>,
    generation: Generation,
    /// Changes after `log_floor`, in order; a cursor older than `log_floor` gets `All`.
    log: VecDeque<(Generation, ObjectKey)>,
    log_floor: Generation,
    /// Keys seen since the current (re)list began.
    relist: Option<HashSet<ObjectKey>>,
    synced: bool,
}

impl<T: Watched> Default for Store<T> {
    fn default() -> Store<T> {
        Store {
            objects: HashMap::new(),
            issues: BTreeMap::new(),
            generation: 0,
            log: VecDeque::new(),
            log_floor: 0,
            relist: None,
            synced: false,
        }
    }
}

impl<T: Watched> Store<T> {
    pub fn get(&self, key: &ObjectKey) -> Option<&T> {
        self.objects.get(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&ObjectKey, &T)> {
        self.objects.iter()
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Every refused object's issues.
    pub fn issues(&self) -> impl Iterator<Item = &Issue> {
        self.issues.values().flatten()
    }

    /// The issues of one object, if it was refused.
    pub fn issues_of(&self, key: &ObjectKey) -> Option<&[Issue]> {
        self.issues.get(key).map(Vec::as_slice)
    }

    /// Whether a first full list has completed: until then the store may lack objects
    /// that exist, and nothing should be removed because of their absence.
    pub fn synced(&self) -> bool {
        self.synced
    }

    pub fn generation(&self) -> Generation {
        self.generation
    }

    /// The keys changed after `since` (`None`: never ran, so everything).
    pub fn changes_since(&self, since: Option<Generation>) -> Changed {
        let Some(since) = since else {
            return Changed::All;
        };
        if since < self.log_floor {
            return Changed::All;
        }
        // Entries are in generation order: walk back from the newest.
        let mut keys = BTreeSet::new();
        for (generation, key) in self.log.iter().rev() {
            if *generation <= since {
                break;
            }
            keys.insert(key.clone());
        }
        Changed::Keys(keys)
    }

    pub fn apply(&mut self, update: Update<T>) -> Applied {
        let mut applied = Applied::default();
        match update {
            Update::Init => self.relist = Some(HashSet::new()),
            Update::Apply(key, value) => {
                if let Some(seen) = &mut self.relist {
                    seen.insert(key.clone());
                }
                self.set(key, value, &mut applied);
            }
            Update::Delete(key) => {
                applied.issues_changed = self.issues.remove(&key).is_some();
                if self.objects.remove(&key).is_some() {
                    self.record(key);
                    applied.changed += 1;
                }
            }
            Update::InitDone => {
                let seen = self.relist.take().unwrap_or_default();
                let gone: Vec<ObjectKey> = self
                    .objects
                    .keys()
                    .filter(|k| !seen.contains(*k))
                    .cloned()
                    .collect();
                for key in gone {
                    self.objects.remove(&key);
                    self.record(key);
                    applied.changed += 1;
                }
                let before = self.issues.len();
                self.issues.retain(|k, _| seen.contains(k));
                applied.issues_changed |= before != self.issues.len();
                if !self.synced {
                    self.synced = true;
                    applied.synced_now = true;
                    // Every reader's first run sees everything anyway: forget the log of
                    // the initial list.
                    self.log.clear();
                    self.log_floor = self.generation;
                }
            }
        }
        applied
    }

    fn set(&mut self, key: ObjectKey, value: Result<T, Vec<Issue>>, applied: &mut Applied) {
        match value {
            Ok(value) => {
                applied.issues_changed = self.issues.remove(&key).is_some();
                if self.objects.get(&key) == Some(&value) {
                    return;
                }
                self.objects.insert(key.clone(), value);
                self.record(key);
                applied.changed += 1;
            }
            Err(issues) => {
                applied.issues_changed = self.issues.get(&key) != Some(&issues);
                self.issues.insert(key.clone(), issues);
                if self.objects.remove(&key).is_some() {
                    self.record(key);
                    applied.changed += 1;
                }
            }
        }
    }

    fn record(&mut self, key: ObjectKey) {
        self.generation += 1;
        if !self.synced {
            // Nobody has read this store yet: no log needed.
            self.log_floor = self.generation;
            return;
        }
        self.log.push_back((self.generation, key));
        let cap = MIN_LOG.max(2 * self.objects.len());
        while self.log.len() > cap {
            if let Some((generation, _)) = self.log.pop_front() {
                self.log_floor = generation;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kind::KindInfo;
    use crate::meta::Meta;

    #[derive(Debug, Clone, PartialEq)]
    struct Thing(u32);

    impl Watched for Thing {
        const KIND: KindInfo = KindInfo {
            group: "",
            version: "v1",
            kind: "Thing",
            plural: "things",
            namespaced: false,
        };
        type Wire = Meta;
        fn meta(wire: &Meta) -> crate::meta::MetaView<'_> {
            wire.view()
        }
        fn from_wire(_: &Meta) -> Result<Thing, Vec<Issue>> {
            Ok(Thing(0))
        }
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey::cluster(name)
    }

    fn listed(store: &mut Store<Thing>, items: &[(&str, u32)]) -> usize {
        let mut changed = store.apply(Update::Init).changed;
        for (name, v) in items {
            changed += store.apply(Update::Apply(key(name), Ok(Thing(*v)))).changed;
        }
        changed + store.apply(Update::InitDone).changed
    }

    #[test]
    fn a_relist_reports_only_real_changes_and_removes_what_went() {
        let mut store = Store::<Thing>::default();
        assert!(!store.synced());
        assert_eq!(listed(&mut store, &[("a", 1), ("b", 2), ("c", 3)]), 3);
        assert!(store.synced());
        let cursor = store.generation();
        assert_eq!(
            store.changes_since(Some(cursor)),
            Changed::Keys(BTreeSet::new())
        );

        // The same cluster again: nothing changed. Then b changed and c went meanwhile.
        assert_eq!(listed(&mut store, &[("a", 1), ("b", 2), ("c", 3)]), 0);
        assert_eq!(listed(&mut store, &[("a", 1), ("b", 20)]), 2);
        assert_eq!(
            store.changes_since(Some(cursor)),
            Changed::Keys([key("b"), key("c")].into_iter().collect())
        );
        assert!(store.get(&key("c")).is_none());
        assert_eq!(store.changes_since(None), Changed::All);
    }

    #[test]
    fn a_refused_object_is_reported_and_leaves_the_store() {
        let mut store = Store::<Thing>::default();
        listed(&mut store, &[("a", 1)]);
        let issue = Issue::new("Thing/a", "spec.x", "bad");
        let applied = store.apply(Update::Apply(key("a"), Err(vec![issue.clone()])));
        assert_eq!(applied.changed, 1);
        assert!(applied.issues_changed);
        assert!(store.get(&key("a")).is_none());
        assert_eq!(store.issues().collect::<Vec<_>>(), vec![&issue]);
        // Fixed: the issue goes, the object is back.
        let applied = store.apply(Update::Apply(key("a"), Ok(Thing(1))));
        assert!(applied.issues_changed && applied.changed == 1);
        assert_eq!(store.issues().count(), 0);
        // Refused again, then deleted: the issue goes with it.
        store.apply(Update::Apply(key("a"), Err(vec![issue])));
        let applied = store.apply(Update::Delete(key("a")));
        assert!(applied.issues_changed);
        assert_eq!(applied.changed, 0);
    }

    #[test]
    fn an_old_cursor_gets_everything_once_the_log_is_trimmed() {
        let mut store = Store::<Thing>::default();
        listed(&mut store, &[("a", 0)]);
        let cursor = store.generation();
        for i in 1..=(MIN_LOG as u32 + 10) {
            store.apply(Update::Apply(key("a"), Ok(Thing(i))));
        }
        assert_eq!(store.changes_since(Some(cursor)), Changed::All);
        let recent = store.generation() - 1;
        assert_eq!(
            store.changes_since(Some(recent)),
            Changed::Keys([key("a")].into_iter().collect())
        );
    }
}
