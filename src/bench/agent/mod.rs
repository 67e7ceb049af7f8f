//! `weft bench agent`: the agent against an in-memory API server holding a synthetic
//! cluster.

pub mod synthetic;
