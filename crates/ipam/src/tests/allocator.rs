//! Behaviour of the store in one process: what gets allocated, in which order, and how
//! errors, idempotency, requests, release, GC and damaged files are handled.

use std::collections::BTreeSet;
use std::fs;
use std::net::IpAddr;
use std::os::unix::fs::symlink;

use super::support::*;
use crate::{ConfigError, Owner, RangeSet, Store, StoreError};

fn store(dir: &TestDir) -> Store {
    Store::open(dir.path(), "podnet").expect("open store")
}

fn addresses(allocs: &[crate::Allocation]) -> Vec<IpAddr> {
    allocs.iter().map(|a| a.address.addr()).collect()
}

fn dual_stack() -> Vec<RangeSet> {
    vec![
        set("10.244.1.0/24", None, None, Some("10.244.1.1")),
        set("fd00:10:244:1::/64", None, None, Some("fd00:10:244:1::1")),
    ]
}

#[test]
fn allocation_carries_prefix_gateway_and_subnet() {
    let dir = TestDir::new("shape");
    let s = store(&dir);
    let got = s.allocate(&owner("a"), &dual_stack()).unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].address, "10.244.1.2/24".parse().unwrap());
    assert_eq!(got[0].gateway, Some(ip("10.244.1.1")));
    assert_eq!(got[0].subnet, "10.244.1.0/24".parse().unwrap());
    assert_eq!(got[1].address, "fd00:10:244:1::2/64".parse().unwrap());
    assert_eq!(got[1].gateway, Some(ip("fd00:10:244:1::1")));
}

#[test]
fn ipv4_skips_network_broadcast_and_gateway() {
    let dir = TestDir::new("v4skip");
    let s = store(&dir);
    // 10.0.0.0/29: .0 network, .7 broadcast, .3 gateway; explicit bounds cover all of it.
    let sets = vec![set(
        "10.0.0.0/29",
        Some("10.0.0.0"),
        Some("10.0.0.7"),
        Some("10.0.0.3"),
    )];
    let mut got = BTreeSet::new();
    for i in 0..5 {
        got.extend(addresses(
            &s.allocate(&owner(&format!("o{i}")), &sets).unwrap(),
        ));
    }
    let expected: BTreeSet<IpAddr> =
        ips(&["10.0.0.1", "10.0.0.2", "10.0.0.4", "10.0.0.5", "10.0.0.6"])
            .into_iter()
            .collect();
    assert_eq!(got, expected);
    let err = s.allocate(&owner("o5"), &sets).unwrap_err();
    assert!(
        matches!(err, StoreError::Exhausted { set_index: 0, .. }),
        "{err}"
    );
}

#[test]
fn ipv6_skips_subnet_router_anycast_and_gateway() {
    let dir = TestDir::new("v6skip");
    let s = store(&dir);
    // fd00::/126 holds ::0 (subnet-router anycast) to ::3; ::3 is not a broadcast in IPv6.
    let sets = vec![set(
        "fd00::/126",
        Some("fd00::"),
        Some("fd00::3"),
        Some("fd00::1"),
    )];
    let a = addresses(&s.allocate(&owner("a"), &sets).unwrap());
    let b = addresses(&s.allocate(&owner("b"), &sets).unwrap());
    assert_eq!([a, b].concat(), ips(&["fd00::2", "fd00::3"]));
    assert!(matches!(
        s.allocate(&owner("c"), &sets),
        Err(StoreError::Exhausted { .. })
    ));
}

#[test]
fn round_robin_does_not_reuse_a_just_freed_address() {
    let dir = TestDir::new("rr");
    let s = store(&dir);
    let sets = vec![set("10.0.0.0/29", None, None, None)]; // .1 - .6
    let a = addresses(&s.allocate(&owner("a"), &sets).unwrap());
    assert_eq!(a, ips(&["10.0.0.1"]));
    assert_eq!(s.release(&owner("a")).unwrap(), a);
    // .1 is free again, but the next owner gets .2, and so on round the range.
    let mut order = Vec::new();
    for i in 0..6 {
        order.extend(addresses(
            &s.allocate(&owner(&format!("o{i}")), &sets).unwrap(),
        ));
    }
    assert_eq!(
        order,
        ips(&["10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6", "10.0.0.1"])
    );
}

