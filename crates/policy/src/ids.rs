//! Stable ids: a key keeps its id across compilations for as long as it exists, and a
//! released id is not handed out again until the counter wraps, so a table entry left over
//! from before a change can never be mistaken for a new key's.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

#[derive(Debug, Clone)]
pub struct Allocator<K> {
    first: u32,
    last: u32,
    next: u32,
    ids: HashMap<K, u32>,
    taken: HashSet<u32>,
    seen: HashSet<u32>,
}

impl<K: Hash + Eq + Clone> Allocator<K> {
    /// Ids from `first` to `last`, both included.
    pub fn new(first: u32, last: u32) -> Allocator<K> {
        Allocator {
            first,
            last,
            next: first,
            ids: HashMap::new(),
            taken: HashSet::new(),
            seen: HashSet::new(),
        }
    }

    /// The key's id, allocating one if it has none; marks it used in this round.
    /// `None` only when every id of the range is taken.
    pub fn id(&mut self, key: &K) -> Option<u32> {
        let id = match self.ids.get(key) {
            Some(id) => *id,
            None => {
                let id = self.fresh()?;
                self.ids.insert(key.clone(), id);
                self.taken.insert(id);
                id
            }
        };
        self.seen.insert(id);
        Some(id)
    }

    /// Offers `id` for `key` (an id the datapath already holds, read back after a restart);
    /// taken only when the key has none yet and nobody else holds it.
    pub fn adopt(&mut self, key: &K, id: u32) -> bool {
        if id < self.first
            || id > self.last
            || self.ids.contains_key(key)
            || self.taken.contains(&id)
        {
            return false;
        }
        self.ids.insert(key.clone(), id);
        self.taken.insert(id);
        true
    }

    fn fresh(&mut self) -> Option<u32> {
        let span = u64::from(self.last - self.first) + 1;
        for _ in 0..span {
            let id = self.next;
            self.next = if self.next == self.last {
                self.first
            } else {
                self.next + 1
            };
            if !self.taken.contains(&id) {
                return Some(id);
            }
        }
        None
    }

    /// Ends a round: keys not used since the last call give their ids up.
    pub fn release_unused(&mut self) {
        let seen = std::mem::take(&mut self.seen);
        self.ids.retain(|_, id| seen.contains(id));
        self.taken.retain(|id| seen.contains(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_not_reused_at_once() {
        let mut a: Allocator<&str> = Allocator::new(10, 13);
        assert_eq!(a.id(&"x"), Some(10));
        assert_eq!(a.id(&"y"), Some(11));
        a.release_unused();
        assert_eq!(a.id(&"y"), Some(11));
        a.release_unused(); // x is gone
        assert_eq!(a.id(&"z"), Some(12));
        assert_eq!(a.id(&"w"), Some(13));
        // Wrapped: 10 is free again, 11 is still y's.
        assert_eq!(a.id(&"v"), Some(10));
        assert_eq!(a.id(&"u"), None);
        assert_eq!(a.id(&"y"), Some(11));
    }

    #[test]
    fn adopted_ids_survive() {
        let mut a: Allocator<&str> = Allocator::new(1, 100);
        assert!(a.adopt(&"x", 42));
        assert!(!a.adopt(&"y", 42));
        assert!(!a.adopt(&"x", 43));
        assert_eq!(a.id(&"x"), Some(42));
        assert_eq!(a.id(&"y"), Some(1));
    }
}
