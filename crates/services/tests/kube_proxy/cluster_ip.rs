//! TestClusterIPGeneral: cluster IPs, target ports, (address, protocol, port) keys, hairpin,
//! and nftables kube-proxy's treatment of other addresses in the service CIDR.

use weft_services::{Protocol, Verdict};

use crate::fixture::*;

fn world() -> World {
    let svc1 = service("ns1", "svc1", |s| {
        set_cluster_ips(s, &["172.30.0.41"]);
        s.spec.ports = vec![port("http", "TCP", 80, 0)];
    });
    let svc2 = service("ns2", "svc2", |s| {
        set_cluster_ips(s, &["172.30.0.42"]);
        s.spec.ports = vec![
            port("http", "TCP", 80, 0),
            port("https", "TCP", 443, 0),
            port("dns-udp", "UDP", 53, 0),
            port("dns-tcp", "TCP", 53, 0),
            port("dns-sctp", "SCTP", 53, 0),
        ];
    });
    let slice1 = slice(
        "ns1",
        "svc1-abc",
        "svc1",
        vec![slice_port("http", "TCP", 80)],
        vec![ready("10.180.0.1", Some(NODE_NAME))],
    );
    let slice2 = slice(
        "ns2",
        "svc2-abc",
        "svc2",
        vec![
            slice_port("http", "TCP", 80),
            slice_port("https", "TCP", 8443),
            slice_port("dns-udp", "UDP", 53),
            slice_port("dns-tcp", "TCP", 5353),
            slice_port("dns-sctp", "SCTP", 53),
        ],
        vec![
            ready("10.180.0.1", Some(NODE_NAME)),
            ready("10.180.2.1", Some("node2")),
        ],
    );
    World::new(vec![svc1, svc2], vec![slice1, slice2])
}

#[test]
fn cluster_ip_flows() {
    let both_80 = "10.180.0.1:80, 10.180.2.1:80";
    run_flows(
        "cluster IPs",
        &world().plan(),
        &[
            tcp(
                "simple cluster IP",
                pod("10.180.0.2"),
                "172.30.0.41:80",
                "10.180.0.1:80",
                false,
            ),
            tcp(
                "hairpin to cluster IP",
                pod("10.180.0.1"),
                "172.30.0.41:80",
                "10.180.0.1:80",
                true,
            ),
            tcp(
                "several endpoints",
                pod("10.180.0.2"),
                "172.30.0.42:80",
                both_80,
                false,
            ),
            tcp(
                "target port differs from port",
                pod("10.180.0.2"),
                "172.30.0.42:443",
                "10.180.0.1:8443, 10.180.2.1:8443",
                false,
            ),
            tcp(
                "TCP 53 has its own target port",
                pod("10.180.0.2"),
                "172.30.0.42:53",
                "10.180.0.1:5353, 10.180.2.1:5353",
                false,
            ),
            udp(
                "UDP 53 is another service port",
                pod("10.180.0.2"),
                "172.30.0.42:53",
                "10.180.0.1:53, 10.180.2.1:53",
                false,
            ),
            sctp(
                "SCTP 53 is a third",
                pod("10.180.0.2"),
                "172.30.0.42:53",
                "10.180.0.1:53, 10.180.2.1:53",
                false,
            ),
            udp(
                "a TCP-only port refuses UDP",
                pod("10.180.0.2"),
                "172.30.0.41:80",
                "REJECT",
                false,
            ),
            tcp(
                "svc1 does not expose svc2's port",
                pod("10.180.0.2"),
                "172.30.0.41:443",
                "REJECT",
                false,
            ),
            tcp(
                "unallocated address in the service CIDR",
                pod("10.180.0.2"),
                "172.30.0.50:80",
                "DROP",
                false,
            ),
            udp(
                "unallocated, any protocol",
                pod("10.180.0.2"),
                "172.30.99.1:53",
                "DROP",
                false,
            ),
            tcp(
                "outside the service CIDR",
                pod("10.180.0.2"),
                "172.31.0.1:80",
                "",
                false,
            ),
            tcp(
                "node to cluster IP is masqueraded",
                node(NODE_IP),
                "172.30.0.41:80",
                "10.180.0.1:80",
                true,
            ),
            tcp(
                "external to cluster IP is masqueraded",
                external(EXTERNAL),
                "172.30.0.42:80",
                both_80,
                true,
            ),
        ],
    );
}

#[test]
fn hairpin_is_masqueraded_only_on_the_branch_back_to_the_client() {
    let plan = world().plan();
    let verdict = plan.trace(pod("10.180.0.1"), Protocol::Tcp, sock("172.30.0.42:80"));
    let Verdict::Forward { reach, .. } = &verdict else {
        panic!("{verdict:?}")
    };
    let masq: Vec<(String, bool)> = reach
        .iter()
        .map(|r| (r.backend.to_string(), r.masquerade))
        .collect();
    assert_eq!(
        masq,
        [
            ("10.180.0.1:80".to_string(), true),
            ("10.180.2.1:80".to_string(), false)
        ]
    );
    assert_eq!(verdict.masquerade(), None);
}

#[test]
fn without_service_cidrs_unallocated_addresses_pass() {
    let mut world = world();
    world.settings.service_cidrs.clear();
    run_flows(
        "no service CIDRs",
        &world.plan(),
        &[
            tcp("unallocated", pod(POD), "172.30.0.50:80", "", false),
            tcp(
                "a cluster IP's other port is still refused",
                pod(POD),
                "172.30.0.41:81",
                "REJECT",
                false,
            ),
        ],
    );
}

#[test]
fn dual_stack_service_serves_each_family_from_its_own_slices() {
    let svc = service("ns1", "dual", |s| {
        set_cluster_ips(s, &["172.30.0.60", "fd00:172:30::60"]);
        s.spec.ports = vec![port("http", "TCP", 80, 0)];
    });
    let v4 = slice(
        "ns1",
        "dual-v4",
        "dual",
        vec![slice_port("http", "TCP", 8080)],
        vec![ready("10.180.0.1", Some(NODE_NAME))],
    );
    let v6 = slice(
        "ns1",
        "dual-v6",
        "dual",
        vec![slice_port("http", "TCP", 8080)],
        vec![ready("fd00:10:180::1", Some(NODE_NAME))],
    );
    let single = service("ns1", "v6only", |s| {
        set_cluster_ips(s, &["fd00:172:30::61"]);
        s.spec.ports = vec![port("http", "TCP", 80, 0)];
    });
    let world = World::new(vec![svc, single], vec![v4, v6]);
    run_flows(
        "dual stack",
        &world.plan(),
        &[
            tcp("v4", pod(POD), "172.30.0.60:80", "10.180.0.1:8080", false),
            tcp(
                "v6",
                pod("fd00:10::2"),
                "[fd00:172:30::60]:80",
                "[fd00:10:180::1]:8080",
                false,
            ),
            tcp(
                "single-stack v6 without endpoints",
                pod("fd00:10::2"),
                "[fd00:172:30::61]:80",
                "REJECT",
                false,
            ),
            tcp(
                "v6 unallocated",
                pod("fd00:10::2"),
                "[fd00:172:30::99]:80",
                "DROP",
                false,
            ),
        ],
    );
}