#[test]
fn round_robin_walks_the_ranges_of_a_set_in_order_and_wraps() {
    let dir = TestDir::new("rrsets");
    let s = store(&dir);
    let sets = vec![RangeSet::new(vec![
        range("10.0.0.0/24", Some("10.0.0.10"), Some("10.0.0.11"), None),
        range("10.0.1.0/24", Some("10.0.1.20"), Some("10.0.1.20"), None),
    ])];
    let mut order = Vec::new();
    for i in 0..3 {
        order.extend(addresses(
            &s.allocate(&owner(&format!("o{i}")), &sets).unwrap(),
        ));
    }
    assert_eq!(order, ips(&["10.0.0.10", "10.0.0.11", "10.0.1.20"]));
    s.release(&owner("o0")).unwrap();
    let again = s.allocate(&owner("o3"), &sets).unwrap();
    assert_eq!(again[0].address, "10.0.0.10/24".parse().unwrap());
    assert_eq!(again[0].subnet, "10.0.0.0/24".parse().unwrap());
    // The second range's allocation carries the second range's subnet.
    let owner2 = s.reserved_by(&owner("o2")).unwrap();
    assert_eq!(owner2, ips(&["10.0.1.20"]));
}

#[test]
fn exhaustion_names_the_range_set() {
    let dir = TestDir::new("exhaust");
    let s = store(&dir);
    let sets = vec![set("10.9.0.0/30", None, None, None)]; // .1 and .2
    s.allocate(&owner("a"), &sets).unwrap();
    s.allocate(&owner("b"), &sets).unwrap();
    match s.allocate(&owner("c"), &sets) {
        Err(e @ StoreError::Exhausted { set_index: 0, .. }) => {
            assert!(e.to_string().contains("10.9.0.0/30"), "{e}");
        }
        other => panic!("expected Exhausted, got {other:?}"),
    }
    assert_eq!(s.reserved_by(&owner("c")).unwrap(), Vec::<IpAddr>::new());
}

#[test]
fn exhausted_later_set_reserves_nothing_in_earlier_sets() {
    let dir = TestDir::new("rollback");
    let s = store(&dir);
    let sets = vec![
        set("10.0.0.0/24", None, None, None),
        set("fd00::/64", Some("fd00::5"), Some("fd00::5"), None),
    ];
    let first = addresses(&s.allocate(&owner("a"), &sets).unwrap());
    assert_eq!(first, ips(&["10.0.0.1", "fd00::5"]));
    let err = s.allocate(&owner("b"), &sets).unwrap_err();
    assert!(
        matches!(err, StoreError::Exhausted { set_index: 1, .. }),
        "{err}"
    );
    assert_eq!(s.reserved_by(&owner("b")).unwrap(), Vec::<IpAddr>::new());
    assert_eq!(s.reservations().unwrap().len(), 2);
    assert!(!dir.path().join("podnet/owners/b@eth0").exists());
    // The IPv4 cursor did not move either: once IPv6 is free, b gets the next IPv4 address.
    s.release(&owner("a")).unwrap();
    let b = addresses(&s.allocate(&owner("b"), &sets).unwrap());
    assert_eq!(b, ips(&["10.0.0.2", "fd00::5"]));
    assert_consistent(&dir.path().join("podnet"));
}

#[test]
fn allocate_is_idempotent_per_owner() {
    let dir = TestDir::new("idem");
    let s = store(&dir);
    let sets = dual_stack();
    let first = s.allocate(&owner("a"), &sets).unwrap();
    let again = s.allocate(&owner("a"), &sets).unwrap();
    assert_eq!(first, again);
    // Same container, another interface: another owner.
    let other_if = s.allocate(&Owner::new("a", "net1"), &sets).unwrap();
    assert_ne!(addresses(&first), addresses(&other_if));
    assert_eq!(s.reservations().unwrap().len(), 4);
}

#[test]
fn allocate_completes_a_partial_holding() {
    let dir = TestDir::new("partial");
    let s = store(&dir);
    let sets = dual_stack();
    let v4_only = s.allocate(&owner("a"), &sets[..1]).unwrap();
    let both = s.allocate(&owner("a"), &sets).unwrap();
    assert_eq!(both[0], v4_only[0]);
    assert_eq!(both[1].address.addr(), ip("fd00:10:244:1::2"));
    assert_eq!(s.reserved_by(&owner("a")).unwrap().len(), 2);
    assert_consistent(&dir.path().join("podnet"));
}

