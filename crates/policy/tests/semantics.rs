//! The corners of the semantics, each checked against both evaluators, and properties of
//! the compiled form (cost of a change, restarts, sets, explanations).

mod support;

use support::*;
use weft_policy::explain::{explain, explain_drop};
use weft_policy::simulate::{path, Decision, DropReason};
use weft_policy::table::{ENDPOINT_PENDING, IDENTITY_HOST, IDENTITY_REMOTE_NODE, SET_NONE};
use weft_policy::{bench, Compiler, Protocol};

fn deny_all_ingress(ns: &str) -> weft_policy::NetworkPolicy {
    policy(&format!(
        "metadata: {{name: deny, namespace: {ns}}}\nspec: {{podSelector: {{}}, policyTypes: [Ingress]}}"
    ))
}

#[test]
fn traffic_from_the_pods_own_node_is_allowed_in_and_other_nodes_are_not() {
    let mut c = cluster();
    c.pods.push(pod("x/a", &[], "n0", &["10.0.0.10"]));
    c.policies.push(deny_all_ingress("x"));
    assert!(allowed(&c, "192.168.0.1", "10.0.0.10", TCP, 10250));
    assert!(!allowed(&c, "192.168.0.2", "10.0.0.10", TCP, 10250));
    // A remote node is matched by an ipBlock like any address, never by a pod selector.
    c.policies.push(policy(
        "metadata: {name: nodes, namespace: x}\nspec: {podSelector: {}, ingress: [{from: [{namespaceSelector: {}}]}, {from: [{ipBlock: {cidr: 192.168.0.2/32}}], ports: [{port: 22}]}]}",
    ));
    assert!(!allowed(&c, "192.168.0.2", "10.0.0.10", TCP, 10250));
    assert!(allowed(&c, "192.168.0.2", "10.0.0.10", TCP, 22));
}

#[test]
fn host_network_pods_are_their_node_and_never_isolated() {
    let mut c = cluster();
    c.pods
        .push(pod("x/a", &[("app", "a")], "n0", &["10.0.0.10"]));
    let mut h0 = pod("x/h0", &[("app", "a")], "n0", &["192.168.0.1"]);
    h0.host_network = true;
    let mut h1 = pod("x/h1", &[("app", "a")], "n1", &["192.168.0.2"]);
    h1.host_network = true;
    c.pods.extend([h0, h1]);
    // Isolates every pod with app=a both ways, and admits app=a pods.
    c.policies.push(policy(
        "metadata: {name: p, namespace: x}\nspec: {podSelector: {matchLabels: {app: a}}, policyTypes: [Ingress, Egress], ingress: [{from: [{podSelector: {matchLabels: {app: a}}}]}]}",
    ));
    // The host-network pod on the pod's own node is the node: allowed in.
    assert!(allowed(&c, "192.168.0.1", "10.0.0.10", TCP, 80));
    // The one elsewhere is another node: its labels do not make it a pod peer.
    assert!(!allowed(&c, "192.168.0.2", "10.0.0.10", TCP, 80));
    // And host-network pods are not isolated: nothing stops what they send or receive.
    assert!(allowed(&c, "192.168.0.2", "192.168.0.1", TCP, 80));
    let sims = compile(&c, &mut Vec::new());
    assert_eq!(
        sims[0].tables().identities[&ip("192.168.0.1").into()],
        IDENTITY_HOST
    );
    assert_eq!(
        sims[0].tables().identities[&ip("192.168.0.2").into()],
        IDENTITY_REMOTE_NODE
    );
    assert!(!sims[0].is_local(ip("192.168.0.1")));
}

