//! Every store the agent keeps, one per registered kind, looked up by type. A kind
//! defined in another crate plugs in with one `register::<Kind>()`.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;

use crate::issue::Issue;
use crate::kind::{KindInfo, Watched};
use crate::store::{Changed, Generation, Store};

/// A kind as reconcilers name it in what they read.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct KindId {
    type_id: TypeId,
    pub info: KindInfo,
}

impl KindId {
    pub fn of<T: Watched>() -> KindId {
        KindId {
            type_id: TypeId::of::<T>(),
            info: T::KIND,
        }
    }

    pub fn kind(&self) -> &'static str {
        self.info.kind
    }
}

impl fmt::Debug for KindId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.info.kind)
    }
}

/// What every store answers without knowing its type.
pub trait AnyStore: Send + Sync {
    fn kind(&self) -> KindInfo;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn issues(&self) -> Vec<Issue>;
    fn issue_count(&self) -> usize;
    fn synced(&self) -> bool;
    fn generation(&self) -> Generation;
    fn changes_since(&self, since: Option<Generation>) -> Changed;
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Watched> AnyStore for Store<T> {
    fn kind(&self) -> KindInfo {
        T::KIND
    }
    fn len(&self) -> usize {
        Store::len(self)
    }
    fn issues(&self) -> Vec<Issue> {
        Store::issues(self).cloned().collect()
    }
    fn issue_count(&self) -> usize {
        Store::issues(self).count()
    }
    fn synced(&self) -> bool {
        Store::synced(self)
    }
    fn generation(&self) -> Generation {
        Store::generation(self)
    }
    fn changes_since(&self, since: Option<Generation>) -> Changed {
        Store::changes_since(self, since)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A reconciler asked for a kind nobody registered (a programming error, reported rather
/// than panicking).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no store for {0}: the kind is not registered")]
pub struct NotRegistered(pub &'static str);

#[derive(Default)]
pub struct Stores {
    stores: HashMap<TypeId, Box<dyn AnyStore>>,
    order: Vec<KindId>,
}

impl Stores {
    /// Adds an empty store for `T` (again: no effect).
    pub fn register<T: Watched>(&mut self) {
        let id = KindId::of::<T>();
        if self.stores.contains_key(&id.type_id) {
            return;
        }
        self.stores
            .insert(id.type_id, Box::new(Store::<T>::default()));
        self.order.push(id);
    }

    pub fn get<T: Watched>(&self) -> Result<&Store<T>, NotRegistered> {
        self.stores
            .get(&TypeId::of::<T>())
            .and_then(|s| s.as_any().downcast_ref())
            .ok_or(NotRegistered(T::KIND.kind))
    }

    pub fn get_mut<T: Watched>(&mut self) -> Result<&mut Store<T>, NotRegistered> {
        self.stores
            .get_mut(&TypeId::of::<T>())
            .and_then(|s| s.as_any_mut().downcast_mut())
            .ok_or(NotRegistered(T::KIND.kind))
    }

    pub fn by_id(&self, id: KindId) -> Option<&dyn AnyStore> {
        self.stores.get(&id.type_id).map(|s| &**s)
    }

    pub fn contains(&self, id: KindId) -> bool {
        self.stores.contains_key(&id.type_id)
    }

    /// The registered kinds, in registration order.
    pub fn kinds(&self) -> &[KindId] {
        &self.order
    }

    /// Every store, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = (KindId, &dyn AnyStore)> {
        self.order
            .iter()
            .filter_map(|id| self.stores.get(&id.type_id).map(|s| (*id, &**s)))
    }
}

impl fmt::Debug for Stores {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for (id, store) in self.iter() {
            m.entry(&id, &store.len());
        }
        m.finish()
    }
}
