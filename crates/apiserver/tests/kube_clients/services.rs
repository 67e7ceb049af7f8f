//! Service allocation: cluster IPs per family from the configured CIDRs, headless, node
//! ports and health-check node ports, requested values honoured, duplicates refused.

use crate::common::*;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

fn svc(name: &str, spec: serde_json::Value) -> Service {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

fn port(p: u16) -> serde_json::Value {
    json!([{"name": "p", "port": p}])
}

#[tokio::test]
async fn cluster_ips_and_node_ports() {
    let mut cfg = config();
    cfg.service_cidrs = vec![
        "10.96.0.0/24".parse().unwrap(),
        "fd00:10:96::/112".parse().unwrap(),
    ];
    cfg.node_port_range = (30000, 30100);
    let server = start(cfg).await;
    let client = client_for(&server, None);
    let api: Api<Service> = Api::namespaced(client, "default");
    let pp = PostParams::default();

    let s = api
        .create(&pp, &svc("single", json!({"ports": port(80)})))
        .await
        .unwrap();
    let spec = s.spec.unwrap();
    let ip: std::net::Ipv4Addr = spec.cluster_ip.clone().unwrap().parse().unwrap();
    assert_eq!(ip.octets()[..3], [10, 96, 0]);
    assert_eq!(spec.ip_families.as_deref(), Some(&["IPv4".to_string()][..]));
    assert_eq!(spec.ip_family_policy.as_deref(), Some("SingleStack"));
    assert_eq!(spec.cluster_ips.as_ref().unwrap().len(), 1);

    let s = api
        .create(
            &pp,
            &svc(
                "dual",
                json!({"ports": port(80), "ipFamilyPolicy": "PreferDualStack"}),
            ),
        )
        .await
        .unwrap();
    let ips = s.spec.unwrap().cluster_ips.unwrap();
    assert_eq!(ips.len(), 2);
    assert!(ips[1].parse::<std::net::Ipv6Addr>().is_ok());

    let s = api
        .create(
            &pp,
            &svc("v6", json!({"ports": port(80), "ipFamilies": ["IPv6"]})),
        )
        .await
        .unwrap();
    assert!(s.spec.unwrap().cluster_ip.unwrap().contains(':'));

    let s = api
        .create(
            &pp,
            &svc(
                "headless",
                json!({"clusterIP": "None", "selector": {"a": "b"}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(s.spec.unwrap().cluster_ips.unwrap(), ["None"]);

    let s = api
        .create(
            &pp,
            &svc(
                "fixed",
                json!({"ports": port(80), "clusterIP": "10.96.0.10"}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(s.spec.unwrap().cluster_ip.as_deref(), Some("10.96.0.10"));
    let e = api
        .create(
            &pp,
            &svc("dup", json!({"ports": port(80), "clusterIP": "10.96.0.10"})),
        )
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), Some((422, "Invalid".into())));
    let e = api
        .create(
            &pp,
            &svc(
                "outside",
                json!({"ports": port(80), "clusterIP": "192.0.2.1"}),
            ),
        )
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), Some((422, "Invalid".into())));

    let s = api
        .create(&pp, &svc("np", json!({"type": "NodePort", "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81, "nodePort": 30042}]})))
        .await
        .unwrap();
    let ports = s.spec.as_ref().unwrap().ports.clone().unwrap();
    assert!((30000..=30100).contains(&ports[0].node_port.unwrap()));
    assert_eq!(ports[1].node_port, Some(30042));
    let e = api.create(&pp, &svc("np2", json!({"type": "NodePort", "ports": [{"name": "a", "port": 80, "nodePort": 30042}]}))).await.unwrap_err();
    assert_eq!(status_code(&e), Some((422, "Invalid".into())));
    let e = api
        .create(
            &pp,
            &svc(
                "np3",
                json!({"type": "NodePort", "ports": [{"name": "a", "port": 80, "nodePort": 80}]}),
            ),
        )
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), Some((422, "Invalid".into())));

    let s = api
        .create(&pp, &svc("lb", json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local", "ports": port(443)})))
        .await
        .unwrap();
    let spec = s.spec.unwrap();
    assert!(spec.health_check_node_port.is_some());
    assert!(spec.ports.unwrap()[0].node_port.is_some());

    // An update that leaves allocated values out keeps them; cluster IPs cannot change.
    let cur = api.get("np").await.unwrap();
    let before = cur.spec.clone().unwrap();
    let mut replaced = svc(
        "np",
        json!({"type": "NodePort", "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}]}),
    );
    replaced.metadata.resource_version = cur.metadata.resource_version.clone();
    let after = api
        .replace("np", &pp, &replaced)
        .await
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(after.cluster_ip, before.cluster_ip);
    assert_eq!(after.ports.unwrap()[1].node_port, Some(30042));
    let e = api
        .patch(
            "np",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"clusterIP": "10.96.0.99", "clusterIPs": ["10.96.0.99"]}}),
            ),
        )
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), Some((422, "Invalid".into())));

    // Deleting releases: the fixed IP and node port can be taken again.
    api.delete("fixed", &DeleteParams::default()).await.unwrap();
    api.delete("np", &DeleteParams::default()).await.unwrap();
    api.create(
        &pp,
        &svc(
            "fixed2",
            json!({"ports": port(80), "clusterIP": "10.96.0.10"}),
        ),
    )
    .await
    .unwrap();
    api.create(
        &pp,
        &svc(
            "np4",
            json!({"type": "NodePort", "ports": [{"name": "a", "port": 80, "nodePort": 30042}]}),
        ),
    )
    .await
    .unwrap();
    server.shutdown().await;
}

#[tokio::test]
async fn single_stack_cluster_refuses_dual_stack() {
    let server = start(config()).await;
    let client = client_for(&server, None);
    let api: Api<Service> = Api::namespaced(client, "default");
    let e = api
        .create(
            &PostParams::default(),
            &svc(
                "d",
                json!({"ports": port(80), "ipFamilyPolicy": "RequireDualStack"}),
            ),
        )
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), Some((422, "Invalid".into())));
    let e = api
        .create(
            &PostParams::default(),
            &svc("v6", json!({"ports": port(80), "ipFamilies": ["IPv6"]})),
        )
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), Some((422, "Invalid".into())));
    let s = api
        .create(
            &PostParams::default(),
            &svc(
                "p",
                json!({"ports": port(80), "ipFamilyPolicy": "PreferDualStack"}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(s.spec.unwrap().cluster_ips.unwrap().len(), 1);
    server.shutdown().await;
}
