//! CHECK and DEL of the `weft` plugin, and a repeated ADD: CHECK names what went missing,
//! DEL is idempotent in every shape runtimes send it, and a second ADD of an attachment
//! never hurts the first.

mod cni_support;

use std::net::IpAddr;

use cni_support::tcp::assert_reachable;
use cni_support::{result_addresses, result_host_veth, Net, Node, Pod};
use serde_json::Value;

/// ADD a fresh pod, check it passes CHECK, break it with `damage`, and return CHECK's
/// message, which must carry code 100. DEL afterwards must still clean up.
fn check_after(net: &Net, tag: &str, damage: impl FnOnce(&Pod, &Value)) -> String {
    let pod = Pod::new(tag);
    let result = net.add_ok(&pod);
    net.check(&pod, &result).ok("CHECK right after ADD");
    damage(&pod, &result);
    let reply = net.check(&pod, &result);
    let msg = reply.fails_with(100, "CHECK after damage");
    net.del(&pod, Some(&result)).ok("DEL after damage");
    assert_eq!(net.reserved_by(&pod.id, "eth0"), Vec::<IpAddr>::new());
    assert!(
        !net.node.wf_links().contains(&result_host_veth(&result)),
        "DEL left the host veth"
    );
    msg
}

#[test]
fn check_names_what_is_missing() {
    let node = Node::new("ck");
    let net = Net::dual(&node, "weftck", 20);

    let msg = check_after(&net, "ck", |pod, result| {
        let v4 = result["ips"][0]["address"].as_str().expect("v4 address");
        pod.ns.ip(&["addr", "del", v4, "dev", "eth0"]);
    });
    assert!(
        msg.contains("address 10.231.20.") && msg.contains("missing"),
        "{msg}"
    );

    let msg = check_after(&net, "ck", |pod, _| {
        pod.ns
            .ip(&["-6", "addr", "flush", "dev", "eth0", "scope", "global"]);
    });
    assert!(
        msg.contains("address fd00:231:14::") && msg.contains("missing"),
        "{msg}"
    );

    let msg = check_after(&net, "ck", |pod, _| {
        pod.ns.ip(&["route", "del", "default"]);
    });
    assert!(
        msg.contains("route 0.0.0.0/0") && msg.contains("missing"),
        "{msg}"
    );

    let msg = check_after(&net, "ck", |pod, _| {
        pod.ns.ip(&["-6", "route", "del", "default"]);
    });
    assert!(
        msg.contains("route ::/0") && msg.contains("missing"),
        "{msg}"
    );

    // Deleting the host end of a veth deletes the pod end with it: CHECK names the pod's
    // interface, the first thing it looks for.
    let msg = check_after(&net, "ck", |_, result| {
        node.ns.ip(&["link", "del", &result_host_veth(result)]);
    });
    assert!(msg.contains("eth0") && msg.contains("missing"), "{msg}");

    // A host veth that is gone from the node while the pod end lives (renamed here).
    let msg = check_after(&net, "ck", |_, result| {
        let host = result_host_veth(result);
        node.ns.ip(&["link", "set", &host, "name", "weftrenamed"]);
    });
    // The renamed veth goes away with the pod's namespace (dropped in check_after).
    assert!(
        msg.contains("host veth wf") && msg.contains("missing"),
        "{msg}"
    );

    let msg = check_after(&net, "ck", |_, result| {
        let host = result_host_veth(result);
        node.ns.ip(&["link", "set", &host, "down"]);
    });
    assert!(msg.contains("down"), "{msg}");

    let msg = check_after(&net, "ck", |_, result| {
        let v4 = result_addresses(result)[0].to_string();
        node.ns.ip(&["route", "del", &format!("{v4}/32")]);
    });
    assert!(
        msg.contains("host route 10.231.20.") && msg.contains("missing"),
        "{msg}"
    );

    // The reservation released behind the plugin's back.
    let msg = check_after(&net, "ck", |pod, _| {
        let store = weft_ipam::Store::open(&node.data_dir(), "weftck").expect("open store");
        let released = store
            .release(&weft_ipam::Owner::new(&pod.id, "eth0"))
            .expect("release");
        assert_eq!(released.len(), 2);
    });
    assert!(msg.contains("IPAM holds []"), "{msg}");

    net.assert_no_state("after all CHECK cases");
}

#[test]
fn check_needs_a_prev_result() {
    let node = Node::new("cp");
    let net = Net::dual(&node, "weftcp", 21);
    let pod = Pod::new("cp");
    let result = net.add_ok(&pod);
    let netns = pod.netns();
    let env = cni_support::attachment_env("CHECK", &pod.id, "eth0", &netns);
    let msg = node
        .run(&env, &net.bytes())
        .fails_with(7, "CHECK without prevResult");
    assert!(msg.contains("prevResult"), "{msg}");
    net.del(&pod, Some(&result)).ok("DEL");
}

#[test]
fn del_twice_succeeds() {
    let node = Node::new("dt");
    let net = Net::dual(&node, "weftdt", 22);
    let pod = Pod::new("dt");
    let result = net.add_ok(&pod);
    assert_eq!(node.wf_links(), vec![result_host_veth(&result)]);
    net.del(&pod, Some(&result)).ok("first DEL");
    net.assert_no_state("after first DEL");
    assert_eq!(
        pod.addresses(),
        Vec::<String>::new(),
        "pod interface removed"
    );
    net.del(&pod, Some(&result)).ok("second DEL");
    net.assert_no_state("after second DEL");
}

