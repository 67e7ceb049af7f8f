use std::io::Write;

use weft_model::{standalone, ClusterConfig, Issue, Model, NodeSpec};

fn cluster() -> ClusterConfig {
    ClusterConfig::new(vec![
        "10.244.0.0/16".parse().unwrap(),
        "fd00:10:244::/48".parse().unwrap(),
    ])
    .unwrap()
}

fn node_yaml(name: &str, cidrs: &[&str], ip: &str) -> String {
    let cidrs = cidrs
        .iter()
        .map(|c| format!("\"{c}\""))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\nspec:\n  podCIDRs: [{cidrs}]\nstatus:\n  addresses:\n  - type: InternalIP\n    address: {ip}\n"
    )
}

fn read(docs: &[String]) -> (Model, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let mut f = std::fs::File::create(dir.path().join("nodes.yaml")).unwrap();
    f.write_all(docs.join("---\n").as_bytes()).unwrap();
    let (nodes, mut issues) = nodes_in(dir.path());
    let (model, model_issues) = Model::build(&cluster(), &nodes);
    issues.extend(model_issues);
    (model, issues.iter().map(|i| i.to_string()).collect())
}

/// The valid nodes of a directory, and every issue found reading it.
fn nodes_in(dir: &std::path::Path) -> (Vec<NodeSpec>, Vec<Issue>) {
    let documents = standalone::read_dir(dir);
    let objects = standalone::objects::<NodeSpec>(&documents);
    let mut issues = documents.issues;
    issues.extend(objects.issues);
    let mut nodes = Vec::new();
    for (_, value) in objects.items {
        match value {
            Ok(node) => nodes.push(node),
            Err(found) => issues.extend(found),
        }
    }
    (nodes, issues)
}

#[test]
fn valid_dual_stack_nodes_are_modelled_with_derived_vtep_identity() {
    let (model, issues) = read(&[
        node_yaml("n1", &["10.244.1.0/24", "fd00:10:244:1::/64"], "192.0.2.11"),
        node_yaml("n2", &["10.244.2.0/24", "fd00:10:244:2::/64"], "192.0.2.12"),
    ]);
    assert!(issues.is_empty(), "{issues:?}");
    let n1 = &model.nodes["n1"];
    assert_eq!(n1.vtep_mac(), [0x0e, 0x77, 192, 0, 2, 11]);
    assert_eq!(
        n1.vtep_addresses(),
        vec![
            "10.244.1.0".parse::<std::net::IpAddr>().unwrap(),
            "fd00:10:244:1::".parse().unwrap()
        ]
    );
}

#[test]
fn node_without_pod_cidrs_is_refused_naming_the_field() {
    let (model, issues) = read(&[
        node_yaml("n1", &[], "192.0.2.11"),
        node_yaml("n2", &["10.244.2.0/24"], "192.0.2.12"),
    ]);
    assert!(!model.nodes.contains_key("n1"));
    assert!(
        model.nodes.contains_key("n2"),
        "one bad node must not take the others down"
    );
    assert!(
        issues
            .iter()
            .any(|i| i.contains("Node/n1") && i.contains("spec.podCIDRs")),
        "{issues:?}"
    );
}

#[test]
fn pod_cidr_outside_the_cluster_is_refused_naming_object_and_index() {
    let (model, issues) = read(&[node_yaml(
        "n1",
        &["10.244.1.0/24", "fd00:99::/64"],
        "192.0.2.11",
    )]);
    assert!(model.nodes.is_empty());
    assert!(
        issues
            .iter()
            .any(|i| i.contains("Node/n1 spec.podCIDRs[1]") && i.contains("outside")),
        "{issues:?}"
    );
}

#[test]
fn an_overlapping_newcomer_is_refused_and_the_established_node_keeps_its_cidr() {
    let docs = [
        node_yaml("zz-first", &["10.244.1.0/24"], "192.0.2.11"),
        node_yaml("aa-intruder", &["10.244.0.0/23"], "192.0.2.12"),
        node_yaml("n3", &["10.244.3.0/24"], "192.0.2.13"),
    ];
    // Without history the name decides...
    let (model, issues) = read(&docs);
    assert_eq!(
        model.nodes.keys().collect::<Vec<_>>(),
        vec!["aa-intruder", "n3"]
    );
    assert!(
        issues
            .iter()
            .any(|i| i.contains("Node/zz-first spec.podCIDRs") && i.contains("overlaps")),
        "{issues:?}"
    );
    // ...but a node the previous model already had keeps its CIDR against a newcomer.
    let (before, _) = read(&[docs[0].clone(), docs[2].clone()]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("n.yaml"), docs.join("---\n")).unwrap();
    let (nodes, _) = nodes_in(dir.path());
    let (after, issues) = Model::build_after(&before, &cluster(), &nodes);
    assert_eq!(
        after.nodes.keys().collect::<Vec<_>>(),
        vec!["n3", "zz-first"]
    );
    let issues: Vec<String> = issues.iter().map(ToString::to_string).collect();
    assert!(
        issues
            .iter()
            .any(|i| i.contains("Node/aa-intruder spec.podCIDRs")
                && i.contains("Node/zz-first, which keeps it")),
        "{issues:?}"
    );
}

