//! Real object JSON decodes into the wire types: unknown fields skipped, nulls accepted.

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::discovery::v1 as discovery;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use weft_services::wire::{EndpointSliceWire, ServiceWire};
use weft_services::{EndpointSlice, Protocol, Service, ServiceType, TrafficPolicy};

use crate::fixture::ip;

fn full_service() -> core::Service {
    core::Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("shop".into()),
            uid: Some("0b5b6c3e-8a47-4f0e-9c39-5f1f1a0c2d11".into()),
            resource_version: Some("4711".into()),
            annotations: Some(
                [(
                    "kubectl.kubernetes.io/last-applied-configuration".to_string(),
                    "x".repeat(3000),
                )]
                .into(),
            ),
            labels: Some([("app".to_string(), "web".to_string())].into()),
            managed_fields: Some(vec![ManagedFieldsEntry {
                manager: Some("kubectl".into()),
                operation: Some("Apply".into()),
                ..ManagedFieldsEntry::default()
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(core::ServiceSpec {
            type_: Some("LoadBalancer".into()),
            cluster_ip: Some("10.96.0.10".into()),
            cluster_ips: Some(vec!["10.96.0.10".into(), "fd00:96::10".into()]),
            ip_families: Some(vec!["IPv4".into(), "IPv6".into()]),
            ip_family_policy: Some("PreferDualStack".into()),
            selector: Some([("app".to_string(), "web".to_string())].into()),
            ports: Some(vec![core::ServicePort {
                name: Some("http".into()),
                protocol: Some("TCP".into()),
                port: 80,
                target_port: Some(IntOrString::String("http".into())),
                node_port: Some(30080),
                app_protocol: Some("http".into()),
            }]),
            external_traffic_policy: Some("Local".into()),
            internal_traffic_policy: Some("Cluster".into()),
            health_check_node_port: Some(31000),
            session_affinity: Some("ClientIP".into()),
            session_affinity_config: Some(core::SessionAffinityConfig {
                client_ip: Some(core::ClientIPConfig {
                    timeout_seconds: Some(600),
                }),
            }),
            load_balancer_source_ranges: Some(vec!["203.0.113.0/24".into()]),
            allocate_load_balancer_node_ports: Some(true),
            ..core::ServiceSpec::default()
        }),
        status: Some(core::ServiceStatus {
            load_balancer: Some(core::LoadBalancerStatus {
                ingress: Some(vec![core::LoadBalancerIngress {
                    ip: Some("198.51.100.7".into()),
                    ip_mode: Some("VIP".into()),
                    ..core::LoadBalancerIngress::default()
                }]),
            }),
            conditions: None,
        }),
    }
}

#[test]
fn a_full_service_decodes_to_what_weft_reads() {
    let json = serde_json::to_string(&full_service()).unwrap();
    assert!(json.len() > 3000);
    let wire: ServiceWire = serde_json::from_str(&json).unwrap();
    let svc = Service::from_wire(&wire).unwrap();
    assert_eq!(svc.name.to_string(), "shop/web");
    assert_eq!(svc.service_type, ServiceType::LoadBalancer);
    assert_eq!(svc.cluster_ips, [ip("10.96.0.10"), ip("fd00:96::10")]);
    assert_eq!(svc.ports.len(), 1);
    assert_eq!(
        (svc.ports[0].port, svc.ports[0].node_port),
        (80, Some(30080))
    );
    assert_eq!(svc.ports[0].protocol, Protocol::Tcp);
    assert_eq!(svc.external_policy, TrafficPolicy::Local);
    assert_eq!(svc.health_check_node_port, Some(31000));
    assert_eq!(svc.affinity_timeout, Some(600));
    assert_eq!(svc.load_balancer_ips, [ip("198.51.100.7")]);
    assert_eq!(svc.source_ranges, ["203.0.113.0/24".parse().unwrap()]);
    assert_eq!(wire.metadata.resource_version.as_deref(), Some("4711"));
}

#[test]
fn a_full_endpoint_slice_decodes() {
    let slice = discovery::EndpointSlice {
        metadata: ObjectMeta {
            name: Some("web-x7k2p".into()),
            namespace: Some("shop".into()),
            labels: Some(
                [
                    ("kubernetes.io/service-name".to_string(), "web".to_string()),
                    (
                        "endpointslice.kubernetes.io/managed-by".to_string(),
                        "endpointslice-controller.k8s.io".to_string(),
                    ),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        address_type: "IPv4".into(),
        endpoints: vec![discovery::Endpoint {
            addresses: vec!["10.244.1.5".into()],
            conditions: Some(discovery::EndpointConditions {
                ready: Some(false),
                serving: Some(true),
                terminating: Some(true),
            }),
            node_name: Some("node-a".into()),
            zone: Some("zone-1".into()),
            hints: Some(discovery::EndpointHints {
                for_zones: Some(vec![discovery::ForZone {
                    name: "zone-1".into(),
                }]),
                for_nodes: None,
            }),
            target_ref: Some(core::ObjectReference {
                kind: Some("Pod".into()),
                name: Some("web-0".into()),
                ..core::ObjectReference::default()
            }),
            ..discovery::Endpoint::default()
        }],
        ports: Some(vec![discovery::EndpointPort {
            name: Some("http".into()),
            port: Some(8080),
            protocol: Some("TCP".into()),
            app_protocol: None,
        }]),
    };
    let wire: EndpointSliceWire =
        serde_json::from_value(serde_json::to_value(&slice).unwrap()).unwrap();
    let compact = EndpointSlice::from_wire(&wire).unwrap();
    assert_eq!(compact.service, "web");
    assert_eq!(compact.ports[0].port, 8080);
    let e = &compact.endpoints[0];
    assert_eq!(e.address, ip("10.244.1.5"));
    assert_eq!((e.ready, e.serving, e.terminating), (false, true, true));
    assert_eq!(e.node.as_deref(), Some("node-a"));
    assert_eq!(e.zone_hints, ["zone-1"]);
}

#[test]
fn nulls_and_absent_fields_take_the_api_defaults() {
    let json = r#"{
        "metadata": {"name": "svc1", "namespace": "ns1", "labels": null},
        "spec": {"clusterIP": "10.96.0.1", "clusterIPs": null, "ports": [{"port": 53}],
                 "externalIPs": null, "loadBalancerSourceRanges": null, "sessionAffinityConfig": null},
        "status": {"loadBalancer": {"ingress": null}}
    }"#;
    let svc = Service::from_wire(&serde_json::from_str(json).unwrap()).unwrap();
    assert_eq!(svc.service_type, ServiceType::ClusterIp);
    assert_eq!(svc.ports[0].protocol, Protocol::Tcp);
    assert_eq!(svc.ports[0].name, "");
    assert_eq!(svc.affinity_timeout, None);

    let json = r#"{
        "metadata": {"name": "s", "namespace": "ns1", "labels": {"kubernetes.io/service-name": "svc1"}},
        "addressType": "IPv4", "ports": null,
        "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {}, "nodeName": null}]
    }"#;
    let slice = EndpointSlice::from_wire(&serde_json::from_str(json).unwrap()).unwrap();
    let e = &slice.endpoints[0];
    assert_eq!((e.ready, e.serving, e.terminating), (true, true, false));
    assert!(slice.ports.is_empty());
}
