//! Tests of the store: behaviour (`allocator`), many threads and processes at once
//! (`concurrency`), and a kill at every step of every operation (`crash_points`). The
//! process tests re-run this test binary as children (`child`).

mod allocator;
mod child;
mod concurrency;
mod crash_points;
mod support;
