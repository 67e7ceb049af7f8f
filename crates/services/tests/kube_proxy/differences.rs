//! Where weft deliberately differs from kube-proxy. Each test names the difference; the
//! reasons are in docs/services.md ("Deliberate differences").

use weft_services::{NodePlan, Service};

use crate::fixture::*;
use crate::terminating;

fn one_endpoint(service: &str) -> weft_services::wire::EndpointSliceWire {
    slice(
        "ns1",
        &format!("{service}-abc"),
        service,
        vec![slice_port("p80", "TCP", 80)],
        vec![ready("10.180.0.1", None)],
    )
}

#[test]
fn source_ranges_of_the_other_family_only_shut_this_family_out() {
    // kube-proxy: no range of the family left, so every source of it gets in.
    // weft: the Service asked for a restriction; fail closed.
    let svc = service("ns1", "svc1", |s| {
        set_type(s, "LoadBalancer");
        set_cluster_ips(s, &["172.30.0.41", "fd00:172:30::41"]);
        s.spec.ports = vec![port("p80", "TCP", 80, 3001)];
        set_ingress(s, &["1.2.3.4", "2001:db8:99::4"]);
        s.spec.load_balancer_source_ranges = strings(&["203.0.113.0/25"]);
    });
    let v6 = slice(
        "ns1",
        "svc1-v6",
        "svc1",
        vec![slice_port("p80", "TCP", 80)],
        vec![ready("fd00:10:180::1", None)],
    );
    let world = World::new(vec![svc], vec![one_endpoint("svc1"), v6]);
    run_flows(
        "v4-only ranges on a dual-stack LB",
        &world.plan(),
        &[
            tcp(
                "v4 inside",
                external(EXTERNAL),
                "1.2.3.4:80",
                "10.180.0.1:80",
                true,
            ),
            tcp(
                "v6: nothing allowed",
                external("2600:5200::1"),
                "[2001:db8:99::4]:80",
                "DROP",
                false,
            ),
        ],
    );
}

#[test]
fn load_balancer_status_of_a_service_that_is_no_longer_a_load_balancer_is_ignored() {
    // kube-proxy reads status.loadBalancer whatever the type; a stale status left after a
    // type change would keep capturing the old VIP.
    let svc = service("ns1", "svc1", |s| {
        set_type(s, "NodePort");
        set_cluster_ips(s, &["172.30.0.41"]);
        s.spec.ports = vec![port("p80", "TCP", 80, 3001)];
        set_ingress(s, &["1.2.3.4"]);
    });
    let world = World::new(vec![svc], vec![one_endpoint("svc1")]);
    run_flows(
        "stale LB status",
        &world.plan(),
        &[tcp(
            "external to the old VIP",
            external(EXTERNAL),
            "1.2.3.4:80",
            "",
            false,
        )],
    );
}

#[test]
fn cluster_ips_of_services_left_to_another_proxy_are_not_dropped() {
    // nftables kube-proxy knows only the Services it serves, so it drops traffic to the
    // cluster IP of a Service another proxy serves, as "unallocated".
    let svc = service("ns1", "svc1", |s| {
        set_cluster_ips(s, &["172.30.0.41"]);
        s.spec.ports = vec![port("p80", "TCP", 80, 0)];
        s.metadata.labels.insert(
            weft_services::SERVICE_PROXY_NAME_LABEL.into(),
            "other-proxy".into(),
        );
    });
    let world = World::new(vec![svc], vec![one_endpoint("svc1")]);
    run_flows(
        "foreign Service",
        &world.plan(),
        &[
            tcp("its cluster IP", pod(POD), "172.30.0.41:80", "", false),
            tcp("any port of it", pod(POD), "172.30.0.41:81", "", false),
            tcp(
                "truly unallocated",
                pod(POD),
                "172.30.0.42:80",
                "DROP",
                false,
            ),
        ],
    );
}

#[test]
fn an_unparsable_source_range_refuses_the_whole_service() {
    // kube-proxy skips it; if every range is bad the load balancer is open to everyone.
    let svc = service("ns1", "svc1", |s| {
        set_type(s, "LoadBalancer");
        set_cluster_ips(s, &["172.30.0.41"]);
        s.spec.ports = vec![port("p80", "TCP", 80, 3001)];
        set_ingress(s, &["1.2.3.4"]);
        s.spec.load_balancer_source_ranges = strings(&["203.0.113.0/33"]);
    });
    let issues = Service::from_wire(&svc).unwrap_err();
    assert_eq!(issues.len(), 1);
    assert_eq!(issues[0].field, "spec.loadBalancerSourceRanges[0]");
}