#[test]
fn on_an_overlap_the_older_object_keeps_its_cidr() {
    let stamp = |yaml: String, ts: &str| {
        yaml.replacen(
            "metadata:\n",
            &format!("metadata:\n  creationTimestamp: \"{ts}\"\n"),
            1,
        )
    };
    let (model, _) = read(&[
        stamp(
            node_yaml("aa", &["10.244.0.0/23"], "192.0.2.12"),
            "2026-06-01T00:00:00Z",
        ),
        stamp(
            node_yaml("bb", &["10.244.1.0/24"], "192.0.2.11"),
            "2025-01-01T00:00:00Z",
        ),
    ]);
    assert_eq!(model.nodes.keys().collect::<Vec<_>>(), vec!["bb"]);
}

#[test]
fn malformed_documents_are_reported_and_the_rest_still_count() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.yaml"),
        node_yaml("good", &["10.244.5.0/24"], "192.0.2.15"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("b.yaml"),
        "kind: Node\nmetadata: [this is: not valid",
    )
    .unwrap();
    std::fs::write(dir.path().join("c.yaml"), "kind: Node\nspec: 7\n").unwrap();
    std::fs::write(
        dir.path().join("d.yaml"),
        "kind: Node\nmetadata: {name: typed}\nspec: {podCIDRs: 7}\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("ignored.txt"), "whatever").unwrap();
    let (nodes, issues) = nodes_in(dir.path());
    assert_eq!(nodes.len(), 1);
    assert_eq!(issues.len(), 3, "{issues:?}");
    let text: Vec<String> = issues.iter().map(ToString::to_string).collect();
    assert!(
        text.iter()
            .any(|i| i.starts_with("Node/typed spec.podCIDRs:")),
        "a wrongly typed field is named: {text:?}"
    );
}

#[test]
fn an_object_defined_twice_is_reported_and_the_first_is_used() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.yaml"),
        node_yaml("n1", &["10.244.1.0/24"], "192.0.2.11"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("b.yaml"),
        node_yaml("n1", &["10.244.2.0/24"], "192.0.2.12"),
    )
    .unwrap();
    let (nodes, issues) = nodes_in(dir.path());
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].pod_cidrs, vec!["10.244.1.0/24".parse().unwrap()]);
    assert!(
        issues[0].to_string().contains("defined more than once"),
        "{issues:?}"
    );
}

#[test]
fn cluster_config_errors_name_the_field() {
    assert!(ClusterConfig::new(vec![])
        .unwrap_err()
        .to_string()
        .contains("clusterCIDRs"));
    let e = ClusterConfig::new(vec![
        "10.0.0.0/8".parse().unwrap(),
        "10.1.0.0/16".parse().unwrap(),
    ])
    .unwrap_err();
    assert!(e.to_string().contains("overlap"));
    assert!(ClusterConfig::new(vec!["10.0.0.1/8".parse().unwrap()]).is_err());
}

#[test]
fn overlaps_are_found_among_many_nodes_of_mixed_prefix_lengths() {
    // A deterministic jumble of /20 to /28 CIDRs, many overlapping.
    let mut seed: u32 = 12345;
    let mut next = || {
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        seed >> 8
    };
    let docs: Vec<String> = (0..300)
        .map(|i| {
            let len = 20 + next() % 9;
            let host = next() % (1 << 16);
            let net: ipnet::Ipv4Net = format!("10.244.{}.{}/{len}", host >> 8, host & 0xff)
                .parse()
                .unwrap();
            let ip = format!("192.0.{}.{}", 2 + i / 250, 1 + i % 250);
            node_yaml(&format!("n{i:03}"), &[&net.trunc().to_string()], &ip)
        })
        .collect();
    let (model, issues) = read(&docs);
    let kept: Vec<&ipnet::IpNet> = model.nodes.values().map(|n| &n.pod_cidrs[0]).collect();
    for (i, a) in kept.iter().enumerate() {
        for b in &kept[i + 1..] {
            assert!(!a.contains(*b) && !b.contains(*a), "{a} and {b} both kept");
        }
    }
    let (all, _) = nodes_in_docs(&docs);
    for node in all.iter().filter(|n| !model.nodes.contains_key(&n.name)) {
        let cidr = &node.pod_cidrs[0];
        assert!(
            kept.iter().any(|k| k.contains(cidr) || cidr.contains(*k)),
            "{} left out without an overlap",
            node.name
        );
        assert!(issues
            .iter()
            .any(|i| i.contains(&format!("Node/{} ", node.name))));
    }
    assert!(model.nodes.len() < 300, "the jumble has overlaps");
}

fn nodes_in_docs(docs: &[String]) -> (Vec<NodeSpec>, Vec<Issue>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("nodes.yaml"), docs.join("---\n")).unwrap();
    nodes_in(dir.path())
}