#[test]
fn an_unknown_address_never_matches_a_pod_selector_but_ip_blocks_match_pods_too() {
    let mut c = cluster();
    c.pods.push(pod("x/a", &[], "n0", &["10.0.0.10"]));
    c.pods.push(pod("y/b", &[], "n1", &["10.0.1.10"]));
    c.policies.push(policy(
        "metadata: {name: p, namespace: x}\nspec: {podSelector: {}, ingress: [{from: [{namespaceSelector: {}, podSelector: {}}]}]}",
    ));
    assert!(allowed(&c, "10.0.1.10", "10.0.0.10", TCP, 80));
    assert!(!allowed(&c, "10.0.1.99", "10.0.0.10", TCP, 80));
    assert!(!allowed(&c, "203.0.113.5", "10.0.0.10", TCP, 80));
    // An ipBlock covering pods matches the pods as well as the rest.
    c.policies.push(policy(
        "metadata: {name: q, namespace: x}\nspec: {podSelector: {}, ingress: [{from: [{ipBlock: {cidr: 10.0.1.0/24, except: [10.0.1.10/32]}}]}]}",
    ));
    assert!(allowed(&c, "10.0.1.99", "10.0.0.10", TCP, 80));
    // The excepted pod is still allowed by the selector rule: policies add up.
    assert!(allowed(&c, "10.0.1.10", "10.0.0.10", TCP, 80));
}

#[test]
fn finished_pods_and_pods_without_addresses_are_not_there() {
    let mut c = cluster();
    c.pods.push(pod("x/a", &[], "n0", &["10.0.0.10"]));
    let mut done = pod("x/done", &[("role", "client")], "n1", &["10.0.1.10"]);
    done.terminal = true;
    c.pods.push(done);
    c.pods.push(pod("x/late", &[("role", "client")], "n0", &[]));
    c.policies.push(policy(
        "metadata: {name: p, namespace: x}\nspec: {podSelector: {}, ingress: [{from: [{podSelector: {matchLabels: {role: client}}}]}]}",
    ));
    // The finished pod's address no longer carries its labels.
    assert!(!allowed(&c, "10.0.1.10", "10.0.0.10", TCP, 80));
    let sims = compile(&c, &mut Vec::new());
    let t = sims[0].tables();
    // The pod scheduled here without an address yet is prepared for its ADD, with its
    // identity and its sets; the finished one is not.
    let prepared = t.prepared["x/late"];
    assert_ne!(prepared.ingress_set, SET_NONE);
    assert!(t.meta.identities.contains_key(&prepared.identity));
    assert!(!t.prepared.contains_key("x/done"));
    assert!(!sims[1].tables().prepared.contains_key("x/done"));
}

#[test]
fn an_address_held_twice_identifies_nobody_and_its_local_holder_is_held_back() {
    let mut c = cluster();
    c.pods
        .push(pod("x/a", &[("app", "a")], "n0", &["10.0.0.10"]));
    c.pods
        .push(pod("x/b", &[("app", "b")], "n1", &["10.0.0.10"]));
    let cluster_view = c.cluster();
    let compiled = Compiler::new().compile(&cluster_view, "n0");
    assert_eq!(compiled.issues.len(), 1, "{:?}", compiled.issues);
    assert!(compiled.issues[0].to_string().contains("10.0.0.10"));
    let t = &compiled.tables;
    assert!(!t.identities.contains_key(&ip("10.0.0.10").into()));
    assert_eq!(
        t.endpoints[&ip("10.0.0.10").into()].flags & ENDPOINT_PENDING,
        ENDPOINT_PENDING
    );
}

#[test]
fn named_ports_resolve_per_destination_pod() {
    let mut c = cluster();
    c.pods.push(pod("x/client", &[], "n0", &["10.0.0.10"]));
    // Same labels, the same name on different numbers.
    c.pods.push(with_port(
        pod("y/s1", &[("app", "web")], "n1", &["10.0.1.10"]),
        "http",
        Protocol::Tcp,
        8080,
    ));
    c.pods.push(with_port(
        pod("y/s2", &[("app", "web")], "n1", &["10.0.1.11"]),
        "http",
        Protocol::Tcp,
        9090,
    ));
    c.policies.push(policy(
        "metadata: {name: out, namespace: x}\nspec: {podSelector: {}, policyTypes: [Egress], egress: [{to: [{namespaceSelector: {}, podSelector: {matchLabels: {app: web}}}], ports: [{port: http}]}]}",
    ));
    assert!(allowed(&c, "10.0.0.10", "10.0.1.10", TCP, 8080));
    assert!(!allowed(&c, "10.0.0.10", "10.0.1.10", TCP, 9090));
    assert!(allowed(&c, "10.0.0.10", "10.0.1.11", TCP, 9090));
    assert!(!allowed(&c, "10.0.0.10", "10.0.1.11", TCP, 8080));
    // The protocol is part of the name's meaning.
    assert!(!allowed(&c, "10.0.0.10", "10.0.1.10", UDP, 8080));

    // On ingress the name resolves against the local endpoint: two endpoints of the same
    // labels and policies, resolving it differently, get two sets.
    c.policies.push(policy(
        "metadata: {name: in, namespace: y}\nspec: {podSelector: {}, ingress: [{ports: [{port: http}]}]}",
    ));
    assert!(allowed(&c, "10.0.0.10", "10.0.1.10", TCP, 8080));
    assert!(!allowed(&c, "10.0.0.10", "10.0.1.11", TCP, 8080));
    let sims = compile(&c, &mut Vec::new());
    let t = sims[1].tables();
    let s1 = t.endpoints[&ip("10.0.1.10").into()].ingress_set;
    let s2 = t.endpoints[&ip("10.0.1.11").into()].ingress_set;
    assert_ne!(s1, s2);
    assert_eq!(t.meta.sets[&s1].named_ports[0].2, vec![8080]);
}