#[test]
fn specific_address_is_honoured_and_checked() {
    let dir = TestDir::new("specific");
    let s = store(&dir);
    let sets = dual_stack();
    let got = s
        .allocate_specific(&owner("a"), &sets, &[ip("10.244.1.50")])
        .unwrap();
    assert_eq!(addresses(&got), ips(&["10.244.1.50", "fd00:10:244:1::2"]));
    // Repeating the same request is idempotent.
    assert_eq!(
        s.allocate_specific(&owner("a"), &sets, &[ip("10.244.1.50")])
            .unwrap(),
        got
    );
    // A dynamic allocate by the same owner returns what it holds.
    assert_eq!(s.allocate(&owner("a"), &sets).unwrap(), got);

    let in_use = s
        .allocate_specific(&owner("b"), &sets, &[ip("10.244.1.50")])
        .unwrap_err();
    assert!(
        matches!(&in_use, StoreError::AddressInUse { owner: Some(o), .. } if o == &owner("a")),
        "{in_use}"
    );
    let other = s
        .allocate_specific(&owner("a"), &sets, &[ip("10.244.1.51")])
        .unwrap_err();
    assert!(
        matches!(other, StoreError::OwnerHoldsOther { .. }),
        "{other}"
    );
    let gw = s
        .allocate_specific(&owner("b"), &sets, &[ip("10.244.1.1")])
        .unwrap_err();
    assert!(matches!(gw, StoreError::RequestedNotUsable { .. }), "{gw}");
    let net = s
        .allocate_specific(&owner("b"), &sets, &[ip("fd00:10:244:1::")])
        .unwrap_err();
    assert!(
        matches!(net, StoreError::RequestedNotUsable { .. }),
        "{net}"
    );
    let outside = s
        .allocate_specific(&owner("b"), &sets, &[ip("192.0.2.1")])
        .unwrap_err();
    assert!(
        matches!(outside, StoreError::RequestedOutsideRanges { .. }),
        "{outside}"
    );
    let twice = s
        .allocate_specific(&owner("b"), &sets, &[ip("10.244.1.60"), ip("10.244.1.61")])
        .unwrap_err();
    assert!(
        matches!(twice, StoreError::RequestedTwiceInSet { set_index: 0, .. }),
        "{twice}"
    );
    // None of the failures reserved anything.
    assert_eq!(s.reserved_by(&owner("b")).unwrap(), Vec::<IpAddr>::new());
    // Both families requested at once.
    let both = s
        .allocate_specific(
            &owner("b"),
            &sets,
            &[ip("fd00:10:244:1::99"), ip("10.244.1.99")],
        )
        .unwrap();
    assert_eq!(addresses(&both), ips(&["10.244.1.99", "fd00:10:244:1::99"]));
    assert_consistent(&dir.path().join("podnet"));
}

#[test]
fn specific_address_does_not_move_the_round_robin_cursor() {
    let dir = TestDir::new("speccur");
    let s = store(&dir);
    let sets = vec![set("10.0.0.0/24", None, None, None)];
    s.allocate_specific(&owner("a"), &sets, &[ip("10.0.0.100")])
        .unwrap();
    assert_eq!(
        addresses(&s.allocate(&owner("b"), &sets).unwrap()),
        ips(&["10.0.0.1"])
    );
}

#[test]
fn release_is_idempotent() {
    let dir = TestDir::new("release");
    let s = store(&dir);
    let got = addresses(&s.allocate(&owner("a"), &dual_stack()).unwrap());
    assert_eq!(s.release(&owner("a")).unwrap(), got);
    assert_eq!(s.release(&owner("a")).unwrap(), Vec::<IpAddr>::new());
    assert_eq!(s.release(&owner("never")).unwrap(), Vec::<IpAddr>::new());
    assert!(s.reservations().unwrap().is_empty());
    assert!(disk_indexes(&dir.path().join("podnet")).is_empty());
}

#[test]
fn gc_releases_all_but_the_valid_owners() {
    let dir = TestDir::new("gc");
    let s = store(&dir);
    let sets = dual_stack();
    let keep = s.allocate(&owner("keep"), &sets).unwrap();
    let gone = addresses(&s.allocate(&owner("gone"), &sets).unwrap());
    let report = s
        .release_all_except(&[owner("keep"), owner("absent")])
        .unwrap();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let released: Vec<(Owner, IpAddr)> = gone.iter().map(|a| (owner("gone"), *a)).collect();
    assert_eq!(report.released, released);
    assert_eq!(s.reserved_by(&owner("keep")).unwrap(), addresses(&keep));
    assert_eq!(s.reservations().unwrap().len(), 2);
    let indexes = disk_indexes(&dir.path().join("podnet"));
    assert_eq!(indexes.keys().collect::<Vec<_>>(), vec!["keep@eth0"]);
    // Idempotent.
    let again = s.release_all_except(&[owner("keep")]).unwrap();
    assert!(again.released.is_empty() && again.errors.is_empty());
}

