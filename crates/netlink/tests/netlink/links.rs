use crate::common::{strings, veth_in, Ns};
use std::collections::BTreeSet;
use weft_netlink::{mac_to_string, Error, VethSpec};

const HOST_MAC: [u8; 6] = [0x02, 0x77, 0x65, 0x66, 0x74, 0x01];
const POD_MAC: [u8; 6] = [0x02, 0x77, 0x65, 0x66, 0x74, 0x02];

#[test]
fn veth_peer_is_created_inside_the_other_namespace_under_its_final_name() {
    let node = Ns::new("nd");
    let pod = Ns::new("pd");
    let mut handle = node.handle();
    let name = weft_testkit::unique_name("wf");

    let index = handle
        .create_veth(&VethSpec {
            name: &name,
            mac: Some(HOST_MAC),
            mtu: Some(1450),
            alias: Some("pod default/web-0"),
            up: true,
            peer_name: "eth0",
            peer_mac: Some(POD_MAC),
            peer_netns: Some(&pod.netns),
        })
        .unwrap();

    let host_end = node.link(&name);
    assert_eq!(
        host_end["ifindex"], index,
        "returned index is the host end's"
    );
    assert_eq!(host_end["address"], mac_to_string(&HOST_MAC));
    assert_eq!(host_end["mtu"], 1450);
    assert_eq!(host_end["ifalias"], "pod default/web-0");
    assert_eq!(host_end["linkinfo"]["info_kind"], "veth");
    assert!(strings(&host_end["flags"]).contains(&"UP".to_string()));
    assert!(
        !node.has_link("eth0"),
        "the peer never lives in the node namespace"
    );

    let pod_end = pod.link("eth0");
    assert_eq!(pod_end["address"], mac_to_string(&POD_MAC));
    assert_eq!(pod_end["mtu"], 1450);
    assert!(
        !strings(&pod_end["flags"]).contains(&"UP".to_string()),
        "peer starts down"
    );

    // Our own view agrees with ip's.
    let link = handle.link_by_name(&name).unwrap().unwrap();
    assert_eq!(link.index, index);
    assert_eq!(link.mac, Some(HOST_MAC));
    assert_eq!(link.mtu, 1450);
    assert_eq!(link.alias.as_deref(), Some("pod default/web-0"));
    assert_eq!(link.kind.as_deref(), Some("veth"));
    assert!(link.up);
    assert_eq!(handle.link_by_index(index).unwrap(), Some(link));

    let mut inside = pod.handle();
    let in_pod = inside.link_by_name("eth0").unwrap().unwrap();
    assert_eq!(in_pod.index, pod_end["ifindex"]);
    assert_eq!(in_pod.mac, Some(POD_MAC));
    assert_eq!(in_pod.alias, None);
    inside.set_up(in_pod.index).unwrap();
    assert!(strings(&pod.link("eth0")["flags"]).contains(&"UP".to_string()));
}

#[test]
fn duplicate_names_on_either_side_are_exists_errors_naming_that_side() {
    let node = Ns::new("nd");
    let pod = Ns::new("pd");
    let mut handle = node.handle();
    let first = weft_testkit::unique_name("wf");
    let spec = VethSpec {
        name: &first,
        peer_name: "eth0",
        peer_netns: Some(&pod.netns),
        ..Default::default()
    };
    handle.create_veth(&spec).unwrap();

    // Host-side name taken.
    let err = handle
        .create_veth(&VethSpec {
            peer_name: "eth1",
            ..spec.clone()
        })
        .unwrap_err();
    assert!(matches!(err, Error::Exists { .. }), "{err:?}");
    assert_eq!(err.to_string(), format!("create veth {first}: File exists"));
    assert!(!pod.has_link("eth1"), "nothing left behind in the pod");

    // Pod-side name taken.
    let second = weft_testkit::unique_name("wf");
    let err = handle
        .create_veth(&VethSpec {
            name: &second,
            ..spec.clone()
        })
        .unwrap_err();
    assert!(err.is_exists(), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("peer eth0"), "{message}");
    assert!(message.contains(pod.test.name()), "{message}");
    assert!(!node.has_link(&second), "nothing left behind on the node");
}

#[test]
fn delete_removes_both_ends_and_a_missing_link_is_not_an_error_by_name() {
    let node = Ns::new("nd");
    let pod = Ns::new("pd");
    let mut handle = node.handle();
    let name = weft_testkit::unique_name("wf");
    let index = handle
        .create_veth(&VethSpec {
            name: &name,
            peer_name: "eth0",
            peer_netns: Some(&pod.netns),
            ..Default::default()
        })
        .unwrap();

    assert!(handle.delete_link_by_name(&name).unwrap());
    assert!(!node.has_link(&name));
    assert!(!pod.has_link("eth0"), "deleting one end deletes the peer");
    assert!(!handle.delete_link_by_name(&name).unwrap(), "already gone");

    let err = handle.delete_link(index).unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    assert_eq!(handle.link_by_name(&name).unwrap(), None);
    assert_eq!(handle.link_by_index(index).unwrap(), None);

    // By index, too.
    let (other, other_index) = veth_in(&node, &mut handle);
    handle.delete_link(other_index).unwrap();
    assert!(!node.has_link(&other));
}

