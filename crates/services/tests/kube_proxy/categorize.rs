//! TestCategorizeEndpoints: which endpoints the Cluster and Local policies use, including
//! topology hints, as a pure truth table over `endpoints::categorize`.

use std::collections::BTreeSet;

use weft_services::endpoints::{categorize, PortEndpoint};

use crate::fixture::*;

#[derive(Clone, Copy, Default)]
struct E {
    address: &'static str,
    zones: &'static [&'static str],
    nodes: &'static [&'static str],
    ready: bool,
    serving: bool,
    terminating: bool,
    local: bool,
}

fn r(address: &'static str) -> E {
    E {
        address,
        ready: true,
        serving: true,
        ..E::default()
    }
}

impl E {
    fn zones(mut self, zones: &'static [&'static str]) -> E {
        self.zones = zones;
        self
    }
    fn nodes(mut self, nodes: &'static [&'static str]) -> E {
        self.nodes = nodes;
        self
    }
    fn local(mut self) -> E {
        self.local = true;
        self
    }
    fn unready(mut self) -> E {
        self.ready = false;
        self.serving = false;
        self
    }
    fn terminating(mut self) -> E {
        self.ready = false;
        self.serving = true;
        self.terminating = true;
        self
    }
    fn gone(mut self) -> E {
        self.ready = false;
        self.serving = false;
        self.terminating = true;
        self
    }
    fn into_endpoint(self) -> PortEndpoint {
        PortEndpoint {
            address: ip(self.address),
            port: 80,
            local: self.local,
            ready: self.ready,
            serving: self.serving,
            terminating: self.terminating,
            zone_hints: self.zones.iter().map(|s| s.to_string()).collect(),
            node_hints: self.nodes.iter().map(|s| s.to_string()).collect(),
        }
    }
}

struct Case {
    name: &'static str,
    zone: Option<&'static str>,
    uses_cluster: bool,
    uses_local: bool,
    endpoints: Vec<E>,
    cluster: Option<&'static [&'static str]>,
    local: Option<&'static [&'static str]>,
    has_any: bool,
}

fn names(set: &Option<Vec<PortEndpoint>>) -> Option<BTreeSet<String>> {
    set.as_ref()
        .map(|s| s.iter().map(|e| e.address.to_string()).collect())
}

fn expect(list: Option<&[&str]>) -> Option<BTreeSet<String>> {
    list.map(|l| l.iter().map(|s| s.to_string()).collect())
}

