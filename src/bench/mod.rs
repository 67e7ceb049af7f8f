//! `weft bench ...`: side-by-side benchmarks. Each prints every figure beside a baseline
//! measured in the same run (interleaved), with medians and spread, and a ratio line.
//! Benchmarks are not tests: nothing here asserts timing.

pub mod agent;
pub mod cni;
pub mod datapath;
pub mod guard;
pub mod stats;
