//! TestBadIPs: addresses with leading zeros (accepted by old API servers) are read as
//! decimal and normalised everywhere.

use crate::fixture::*;

#[test]
fn leading_zeros_are_normalised() {
    let svc = service("ns1", "svc1", |s| {
        set_type(s, "LoadBalancer");
        s.spec.cluster_ip = Some("172.30.0.041".into());
        s.spec.ports = vec![port("p80", "TCP", 80, 3001)];
        s.spec.external_ips = strings(&["192.168.099.022"]);
        set_ingress(s, &["1.2.3.004"]);
        s.spec.load_balancer_source_ranges = strings(&["203.0.113.000/025"]);
    });
    let eps = slice(
        "ns1",
        "svc1-abc",
        "svc1",
        vec![slice_port("p80", "TCP", 80)],
        vec![ready("10.180.00.001", None)],
    );
    let world = World::new(vec![svc], vec![eps]);
    let plan = world.plan();
    let addresses: Vec<String> = plan
        .frontends()
        .map(|(_, _, f)| f.key.address.to_string())
        .collect();
    assert_eq!(
        addresses,
        ["1.2.3.4", "172.30.0.41", "192.168.0.2", "192.168.99.22"]
    );
    let lb = plan
        .frontends()
        .find(|(_, _, f)| f.key.address == ip("1.2.3.4"))
        .unwrap()
        .2;
    assert_eq!(
        lb.source_ranges,
        Some(vec!["203.0.113.0/25".parse().unwrap()])
    );
    let ep = "10.180.0.1:80";
    run_flows(
        "normalised",
        &plan,
        &[
            tcp("pod to cluster IP", pod(POD), "172.30.0.41:80", ep, false),
            tcp(
                "external to external IP",
                external(EXTERNAL),
                "192.168.99.22:80",
                ep,
                true,
            ),
            tcp(
                "allowed external to LB",
                external(EXTERNAL),
                "1.2.3.4:80",
                ep,
                true,
            ),
            tcp(
                "blocked external to LB",
                external(EXTERNAL_BLOCKED),
                "1.2.3.4:80",
                "DROP",
                false,
            ),
        ],
    );
}
