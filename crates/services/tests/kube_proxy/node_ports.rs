//! TestNodePorts: which node addresses serve NodePorts, per `nodePortAddresses`.

use weft_services::NodePortAddresses;

use crate::fixture::*;

struct Case {
    name: &'static str,
    v6: bool,
    node_port_addresses: &'static [&'static str],
    serves_primary: bool,
    serves_alt: bool,
}

const CASES: &[Case] = &[
    Case {
        name: "v4, unset: primary address only",
        v6: false,
        node_port_addresses: &[],
        serves_primary: true,
        serves_alt: false,
    },
    Case {
        name: "v4, \"primary\"",
        v6: false,
        node_port_addresses: &["primary"],
        serves_primary: true,
        serves_alt: false,
    },
    Case {
        name: "v4, the node IP",
        v6: false,
        node_port_addresses: &["192.168.0.2/32"],
        serves_primary: true,
        serves_alt: false,
    },
    Case {
        name: "v4, 0.0.0.0/0: every address",
        v6: false,
        node_port_addresses: &["0.0.0.0/0"],
        serves_primary: true,
        serves_alt: true,
    },
    Case {
        name: "v4, only the alternate network",
        v6: false,
        node_port_addresses: &["192.168.1.0/24"],
        serves_primary: false,
        serves_alt: true,
    },
    Case {
        name: "v4, only v6 CIDRs: v4 falls back to primary",
        v6: false,
        node_port_addresses: &["2001:db8::/32"],
        serves_primary: true,
        serves_alt: false,
    },
    Case {
        name: "v6, unset",
        v6: true,
        node_port_addresses: &[],
        serves_primary: true,
        serves_alt: false,
    },
    Case {
        name: "v6, \"primary\"",
        v6: true,
        node_port_addresses: &["primary"],
        serves_primary: true,
        serves_alt: false,
    },
    Case {
        name: "v6, the node IP",
        v6: true,
        node_port_addresses: &["2001:db8::1/128"],
        serves_primary: true,
        serves_alt: false,
    },
    Case {
        name: "v6, ::/0",
        v6: true,
        node_port_addresses: &["::/0"],
        serves_primary: true,
        serves_alt: true,
    },
    Case {
        name: "v6, only v4 CIDRs: v6 falls back to primary",
        v6: true,
        node_port_addresses: &["192.168.0.0/16"],
        serves_primary: true,
        serves_alt: false,
    },
];

fn world(case: &Case) -> World {
    let (cluster_ip, ep1, ep2) = if case.v6 {
        ("fd00:172:30::41", "fd00:10:180::1", "fd00:10:180::2:1")
    } else {
        ("172.30.0.41", "10.180.0.1", "10.180.2.1")
    };
    let svc = service("ns1", "svc1", |s| {
        set_type(s, "NodePort");
        set_cluster_ips(s, &[cluster_ip]);
        s.spec.ports = vec![port("p80", "TCP", 80, 3001)];
    });
    let eps = slice(
        "ns1",
        "svc1-abc",
        "svc1",
        vec![slice_port("p80", "TCP", 80)],
        vec![ready(ep1, None), ready(ep2, Some(NODE_NAME))],
    );
    let mut world = World::new(vec![svc], vec![eps]);
    world.settings.node_port_addresses =
        NodePortAddresses::parse(case.node_port_addresses).unwrap();
    world
}

#[test]
fn node_port_addresses_variants() {
    for case in CASES {
        let plan = world(case).plan();
        let (both, cluster, pod_ip, ext, node_ip, alt, localhost) = if case.v6 {
            (
                "[fd00:10:180::1]:80, [fd00:10:180::2:1]:80",
                "[fd00:172:30::41]:80",
                "fd00:10::2",
                "2600:5200::1",
                "[2001:db8::1]:3001",
                "[2001:db8:1::2]:3001",
                "[::1]:3001",
            )
        } else {
            (
                "10.180.0.1:80, 10.180.2.1:80",
                "172.30.0.41:80",
                POD,
                EXTERNAL,
                "192.168.0.2:3001",
                "192.168.1.2:3001",
                "127.0.0.1:3001",
            )
        };
        let primary = if case.serves_primary { both } else { "" };
        let alternate = if case.serves_alt { both } else { "" };
        let own = if case.v6 { NODE_IP6 } else { NODE_IP };
        let lo = if case.v6 { "::1" } else { "127.0.0.1" };
        run_flows(
            case.name,
            &plan,
            &[
                tcp("pod to cluster IP", pod(pod_ip), cluster, both, false),
                tcp(
                    "external to node port",
                    external(ext),
                    node_ip,
                    primary,
                    true,
                ),
                tcp("node to node port", node(own), node_ip, primary, true),
                tcp("pod to node port", pod(pod_ip), node_ip, primary, true),
                tcp(
                    "external to alternate node IP",
                    external(ext),
                    alt,
                    alternate,
                    true,
                ),
                tcp(
                    "pod to alternate node IP",
                    pod(pod_ip),
                    alt,
                    alternate,
                    true,
                ),
                // nftables kube-proxy never serves NodePorts on loopback; neither do we.
                tcp("localhost to node port", node(lo), localhost, "", false),
                udp("UDP to a TCP node port", external(ext), node_ip, "", false),
            ],
        );
    }
}

#[test]
fn node_ports_are_never_served_on_loopback_even_when_selected() {
    let case = &CASES[0];
    let mut world = world(case);
    world.settings.node_port_addresses =
        NodePortAddresses::parse(&["127.0.0.0/8", "192.168.0.0/24"]).unwrap();
    run_flows(
        "127.0.0.0/8 selected",
        &world.plan(),
        &[
            tcp("localhost", node("127.0.0.1"), "127.0.0.1:3001", "", false),
            tcp(
                "node IP",
                external(EXTERNAL),
                "192.168.0.2:3001",
                "10.180.0.1:80, 10.180.2.1:80",
                true,
            ),
        ],
    );
}

#[test]
fn node_port_addresses_setting_is_checked() {
    assert!(NodePortAddresses::parse(&["primary", "10.0.0.0/8"]).is_err());
    assert!(NodePortAddresses::parse(&["10.0.0.0"]).is_err());
    assert_eq!(
        NodePortAddresses::parse(&[" 10.1.2.3/8 "]).unwrap(),
        NodePortAddresses::Cidrs(vec!["10.0.0.0/8".parse().unwrap()])
    );
}

#[test]
fn without_a_primary_address_of_a_family_every_address_of_it_serves() {
    let case = &CASES[0];
    let mut world = world(case);
    world.node.primary_addresses = vec![ip(NODE_IP6)];
    let both = "10.180.0.1:80, 10.180.2.1:80";
    run_flows(
        "no v4 primary",
        &world.plan(),
        &[
            tcp(
                "first address",
                external(EXTERNAL),
                "192.168.0.2:3001",
                both,
                true,
            ),
            tcp(
                "second address",
                external(EXTERNAL),
                "192.168.1.2:3001",
                both,
                true,
            ),
            tcp(
                "still not loopback",
                node("127.0.0.1"),
                "127.0.0.1:3001",
                "",
                false,
            ),
        ],
    );
}
