//! Real packets: two pods on one node ping each other, dual-stack, with no kernel
//! route between them, so only `from_pod` + `bpf_redirect_peer` can carry them;
//! once with the program on TCX links, once on the clsact/cls_bpf fallback.

mod common;

use common::hooks::{assert_weft_filter, tcx_ingress_programs};
use common::pods::pod;
use common::{in_netns, PinRoot};
use weft_datapath::{pod, AttachMode, Counter, Datapath, EndpointInfo, Program, Tables};
use weft_testkit::Netns;

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
    let pods: Vec<(String, [std::net::IpAddr; 2])> = [&a, &b]
        .iter()
        .map(|p| (p.host_veth.clone(), p.addrs()))
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
                pod::add_endpoint(&path, *addr, info).expect("endpoint");
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

    a.ns.exec_ok("ping", &["-c", "1", "-W", "5", &b.v4.to_string()]);
    a.ns.exec_ok("ping", &["-6", "-c", "1", "-W", "5", &b.v6.to_string()]);

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
