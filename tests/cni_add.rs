//! ADD of the `weft` plugin: addresses from the configured ranges, the default routes, real
//! TCP between pods and from the node, and the result's shape in every version it speaks.

mod cni_support;

use std::net::IpAddr;

use cni_support::tcp::assert_reachable;
use cni_support::{
    in_subnet, ranges, result_addresses, result_host_veth, routes, v4_subnet, v6_subnet, Net, Node,
    Pod, NODE_V4, NODE_V6,
};
use serde_json::{json, Value};

/// Two pods on one node: each gets an address of every configured family in its range and
/// a default route per family; each reaches the other over TCP, and the node reaches both.
fn two_pods_talk(tag: &str, subnets: &[&str]) {
    let node = Node::new(tag);
    let net = Net::new(&node, &format!("weft{tag}"), "1.1.0", ranges(subnets));
    let a = Pod::new(tag);
    let b = Pod::new(tag);
    let result_a = net.add_ok(&a);
    let result_b = net.add_ok(&b);

    for (pod, result) in [(&a, &result_a), (&b, &result_b)] {
        let addrs = result_addresses(result);
        assert_eq!(
            addrs.len(),
            subnets.len(),
            "one address per family: {result}"
        );
        for (addr, subnet) in addrs.iter().zip(subnets) {
            assert!(in_subnet(*addr, subnet), "{addr} not in {subnet}");
            let prefix = if addr.is_ipv4() { 32 } else { 128 };
            assert!(
                pod.addresses().contains(&format!("{addr}/{prefix}")),
                "{addr} is not configured in the pod: {:?}",
                pod.addresses()
            );
        }
        let v4 = routes(&pod.ns, "-4");
        let v6 = routes(&pod.ns, "-6");
        if subnets.iter().any(|s| s.contains('.')) {
            assert!(
                v4.iter()
                    .any(|r| r.starts_with("default via 169.254.1.1 dev eth0")),
                "no IPv4 default route: {v4:?}"
            );
        }
        if subnets.iter().any(|s| s.contains(':')) {
            assert!(
                v6.iter()
                    .any(|r| r.starts_with("default via fe80::1 dev eth0")),
                "no IPv6 default route: {v6:?}"
            );
        }
    }
    assert_ne!(result_addresses(&result_a), result_addresses(&result_b));

    for (from, to, result) in [(&a, &b, &result_b), (&b, &a, &result_a)] {
        for addr in result_addresses(result) {
            assert_reachable(from.ns.path(), to.ns.path(), addr, "pod to pod");
        }
    }
    for (pod, result) in [(&a, &result_a), (&b, &result_b)] {
        for addr in result_addresses(result) {
            assert_reachable(node.netns_path(), pod.ns.path(), addr, "node to pod");
        }
    }
    // And back: the pod reaches the node's own addresses through its gateway.
    for addr in result_addresses(&result_a) {
        let node_addr: IpAddr = if addr.is_ipv4() { NODE_V4 } else { NODE_V6 }
            .parse()
            .expect("valid");
        assert_reachable(a.ns.path(), node.netns_path(), node_addr, "pod to node");
    }

    net.del(&a, Some(&result_a)).ok("DEL a");
    net.del(&b, Some(&result_b)).ok("DEL b");
    net.assert_no_state("after DEL of both pods");
}

#[test]
fn ipv4_pods_reach_each_other_and_the_node() {
    two_pods_talk("a4", &[&v4_subnet(10)]);
}

#[test]
fn ipv6_pods_reach_each_other_and_the_node() {
    two_pods_talk("a6", &[&v6_subnet(11)]);
}

#[test]
fn dual_stack_pods_reach_each_other_and_the_node() {
    two_pods_talk("ad", &[&v4_subnet(12), &v6_subnet(12)]);
}