#[test]
fn a_ready_flag_on_a_terminating_endpoint_is_not_trusted() {
    // The API promises ready is false while terminating; kube-proxy takes the flags as
    // given. weft reads such an endpoint as terminating, so it cannot crowd out a
    // genuinely ready one.
    let eps: &[terminating::Ep] = &[
        ("10.0.1.1", NODE_NAME, (true, true, true)),
        ("10.0.1.2", "another-node", (true, true, false)),
    ];
    run_flows(
        "ready and terminating",
        &terminating::world("Cluster", eps).plan(),
        &[tcp(
            "pod to cluster IP",
            pod(POD),
            "172.30.1.1:80",
            "10.0.1.2:80",
            false,
        )],
    );
}

#[test]
fn a_frontend_claimed_twice_goes_to_the_older_service() {
    // kube-proxy installs both and whichever rule lands first wins. weft keeps the older
    // Service's (then the first by name) and reports the other.
    let claim = |name: &str, cluster_ip: &str, created: &str| {
        let (cluster_ip, created) = (cluster_ip.to_string(), created.to_string());
        service("ns1", name, move |s| {
            set_cluster_ips(s, &[&cluster_ip]);
            s.spec.ports = vec![port("p80", "TCP", 80, 0)];
            s.spec.external_ips = strings(&["192.168.99.11"]);
            s.metadata.creation_timestamp = Some(created);
        })
    };
    let young = claim("a-young", "172.30.0.41", "2024-06-01T00:00:00Z");
    let old = claim("b-old", "172.30.0.42", "2023-01-01T00:00:00Z");
    let services: Vec<Service> = [young, old]
        .iter()
        .map(|w| Service::from_wire(w).unwrap())
        .collect();
    let slices: Vec<weft_services::EndpointSlice> = [
        slice(
            "ns1",
            "y",
            "a-young",
            vec![slice_port("p80", "TCP", 80)],
            vec![ready("10.180.0.1", None)],
        ),
        slice(
            "ns1",
            "o",
            "b-old",
            vec![slice_port("p80", "TCP", 80)],
            vec![ready("10.180.0.2", None)],
        ),
    ]
    .iter()
    .map(|w| weft_services::EndpointSlice::from_wire(w).unwrap())
    .collect();
    let (plan, issues) = NodePlan::build(&services, &slices, &test_node(), &test_settings());
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].object, "Service/ns1/a-young");
    assert_eq!(issues[0].field, "spec.externalIPs[0]");
    run_flows(
        "clash",
        &plan,
        &[
            tcp(
                "the shared external IP",
                external(EXTERNAL),
                "192.168.99.11:80",
                "10.180.0.2:80",
                true,
            ),
            tcp(
                "the younger keeps its cluster IP",
                pod(POD),
                "172.30.0.41:80",
                "10.180.0.1:80",
                false,
            ),
        ],
    );
}

#[test]
fn no_node_ports_on_loopback_unlike_iptables_kube_proxy() {
    // iptables kube-proxy serves 127.0.0.1:<nodePort> by default (localhostNodePorts, which
    // needs route_localnet). weft follows nftables kube-proxy: never on loopback, and the
    // health check is not served there either.
    let svc = service("ns1", "svc1", |s| {
        set_type(s, "LoadBalancer");
        set_cluster_ips(s, &["172.30.0.41"]);
        s.spec.ports = vec![port("p80", "TCP", 80, 3001)];
        s.spec.external_traffic_policy = Some("Local".into());
        s.spec.health_check_node_port = Some(30000);
    });
    let mut world = World::new(vec![svc], vec![one_endpoint("svc1")]);
    world.settings.node_port_addresses =
        weft_services::NodePortAddresses::parse(&["127.0.0.0/8"]).unwrap();
    run_flows(
        "loopback",
        &world.plan(),
        &[
            tcp(
                "localhost to node port",
                node("127.0.0.1"),
                "127.0.0.1:3001",
                "",
                false,
            ),
            tcp(
                "localhost to health check",
                node("127.0.0.1"),
                "127.0.0.1:30000",
                "",
                false,
            ),
            tcp(
                "node IP is not selected",
                external(EXTERNAL),
                "192.168.0.2:3001",
                "",
                false,
            ),
        ],
    );
}

#[test]
fn unallocated_service_addresses_are_dropped_unlike_iptables_kube_proxy() {
    // iptables kube-proxy lets such traffic through untouched; weft drops it as nftables
    // kube-proxy does (a client racing a new Service retries its SYN and gets through once
    // the Service is programmed, instead of failing hard).
    let world = World::new(vec![], vec![]);
    run_flows(
        "unallocated",
        &world.plan(),
        &[
            tcp("v4", pod(POD), "172.30.0.99:80", "DROP", false),
            tcp(
                "v6",
                pod("fd00:10::2"),
                "[fd00:172:30::99]:80",
                "DROP",
                false,
            ),
        ],
    );
}
