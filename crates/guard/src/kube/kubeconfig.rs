//! The kubeconfig and in-cluster settings live in `weft-kubeconfig` (the agent reads them
//! too); this module keeps the names the guard's client uses.

pub use weft_kubeconfig::{read_limited, ApiTarget, Auth, ClientIdentity};