#[test]
fn endpoints_selected_by_the_same_policies_share_a_set() {
    let c = bench::synthetic(60, 200, 1);
    let compiled = Compiler::new().compile(&c.cluster(), "node0");
    let t = &compiled.tables;
    let sets: std::collections::BTreeSet<u32> = t
        .endpoints
        .values()
        .flat_map(|e| [e.ingress_set, e.egress_set])
        .filter(|s| *s != SET_NONE)
        .collect();
    assert!(
        sets.len() * 4 < t.endpoints.len(),
        "{} sets for {} endpoint addresses",
        sets.len(),
        t.endpoints.len()
    );
    assert_eq!(sets.len(), t.meta.sets.len());
}

#[test]
fn a_port_range_is_a_handful_of_prefixes() {
    let mut c = cluster();
    c.pods.push(pod("x/a", &[], "n0", &["10.0.0.10"]));
    c.pods.push(pod("y/b", &[], "n1", &["10.0.1.10"]));
    c.policies.push(policy(
        "metadata: {name: p, namespace: x}\nspec: {podSelector: {}, ingress: [{from: [{namespaceSelector: {}}], ports: [{port: 1, endPort: 65535}, {protocol: UDP, port: 1000, endPort: 2000}]}]}",
    ));
    assert!(allowed(&c, "10.0.1.10", "10.0.0.10", TCP, 65535));
    assert!(allowed(&c, "10.0.1.10", "10.0.0.10", TCP, 1));
    assert!(allowed(&c, "10.0.1.10", "10.0.0.10", UDP, 1000));
    assert!(allowed(&c, "10.0.1.10", "10.0.0.10", UDP, 2000));
    assert!(!allowed(&c, "10.0.1.10", "10.0.0.10", UDP, 999));
    assert!(!allowed(&c, "10.0.1.10", "10.0.0.10", UDP, 2001));
    let sims = compile(&c, &mut Vec::new());
    // Two peer identities (x/a, y/b), each with ≤16 blocks for 1-65535 and ≤30 for the UDP range.
    assert!(sims[0].tables().allow.len() <= 2 * (16 + 30));
}

