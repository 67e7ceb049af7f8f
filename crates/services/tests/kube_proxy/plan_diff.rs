//! The plan diff: what the datapath reconciler writes when inputs change.

use weft_services::{Scope, ServiceName, Target};

use crate::fixture::*;

/// A LoadBalancer whose LB IP, node port and health-check port derive from its cluster
/// IP's last octet, so two of them never clash.
fn svc(name: &str, cluster_ip: &str) -> weft_services::wire::ServiceWire {
    let cluster_ip = cluster_ip.to_string();
    let n: i64 = cluster_ip.rsplit('.').next().unwrap().parse().unwrap();
    service("ns1", name, move |s| {
        set_type(s, "LoadBalancer");
        set_cluster_ips(s, &[&cluster_ip]);
        s.spec.ports = vec![port("dns", "UDP", 53, 3000 + n)];
        set_ingress(s, &[&format!("1.2.3.{n}")]);
        s.spec.external_traffic_policy = Some("Local".into());
        s.spec.health_check_node_port = Some(30000 + n);
    })
}

fn eps(name: &str, list: &[(&str, Option<&str>)]) -> weft_services::wire::EndpointSliceWire {
    slice(
        "ns1",
        &format!("{name}-abc"),
        name,
        vec![slice_port("dns", "UDP", 5353)],
        list.iter().map(|(a, n)| ready(a, *n)).collect(),
    )
}

#[test]
fn an_endpoint_change_touches_one_service_and_applies_back() {
    let before = World::new(
        vec![svc("a", "172.30.0.10"), svc("b", "172.30.0.11")],
        vec![
            eps("a", &[("10.0.0.1", Some(NODE_NAME))]),
            eps("b", &[("10.0.0.2", None)]),
        ],
    )
    .plan();
    let after = World::new(
        vec![svc("a", "172.30.0.10"), svc("b", "172.30.0.11")],
        vec![
            eps("a", &[("10.0.0.1", Some(NODE_NAME))]),
            eps("b", &[("10.0.0.3", None)]),
        ],
    )
    .plan();
    let diff = before.diff(&after);
    assert_eq!(diff.services.len(), 1);
    assert_eq!(diff.services[0].name, ServiceName::new("ns1", "b"));
    assert!(diff.services[0].removed_frontends().is_empty());

    let mut applied = before.clone();
    diff.apply(&mut applied);
    assert_eq!(applied, after);
    // Lookups follow the applied plan too.
    run_flows(
        "applied",
        &applied,
        &[udp(
            "b's cluster IP",
            pod(POD),
            "172.30.0.11:53",
            "10.0.0.3:5353",
            false,
        )],
    );
    assert!(after.diff(&applied).is_empty());
}

#[test]
fn losing_the_local_endpoint_makes_external_flows_stale_but_not_pod_flows() {
    let before = World::new(
        vec![svc("a", "172.30.0.10")],
        vec![eps(
            "a",
            &[("10.0.0.1", Some(NODE_NAME)), ("10.0.0.2", None)],
        )],
    )
    .plan();
    // 10.0.0.1 moves away: it is now remote.
    let after = World::new(
        vec![svc("a", "172.30.0.10")],
        vec![eps("a", &[("10.0.0.1", Some("node2")), ("10.0.0.2", None)])],
    )
    .plan();
    let change = &before.diff(&after).services[0];
    // Every frontend could still reach 10.0.0.1 through the Cluster set (pods and the node
    // are short-circuited there), so nothing is stale: a pod's flow to it stays valid. The
    // external class lost it, which the datapath sees in the Local set.
    assert!(change.stale_flows().is_empty());
    let old = change.old.as_ref().unwrap();
    let new = change.new.as_ref().unwrap();
    let port = |p: &weft_services::ServicePlan| p.ports.values().next().unwrap().clone();
    assert_eq!(port(old).backends(Target::Local).len(), 1);
    assert!(port(new).backends(Target::Local).is_empty());
    let health = |p: &weft_services::ServicePlan| {
        p.health_check
            .as_ref()
            .unwrap()
            .local_endpoints(weft_services::Family::V4)
    };
    assert_eq!((health(old), health(new)), (1, 0));
}

#[test]
fn a_frontend_moving_between_services_applies_cleanly() {
    let with_ip = |name: &str, cluster_ip: &str, external_ip: bool| {
        let (name, cluster_ip) = (name.to_string(), cluster_ip.to_string());
        service("ns1", &name.clone(), move |s| {
            set_cluster_ips(s, &[&cluster_ip]);
            s.spec.ports = vec![port("p", "TCP", 80, 0)];
            if external_ip {
                s.spec.external_ips = strings(&["192.168.99.11"]);
            }
        })
    };
    let before = World::new(
        vec![
            with_ip("a", "172.30.0.10", true),
            with_ip("b", "172.30.0.11", false),
        ],
        vec![],
    )
    .plan();
    let after = World::new(
        vec![
            with_ip("a", "172.30.0.10", false),
            with_ip("b", "172.30.0.11", true),
        ],
        vec![],
    )
    .plan();
    let diff = before.diff(&after);
    assert_eq!(diff.services.len(), 2);
    let mut applied = before.clone();
    diff.apply(&mut applied);
    assert_eq!(applied, after);
    let (owner, _, frontend) = applied
        .frontend(&weft_services::FrontendKey {
            address: ip("192.168.99.11"),
            protocol: weft_services::Protocol::Tcp,
            port: 80,
        })
        .unwrap();
    assert_eq!(owner.name.name, "b");
    assert_eq!(frontend.scope, Scope::ExternalIp);
}

#[test]
fn settings_changes_show_in_the_diff() {
    let world = World::new(vec![svc("a", "172.30.0.10")], vec![]);
    let before = world.plan();
    let mut changed = World::new(vec![svc("a", "172.30.0.10")], vec![]);
    changed.settings.service_cidrs.clear();
    changed.settings.node_port_addresses =
        weft_services::NodePortAddresses::parse(&["0.0.0.0/0"]).unwrap();
    let after = changed.plan();
    let diff = before.diff(&after);
    assert_eq!(diff.service_cidrs, Some(vec![]));
    // The alternate address now serves the NodePort (and the health check).
    assert_eq!(diff.services.len(), 1);
    let mut applied = before.clone();
    diff.apply(&mut applied);
    assert_eq!(applied, after);
}
