//! The server driven by a real client, kube-rs 5 (client + runtime), over loopback HTTP.

mod common;

#[path = "kube_clients/crud.rs"]
mod crud;
#[path = "kube_clients/faults.rs"]
mod faults;
#[path = "kube_clients/lists.rs"]
mod lists;
#[path = "kube_clients/services.rs"]
mod services;
#[path = "kube_clients/watch.rs"]
mod watch;