#[test]
fn a_change_costs_writes_in_proportion_to_it() {
    let base = bench::synthetic(300, 600, 3);
    let mut compiler = Compiler::new();
    let before = compiler.compile(&base.cluster(), "node0").tables;
    assert!(compiler
        .compile(&base.cluster(), "node0")
        .tables
        .diff(&before)
        .is_empty());
    let entries = before.allow.len() + before.cidrs.len() + before.identities.len();

    // A new pod on another node with the labels of an existing one: its addresses only.
    let mut grown = base.clone();
    let mut newcomer = base.pods[1].clone();
    newcomer.name = "newcomer".into();
    newcomer.ips = vec![ip("10.244.200.1"), ip("fd00:10:244:c8::1")];
    grown.pods.push(newcomer);
    let after = compiler.compile(&grown.cluster(), "node0").tables;
    let diff = before.diff(&after);
    assert_eq!(diff.identities.upsert.len(), 2);
    assert_eq!(diff.len(), 2, "{diff:?}");

    // Relabelling one remote pod touches its addresses and the entries its identity needs.
    let mut relabelled = grown.clone();
    relabelled.pods[1]
        .labels
        .insert("app".into(), "app7".into());
    let again = compiler.compile(&relabelled.cluster(), "node0").tables;
    let diff = after.diff(&again);
    assert!(
        diff.identities.len() == 2 && diff.len() * 20 < entries,
        "{} writes of {entries}",
        diff.len()
    );

    // Deleting one policy removes its entries, and leaves other sets' ids alone.
    let mut fewer = relabelled.clone();
    fewer.policies.remove(0);
    let last = compiler.compile(&fewer.cluster(), "node0").tables;
    let diff = again.diff(&last);
    assert!(
        diff.len() * 10 < entries,
        "{} writes of {entries}",
        diff.len()
    );
    let mut applied = again.clone();
    applied.apply(&diff);
    assert_eq!(applied.allow, last.allow);
    assert_eq!(applied.cidrs, last.cidrs);
    assert_eq!(applied.identities, last.identities);
    assert_eq!(applied.endpoints, last.endpoints);
}

#[test]
fn a_restarted_compiler_adopts_the_ids_the_datapath_holds() {
    let base = bench::synthetic(100, 300, 2);
    let mut long_lived = Compiler::new();
    // Drift the ids: a few rounds of changes.
    let mut c = base.clone();
    for i in 0..5 {
        c.pods[i].labels.insert("app".into(), format!("moved{i}"));
        long_lived.compile(&c.cluster(), "node0");
    }
    c = base.clone();
    let running = long_lived.compile(&c.cluster(), "node0").tables;

    let mut restarted = Compiler::new();
    restarted.adopt(
        &c.cluster(),
        "node0",
        &running.identities,
        &running.endpoints,
    );
    let after = restarted.compile(&c.cluster(), "node0").tables;
    let diff = running.diff(&after);
    assert!(diff.identities.is_empty(), "{:?}", diff.identities);
    assert!(diff.endpoints.is_empty(), "{:?}", diff.endpoints);
    // Without adopting, the identities would move.
    let fresh = Compiler::new().compile(&c.cluster(), "node0").tables;
    assert!(!running.diff(&fresh).identities.is_empty());
}

#[test]
fn explanations_name_the_policies_and_the_rule() {
    let mut c = cluster();
    c.pods
        .push(pod("x/a", &[("app", "a")], "n0", &["10.0.0.10"]));
    c.pods
        .push(pod("x/b", &[("app", "b")], "n1", &["10.0.1.10"]));
    c.pods
        .push(pod("x/c", &[("app", "c")], "n1", &["10.0.1.11"]));
    c.policies.push(policy(
        "metadata: {name: policy-b, namespace: x}\nspec: {podSelector: {matchLabels: {app: a}}, ingress: [{from: [{podSelector: {matchLabels: {app: b}}}], ports: [{port: 80}]}]}",
    ));
    c.policies.push(deny_all_ingress("x"));
    let cluster_view = c.cluster();
    let denied = explain(&cluster_view, ip("10.0.1.11"), ip("10.0.0.10"), TCP, 80).to_string();
    assert!(
        denied.contains("ingress of x/a: denied by default: selected by x/deny, x/policy-b; no rule allows tcp/80"),
        "{denied}"
    );
    let ok = explain(&cluster_view, ip("10.0.1.10"), ip("10.0.0.10"), TCP, 80).to_string();
    assert!(ok.contains("allowed by x/policy-b ingress rule 0"), "{ok}");

    // The datapath's drop event for the same attempt reads the same way.
    let sims = compile(&c, &mut Vec::new());
    let p = path(&sims, ip("10.0.1.11"), ip("10.0.0.10"), TCP, 80);
    let Some(Decision::Drop(event)) = p.ingress else {
        panic!("{p:?}")
    };
    assert_eq!(event.reason, DropReason::NoRule);
    let text = explain_drop(sims[0].tables(), &event);
    assert!(
        text.contains("ingress of x/a (10.0.0.10): tcp/80 from 10.0.1.11 (a pod of x with app=c) dropped: denied by default: selected by x/deny, x/policy-b; no rule allows tcp/80"),
        "{text}"
    );
}
