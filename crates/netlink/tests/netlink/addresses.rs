use crate::common::{veth_in, Ns};
use ipnet::IpNet;
use serde_json::Value;
use weft_netlink::{AddrFlags, Error};

fn addr_infos(ns: &Ns, name: &str) -> Vec<Value> {
    let shown = ns.ip(&["addr", "show", "dev", name]);
    shown[0]["addr_info"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn find<'a>(infos: &'a [Value], local: &str) -> Option<&'a Value> {
    infos.iter().find(|info| info["local"] == local)
}

#[test]
fn v4_and_v6_addresses_with_nodad() {
    let node = Ns::new("ad");
    let mut handle = node.handle();
    let (name, index) = veth_in(&node, &mut handle);
    let v4: IpNet = "10.244.1.5/24".parse().unwrap();
    let v6: IpNet = "2001:db8:1::5/64".parse().unwrap();
    let nodad = AddrFlags { nodad: true };

    handle.add_address(index, v4, nodad).unwrap();
    handle.add_address(index, v6, nodad).unwrap();

    let infos = addr_infos(&node, &name);
    let shown_v4 = find(&infos, "10.244.1.5").expect("v4 address");
    assert_eq!(shown_v4["prefixlen"], 24);
    let shown_v6 = find(&infos, "2001:db8:1::5").expect("v6 address");
    assert_eq!(shown_v6["prefixlen"], 64);
    assert_eq!(shown_v6["nodad"], true);
    assert!(shown_v6.get("tentative").is_none(), "nodad: usable at once");

    let ours = handle.addresses(index).unwrap();
    assert!(ours.contains(&v4) && ours.contains(&v6), "{ours:?}");
    let theirs: Vec<IpNet> = infos
        .iter()
        .map(|i| {
            format!("{}/{}", i["local"].as_str().unwrap(), i["prefixlen"])
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(ours.len(), theirs.len(), "ours {ours:?} theirs {theirs:?}");
    assert!(theirs.iter().all(|a| ours.contains(a)));
}

#[test]
fn duplicates_replace_and_delete() {
    let node = Ns::new("ad");
    let mut handle = node.handle();
    let (name, index) = veth_in(&node, &mut handle);
    let v4: IpNet = "10.244.2.7/32".parse().unwrap();

    handle.add_address(index, v4, AddrFlags::default()).unwrap();
    let err = handle
        .add_address(index, v4, AddrFlags::default())
        .unwrap_err();
    assert!(matches!(err, Error::Exists { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!("add address 10.244.2.7/32 dev {name}: File exists")
    );

    handle
        .replace_address(index, v4, AddrFlags::default())
        .unwrap();
    handle
        .replace_address(index, v4, AddrFlags::default())
        .unwrap();
    let v6: IpNet = "2001:db8:2::7/128".parse().unwrap();
    handle
        .replace_address(index, v6, AddrFlags { nodad: true })
        .unwrap();
    assert!(find(&addr_infos(&node, &name), "2001:db8:2::7").is_some());

    handle.delete_address(index, v4).unwrap();
    handle.delete_address(index, v6).unwrap();
    let infos = addr_infos(&node, &name);
    assert!(find(&infos, "10.244.2.7").is_none() && find(&infos, "2001:db8:2::7").is_none());
    assert!(!handle.addresses(index).unwrap().contains(&v4));

    let err = handle.delete_address(index, v4).unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
}

#[test]
fn addresses_of_other_interfaces_are_not_listed() {
    let node = Ns::new("ad");
    let mut handle = node.handle();
    let (_, first) = veth_in(&node, &mut handle);
    let (_, second) = veth_in(&node, &mut handle);
    handle
        .add_address(
            first,
            "10.244.3.1/32".parse().unwrap(),
            AddrFlags::default(),
        )
        .unwrap();
    handle
        .add_address(
            second,
            "10.244.3.2/32".parse().unwrap(),
            AddrFlags::default(),
        )
        .unwrap();
    let on_second = handle.addresses(second).unwrap();
    assert!(on_second.contains(&"10.244.3.2/32".parse().unwrap()));
    assert!(!on_second.contains(&"10.244.3.1/32".parse().unwrap()));
    let lo = handle.addresses(1).unwrap();
    assert!(lo.contains(&"127.0.0.1/8".parse().unwrap()), "{lo:?}");
}