#[test]
fn dual_stack_result_shape() {
    let node = Node::new("rs");
    let net = Net::dual(&node, "weftrs", 13);
    let pod = Pod::new("rs");
    let result = net.add_ok(&pod);

    assert_eq!(result["cniVersion"], "1.1.0");
    let interfaces = result["interfaces"].as_array().expect("interfaces");
    assert_eq!(interfaces.len(), 2, "{result}");
    let host = &interfaces[0];
    let host_name = host["name"].as_str().expect("host veth name");
    assert!(
        host_name.starts_with("wf") && host_name.len() <= 15,
        "{host_name}"
    );
    assert!(
        host.get("sandbox").is_none(),
        "the host veth is not in a sandbox"
    );
    assert_eq!(host["mac"], "ee:ee:ee:ee:ee:ee");
    assert_eq!(interfaces[1]["name"], "eth0");
    assert_eq!(interfaces[1]["sandbox"], json!(pod.netns()));

    let link = node
        .link(host_name)
        .expect("the host veth exists on the node");
    assert_eq!(
        link.alias.as_deref(),
        Some(format!("weft:weftrs:{}:eth0", pod.id).as_str())
    );
    let pod_link = cni_support::links(&pod.ns)
        .into_iter()
        .find(|l| l.name == "eth0")
        .expect("eth0 in the pod");
    assert_eq!(interfaces[1]["mac"], json!(pod_link.mac));

    let ips = result["ips"].as_array().expect("ips");
    assert_eq!(ips.len(), 2, "{result}");
    assert_eq!(ips[0]["interface"], 1);
    assert_eq!(ips[1]["interface"], 1);
    assert_eq!(ips[0]["gateway"], "169.254.1.1");
    assert_eq!(ips[1]["gateway"], "fe80::1");
    assert!(ips[0]["address"]
        .as_str()
        .unwrap_or_default()
        .ends_with("/32"));
    assert!(ips[1]["address"]
        .as_str()
        .unwrap_or_default()
        .ends_with("/128"));
    assert!(
        ips[0].get("version").is_none(),
        "1.x results have no per-IP version"
    );
    assert_eq!(
        result["routes"],
        json!([
            {"dst": "0.0.0.0/0", "gw": "169.254.1.1"},
            {"dst": "::/0", "gw": "fe80::1"}
        ])
    );
    net.del(&pod, Some(&result)).ok("DEL");
}

#[test]
fn results_follow_the_config_version() {
    let node = Node::new("rv");
    for (n, version) in [(14u8, "0.4.0"), (15, "1.0.0")] {
        let name = format!("weftrv{n}");
        let net = Net::new(
            &node,
            &name,
            version,
            ranges(&[&v4_subnet(n), &v6_subnet(n)]),
        );
        let pod = Pod::new("rv");
        let result = net.add_ok(&pod);
        assert_eq!(result["cniVersion"], version, "{result}");
        let ips = result["ips"].as_array().expect("ips");
        if version == "0.4.0" {
            assert_eq!(ips[0]["version"], "4", "{result}");
            assert_eq!(ips[1]["version"], "6", "{result}");
        } else {
            assert!(ips.iter().all(|ip| ip.get("version").is_none()), "{result}");
        }
        // The same version round-trips through CHECK and DEL.
        net.check(&pod, &result).ok(&format!("CHECK {version}"));
        net.del(&pod, Some(&result)).ok(&format!("DEL {version}"));
        net.assert_no_state(version);
    }
}

#[test]
fn mtu_gateways_and_dns_from_the_config() {
    let node = Node::new("mg");
    let net = Net::dual(&node, "weftmg", 16)
        .with("mtu", json!(1400))
        .with("gatewayV4", json!("169.254.7.7"))
        .with("gatewayV6", json!("fe80::7"))
        .with(
            "dns",
            json!({"nameservers": ["10.96.0.10"], "search": ["svc.cluster.local"]}),
        );
    let a = Pod::new("mg");
    let b = Pod::new("mg");
    let result = net.add_ok(&a);
    let result_b = net.add_ok(&b);

    assert_eq!(result["ips"][0]["gateway"], "169.254.7.7");
    assert_eq!(result["ips"][1]["gateway"], "fe80::7");
    assert_eq!(result["routes"][0]["gw"], "169.254.7.7");
    assert_eq!(result["dns"]["nameservers"], json!(["10.96.0.10"]));
    assert_eq!(result["interfaces"][1]["mtu"], 1400);
    let eth0 = cni_support::links(&a.ns)
        .into_iter()
        .find(|l| l.name == "eth0")
        .expect("eth0");
    assert_eq!(eth0.mtu, 1400);
    assert_eq!(
        node.link(&result_host_veth(&result))
            .expect("host veth")
            .mtu,
        1400
    );
    let v4 = routes(&a.ns, "-4");
    assert!(
        v4.iter().any(|r| r.starts_with("default via 169.254.7.7")),
        "{v4:?}"
    );

    for addr in result_addresses(&result_b) {
        assert_reachable(a.ns.path(), b.ns.path(), addr, "through custom gateways");
    }
    net.del(&a, Some(&result)).ok("DEL a");
    net.del(&b, Some(&result_b)).ok("DEL b");
}