#[test]
fn del_with_empty_netns_releases() {
    let node = Node::new("de");
    let net = Net::dual(&node, "weftde", 23);
    let pod = Pod::new("de");
    let result = net.add_ok(&pod);
    // containerd's second DEL: CNI_NETNS set but empty, and no prevResult.
    net.del_att(&pod.id, "eth0", "", None)
        .ok("DEL with empty CNI_NETNS");
    net.assert_no_state("after DEL with empty CNI_NETNS");
    assert_eq!(pod.addresses(), Vec::<String>::new());

    // Unset entirely behaves the same.
    let result2 = net.add_ok(&pod);
    let env = [
        ("CNI_COMMAND", "DEL"),
        ("CNI_CONTAINERID", pod.id.as_str()),
        ("CNI_IFNAME", "eth0"),
    ];
    node.run(&env, &net.bytes()).ok("DEL without CNI_NETNS");
    net.assert_no_state("after DEL without CNI_NETNS");
    let _ = (result, result2);
}

#[test]
fn del_without_prev_result_releases() {
    let node = Node::new("dp");
    let net = Net::dual(&node, "weftdp", 24);
    let pod = Pod::new("dp");
    net.add_ok(&pod);
    net.del(&pod, None).ok("DEL without prevResult");
    net.assert_no_state("after DEL without prevResult");
}

#[test]
fn del_of_a_never_added_container_succeeds() {
    let node = Node::new("dn");
    let net = Net::dual(&node, "weftdn", 25);
    let pod = Pod::new("dn");
    net.del(&pod, None).ok("DEL of a container never added");
    net.del_att("weftneverseen", "eth0", "", None)
        .ok("DEL of a never-added container without netns");
    net.assert_no_state("after DELs of unknown containers");
}

#[test]
fn del_after_the_pod_netns_is_gone() {
    let node = Node::new("dg");
    let net = Net::dual(&node, "weftdg", 26);
    let pod = Pod::new("dg");
    let id = pod.id.clone();
    let netns = pod.netns();
    let result = net.add_ok(&pod);
    drop(pod);
    assert!(!std::path::Path::new(&netns).exists());
    net.del_att(&id, "eth0", &netns, Some(&result))
        .ok("DEL after the netns was deleted");
    net.assert_no_state("after DEL of a pod whose netns is gone");
}

#[test]
fn double_add_fails_and_keeps_the_first_attachment() {
    let node = Node::new("da");
    let net = Net::dual(&node, "weftda", 27);
    let pod = Pod::new("da");
    let first = net.add_ok(&pod);
    let addrs = result_addresses(&first);

    let second = net.add(&pod);
    assert!(
        !second.success(),
        "a second ADD of the same attachment must fail: {second:?}"
    );
    assert!(
        second.code().is_some(),
        "error object on stdout: {second:?}"
    );
    println!("second ADD: code {:?}: {}", second.code(), second.msg());

    let mut held = net.reserved_by(&pod.id, "eth0");
    held.sort();
    let mut expected = addrs.clone();
    expected.sort();
    assert_eq!(held, expected, "the first attachment keeps its reservation");
    assert_eq!(net.reservations().len(), 2, "nothing else reserved");
    assert_eq!(node.wf_links(), vec![result_host_veth(&first)]);
    net.check(&pod, &first).ok("CHECK of the first attachment");
    for addr in &addrs {
        assert_reachable(node.netns_path(), pod.ns.path(), *addr, "first attachment");
    }

    // The same container and interface in another sandbox is the same attachment too.
    let other = Pod::new("da");
    let netns = other.netns();
    let reply = net.add_att(&pod.id, "eth0", &netns);
    assert!(
        !reply.success(),
        "same attachment in another netns: {reply:?}"
    );
    assert_eq!(net.reserved_by(&pod.id, "eth0").len(), 2);
    assert_eq!(
        cni_support::links(&other.ns).len(),
        1,
        "only lo in the other netns"
    );
    net.check(&pod, &first)
        .ok("CHECK of the first attachment again");

    net.del(&pod, Some(&first)).ok("DEL");
    net.assert_no_state("after DEL");
}

/// A second weft interface in a pod that already has one: whatever the plugin decides, the
/// first attachment must keep working, and a refusal must leave no trace.
#[test]
fn second_interface_in_the_same_pod() {
    let node = Node::new("si");
    let net = Net::dual(&node, "weftsi", 28);
    let pod = Pod::new("si");
    let first = net.add_ok(&pod);
    let netns = pod.netns();
    let second = net.add_att(&pod.id, "net1", &netns);
    if second.success() {
        println!("a second interface is supported: {}", second.stdout.trim());
        let result = second.json();
        for addr in result_addresses(&result) {
            assert_reachable(node.netns_path(), pod.ns.path(), addr, "second interface");
        }
        net.del_att(&pod.id, "net1", &netns, Some(&result))
            .ok("DEL net1");
    } else {
        println!(
            "a second interface is refused: code {:?}: {}",
            second.code(),
            second.msg()
        );
        assert!(
            second.code().is_some(),
            "error object on stdout: {second:?}"
        );
        assert_eq!(net.reserved_by(&pod.id, "net1"), Vec::<IpAddr>::new());
        assert_eq!(node.wf_links(), vec![result_host_veth(&first)]);
        assert!(
            !cni_support::links(&pod.ns).iter().any(|l| l.name == "net1"),
            "net1 left in the pod"
        );
    }
    net.check(&pod, &first).ok("CHECK of the first interface");
    for addr in result_addresses(&first) {
        assert_reachable(node.netns_path(), pod.ns.path(), addr, "first interface");
    }
    net.del(&pod, Some(&first)).ok("DEL eth0");
    net.assert_no_state("after DEL of both");
}
