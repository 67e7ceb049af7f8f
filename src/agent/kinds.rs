//! The kinds the agent watches, in one place: each gets a store, a watcher in a cluster and
//! a reader in the directory source. Adding a kind is one line here once its crate
//! implements `weft_model::Watched` for its compact type.

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use tokio::sync::mpsc;
use weft_model::{KindId, Namespace, NodeSpec, Pod, Stores, Watched};

use super::placeholder;
use super::source::{dir, kube, SourceMsg};

/// One watched kind and how each source fills its store.
pub struct Kind {
    pub id: KindId,
    register: fn(&mut Stores),
    /// The directory source's relist of this kind.
    pub relist: dir::Relist,
    /// The Kubernetes source's watcher for this kind.
    pub watch: fn(::kube::Client, mpsc::Sender<SourceMsg>) -> BoxFuture<'static, ()>,
}

impl Kind {
    pub fn of<T: Watched>() -> Kind {
        Kind {
            id: KindId::of::<T>(),
            register: |stores| stores.register::<T>(),
            relist: dir::relist::<T>,
            watch: |client, tx| kube::watch::<T>(client, tx).boxed(),
        }
    }
}

/// Every kind weft reads. The Service, EndpointSlice and NetworkPolicy entries are
/// placeholders until `weft-services` and `weft-policy` provide their compact types.
pub fn all() -> Vec<Kind> {
    vec![
        Kind::of::<NodeSpec>(),
        Kind::of::<Namespace>(),
        Kind::of::<Pod>(),
        Kind::of::<placeholder::Service>(),
        Kind::of::<placeholder::EndpointSlice>(),
        Kind::of::<placeholder::NetworkPolicy>(),
    ]
}

/// A store for each kind.
pub fn stores(kinds: &[Kind]) -> Stores {
    let mut stores = Stores::default();
    for kind in kinds {
        (kind.register)(&mut stores);
    }
    stores
}
