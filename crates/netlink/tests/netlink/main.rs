//! Integration tests for weft-netlink: every operation against real network
//! namespaces, checked with `ip -j` / `bridge -j` / `tc -j` as the oracle. They need
//! root and fail (never skip) without it.

mod common;

mod addresses;
mod links;
mod neighbours;
mod netns;
mod round_trips;
mod routes;
mod sysctl;
mod tc;
mod vxlan;
