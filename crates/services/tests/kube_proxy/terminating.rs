//! TestTerminatingEndpointsTrafficPolicyLocal and ...Cluster: terminating endpoints are
//! used only when no ready one exists, for the Cluster and the Local set independently
//! (KEP-1669), and never when they have stopped serving.

use crate::fixture::*;

/// (address, node, (ready, serving, terminating))
pub type Ep = (&'static str, &'static str, (bool, bool, bool));

const T: bool = true;
const F: bool = false;
const OTHER: &str = "another-node";

struct Case {
    name: &'static str,
    endpoints: &'static [Ep],
    /// pod to the cluster IP
    internal: &'static str,
    /// external client to the LB IP
    external: &'static str,
}

pub fn world(policy: &str, eps: &[Ep]) -> World {
    let svc = service("ns1", "svc1", |s| {
        set_type(s, "LoadBalancer");
        set_cluster_ips(s, &["172.30.1.1"]);
        s.spec.ports = vec![port("", "TCP", 80, 0)];
        set_ingress(s, &["1.2.3.4"]);
        s.spec.external_traffic_policy = Some(policy.into());
        s.spec.health_check_node_port = Some(30000);
        // Affinity changes which backend a client keeps, never the set it may reach.
        s.spec.session_affinity = Some("ClientIP".into());
    });
    let slices = if eps.is_empty() {
        vec![]
    } else {
        vec![slice(
            "ns1",
            "svc1-abc",
            "svc1",
            vec![slice_port("", "TCP", 80)],
            eps.iter()
                .map(|(a, n, c)| endpoint(a, Some(n), *c))
                .collect(),
        )]
    };
    World::new(vec![svc], slices)
}

fn run(policy: &str, masq_external: bool, cases: &[Case]) {
    for case in cases {
        for (label, eps) in [
            (case.name, case.endpoints),
            ("after the slice is deleted", &[][..]),
        ] {
            let (internal, external_out) = if eps.is_empty() {
                ("REJECT", "REJECT")
            } else {
                (case.internal, case.external)
            };
            run_flows(
                &format!("eTP {policy}: {} / {label}", case.name),
                &world(policy, eps).plan(),
                &[
                    tcp(
                        "pod to cluster IP",
                        pod(POD),
                        "172.30.1.1:80",
                        internal,
                        false,
                    ),
                    tcp(
                        "external to LB",
                        external(EXTERNAL),
                        "1.2.3.4:80",
                        external_out,
                        masq_external,
                    ),
                ],
            );
        }
    }
}

#[test]
fn external_policy_local() {
    run(
        "Local",
        false,
        &[
            Case {
                name: "ready endpoints exist",
                endpoints: &[
                    ("10.0.1.1", NODE_NAME, (T, T, F)),
                    ("10.0.1.2", NODE_NAME, (T, T, F)),
                    ("10.0.1.3", NODE_NAME, (F, T, T)),
                    ("10.0.1.4", NODE_NAME, (F, F, T)),
                    ("10.0.1.5", OTHER, (T, T, F)),
                ],
                internal: "10.0.1.1:80, 10.0.1.2:80, 10.0.1.5:80",
                external: "10.0.1.1:80, 10.0.1.2:80",
            },
            Case {
                name: "only terminating endpoints here, a ready one elsewhere",
                endpoints: &[
                    // Unready but not terminating: never a fallback.
                    ("10.0.1.1", NODE_NAME, (F, T, F)),
                    ("10.0.1.2", NODE_NAME, (F, T, T)),
                    ("10.0.1.3", NODE_NAME, (F, T, T)),
                    ("10.0.1.4", NODE_NAME, (F, F, T)),
                    ("10.0.1.5", OTHER, (T, T, F)),
                ],
                internal: "10.0.1.5:80",
                external: "10.0.1.2:80, 10.0.1.3:80",
            },
            Case {
                name: "terminating endpoints on a remote node only",
                endpoints: &[("10.0.1.5", OTHER, (F, T, T))],
                internal: "10.0.1.5:80",
                external: "DROP",
            },
            Case {
                name: "no usable endpoint anywhere",
                endpoints: &[
                    ("10.0.1.5", NODE_NAME, (F, F, T)),
                    ("10.0.1.6", OTHER, (F, F, T)),
                ],
                internal: "REJECT",
                external: "REJECT",
            },
        ],
    );
}

#[test]
fn external_policy_cluster() {
    run(
        "Cluster",
        true,
        &[
            Case {
                name: "ready endpoints exist",
                endpoints: &[
                    ("10.0.1.1", NODE_NAME, (T, T, F)),
                    ("10.0.1.2", NODE_NAME, (T, T, F)),
                    ("10.0.1.3", OTHER, (F, T, T)),
                    ("10.0.1.4", OTHER, (F, F, T)),
                    ("10.0.1.5", OTHER, (T, T, F)),
                ],
                internal: "10.0.1.1:80, 10.0.1.2:80, 10.0.1.5:80",
                external: "10.0.1.1:80, 10.0.1.2:80, 10.0.1.5:80",
            },
            Case {
                name: "only terminating endpoints exist",
                endpoints: &[
                    ("10.0.1.1", NODE_NAME, (F, F, F)),
                    ("10.0.1.2", NODE_NAME, (F, T, T)),
                    ("10.0.1.3", NODE_NAME, (F, T, T)),
                    ("10.0.1.4", OTHER, (F, F, T)),
                    ("10.0.1.5", OTHER, (F, T, T)),
                ],
                internal: "10.0.1.2:80, 10.0.1.3:80, 10.0.1.5:80",
                external: "10.0.1.2:80, 10.0.1.3:80, 10.0.1.5:80",
            },
            Case {
                name: "terminating endpoints on a remote node only",
                endpoints: &[("10.0.1.5", OTHER, (F, T, T))],
                internal: "10.0.1.5:80",
                external: "10.0.1.5:80",
            },
            Case {
                name: "no usable endpoint anywhere",
                endpoints: &[
                    ("10.0.1.5", NODE_NAME, (F, F, T)),
                    ("10.0.1.6", OTHER, (F, F, T)),
                ],
                internal: "REJECT",
                external: "REJECT",
            },
        ],
    );
}
