//! Many allocators at once: threads sharing one `Store`, and processes (some SIGKILLed
//! mid-run) sharing one directory.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::net::IpAddr;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use super::child::{churn_command, churn_owner, churn_sets, NETWORK, OWNERS_PER_CHILD};
use super::support::{
    assert_consistent, disk_indexes, disk_reservations, scratch_files, set, TestDir,
};
use crate::{Owner, Store};

#[test]
fn threads_sharing_one_store_never_share_an_address() {
    let dir = TestDir::new("threads");
    let store = Store::open(dir.path(), "podnet").unwrap();
    let sets = vec![set("10.1.0.0/24", None, None, None)];
    let results: Vec<Vec<(Owner, IpAddr)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let (store, sets) = (&store, &sets);
                scope.spawn(move || {
                    let mut kept = Vec::new();
                    for i in 0..12 {
                        let o = Owner::new(format!("t{t}n{i}"), "eth0");
                        let a = store.allocate(&o, sets).expect("allocate")[0]
                            .address
                            .addr();
                        // Release every third one so frees interleave with allocations.
                        if i % 3 == 0 {
                            assert_eq!(store.release(&o).expect("release"), vec![a]);
                        } else {
                            kept.push((o, a));
                        }
                    }
                    kept
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    let held: Vec<(Owner, IpAddr)> = results.into_iter().flatten().collect();
    let distinct: BTreeSet<IpAddr> = held.iter().map(|(_, a)| *a).collect();
    assert_eq!(distinct.len(), held.len(), "an address went to two owners");
    let on_disk = disk_reservations(&dir.path().join("podnet"));
    let expected: BTreeMap<IpAddr, Owner> = held.into_iter().map(|(o, a)| (a, o)).collect();
    assert_eq!(on_disk, expected);
    assert_consistent(&dir.path().join("podnet"));
}

const CHILDREN: u64 = 6;
const OPS_PER_CHILD: u64 = 80;
/// Children killed once their journal reaches `KILL_AFTER_LINES + 12 * index` lines.
const VICTIMS: [u64; 3] = [0, 2, 4];
const KILL_AFTER_LINES: usize = 16;

/// What a child's journal says about each of its owners once it stopped.
#[derive(Debug, PartialEq, Eq)]
enum Fate {
    Holds(BTreeSet<IpAddr>),
    HoldsNothing,
    /// Killed between `B` and `E`: the operation may have done anything.
    InFlight,
}

fn read_journal(path: &Path) -> (BTreeMap<String, Fate>, usize) {
    let text = fs::read_to_string(path).unwrap_or_default();
    let mut fates = BTreeMap::new();
    let mut completed = 0;
    // A kill may cut the last line short; only whole lines count.
    let whole = text.rsplit_once('\n').map(|(w, _)| w).unwrap_or("");
    for line in whole.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        match parts.as_slice() {
            ["B", owner] => {
                fates.insert(owner.to_string(), Fate::InFlight);
            }
            ["E", owner, "-"] => {
                fates.insert(owner.to_string(), Fate::HoldsNothing);
                completed += 1;
            }
            ["E", owner, addrs] => {
                let set = addrs
                    .split(',')
                    .map(|a| a.parse().expect("journal address"))
                    .collect();
                fates.insert(owner.to_string(), Fate::Holds(set));
                completed += 1;
            }
            _ => panic!("bad journal line {line:?} in {path:?}"),
        }
    }
    (fates, completed)
}

fn journal_lines(path: &Path) -> usize {
    fs::read_to_string(path)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

fn kill_when_journal_reaches(child: &mut Child, journal: &Path, lines: usize) {
    loop {
        if child.try_wait().expect("poll child").is_some() {
            return; // finished before we got to it: nothing to kill
        }
        if journal_lines(journal) >= lines {
            child.kill().expect("SIGKILL child");
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn processes_killed_mid_run_leave_a_store_gc_reconciles() {
    let dir = TestDir::new("procs");
    let data_dir = dir.path().join("data");
    Store::open(&data_dir, NETWORK).expect("create store");
    let journals: Vec<_> = (0..CHILDREN)
        .map(|i| dir.path().join(format!("journal-{i}")))
        .collect();
    let mut children: Vec<Child> = (0..CHILDREN)
        .map(|i| {
            churn_command(&data_dir, i, OPS_PER_CHILD, &journals[i as usize])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn churn child")
        })
        .collect();
    for &v in &VICTIMS {
        let lines = KILL_AFTER_LINES + 12 * v as usize;
        kill_when_journal_reaches(&mut children[v as usize], &journals[v as usize], lines);
    }
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().expect("wait child");
        if !VICTIMS.contains(&(i as u64)) {
            assert!(
                out.status.success(),
                "child {i} failed: {:?}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    // The owners the "runtime" still considers live: those whose last journaled operation
    // completed and left them holding addresses. In-flight owners of killed children are
    // not valid, like a sandbox whose ADD never returned.
    let mut valid: BTreeMap<Owner, BTreeSet<IpAddr>> = BTreeMap::new();
    let mut completed_ops = 0;
    for (i, journal) in journals.iter().enumerate() {
        let (fates, completed) = read_journal(journal);
        completed_ops += completed;
        for n in 0..OWNERS_PER_CHILD {
            let owner = churn_owner(i as u64, n);
            if let Some(Fate::Holds(addrs)) = fates.get(&owner.container_id) {
                valid.insert(owner, addrs.clone());
            }
        }
    }
    eprintln!(
        "{completed_ops} operations completed by {CHILDREN} processes ({} killed); {} owners live",
        VICTIMS.len(),
        valid.len()
    );
    assert!(
        completed_ops >= 200,
        "only {completed_ops} operations completed"
    );

    // No two live owners believe they hold the same address.
    let mut seen: BTreeMap<IpAddr, &Owner> = BTreeMap::new();
    for (owner, addrs) in &valid {
        for a in addrs {
            if let Some(other) = seen.insert(*a, owner) {
                panic!("{a} handed to both {other} and {owner}");
            }
        }
    }

    let store_dir = data_dir.join(NETWORK);
    assert_consistent(&store_dir);
    let store = Store::open(&data_dir, NETWORK).expect("reopen");
    let owners: Vec<Owner> = valid.keys().cloned().collect();
    let report = store.release_all_except(&owners).expect("gc");
    assert!(report.errors.is_empty(), "{:?}", report.errors);

    // Exactly the live owners' addresses remain, each with its owner.
    let expected: BTreeMap<IpAddr, Owner> = valid
        .iter()
        .flat_map(|(o, addrs)| addrs.iter().map(move |a| (*a, o.clone())))
        .collect();
    assert_eq!(disk_reservations(&store_dir), expected);
    for (owner, addrs) in &valid {
        let held: BTreeSet<IpAddr> = store
            .reserved_by(owner)
            .expect("reserved_by")
            .into_iter()
            .collect();
        assert_eq!(&held, addrs, "{owner} lost or gained addresses");
    }
    let index_keys: BTreeSet<String> = disk_indexes(&store_dir).into_keys().collect();
    let valid_keys: BTreeSet<String> = valid
        .keys()
        .map(|o| format!("{}@{}", o.container_id, o.ifname))
        .collect();
    assert_eq!(index_keys, valid_keys);
    assert!(scratch_files(&store_dir).is_empty());
    assert_consistent(&store_dir);
    // Every live owner's addresses come from the configured sets, one per set.
    let sets = churn_sets();
    for addrs in valid.values() {
        assert_eq!(addrs.len(), sets.len());
        for s in &sets {
            assert_eq!(
                addrs
                    .iter()
                    .filter(|a| s.usable_range_for(**a).is_some())
                    .count(),
                1
            );
        }
    }
}
