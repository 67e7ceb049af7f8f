//! weft-guard: a chained CNI plugin that confines a sandboxed pod's egress to a proxy UID.

pub mod plugin;