/// `CNI_ARGS IP=` (podman `--ip`) and runtimeConfig `ips` (the `ips` capability) pick the
/// address; one already taken is refused and leaves the holder alone.
#[test]
fn requested_addresses() {
    let node = Node::new("ra");
    let net = Net::dual(&node, "weftra", 17);

    let a = Pod::new("ra");
    let netns = a.netns();
    let mut env = cni_support::attachment_env("ADD", &a.id, "eth0", &netns);
    env.push(("CNI_ARGS", "IgnoreUnknown=1;K8S_POD_NAME=a;IP=10.231.17.77"));
    let result_a = node.run(&env, &net.bytes()).ok("ADD with IP=").json();
    let addrs = result_addresses(&result_a);
    assert!(
        addrs.contains(&"10.231.17.77".parse().expect("valid")),
        "{result_a}"
    );
    assert_eq!(addrs.len(), 2, "the other family is allocated dynamically");

    let b = Pod::new("ra");
    let mut conf: Value = net.conf.clone();
    conf["runtimeConfig"] = json!({"ips": ["fd00:231:11::99/64"]});
    let netns_b = b.netns();
    let env_b = cni_support::attachment_env("ADD", &b.id, "eth0", &netns_b);
    let result_b = node
        .run(&env_b, conf.to_string().as_bytes())
        .ok("ADD with runtimeConfig ips")
        .json();
    assert!(
        result_addresses(&result_b).contains(&"fd00:231:11::99".parse().expect("valid")),
        "{result_b}"
    );

    let c = Pod::new("ra");
    let netns_c = c.netns();
    let mut env_c = cni_support::attachment_env("ADD", &c.id, "eth0", &netns_c);
    env_c.push(("CNI_ARGS", "IP=10.231.17.77"));
    let taken = node.run(&env_c, &net.bytes());
    assert!(
        !taken.success(),
        "an address held by another pod must be refused: {taken:?}"
    );
    assert_eq!(net.reserved_by(&c.id, "eth0"), Vec::<IpAddr>::new());
    assert_eq!(net.reserved_by(&a.id, "eth0"), addrs);
    assert!(a.addresses().contains(&"10.231.17.77/32".to_string()));

    net.del(&a, Some(&result_a)).ok("DEL a");
    net.del(&b, Some(&result_b)).ok("DEL b");
    net.del(&c, None).ok("DEL c");
    net.assert_no_state("after DEL of all");
}

/// Real runtimes use 64-hex container ids; CNI allows interface names up to 15 bytes with
/// characters like '@', '.' and '-'. All of them must survive naming, the store and GC.
#[test]
fn long_ids_and_unusual_interface_names() {
    let node = Node::new("ln");
    let net = Net::dual(&node, "weft.long-name_18", 18);
    let pod = Pod::new("ln");
    let id = format!("{:0>64}", format!("{:x}", std::process::id()));
    let ifname = "e@x.1-abcdefghi";
    assert_eq!(ifname.len(), 15);
    let netns = pod.netns();
    let result = net.add_att(&id, ifname, &netns).ok("ADD").json();
    let host = result_host_veth(&result);
    assert_eq!(
        node.link(&host).and_then(|l| l.alias),
        Some(format!("weft:weft.long-name_18:{id}:{ifname}"))
    );
    assert_eq!(net.reserved_by(&id, ifname).len(), 2);
    let env = cni_support::attachment_env("CHECK", &id, ifname, &netns);
    node.run(&env, &net.with_prev(&result)).ok("CHECK");
    net.gc(Some(&[(id.as_str(), ifname)])).ok("GC keeping it");
    assert_eq!(net.reserved_by(&id, ifname).len(), 2);
    assert_eq!(node.wf_links(), vec![host]);
    for addr in result_addresses(&result) {
        assert_reachable(node.netns_path(), pod.ns.path(), addr, "unusual names");
    }
    net.gc(Some(&[])).ok("GC removing it");
    net.assert_no_state("after GC");
    net.del_att(&id, ifname, &netns, Some(&result))
        .ok("DEL after GC");
}
