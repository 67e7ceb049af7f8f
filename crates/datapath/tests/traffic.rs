//! Real packets: two pods on one node ping each other, dual-stack, with no kernel
//! route between them, so only `from_pod` + `bpf_redirect_peer` can carry them;
//! once with the program on TCX links, once on the clsact/cls_bpf fallback.

mod common;

use common::hooks::{assert_weft_filter, tcx_ingress_programs};
use common::{in_netns, PinRoot};
use weft_datapath::{pod, AttachMode, Counter, Datapath, EndpointInfo, Program, Tables};
use weft_testkit::{Netns, VethPair};

const GATEWAY_MAC: &str = "ee:ee:ee:ee:ee:ee";

struct Pod {
    ns: Netns,
    host_veth: String,
    v4: &'static str,
    v6: &'static str,
}

/// A pod wired as the CNI plugin does it: /32 and /128 on its side, a permanent
/// neighbour for the link-local gateways, default routes through them.
fn pod(node: &Netns, v4: &'static str, v6: &'static str) -> Pod {
    let ns = Netns::new("pd");
    let veth = VethPair::new(node, &[], &ns, &[&format!("{v4}/32"), &format!("{v6}/128")]);
    node.ip(&["link", "set", &veth.a, "address", GATEWAY_MAC]);
    let dev = veth.b.as_str();
    ns.ip(&["route", "add", "169.254.1.1", "dev", dev, "scope", "link"]);
    ns.ip(&["route", "add", "default", "via", "169.254.1.1", "dev", dev]);
    ns.ip(&[
        "neigh",
        "add",
        "169.254.1.1",
        "lladdr",
        GATEWAY_MAC,
        "dev",
        dev,
        "nud",
        "permanent",
    ]);
    ns.ip(&[
        "-6", "route", "add", "default", "via", "fe80::1", "dev", dev,
    ]);
    ns.ip(&[
        "-6",
        "neigh",
        "add",
        "fe80::1",
        "lladdr",
        GATEWAY_MAC,
        "dev",
        dev,
        "nud",
        "permanent",
    ]);
    Pod {
        ns,
        host_veth: veth.a,
        v4,
        v6,
    }
}

#[test]
fn pods_on_one_node_reach_each_other_through_redirect_peer_over_tcx() {
    pods_reach_each_other_through_redirect_peer_only(AttachMode::Tcx);
}

#[test]
fn pods_on_one_node_reach_each_other_through_redirect_peer_over_clsact() {
    pods_reach_each_other_through_redirect_peer_only(AttachMode::Clsact);
}

fn pods_reach_each_other_through_redirect_peer_only(mode: AttachMode) {
    weft_testkit::require_tool("ping");
    let root = PinRoot::new("tr");
    let node = Netns::new("nd");
    let a = pod(&node, "10.244.1.10", "fd00:10:244:1::10");
    let b = pod(&node, "10.244.1.11", "fd00:10:244:1::11");

    let path = root.path().to_path_buf();
    let pods: Vec<(String, [&str; 2])> = [&a, &b]
        .iter()
        .map(|p| (p.host_veth.clone(), [p.v4, p.v6]))
        .collect();
    let from_pod = in_netns(node.path(), move || {
        let from_pod = Datapath::load_or_adopt(&path)
            .expect("load")
            .program(Program::FromPod)
            .expect("from_pod")
            .id;
        for (host, addrs) in &pods {
            let ifindex = common::ifindex(host);
            for addr in addrs {
                let info = EndpointInfo {
                    ifindex,
                    mac: [2, 0, 0, 0, 0, 1], // not used on the redirect_peer path
                };
                pod::add_endpoint(&path, addr.parse().unwrap(), info).expect("endpoint");
            }
            pod::attach_pod_with_mode(&path, ifindex, host, mode).expect("attach");
            let tcx = tcx_ingress_programs(host);
            match mode {
                AttachMode::Clsact => assert_eq!(tcx, Vec::<u32>::new(), "{host}: no TCX"),
                _ => assert_eq!(tcx, [from_pod], "{host}"),
            }
        }
        from_pod
    });
    if mode == AttachMode::Clsact {
        for p in [&a, &b] {
            assert_weft_filter(&node, &p.host_veth, root.path(), Program::FromPod, from_pod);
        }
    }

    a.ns.exec_ok("ping", &["-c", "1", "-W", "5", b.v4]);
    a.ns.exec_ok("ping", &["-6", "-c", "1", "-W", "5", b.v6]);

    let counters = Tables::open(root.path())
        .expect("maps")
        .counters()
        .expect("counters");
    // Echo request and reply, both families.
    assert!(
        counters.get(Counter::LocalDelivery) >= 4,
        "{:?}",
        counters.iter().collect::<Vec<_>>()
    );
    assert_eq!(
        counters.drops(),
        0,
        "{:?}",
        counters.iter().collect::<Vec<_>>()
    );
}
