//! Child-process roles. The multi-process and crash-point tests re-run this test binary
//! with `--exact tests::child::child_main --ignored` and an environment variable naming
//! the role; run any other way, `child_main` does nothing.

use std::fs::OpenOptions;
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::support::{ip, set};
use crate::{Owner, RangeSet, Store, StoreError};

pub const NETWORK: &str = "churnnet";
/// Exit code of a crash child whose operation finished before the armed step.
pub const COMPLETED: i32 = 42;

const ROLE: &str = "WEFT_IPAM_CHILD_ROLE";
const DIR: &str = "WEFT_IPAM_CHILD_DIR";
const INDEX: &str = "WEFT_IPAM_CHILD_INDEX";
const OPS: &str = "WEFT_IPAM_CHILD_OPS";
const JOURNAL: &str = "WEFT_IPAM_CHILD_JOURNAL";
const SCENARIO: &str = "WEFT_IPAM_CHILD_SCENARIO";
const KILL_AT: &str = "WEFT_IPAM_CHILD_KILL_AT";

pub const OWNERS_PER_CHILD: u64 = 8;

#[test]
#[ignore = "child-process role, started by the multi-process and crash-point tests"]
fn child_main() {
    match std::env::var(ROLE).as_deref() {
        Ok("churn") => churn(),
        Ok("crash") => crash(),
        _ => {}
    }
}

fn this_test_binary(role: &str, data_dir: &Path) -> Command {
    let exe = std::env::current_exe().expect("test binary path");
    let mut cmd = Command::new(exe);
    cmd.args([
        "--exact",
        "tests::child::child_main",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(ROLE, role)
    .env(DIR, data_dir);
    cmd
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("child needs {name}"))
}

// ---- churn: random allocate/release traffic, journaled ----

/// Small ranges so that children compete for addresses and sometimes exhaust the IPv6 set
/// (fewer addresses than IPv4), which exercises "reserve nothing when a later set is full".
pub fn churn_sets() -> Vec<RangeSet> {
    vec![
        set("10.77.0.0/27", None, None, Some("10.77.0.1")),
        set(
            "fd00:77::/64",
            Some("fd00:77::100"),
            Some("fd00:77::119"),
            None,
        ),
    ]
}

pub fn churn_owner(child: u64, n: u64) -> Owner {
    Owner::new(format!("c{child}o{n}"), "eth0")
}

pub fn churn_command(data_dir: &Path, index: u64, ops: u64, journal: &Path) -> Command {
    let mut cmd = this_test_binary("churn", data_dir);
    cmd.env(INDEX, index.to_string())
        .env(OPS, ops.to_string())
        .env(JOURNAL, journal);
    cmd
}

/// A tiny deterministic PRNG (xorshift64*); the tests need variety, not quality.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// Journal lines, each written with one `write` so a kill leaves whole lines:
/// `B <owner>` before an operation, `E <owner> <addr,addr|->` after it (the owner's
/// holding once the operation finished).
fn churn() {
    let data_dir = PathBuf::from(env(DIR));
    let index: u64 = env(INDEX).parse().expect("index");
    let ops: u64 = env(OPS).parse().expect("ops");
    let mut journal = OpenOptions::new()
        .append(true)
        .create(true)
        .open(env(JOURNAL))
        .expect("open journal");
    let mut log = |line: String| journal.write_all(line.as_bytes()).expect("journal");

    let store = Store::open(&data_dir, NETWORK).expect("open store");
    let sets = churn_sets();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (index + 1).wrapping_mul(0x1000_0000_01b3));
    let mut held: std::collections::HashMap<u64, Vec<IpAddr>> = Default::default();
    for _ in 0..ops {
        let n = rng.below(OWNERS_PER_CHILD);
        let owner = churn_owner(index, n);
        log(format!("B {}\n", owner.container_id));
        let after: Option<Vec<IpAddr>> = match held.get(&n).cloned() {
            Some(addrs) if rng.below(4) == 0 => {
                let again = store.allocate(&owner, &sets).expect("idempotent allocate");
                let again: Vec<IpAddr> = again.iter().map(|a| a.address.addr()).collect();
                assert_eq!(
                    again, addrs,
                    "allocate for a holder must return its addresses"
                );
                Some(addrs)
            }
            Some(addrs) => {
                let mut released = store.release(&owner).expect("release");
                released.sort();
                let mut expected = addrs.clone();
                expected.sort();
                assert_eq!(released, expected, "release must free exactly the holding");
                None
            }
            None => {
                let specific = rng.below(3) == 0;
                let result = if specific {
                    let wanted = ip(&format!("10.77.0.{}", 2 + rng.below(29)));
                    store.allocate_specific(&owner, &sets, &[wanted])
                } else {
                    store.allocate(&owner, &sets)
                };
                match result {
                    Ok(allocs) => Some(allocs.iter().map(|a| a.address.addr()).collect()),
                    Err(StoreError::Exhausted { .. }) => None,
                    // Only a request can name a taken address; a dynamic pick that
                    // collides means the lock did not exclude.
                    Err(StoreError::AddressInUse { .. }) if specific => None,
                    Err(e) => panic!("unexpected allocate error: {e}"),
                }
            }
        };
        match &after {
            Some(addrs) => {
                let text: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
                log(format!("E {} {}\n", owner.container_id, text.join(",")));
                held.insert(n, addrs.clone());
            }
            None => {
                log(format!("E {} -\n", owner.container_id));
                held.remove(&n);
            }
        }
    }
}

