//! Where the stores are filled from: the API server's watches ([`kube`]) or a directory of
//! YAML ([`dir`]). A source sends [`SourceMsg`]s; the agent's loop applies them to the
//! stores it owns, so sources never touch a store and reconcilers never see a source.

pub mod dir;
pub mod kube;

use weft_model::{Applied, Issue, KindId, Stores, Update, Watched};

/// What a source tells the agent.
pub enum SourceMsg {
    /// Changes to one kind's store, applied together.
    Update(Box<dyn StoreUpdate>),
    /// A list or watch failed; the source retries with backoff on its own.
    Trouble { kind: &'static str, error: String },
    /// Problems the source found that belong to no stored object (unreadable files,
    /// unnamed objects); replaces what this source reported before for `origin`.
    Issues { origin: String, issues: Vec<Issue> },
}

/// A batch of updates to one kind's store.
pub trait StoreUpdate: Send {
    fn kind(&self) -> KindId;
    /// Events in the batch (for metrics).
    fn events(&self) -> usize;
    fn apply(self: Box<Self>, stores: &mut Stores) -> Applied;
}

/// [`StoreUpdate`] for a watched kind.
pub struct Batch<T: Watched>(pub Vec<Update<T>>);

impl<T: Watched> StoreUpdate for Batch<T> {
    fn kind(&self) -> KindId {
        KindId::of::<T>()
    }

    fn events(&self) -> usize {
        self.0.len()
    }

    fn apply(self: Box<Self>, stores: &mut Stores) -> Applied {
        let mut total = Applied::default();
        let Ok(store) = stores.get_mut::<T>() else {
            return total;
        };
        for update in self.0 {
            let applied = store.apply(update);
            total.changed += applied.changed;
            total.issues_changed |= applied.issues_changed;
            total.synced_now |= applied.synced_now;
        }
        total
    }
}

impl SourceMsg {
    pub fn batch<T: Watched>(updates: Vec<Update<T>>) -> SourceMsg {
        SourceMsg::Update(Box::new(Batch(updates)))
    }
}
