//! Whole invocations shaped like what containerd 1.6 CRI and podman 4.3 really send
//! (research/cni-clients.md sections 2.5 and 3.5).

use std::collections::HashMap;

use serde_json::json;
use weft_cni::{
    requested_version, version_response, CniResult, Command, Env, NetConf, Protocol, Version,
};

fn env(pairs: &[(&str, &str)]) -> Result<Env, weft_cni::CniError> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Env::from_lookup(|name| map.get(name).cloned())
}

const SANDBOX: &str = "0f5e1c0b4a7d4c7f9d3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e";

fn cri_config(with_prev_result: bool) -> String {
    let mut config = json!({
        "cniVersion": "1.0.0",
        "name": "weft",
        "type": "weft",
        "capabilities": {"portMappings": true, "bandwidth": true, "io.kubernetes.cri.pod-annotations": true},
        "runtimeConfig": {
            "portMappings": [{"HostPort": 28183, "ContainerPort": 80, "Protocol": "tcp", "HostIP": ""}],
            "bandwidth": {"IngressRate": 10000000u64, "IngressBurst": 4294967295u64,
                          "EgressRate": 10000000u64, "EgressBurst": 4294967295u64},
            "io.kubernetes.cri.pod-annotations": {"weft.dev/Egress-Guard": "proxy"}
        }
    });
    if with_prev_result {
        config["prevResult"] = json!({
            "cniVersion": "1.0.0",
            "interfaces": [{"name": "weft1a2b", "mac": "ee:ee:ee:ee:ee:ee"},
                           {"name": "eth0", "mac": "02:00:0a:f4:00:05", "sandbox": "/var/run/netns/cni-1"}],
            "ips": [{"address": "10.244.0.5/24", "gateway": "10.244.0.1", "interface": 1}],
            "routes": [{"dst": "0.0.0.0/0", "gw": "10.244.0.1"}]
        });
    }
    config.to_string()
}

#[test]
fn containerd_cri_add_then_two_dels() {
    let cni_args = format!(
        "K8S_POD_UID=9c6d;IgnoreUnknown=1;K8S_POD_NAMESPACE=p2ns;K8S_POD_INFRA_CONTAINER_ID={SANDBOX};K8S_POD_NAME=web1"
    );
    let add = env(&[
        ("CNI_COMMAND", "ADD"),
        ("CNI_CONTAINERID", SANDBOX),
        ("CNI_NETNS", "/var/run/netns/cni-1"),
        ("CNI_IFNAME", "eth0"),
        ("CNI_PATH", "/opt/cni/bin"),
        ("CNI_ARGS", &cni_args),
    ])
    .unwrap();
    assert_eq!(add.args.k8s_pod_namespace(), Some("p2ns"));
    assert_eq!(add.args.k8s_pod_infra_container_id(), Some(SANDBOX));
    assert!(add.args.ensure_known(&[]).is_ok());

    let config = NetConf::from_slice_for(add.command, cri_config(false).as_bytes()).unwrap();
    let mapping = &config.runtime_config.port_mappings[0];
    assert_eq!((mapping.host_port, mapping.container_port), (28183, 80));
    assert_eq!(mapping.protocol, Protocol::Tcp);
    assert_eq!(mapping.host_ip, None);
    assert_eq!(
        config.runtime_config.bandwidth.unwrap().ingress_burst,
        Some(4_294_967_295)
    );
    assert_eq!(
        config
            .runtime_config
            .pod_annotations
            .get("weft.dev/Egress-Guard")
            .map(String::as_str),
        Some("proxy")
    );

    // First DEL (StopPodSandbox): netns and prevResult.
    let first = env(&[
        ("CNI_COMMAND", "DEL"),
        ("CNI_CONTAINERID", SANDBOX),
        ("CNI_NETNS", "/var/run/netns/cni-1"),
        ("CNI_IFNAME", "eth0"),
        ("CNI_ARGS", &cni_args),
    ])
    .unwrap();
    let config = NetConf::from_slice_for(first.command, cri_config(true).as_bytes()).unwrap();
    let prev = config.prev_result.unwrap();
    assert_eq!(prev.ips[0].interface, Some(1));

    // Second DEL (RemovePodSandbox): CNI_NETNS empty, no prevResult.
    let second = env(&[
        ("CNI_COMMAND", "DEL"),
        ("CNI_CONTAINERID", SANDBOX),
        ("CNI_NETNS", ""),
        ("CNI_IFNAME", "eth0"),
        ("CNI_ARGS", &cni_args),
    ])
    .unwrap();
    assert_eq!(second.attachment().unwrap().netns, None);
    let config = NetConf::from_slice_for(second.command, cri_config(false).as_bytes()).unwrap();
    assert!(config.prev_result.is_none());
}

