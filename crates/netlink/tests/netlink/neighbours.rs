use crate::common::{strings, veth_in, Ns};
use serde_json::Value;
use std::net::IpAddr;
use weft_netlink::{mac_to_string, NeighbourState};

const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];

fn shown(ns: &Ns, name: &str, ip: &str) -> Option<Value> {
    let all = ns.ip(&["neigh", "show", "dev", name]);
    all.as_array()?.iter().find(|n| n["dst"] == ip).cloned()
}

#[test]
fn permanent_neighbours_v4_and_v6_replace_and_delete() {
    let node = Ns::new("ng");
    let mut handle = node.handle();
    let (name, index) = veth_in(&node, &mut handle);
    let v4: IpAddr = "10.244.1.9".parse().unwrap();
    let v6: IpAddr = "2001:db8:1::9".parse().unwrap();

    handle.add_neighbour(index, v4, MAC_A, true).unwrap();
    handle.add_neighbour(index, v6, MAC_A, true).unwrap();
    for ip in ["10.244.1.9", "2001:db8:1::9"] {
        let entry = shown(&node, &name, ip).expect("entry shown by ip");
        assert_eq!(entry["lladdr"], mac_to_string(&MAC_A));
        assert_eq!(strings(&entry["state"]), vec!["PERMANENT".to_string()]);
    }
    let ours = handle.neighbours(index).unwrap();
    for ip in [v4, v6] {
        let entry = ours.iter().find(|n| n.ip == ip).expect("in our dump");
        assert_eq!(
            (entry.mac, entry.state),
            (Some(MAC_A), NeighbourState::Permanent)
        );
    }

    // Replace semantics: same call, new MAC, no error.
    handle.add_neighbour(index, v4, MAC_B, true).unwrap();
    assert_eq!(
        shown(&node, &name, "10.244.1.9").unwrap()["lladdr"],
        mac_to_string(&MAC_B)
    );
    handle.add_neighbour(index, v4, MAC_B, false).unwrap();
    let entry = handle
        .neighbours(index)
        .unwrap()
        .into_iter()
        .find(|n| n.ip == v4)
        .unwrap();
    assert_ne!(entry.state, NeighbourState::Permanent);

    handle.delete_neighbour(index, v4).unwrap();
    handle.delete_neighbour(index, v6).unwrap();
    assert!(shown(&node, &name, "10.244.1.9").is_none());
    assert!(shown(&node, &name, "2001:db8:1::9").is_none());
    let err = handle.delete_neighbour(index, v4).unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
}

#[test]
fn neighbours_of_other_interfaces_are_not_listed() {
    let node = Ns::new("ng");
    let mut handle = node.handle();
    let (_, first) = veth_in(&node, &mut handle);
    let (_, second) = veth_in(&node, &mut handle);
    handle
        .add_neighbour(first, "10.244.4.1".parse().unwrap(), MAC_A, true)
        .unwrap();
    handle
        .add_neighbour(second, "10.244.4.2".parse().unwrap(), MAC_B, true)
        .unwrap();
    let ips: Vec<IpAddr> = handle
        .neighbours(second)
        .unwrap()
        .into_iter()
        .map(|n| n.ip)
        .collect();
    assert!(ips.contains(&"10.244.4.2".parse().unwrap()));
    assert!(!ips.contains(&"10.244.4.1".parse().unwrap()), "{ips:?}");
}
