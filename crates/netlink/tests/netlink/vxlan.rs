use crate::common::{strings, veth_in, Ns};
use std::collections::BTreeSet;
use std::net::IpAddr;
use weft_netlink::{mac_to_string, AddrFlags, Error, Mac, VxlanSpec};

const FLOOD: Mac = [0; 6];
const VTEP_MAC: Mac = [0x02, 0x77, 0x66, 0, 0, 0x01];
const REMOTE_MAC: Mac = [0x02, 0x77, 0x66, 0, 0, 0x02];

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

/// A VXLAN device in `ns` over a veth "underlay" addressed 203.0.113.1/24.
fn vxlan(ns: &Ns, handle: &mut weft_netlink::Handle) -> (String, String, u32) {
    let (underlay, underlay_index) = veth_in(ns, handle);
    handle
        .add_address(
            underlay_index,
            "203.0.113.1/24".parse().unwrap(),
            AddrFlags::default(),
        )
        .unwrap();
    let name = weft_testkit::unique_name("vx");
    let index = handle
        .create_vxlan(&VxlanSpec {
            name: &name,
            vni: 4242,
            local: Some(ip("203.0.113.1")),
            underlay_index: Some(underlay_index),
            port: 4789,
            learning: false,
            mtu: Some(1450),
            mac: Some(VTEP_MAC),
            df_set: true,
            up: true,
        })
        .unwrap();
    (name, underlay, index)
}

#[test]
fn vxlan_device_has_the_requested_vni_port_learning_and_df() {
    let node = Ns::new("vx");
    let mut handle = node.handle();
    let (name, underlay, index) = vxlan(&node, &mut handle);

    let link = node.link(&name);
    assert_eq!(link["ifindex"], index);
    assert_eq!(link["mtu"], 1450);
    assert_eq!(link["address"], mac_to_string(&VTEP_MAC));
    assert!(strings(&link["flags"]).contains(&"UP".to_string()));
    let info = &link["linkinfo"];
    assert_eq!(info["info_kind"], "vxlan");
    let data = &info["info_data"];
    assert_eq!(data["id"], 4242);
    assert_eq!(data["local"], "203.0.113.1");
    assert_eq!(data["link"], underlay.as_str());
    assert_eq!(data["port"], 4789);
    assert_eq!(data["learning"], false);
    assert_eq!(data["df"], "set");
    assert!(data.get("external").is_none(), "fixed VNI, not collect_md");

    let ours = handle.link_by_index(index).unwrap().unwrap();
    assert_eq!(ours.kind.as_deref(), Some("vxlan"));

    let err = handle
        .create_vxlan(&VxlanSpec {
            name: "weftvxbad",
            vni: 1 << 24,
            ..Default::default()
        })
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
}

#[test]
fn flood_list_takes_several_destinations_per_mac() {
    let node = Ns::new("vx");
    let mut handle = node.handle();
    let (name, _, index) = vxlan(&node, &mut handle);

    handle.append_fdb(index, FLOOD, ip("203.0.113.2")).unwrap();
    handle.append_fdb(index, FLOOD, ip("203.0.113.3")).unwrap();
    handle.append_fdb(index, FLOOD, ip("203.0.113.3")).unwrap(); // idempotent

    let shown = node.bridge(&["fdb", "show", "dev", &name]);
    let flood: Vec<_> = shown
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["mac"] == "00:00:00:00:00:00")
        .collect();
    let dsts: BTreeSet<&str> = flood.iter().filter_map(|e| e["dst"].as_str()).collect();
    assert_eq!(
        dsts,
        BTreeSet::from(["203.0.113.2", "203.0.113.3"]),
        "{shown}"
    );
    assert_eq!(
        flood.len(),
        2,
        "no duplicate entry from the repeated append"
    );
    for entry in &flood {
        assert_eq!(entry["state"], "permanent");
        assert!(
            strings(&entry["flags"]).contains(&"self".to_string()),
            "{entry}"
        );
    }

    let ours: BTreeSet<(Mac, IpAddr)> = handle.fdb_entries(index).unwrap().into_iter().collect();
    assert_eq!(
        ours,
        BTreeSet::from([(FLOOD, ip("203.0.113.2")), (FLOOD, ip("203.0.113.3"))])
    );

    handle.delete_fdb(index, FLOOD, ip("203.0.113.2")).unwrap();
    assert_eq!(
        handle.fdb_entries(index).unwrap(),
        vec![(FLOOD, ip("203.0.113.3"))]
    );
    // The kernel accepts deleting a destination the MAC does not have...
    handle.delete_fdb(index, FLOOD, ip("203.0.113.2")).unwrap();
    assert_eq!(
        handle.fdb_entries(index).unwrap(),
        vec![(FLOOD, ip("203.0.113.3"))]
    );
    // ...and the entry goes with its last destination, after which the MAC is unknown.
    handle.delete_fdb(index, FLOOD, ip("203.0.113.3")).unwrap();
    assert!(node
        .bridge(&["fdb", "show", "dev", &name])
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["mac"] != "00:00:00:00:00:00"));
    let err = handle
        .delete_fdb(index, FLOOD, ip("203.0.113.3"))
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
}

#[test]
fn unicast_macs_have_one_destination_that_replace_moves() {
    let node = Ns::new("vx");
    let mut handle = node.handle();
    let (name, _, index) = vxlan(&node, &mut handle);

    let err = handle
        .append_fdb(index, REMOTE_MAC, ip("203.0.113.2"))
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");

    handle
        .replace_fdb(index, REMOTE_MAC, ip("203.0.113.2"))
        .unwrap();
    handle
        .replace_fdb(index, REMOTE_MAC, ip("203.0.113.3"))
        .unwrap();
    handle
        .replace_fdb(index, REMOTE_MAC, ip("203.0.113.3"))
        .unwrap();
    let shown = node.bridge(&["fdb", "show", "dev", &name]);
    let entries: Vec<_> = shown
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["mac"] == mac_to_string(&REMOTE_MAC))
        .collect();
    assert_eq!(entries.len(), 1, "{shown}");
    assert_eq!(entries[0]["dst"], "203.0.113.3");
    assert_eq!(
        handle.fdb_entries(index).unwrap(),
        vec![(REMOTE_MAC, ip("203.0.113.3"))]
    );

    handle
        .delete_fdb(index, REMOTE_MAC, ip("203.0.113.3"))
        .unwrap();
    assert!(handle.fdb_entries(index).unwrap().is_empty());
}
