//! Policy with connection tracking on the model datapath: replies of an allowed connection
//! pass both ways and nothing else does; changes revoke established connections at their
//! next packet.

mod support;

use support::*;
use weft_policy::conntrack::{Datapath, Packet};
use weft_policy::simulate::DropReason;
use weft_policy::table::NodeTables;
use weft_policy::{Compiler, NetworkPolicy};

fn tables(c: &weft_policy::owned::OwnedCluster, compilers: &mut [Compiler]) -> Vec<NodeTables> {
    let cluster = c.cluster();
    c.nodes
        .iter()
        .zip(compilers.iter_mut())
        .map(|(n, compiler)| compiler.compile(&cluster, &n.name).tables)
        .collect()
}

fn tcp(src: &str, sport: u16, dst: &str, dport: u16) -> Packet {
    Packet {
        src: ip(src),
        dst: ip(dst),
        protocol: TCP,
        sport,
        dport,
    }
}

/// x/client on n0 may send to y/server on n1 port 80; both are otherwise isolated.
fn setup() -> (weft_policy::owned::OwnedCluster, Vec<Compiler>, Datapath) {
    let mut c = cluster();
    c.pods
        .push(pod("x/client", &[("role", "client")], "n0", &["10.0.0.10"]));
    c.pods
        .push(pod("y/server", &[("role", "server")], "n1", &["10.0.1.10"]));
    c.policies.push(egress_to_server());
    c.policies.push(policy(
        "metadata: {name: isolate, namespace: x}\nspec: {podSelector: {}, policyTypes: [Ingress]}",
    ));
    c.policies.push(policy(
        "metadata: {name: admit-client, namespace: y}\nspec: {podSelector: {}, policyTypes: [Ingress, Egress], ingress: [{from: [{namespaceSelector: {}, podSelector: {matchLabels: {role: client}}}], ports: [{port: 80}]}]}",
    ));
    let mut compilers = vec![Compiler::new(), Compiler::new()];
    let dp = Datapath::new(tables(&c, &mut compilers));
    (c, compilers, dp)
}

fn egress_to_server() -> NetworkPolicy {
    policy("metadata: {name: to-server, namespace: x}\nspec: {podSelector: {}, policyTypes: [Egress], egress: [{to: [{namespaceSelector: {}, podSelector: {matchLabels: {role: server}}}], ports: [{port: 80}]}]}")
}

#[test]
fn replies_of_an_allowed_connection_pass_both_ways() {
    let (_, _, mut dp) = setup();
    let syn = tcp("10.0.0.10", 40000, "10.0.1.10", 80);
    assert_eq!(dp.send(syn), Ok(()));
    // The server is egress-isolated with no egress rules, and the client is
    // ingress-isolated: only the connection table lets these through.
    for _ in 0..3 {
        assert_eq!(dp.send(syn.reply()), Ok(()));
        assert_eq!(dp.send(syn), Ok(()));
    }
    // Tracked on both nodes.
    assert_eq!(dp.tracked(), 2);
}

#[test]
fn a_reply_looking_packet_of_no_allowed_connection_is_dropped() {
    let (_, _, mut dp) = setup();
    // The server never received a SYN on this tuple: its "reply" is a new connection from
    // the server, which its egress isolation denies, whatever the TCP flags.
    let fake = tcp("10.0.1.10", 80, "10.0.0.10", 40000);
    let e = dp.send(fake).unwrap_err();
    assert_eq!(e.reason, DropReason::NoRule);
    assert_eq!(e.endpoint, ip("10.0.1.10"));
    // A denied connection leaves nothing behind for its replies.
    let denied = tcp("10.0.0.10", 40001, "10.0.1.10", 81);
    assert!(dp.send(denied).is_err());
    assert!(dp.send(denied.reply()).is_err());
    assert_eq!(dp.tracked(), 0);
}

#[test]
fn a_policy_change_revokes_established_connections_at_their_next_packet() {
    let (mut c, mut compilers, mut dp) = setup();
    let syn = tcp("10.0.0.10", 40000, "10.0.1.10", 80);
    dp.send(syn).unwrap();
    dp.send(syn.reply()).unwrap();

    // An unrelated change: the connection is re-checked, still allowed, and survives.
    c.policies.push(policy(
        "metadata: {name: unrelated, namespace: y}\nspec: {podSelector: {matchLabels: {role: nobody}}, policyTypes: [Ingress]}",
    ));
    for t in tables(&c, &mut compilers) {
        dp.update(t);
    }
    assert_eq!(dp.send(syn.reply()), Ok(()));
    assert_eq!(dp.send(syn), Ok(()));

    // The client loses its egress allow: the next packet of the connection, in either
    // direction, is dropped as revoked, and the connection is forgotten.
    c.policies.retain(|p| p.name != "to-server");
    c.policies.push(policy(
        "metadata: {name: deny-out, namespace: x}\nspec: {podSelector: {}, policyTypes: [Egress]}",
    ));
    for t in tables(&c, &mut compilers) {
        dp.update(t);
    }
    let e = dp.send(syn.reply()).unwrap_err();
    assert_eq!(e.reason, DropReason::Revoked);
    assert!(dp.send(syn).is_err());
    assert!(dp.send(syn.reply()).is_err());
}

#[test]
fn a_label_change_revokes_too() {
    let (mut c, mut compilers, mut dp) = setup();
    let syn = tcp("10.0.0.10", 40000, "10.0.1.10", 80);
    dp.send(syn).unwrap();
    c.pod_mut("x/client")
        .unwrap()
        .labels
        .insert("role".into(), "intruder".into());
    for t in tables(&c, &mut compilers) {
        dp.update(t);
    }
    // The server's node no longer admits the client's new identity.
    let e = dp.send(syn).unwrap_err();
    assert_eq!(e.reason, DropReason::Revoked);
    assert_eq!(e.endpoint, ip("10.0.1.10"));
}

#[test]
fn kubelet_probes_and_their_replies_pass_an_isolated_pod() {
    let (_, _, mut dp) = setup();
    // The server's node probes it; the server may send nothing, but replies pass.
    let probe = tcp("192.168.0.2", 50000, "10.0.1.10", 8080);
    assert_eq!(dp.send(probe), Ok(()));
    assert_eq!(dp.send(probe.reply()), Ok(()));
    // Another node may not.
    assert!(dp
        .send(tcp("192.168.0.1", 50000, "10.0.1.10", 8080))
        .is_err());
}

#[test]
fn a_pending_endpoint_admits_only_its_node() {
    use weft_policy::table::EndpointPolicy;
    let (c, mut compilers, _) = setup();
    let mut ts = tables(&c, &mut compilers);
    // What the CNI ADD installs when the agent has not prepared the pod.
    ts[1]
        .endpoints
        .insert(ip("10.0.1.99").into(), EndpointPolicy::pending());
    let mut dp = Datapath::new(ts);
    let e = dp
        .send(tcp("10.0.1.99", 1000, "10.0.0.10", 80))
        .unwrap_err();
    assert_eq!(e.reason, DropReason::Pending);
    assert!(dp.send(tcp("10.0.0.10", 1000, "10.0.1.99", 80)).is_err());
    assert_eq!(dp.send(tcp("192.168.0.2", 1000, "10.0.1.99", 80)), Ok(()));
}