#[test]
fn reservations_and_reserved_by_report_the_truth() {
    let dir = TestDir::new("list");
    let s = store(&dir);
    let sets = vec![set("10.0.0.0/24", None, None, None)];
    s.allocate(&owner("a"), &sets).unwrap();
    s.allocate(&owner("b"), &sets).unwrap();
    let all = s.reservations().unwrap();
    let pairs: Vec<(IpAddr, Option<Owner>)> =
        all.into_iter().map(|r| (r.address, r.owner)).collect();
    assert_eq!(
        pairs,
        vec![
            (ip("10.0.0.1"), Some(owner("a"))),
            (ip("10.0.0.2"), Some(owner("b")))
        ]
    );
    assert_eq!(s.reserved_by(&owner("b")).unwrap(), ips(&["10.0.0.2"]));
}

#[test]
fn check_ready_reports_exhaustion_and_an_unwritable_store() {
    let dir = TestDir::new("ready");
    let s = store(&dir);
    let sets = vec![
        set("10.0.0.0/30", None, None, None),
        set("fd00::/120", None, None, None),
    ];
    s.check_ready(&sets).unwrap();
    s.allocate(&owner("a"), &sets).unwrap();
    s.check_ready(&sets).unwrap();
    s.allocate(&owner("b"), &sets).unwrap();
    let err = s.check_ready(&sets).unwrap_err();
    assert!(
        matches!(err, StoreError::Exhausted { set_index: 0, .. }),
        "{err}"
    );
    s.release(&owner("b")).unwrap();
    s.check_ready(&sets).unwrap();

    // Tests run as root, where permission bits do not stop writes: make the scratch
    // directory a file instead, which fails the same way a read-only disk would.
    let tmp = dir.path().join("podnet/tmp");
    fs::remove_dir(&tmp).unwrap();
    fs::write(&tmp, b"not a directory").unwrap();
    let err = s.check_ready(&sets).unwrap_err();
    assert!(matches!(err, StoreError::NotWritable { .. }), "{err}");
}

#[test]
fn invalid_input_is_refused_with_typed_errors() {
    let dir = TestDir::new("invalid");
    assert!(matches!(
        Store::open(dir.path(), "../escape"),
        Err(StoreError::InvalidNetworkName { .. })
    ));
    assert!(matches!(
        Store::open(dir.path(), ""),
        Err(StoreError::InvalidNetworkName { .. })
    ));
    let s = store(&dir);
    let sets = vec![set("10.0.0.0/24", None, None, None)];
    for bad in [
        Owner::new("", "eth0"),
        Owner::new("-x", "eth0"),
        Owner::new("a/b", "eth0"),
        Owner::new("a@b", "eth0"),
        Owner::new("ok", ""),
        Owner::new("ok", ".."),
        Owner::new("ok", "eth/0"),
        Owner::new("ok", "sixteen-bytes-xx"),
        Owner::new("x".repeat(201), "eth0"),
    ] {
        assert!(
            matches!(
                s.allocate(&bad, &sets),
                Err(StoreError::InvalidOwner { .. })
            ),
            "{bad:?}"
        );
        assert!(
            matches!(s.release(&bad), Err(StoreError::InvalidOwner { .. })),
            "{bad:?}"
        );
    }
    assert!(matches!(
        s.allocate(&owner("a"), &[]),
        Err(StoreError::InvalidRanges(ConfigError::NoRangeSets { .. }))
    ));
    let mut broken = set("10.0.0.0/24", None, None, None);
    broken.ranges[0].range_start = ip("10.1.0.1");
    assert!(matches!(
        s.allocate(&owner("a"), &[broken]),
        Err(StoreError::InvalidRanges(ConfigError::OutsideSubnet { .. }))
    ));
    assert!(s.reservations().unwrap().is_empty());
}

#[test]
fn a_foreign_or_newer_directory_is_refused() {
    let dir = TestDir::new("foreign");
    // What host-local leaves in its network directory.
    let hl = dir.path().join("hostlocal");
    fs::create_dir_all(&hl).unwrap();
    fs::write(hl.join("10.0.0.2"), b"abc\r\neth0").unwrap();
    fs::write(hl.join("last_reserved_ip.0"), b"10.0.0.2").unwrap();
    assert!(matches!(
        Store::open(dir.path(), "hostlocal"),
        Err(StoreError::UnsupportedFormat { .. })
    ));
    let s = store(&dir);
    drop(s);
    fs::write(dir.path().join("podnet/format"), b"weft-ipam 2\n").unwrap();
    assert!(matches!(
        Store::open(dir.path(), "podnet"),
        Err(StoreError::UnsupportedFormat { .. })
    ));
}

