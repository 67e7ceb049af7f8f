//! A SIGKILL at every step of every store operation: for each scenario and each step k, a
//! child process runs the operation armed to kill itself at the k-th crash point, until an
//! armed run completes. After every kill the store must be consistent, the bystanders'
//! reservations untouched, a retry of the operation must succeed, and GC must reclaim
//! everything the dead process was doing.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;

use super::child::{
    crash_command, crash_sets, owner_a, owner_b, owner_x, owner_y, requested_v4, Scenario,
    COMPLETED, NETWORK,
};
use super::support::{
    assert_consistent, copy_dir, disk_indexes, disk_reservations, scratch_files, TestDir,
};
use crate::{Owner, Store};

/// Builds the starting store for a scenario and returns the bystanders' reservations.
fn prepare(data_dir: &Path, scenario: Scenario) -> BTreeMap<IpAddr, Owner> {
    let store = Store::open(data_dir, NETWORK).expect("open");
    let sets = crash_sets();
    store.allocate(&owner_a(), &sets).expect("a");
    store.allocate(&owner_b(), &sets).expect("b");
    let bystanders = disk_reservations(&data_dir.join(NETWORK));
    if matches!(scenario, Scenario::Release | Scenario::Gc) {
        store.allocate(&owner_x(), &sets).expect("x");
    }
    if scenario == Scenario::Gc {
        store.allocate(&owner_y(), &sets[..1]).expect("y");
    }
    if scenario == Scenario::Complete {
        store
            .allocate(&owner_x(), &sets[..1])
            .expect("x, IPv4 only");
    }
    bystanders
}

fn assert_only(store_dir: &Path, expected: &BTreeMap<IpAddr, Owner>, context: &str) {
    assert_consistent(store_dir);
    assert_eq!(
        &disk_reservations(store_dir),
        expected,
        "{context}: reservations"
    );
}

/// After the kill, retrying the operation must work and leave a consistent store.
fn check_retry(
    data_dir: &Path,
    scenario: Scenario,
    bystanders: &BTreeMap<IpAddr, Owner>,
    context: &str,
) {
    let store = Store::open(data_dir, NETWORK).expect("reopen after kill");
    scenario.run(&store);
    let store_dir = data_dir.join(NETWORK);
    assert_consistent(&store_dir);
    let held = store.reserved_by(&owner_x()).expect("reserved_by");
    match scenario {
        Scenario::Allocate | Scenario::Complete => {
            assert_eq!(held.len(), 2, "{context}: x after retry")
        }
        Scenario::AllocateSpecific => {
            assert_eq!(held.len(), 2, "{context}: x after retry");
            assert!(
                held.contains(&requested_v4()),
                "{context}: requested address"
            );
        }
        Scenario::Release | Scenario::Gc => {
            assert!(held.is_empty(), "{context}: x after retry");
        }
    }
    if scenario == Scenario::Gc {
        assert_only(&store_dir, bystanders, context);
    }
    for (address, owner) in bystanders {
        assert_eq!(
            disk_reservations(&store_dir).get(address),
            Some(owner),
            "{context}: bystander after retry"
        );
    }
}

/// GC with the bystanders as the valid attachments must bring the store back to exactly
/// their reservations, with no index or scratch file of the dead process left.
fn check_gc(data_dir: &Path, bystanders: &BTreeMap<IpAddr, Owner>, context: &str) {
    let store = Store::open(data_dir, NETWORK).expect("reopen after kill");
    let report = store
        .release_all_except(&[owner_a(), owner_b()])
        .expect("gc");
    assert!(report.errors.is_empty(), "{context}: {:?}", report.errors);
    let store_dir = data_dir.join(NETWORK);
    assert_only(&store_dir, bystanders, context);
    let keys: Vec<String> = disk_indexes(&store_dir).into_keys().collect();
    assert_eq!(keys, vec!["a@eth0", "b@eth0"], "{context}: indexes");
    assert!(
        scratch_files(&store_dir).is_empty(),
        "{context}: scratch files left"
    );
}

fn kill_at_every_step(scenario: Scenario) -> u64 {
    for step in 1.. {
        let dir = TestDir::new("crash");
        let data_dir = dir.path().join("data");
        let bystanders = prepare(&data_dir, scenario);
        let out = crash_command(&data_dir, scenario, step)
            .output()
            .expect("run crash child");
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code() == Some(COMPLETED) {
            // Past the last crash point: the operation ran to completion.
            check_gc(&data_dir, &bystanders, &format!("{scenario:?} completed"));
            let kills = step - 1;
            eprintln!("{scenario:?}: killed and recovered at each of {kills} steps");
            return kills;
        }
        assert_eq!(
            out.status.signal(),
            Some(libc_sigkill()),
            "{scenario:?} step {step}: child neither completed nor was killed: {:?}\n{stderr}",
            out.status
        );
        let context = format!(
            "{scenario:?} killed at {}",
            stderr
                .lines()
                .find(|l| l.starts_with("crash point"))
                .unwrap_or("?")
        );
        assert_consistent(&data_dir.join(NETWORK));
        for (address, owner) in &bystanders {
            assert_eq!(
                disk_reservations(&data_dir.join(NETWORK)).get(address),
                Some(owner),
                "{context}: bystander's reservation"
            );
        }
        let copy = dir.path().join("copy");
        copy_dir(&data_dir, &copy);
        check_retry(&copy, scenario, &bystanders, &context);
        check_gc(&data_dir, &bystanders, &context);
        eprintln!("{context}: consistent, retry and GC recover");
    }
    unreachable!("the step loop only ends by returning")
}

fn libc_sigkill() -> i32 {
    nix::sys::signal::Signal::SIGKILL as i32
}

// Each expected count lists the steps; a change to it should be a conscious one, since
// every step is a state a kill can leave behind.

#[test]
fn allocate_survives_a_kill_at_every_step() {
    // lock, sweep a leftover, 2 cursors, create the index, 2 address records
    assert_eq!(kill_at_every_step(Scenario::Allocate), 7);
}

#[test]
fn allocate_specific_survives_a_kill_at_every_step() {
    // lock, sweep, the IPv6 cursor (a requested address moves none), index, 2 records
    assert_eq!(kill_at_every_step(Scenario::AllocateSpecific), 6);
}

#[test]
fn completing_a_partial_holding_survives_a_kill_at_every_step() {
    // lock, sweep, the IPv6 cursor, scratch index, rename it over the old, 1 record
    assert_eq!(kill_at_every_step(Scenario::Complete), 6);
}

#[test]
fn release_survives_a_kill_at_every_step() {
    // lock, sweep, 2 address records, the index
    assert_eq!(kill_at_every_step(Scenario::Release), 5);
}

#[test]
fn gc_survives_a_kill_at_every_step() {
    // lock, sweep, x's 2 and y's 1 address records, x's and y's indexes
    assert_eq!(kill_at_every_step(Scenario::Gc), 7);
}