#[test]
fn podman_version_probe_add_and_del() {
    // VERSION with podman's dummy variables and its 1.0.0 probe body.
    let probe = env(&[
        ("CNI_COMMAND", "VERSION"),
        ("CNI_IFNAME", "dummy"),
        ("CNI_NETNS", "dummy"),
        ("CNI_PATH", "dummy"),
    ])
    .unwrap();
    assert_eq!(probe.command, Command::Version);
    let asked = requested_version(br#"{"cniVersion":"1.0.0"}"#).unwrap_or_default();
    assert_eq!(
        version_response(&asked),
        json!({"cniVersion": "1.0.0", "supportedVersions": ["0.4.0", "1.0.0", "1.1.0"]})
    );

    // ADD: 0.4.0 config, --ip and --mac-address in CNI_ARGS, lower-case runtimeConfig.
    let add = env(&[
        ("CNI_COMMAND", "ADD"),
        ("CNI_CONTAINERID", SANDBOX),
        ("CNI_NETNS", "/run/netns/netns-1b2c"),
        ("CNI_IFNAME", "eth0"),
        ("CNI_PATH", "/usr/libexec/cni:/usr/lib/cni"),
        (
            "CNI_ARGS",
            "IgnoreUnknown=1;K8S_POD_NAME=p2c;MAC=02:11:22:33:44:55;IP=10.93.0.77",
        ),
    ])
    .unwrap();
    assert_eq!(add.path, vec!["/usr/libexec/cni", "/usr/lib/cni"]);
    assert_eq!(add.args.ips()[0].addr.to_string(), "10.93.0.77");
    let body = json!({
        "cniVersion": "0.4.0", "name": "p2net", "type": "weft",
        "capabilities": {"ips": true, "portMappings": true},
        "runtimeConfig": {"portMappings": [{"hostPort": 28184, "containerPort": 80, "protocol": "tcp"}]}
    });
    let config = NetConf::from_slice_for(add.command, body.to_string().as_bytes()).unwrap();
    assert_eq!(config.version, Version::V0_4_0);
    assert_eq!(config.runtime_config.port_mappings[0].host_port, 28184);

    // The result goes back in 0.4.0, with per-IP versions.
    let mut result = CniResult::new(config.version);
    result.ips.push(weft_cni::IpConfig {
        address: "10.93.0.77/16".parse().unwrap(),
        gateway: Some("10.93.0.1".parse().unwrap()),
        interface: None,
    });
    let printed: serde_json::Value = serde_json::from_str(&result.to_json(config.version)).unwrap();
    assert_eq!(
        printed,
        json!({"cniVersion": "0.4.0",
               "ips": [{"version": "4", "address": "10.93.0.77/16", "gateway": "10.93.0.1"}]})
    );

    // DEL: the cached 0.4.0 result comes back as prevResult.
    let mut del_body = body.clone();
    del_body["prevResult"] = printed;
    let config = NetConf::from_slice_for(Command::Del, del_body.to_string().as_bytes()).unwrap();
    assert_eq!(config.prev_result.unwrap(), result);
}
