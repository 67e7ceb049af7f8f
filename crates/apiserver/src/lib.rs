//! weft-apiserver: an in-memory Kubernetes API server for weft's tests and lab.
pub mod admission;
pub mod allocators;
pub mod error;
pub mod meta;
pub mod patch;
pub mod resources;
pub mod selectors;
pub mod store;