#[test]
fn stale_index_entries_never_release_someone_elses_address() {
    let dir = TestDir::new("stale");
    let s = store(&dir);
    let sets = vec![set("10.0.0.0/24", None, None, None)];
    let b = addresses(&s.allocate(&owner("b"), &sets).unwrap());
    // What a kill between "index written" and "address created" leaves, after the
    // address then went to someone else.
    symlink(b[0].to_string(), dir.path().join("podnet/owners/a@eth0")).unwrap();
    assert_eq!(s.reserved_by(&owner("a")).unwrap(), Vec::<IpAddr>::new());
    assert_eq!(s.release(&owner("a")).unwrap(), Vec::<IpAddr>::new());
    assert_eq!(s.reserved_by(&owner("b")).unwrap(), b);
    // And a retried allocate for a does not believe the stale entry either.
    let a = addresses(&s.allocate(&owner("a"), &sets).unwrap());
    assert_ne!(a, b);
    assert_consistent(&dir.path().join("podnet"));
}

#[test]
fn unreadable_records_stay_taken_until_gc() {
    let dir = TestDir::new("torn");
    let s = store(&dir);
    let sets = vec![set("10.0.0.0/29", None, None, None)];
    // What a power loss or a stray hand may leave: an empty regular file, and a record
    // whose owner is cut short.
    fs::write(dir.path().join("podnet/addresses/10.0.0.1"), b"").unwrap();
    symlink("3f2a@", dir.path().join("podnet/addresses/10.0.0.2")).unwrap();
    let a = addresses(&s.allocate(&owner("a"), &sets).unwrap());
    assert_eq!(a, ips(&["10.0.0.3"]));
    let listed = s.reservations().unwrap();
    assert_eq!(listed.len(), 3);
    assert_eq!(listed[0].owner, None);
    assert_eq!(listed[1].owner, None);
    assert!(matches!(
        s.allocate_specific(&owner("b"), &sets, &[ip("10.0.0.1")]),
        Err(StoreError::AddressInUse { owner: None, .. })
    ));
    let report = s.release_all_except(&[owner("a")]).unwrap();
    assert_eq!(report.released_unreadable, ips(&["10.0.0.1", "10.0.0.2"]));
    assert_eq!(s.reserved_by(&owner("a")).unwrap(), a);
    assert_consistent(&dir.path().join("podnet"));
}

#[test]
fn an_unreadable_index_falls_back_to_a_scan() {
    let dir = TestDir::new("badindex");
    let s = store(&dir);
    let got = addresses(&s.allocate(&owner("a"), &dual_stack()).unwrap());
    let index = dir.path().join("podnet/owners/a@eth0");
    fs::remove_file(&index).unwrap();
    symlink("10.244.1.2,fd00:10:2", &index).unwrap();
    assert_eq!(s.reserved_by(&owner("a")).unwrap(), got);
    assert_eq!(s.release(&owner("a")).unwrap(), got);
    assert!(s.reservations().unwrap().is_empty());
}

#[test]
fn gc_repairs_the_index_of_a_valid_owner() {
    let dir = TestDir::new("repair");
    let s = store(&dir);
    let got = addresses(&s.allocate(&owner("a"), &dual_stack()).unwrap());
    let index = dir.path().join("podnet/owners/a@eth0");
    fs::remove_file(&index).unwrap();
    let report = s.release_all_except(&[owner("a")]).unwrap();
    assert!(report.released.is_empty() && report.errors.is_empty());
    assert_consistent(&dir.path().join("podnet"));
    assert_eq!(s.release(&owner("a")).unwrap(), got);
}

#[test]
fn leftover_scratch_files_are_swept() {
    let dir = TestDir::new("sweep");
    let s = store(&dir);
    let tmp = dir.path().join("podnet/tmp");
    fs::write(
        tmp.join("4242.0"),
        b"{\"containerId\":\"dead\",\"ifname\":\"eth0\"}\n",
    )
    .unwrap();
    fs::write(tmp.join("4242.1"), b"").unwrap();
    s.allocate(&owner("a"), &[set("10.0.0.0/24", None, None, None)])
        .unwrap();
    assert!(scratch_files(&dir.path().join("podnet")).is_empty());
}