// ---- crash: one operation, killed at an armed crash point ----

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// `x` allocates from both sets (a scratch file left by a dead process is swept first).
    Allocate,
    /// `x` requests a specific IPv4 address, IPv6 is dynamic.
    AllocateSpecific,
    /// `x` holds an IPv4 address and allocates from both sets: its index is replaced.
    Complete,
    /// `x` releases its two addresses.
    Release,
    /// GC with only `a` and `b` valid: `x` and `y` are released.
    Gc,
}

impl Scenario {
    pub const ALL: [Scenario; 5] = [
        Scenario::Allocate,
        Scenario::AllocateSpecific,
        Scenario::Complete,
        Scenario::Release,
        Scenario::Gc,
    ];

    fn name(self) -> &'static str {
        match self {
            Scenario::Allocate => "allocate",
            Scenario::AllocateSpecific => "allocate-specific",
            Scenario::Complete => "complete",
            Scenario::Release => "release",
            Scenario::Gc => "gc",
        }
    }

    fn from_name(name: &str) -> Scenario {
        Scenario::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .unwrap_or_else(|| panic!("unknown scenario {name}"))
    }

    /// Runs the scenario's operation; used by the child and, for the retry after a
    /// kill, by the parent.
    pub fn run(self, store: &Store) {
        let sets = crash_sets();
        match self {
            Scenario::Allocate | Scenario::Complete => {
                store.allocate(&owner_x(), &sets).expect("allocate");
            }
            Scenario::AllocateSpecific => {
                store
                    .allocate_specific(&owner_x(), &sets, &[requested_v4()])
                    .expect("allocate specific");
            }
            Scenario::Release => {
                store.release(&owner_x()).expect("release");
            }
            Scenario::Gc => {
                let report = store
                    .release_all_except(&[owner_a(), owner_b()])
                    .expect("gc");
                assert!(report.errors.is_empty(), "{:?}", report.errors);
            }
        }
    }
}

pub fn crash_sets() -> Vec<RangeSet> {
    vec![
        set("10.66.0.0/24", None, None, Some("10.66.0.1")),
        set("fd00:66::/64", None, None, None),
    ]
}

pub fn requested_v4() -> IpAddr {
    ip("10.66.0.77")
}

pub fn owner_a() -> Owner {
    Owner::new("a", "eth0")
}
pub fn owner_b() -> Owner {
    Owner::new("b", "eth0")
}
pub fn owner_x() -> Owner {
    Owner::new("x", "eth0")
}
pub fn owner_y() -> Owner {
    Owner::new("y", "net1")
}

pub fn crash_command(data_dir: &Path, scenario: Scenario, kill_at: u64) -> Command {
    let mut cmd = this_test_binary("crash", data_dir);
    cmd.env(SCENARIO, scenario.name())
        .env(KILL_AT, kill_at.to_string());
    cmd
}

fn crash() {
    let data_dir = PathBuf::from(env(DIR));
    let scenario = Scenario::from_name(&env(SCENARIO));
    let kill_at: u64 = env(KILL_AT).parse().expect("kill step");
    let store = Store::open(&data_dir, NETWORK).expect("open store");
    // A scratch file as a dead process leaves it, so sweeping it is a step too (made
    // here because opening the store already sweeps).
    std::fs::write(store.dir().join("tmp/99999.0"), b"{\"contai").expect("leftover");
    crate::fault::arm(kill_at);
    scenario.run(&store);
    std::process::exit(COMPLETED);
}