#[test]
fn truth_table() {
    let a = &["zone-a"][..];
    let cases = vec![
        Case {
            name: "zone hints followed",
            zone: Some("zone-a"),
            uses_cluster: true,
            uses_local: false,
            endpoints: vec![
                r("10.1.2.3").zones(a),
                r("10.1.2.4").zones(&["zone-b"]),
                r("10.1.2.5").zones(&["zone-c"]),
                r("10.1.2.6").zones(a),
            ],
            cluster: Some(&["10.1.2.3", "10.1.2.6"]),
            local: None,
            has_any: true,
        },
        Case {
            name: "an endpoint without hints: hints ignored",
            zone: Some("zone-a"),
            uses_cluster: true,
            uses_local: false,
            endpoints: vec![
                r("10.1.2.3").zones(a),
                r("10.1.2.4").zones(&["zone-b"]),
                r("10.1.2.5"),
                r("10.1.2.6").zones(a),
            ],
            cluster: Some(&["10.1.2.3", "10.1.2.4", "10.1.2.5", "10.1.2.6"]),
            local: None,
            has_any: true,
        },
        Case {
            name: "node without a zone: hints ignored",
            zone: None,
            uses_cluster: true,
            uses_local: false,
            endpoints: vec![r("10.1.2.3").zones(a), r("10.1.2.4").zones(&["zone-b"])],
            cluster: Some(&["10.1.2.3", "10.1.2.4"]),
            local: None,
            has_any: true,
        },
        Case {
            name: "empty zone label: hints ignored",
            zone: Some(""),
            uses_cluster: true,
            uses_local: false,
            endpoints: vec![r("10.1.2.3").zones(a)],
            cluster: Some(&["10.1.2.3"]),
            local: None,
            has_any: true,
        },
        Case {
            name: "no endpoint hinted for this zone: hints ignored",
            zone: Some("zone-b"),
            uses_cluster: true,
            uses_local: false,
            endpoints: vec![r("10.1.2.3").zones(a)],
            cluster: Some(&["10.1.2.3"]),
            local: None,
            has_any: true,
        },
        Case {
            name: "unready endpoints in the zone are still left out",
            zone: Some("zone-a"),
            uses_cluster: true,
            uses_local: false,
            endpoints: vec![
                r("10.1.2.3").zones(a),
                r("10.1.2.4").zones(&["zone-b"]),
                r("10.1.2.6").zones(a).unready(),
            ],
            cluster: Some(&["10.1.2.3"]),
            local: None,
            has_any: true,
        },
        Case {
            name: "only unready endpoints in the zone: hints ignored",
            zone: Some("zone-a"),
            uses_cluster: true,
            uses_local: false,
            endpoints: vec![
                r("10.1.2.3").zones(a).unready(),
                r("10.1.2.4").zones(&["zone-b"]),
                r("10.1.2.5").zones(&["zone-c"]),
            ],
            cluster: Some(&["10.1.2.4", "10.1.2.5"]),
            local: None,
            has_any: true,
        },
        Case {
            name: "several hints per endpoint",
            zone: Some("zone-c"),
            uses_cluster: true,
            uses_local: false,
            endpoints: vec![
                r("10.1.2.3").zones(&["zone-a", "zone-b", "zone-c"]),
                r("10.1.2.4").zones(&["zone-b", "zone-c"]),
                r("10.1.2.5").zones(&["zone-b", "zone-d"]),
                r("10.1.2.6").zones(&["zone-c"]),
            ],
            cluster: Some(&["10.1.2.3", "10.1.2.4", "10.1.2.6"]),
            local: None,
            has_any: true,
        },
        Case {
            name: "node hints followed before zone hints",
            zone: Some("zone-a"),
            uses_cluster: true,
            uses_local: false,
            endpoints: vec![
                r("10.1.2.3").zones(a).nodes(&[NODE_NAME]),
                r("10.1.2.4").zones(a).nodes(&["node2"]),
                r("10.1.2.5").zones(&["zone-b"]).nodes(&["node3"]),
            ],
            cluster: Some(&["10.1.2.3"]),
            local: None,
            has_any: true,
        },
        Case {
            name: "node hints for other nodes only: zone hints instead",
            zone: Some("zone-a"),
            uses_cluster: true,
            uses_local: false,
            endpoints: vec![
                r("10.1.2.3").zones(a).nodes(&["node2"]),
                r("10.1.2.5").zones(&["zone-b"]).nodes(&["node3"]),
            ],
            cluster: Some(&["10.1.2.3"]),
            local: None,
            has_any: true,
        },
        Case {
            name: "topology narrows the Cluster set, never the Local set",
            zone: Some("zone-a"),
            uses_cluster: true,
            uses_local: true,
            endpoints: vec![
                r("10.1.2.3").zones(a).local(),
                r("10.1.2.4").zones(&["zone-b"]).local(),
                r("10.1.2.5").zones(&["zone-c"]),
                r("10.1.2.6").zones(a),
            ],
            cluster: Some(&["10.1.2.3", "10.1.2.6"]),
            local: Some(&["10.1.2.3", "10.1.2.4"]),
            has_any: true,
        },
        Case {
            name: "Local only, no endpoints",
            zone: None,
            uses_cluster: false,
            uses_local: true,
            endpoints: vec![],
            cluster: None,
            local: Some(&[]),
            has_any: false,
        },
        Case {
            name: "Local only, every endpoint remote: has endpoints, none usable here",
            zone: None,
            uses_cluster: false,
            uses_local: true,
            endpoints: vec![r("10.0.0.0"), r("10.0.0.1")],
            cluster: None,
            local: Some(&[]),
            has_any: true,
        },
        Case {
            name: "Local only, every endpoint local",
            zone: None,
            uses_cluster: false,
            uses_local: true,
            endpoints: vec![r("10.0.0.0").local(), r("10.0.0.1").local()],
            cluster: None,
            local: Some(&["10.0.0.0", "10.0.0.1"]),
            has_any: true,
        },
        Case {
            name: "Local only, some local",
            zone: None,
            uses_cluster: false,
            uses_local: true,
            endpoints: vec![r("10.0.0.0").local(), r("10.0.0.1")],
            cluster: None,
            local: Some(&["10.0.0.0"]),
            has_any: true,
        },
        Case {
            name: "Cluster only, terminating fallback",
            zone: None,
            uses_cluster: true,
            uses_local: false,
            endpoints: vec![
                r("10.0.0.0").terminating(),
                r("10.0.0.1").terminating(),
                r("10.0.0.2").gone(),
                r("10.0.0.3").unready(),
            ],
            cluster: Some(&["10.0.0.0", "10.0.0.1"]),
            local: None,
            has_any: true,
        },
        Case {
            name: "Cluster only, a ready endpoint hides the terminating ones",
            zone: None,
            uses_cluster: true,
            uses_local: false,
            endpoints: vec![r("10.0.0.0").terminating(), r("10.0.0.1")],
            cluster: Some(&["10.0.0.1"]),
            local: None,
            has_any: true,
        },
        Case {
            name: "Cluster only, nothing usable",
            zone: None,
            uses_cluster: true,
            uses_local: false,
            endpoints: vec![r("10.0.0.0").gone(), r("10.0.0.1").unready()],
            cluster: Some(&[]),
            local: None,
            has_any: false,
        },
        Case {
            name: "both, the fallback decided per set",
            zone: None,
            uses_cluster: true,
            uses_local: true,
            endpoints: vec![
                r("10.0.0.0").local().terminating(),
                r("10.0.0.1").local().terminating(),
                r("10.0.0.2"),
                r("10.0.0.3").local().gone(),
            ],
            cluster: Some(&["10.0.0.2"]),
            local: Some(&["10.0.0.0", "10.0.0.1"]),
            has_any: true,
        },
        Case {
            name: "both, only remote terminating endpoints",
            zone: None,
            uses_cluster: true,
            uses_local: true,
            endpoints: vec![r("10.0.0.0").terminating(), r("10.0.0.1").local().gone()],
            cluster: Some(&["10.0.0.0"]),
            local: Some(&[]),
            has_any: true,
        },
        Case {
            name: "terminating fallback ignores topology",
            zone: Some("zone-a"),
            uses_cluster: true,
            uses_local: false,
            endpoints: vec![
                r("10.0.0.0").zones(&["zone-b"]).terminating(),
                r("10.0.0.1").zones(a).terminating(),
            ],
            cluster: Some(&["10.0.0.0", "10.0.0.1"]),
            local: None,
            has_any: true,
        },
    ];
    let mut failures = Vec::new();
    for case in cases {
        let endpoints: Vec<PortEndpoint> =
            case.endpoints.iter().map(|e| e.into_endpoint()).collect();
        let got = categorize(
            &endpoints,
            case.uses_cluster,
            case.uses_local,
            NODE_NAME,
            case.zone,
        );
        let (cluster, local) = (names(&got.cluster), names(&got.local));
        if cluster != expect(case.cluster)
            || local != expect(case.local)
            || got.has_any != case.has_any
        {
            failures.push(format!(
                "{}: cluster {cluster:?} local {local:?} has_any {}",
                case.name, got.has_any
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn zone_hints_reach_the_plan_through_the_node_zone() {
    let svc = service("ns1", "svc1", |s| {
        set_cluster_ips(s, &["172.30.0.41"]);
        s.spec.ports = vec![port("p", "TCP", 80, 0)];
    });
    let eps = slice(
        "ns1",
        "svc1-abc",
        "svc1",
        vec![slice_port("p", "TCP", 80)],
        vec![
            with_zone_hints(ready("10.1.2.3", None), &["zone-a"]),
            with_zone_hints(ready("10.1.2.4", None), &["zone-b"]),
        ],
    );
    let mut world = World::new(vec![svc], vec![eps]);
    let flow = |output| {
        [tcp(
            "pod to cluster IP",
            pod(POD),
            "172.30.0.41:80",
            output,
            false,
        )]
    };
    run_flows("no zone", &world.plan(), &flow("10.1.2.3:80, 10.1.2.4:80"));
    world.node.zone = Some("zone-b".into());
    run_flows("zone-b", &world.plan(), &flow("10.1.2.4:80"));
}
