//! The CNI plugin's functions: readiness, endpoints, idempotency, and refusal of a
//! datapath pinned with another layout.

mod common;

use common::PinRoot;
use std::net::IpAddr;
use std::process::Command;
use weft_datapath::{pod, Datapath, EndpointInfo, Error};

const POD: EndpointInfo = EndpointInfo {
    ifindex: 7,
    mac: [2, 0, 0, 0, 0, 7],
};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn not_ready_until_the_agent_has_loaded_then_ready() {
    let root = PinRoot::new("rd");
    match pod::ensure_ready(root.path()) {
        Err(Error::NotPinned { path }) => assert!(path.starts_with(root.path()), "{path:?}"),
        other => panic!("expected NotPinned, got {other:?}"),
    }
    let _dp = Datapath::load_or_adopt(root.path()).expect("load");
    pod::ensure_ready(root.path()).expect("ready after load");
}

#[test]
fn endpoints_are_added_replaced_and_removed_idempotently() {
    let root = PinRoot::new("ep");
    let dp = Datapath::load_or_adopt(root.path()).expect("load");
    for addr in ["10.244.1.7", "fd00:10:244:1::7"] {
        pod::add_endpoint(root.path(), ip(addr), POD).expect("add");
    }
    assert_eq!(
        dp.endpoints().expect("endpoints"),
        [(ip("10.244.1.7"), POD), (ip("fd00:10:244:1::7"), POD)]
    );
    let moved = EndpointInfo { ifindex: 9, ..POD };
    pod::add_endpoint(root.path(), ip("10.244.1.7"), moved).expect("replace");
    assert_eq!(
        dp.endpoints().expect("endpoints")[0],
        (ip("10.244.1.7"), moved)
    );
    for _ in 0..2 {
        pod::remove_endpoint(root.path(), ip("10.244.1.7")).expect("remove");
    }
    assert_eq!(
        dp.endpoints().expect("endpoints"),
        [(ip("fd00:10:244:1::7"), POD)]
    );
}

#[test]
fn del_succeeds_when_nothing_is_there() {
    let root = PinRoot::new("dn");
    pod::remove_endpoint(root.path(), ip("10.244.1.7")).expect("no datapath at all");
    pod::detach_pod(root.path(), "weftnothere").expect("no link pinned");
}

#[test]
fn add_fails_with_the_pin_path_when_the_agent_never_ran() {
    let root = PinRoot::new("na");
    match pod::add_endpoint(root.path(), ip("10.244.1.7"), POD) {
        Err(e @ Error::NotPinned { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("maps/weft_endpoints"), "{msg}");
        }
        other => panic!("expected NotPinned, got {other:?}"),
    }
    assert!(matches!(
        pod::attach_pod(root.path(), 1, "lo"),
        Err(Error::NotPinned { .. })
    ));
}

#[test]
fn hostile_interface_names_are_refused() {
    let root = PinRoot::new("hn");
    for name in ["../../x", "a/b", "", "waytoolonginterfacename"] {
        assert!(
            matches!(
                pod::detach_pod(root.path(), name),
                Err(Error::InvalidIfname { .. })
            ),
            "{name:?}"
        );
    }
}

/// A map of some shape pinned under `name` in `root`'s maps directory.
fn pin_foreign_map(root: &std::path::Path, name: &str) -> std::path::PathBuf {
    weft_testkit::require_tool("bpftool");
    let maps = root.join("maps");
    std::fs::create_dir_all(&maps).expect("mkdir");
    let pin = maps.join(name);
    weft_testkit::run_ok(
        Command::new("bpftool")
            .args(["map", "create"])
            .arg(&pin)
            .args([
                "type",
                "hash",
                "key",
                "4",
                "value",
                "4",
                "entries",
                "16",
                "name",
                "weft_endpoints",
            ]),
    );
    pin
}

#[test]
fn a_map_pinned_with_another_layout_is_refused_by_agent_and_plugin() {
    let root = PinRoot::new("mm");
    let pin = pin_foreign_map(root.path(), "weft_endpoints_v1");
    match Datapath::load_or_adopt(root.path()) {
        Err(Error::MapMismatch { path, .. }) => assert_eq!(path, pin),
        other => panic!("expected MapMismatch, got {other:?}"),
    }
    assert!(matches!(
        pod::add_endpoint(root.path(), ip("10.244.1.7"), POD),
        Err(Error::MapMismatch { .. })
    ));
    assert!(matches!(
        pod::ensure_ready(root.path()),
        Err(Error::MapMismatch { .. })
    ));
}

#[test]
fn an_unknown_map_under_an_earlier_layouts_name_is_refused_before_anything_is_made() {
    let root = PinRoot::new("mo");
    let pin = pin_foreign_map(root.path(), "weft_endpoints");
    match Datapath::load_or_adopt(root.path()) {
        Err(Error::MapMismatch { path, .. }) => assert_eq!(path, pin),
        other => panic!("expected MapMismatch, got {other:?}"),
    }
    let left: Vec<_> = std::fs::read_dir(root.path().join("maps"))
        .expect("maps dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(left, [std::ffi::OsString::from("weft_endpoints")]);
}