#[test]
fn link_attributes_change_as_asked() {
    let node = Ns::new("nd");
    let mut handle = node.handle();
    let (name, index) = veth_in(&node, &mut handle);

    handle.set_down(index).unwrap();
    assert!(!strings(&node.link(&name)["flags"]).contains(&"UP".to_string()));
    assert!(!handle.link_by_index(index).unwrap().unwrap().up);
    handle.set_up(index).unwrap();
    assert!(strings(&node.link(&name)["flags"]).contains(&"UP".to_string()));

    handle.set_mtu(index, 1380).unwrap();
    handle.set_mac(index, HOST_MAC).unwrap();
    handle.set_alias(index, "weft test").unwrap();
    let link = node.link(&name);
    assert_eq!(link["mtu"], 1380);
    assert_eq!(link["address"], mac_to_string(&HOST_MAC));
    assert_eq!(link["ifalias"], "weft test");

    handle.set_alias(index, "").unwrap();
    assert_eq!(handle.link_by_index(index).unwrap().unwrap().alias, None);

    let err = handle.set_mtu(index, 10).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Kernel {
                errno: libc::EINVAL,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with(&format!("set mtu 10 on link {name}: ")),
        "{err}"
    );

    let err = handle.set_up(999_999).unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
}

#[test]
fn lookups_of_missing_or_invalid_names() {
    let node = Ns::new("nd");
    let mut handle = node.handle();
    assert_eq!(handle.link_by_name("weftnosuchlink").unwrap(), None);
    assert_eq!(handle.link_by_index(999_999).unwrap(), None);
    let err = handle
        .link_by_name("a-name-far-too-long-for-linux")
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    let lo = handle.link_by_name("lo").unwrap().unwrap();
    assert_eq!(lo.index, 1);
    assert_eq!(lo.kind, None);
}

#[test]
fn dump_of_more_than_a_hundred_links_is_returned_whole() {
    let node = Ns::new("nd");
    let mut handle = node.handle();
    for _ in 0..60 {
        veth_in(&node, &mut handle);
    }
    for _ in 0..60 {
        let name = weft_testkit::unique_name("va");
        let peer = weft_testkit::unique_name("vb");
        handle
            .create_veth(&VethSpec {
                name: &name,
                peer_name: &peer,
                ..Default::default()
            })
            .unwrap();
    }

    let ours: BTreeSet<(u32, String)> = handle
        .links()
        .unwrap()
        .into_iter()
        .map(|link| (link.index, link.name))
        .collect();
    let ips: BTreeSet<(u32, String)> = node
        .ip(&["link", "show"])
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["ifindex"].as_u64().unwrap() as u32,
                l["ifname"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(ours.len(), 241, "lo plus 120 veth pairs");
    assert_eq!(ours, ips);
}

#[test]
fn a_failure_after_the_pair_exists_leaves_no_pair_behind() {
    let node = Ns::new("nd");
    let pod = Ns::new("pd");
    let mut handle = node.handle();
    let name = weft_testkit::unique_name("wf");
    // The kernel refuses aliases over 255 bytes: the pair is created first, then the alias
    // fails, and the pair must not survive the error.
    let alias = "a".repeat(300);
    let err = handle
        .create_veth(&VethSpec {
            name: &name,
            alias: Some(&alias),
            peer_name: "eth0",
            peer_netns: Some(&pod.netns),
            ..Default::default()
        })
        .unwrap_err();
    assert!(err.to_string().contains("alias"), "{err}");
    assert!(!node.has_link(&name));
    assert!(!pod.has_link("eth0"));
}

#[test]
fn link_removal_is_announced_to_subscribers() {
    let node = Ns::new("nd");
    let pod = Ns::new("pd");
    let mut handle = node.handle();
    let name = weft_testkit::unique_name("wf");
    let index = handle
        .create_veth(&VethSpec {
            name: &name,
            peer_name: "eth0",
            peer_netns: Some(&pod.netns),
            ..Default::default()
        })
        .unwrap();
    let guard = node.netns.enter().unwrap();
    let mut events = weft_netlink::LinkEvents::subscribe().unwrap();
    guard.restore().unwrap();
    assert!(
        !events
            .wait_removed(index, std::time::Duration::from_millis(50))
            .unwrap(),
        "nothing removed yet"
    );
    handle.delete_link(index).unwrap();
    assert!(events
        .wait_removed(index, std::time::Duration::from_secs(5))
        .unwrap());
}
