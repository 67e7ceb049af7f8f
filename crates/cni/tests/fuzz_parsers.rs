//! Every parser takes arbitrary input without panicking, and what weft writes it can read back.

use std::collections::HashMap;

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use weft_cni::{
    requested_version, CniArgs, CniResult, Env, NetConf, NetConfList, RuntimeConfig, Version,
    SUPPORTED_VERSIONS,
};

/// Keys the parsers look at, so random objects reach deep into them.
const KEYS: &[&str] = &[
    "cniVersion",
    "cniVersions",
    "name",
    "type",
    "plugins",
    "disableCheck",
    "disableGC",
    "capabilities",
    "runtimeConfig",
    "args",
    "prevResult",
    "cni.dev/valid-attachments",
    "cni.dev/attachments",
    "containerID",
    "ifname",
    "ipam",
    "dns",
    "nameservers",
    "domain",
    "search",
    "options",
    "interfaces",
    "ips",
    "routes",
    "address",
    "gateway",
    "interface",
    "version",
    "mac",
    "mtu",
    "sandbox",
    "socketPath",
    "pciID",
    "dst",
    "gw",
    "advmss",
    "priority",
    "table",
    "scope",
    "portMappings",
    "HostPort",
    "hostPort",
    "containerPort",
    "ContainerPort",
    "protocol",
    "hostIP",
    "bandwidth",
    "IngressRate",
    "egressBurst",
    "io.kubernetes.cri.pod-annotations",
    "podAnnotations",
    "x",
];

/// Strings the parsers treat specially.
const STRINGS: &[&str] = &[
    "",
    "0.4.0",
    "1.0.0",
    "1.1.0",
    "0.3.1",
    "abc",
    "4",
    "6",
    "tcp",
    "UDP",
    "10.0.0.1/24",
    "10.0.0.1",
    "2001:db8::1/64",
    "2001:db8::1",
    "0.0.0.0/0",
    "02:11:22:33:44:55",
    "eth0",
    "n",
    "weft",
    "a/b",
    "..",
];

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_map(|n| serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)),
        prop::sample::select(STRINGS).prop_map(|s| json!(s)),
        any::<String>().prop_map(Value::String),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(5, 64, 8, |inner| {
        let key = prop_oneof![
            prop::sample::select(KEYS).prop_map(str::to_owned),
            any::<String>()
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key, inner), 0..8)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A valid request config with every section filled in, for targeted mutation.
fn full_config() -> Value {
    json!({
        "cniVersion": "1.1.0", "cniVersions": ["1.0.0", "1.1.0"], "name": "n", "type": "weft",
        "disableCheck": false, "capabilities": {"portMappings": true},
        "runtimeConfig": {
            "portMappings": [{"hostPort": 1, "containerPort": 2, "protocol": "tcp", "hostIP": ""}],
            "bandwidth": {"ingressRate": 1}, "ips": ["10.0.0.1"], "mac": "02:11:22:33:44:55",
            "io.kubernetes.cri.pod-annotations": {"a": "b"}
        },
        "args": {"cni": {"ips": ["10.0.0.1"]}},
        "prevResult": {
            "cniVersion": "1.0.0",
            "interfaces": [{"name": "eth0", "mac": "m", "sandbox": "/x", "mtu": 1500}],
            "ips": [{"address": "10.0.0.1/24", "gateway": "10.0.0.254", "interface": 0}],
            "routes": [{"dst": "0.0.0.0/0", "gw": "10.0.0.254", "table": 1}],
            "dns": {"nameservers": ["10.0.0.53"], "domain": "d", "search": ["s"], "options": ["o"]}
        },
        "cni.dev/valid-attachments": [{"containerID": "c", "ifname": "eth0"}],
        "ipam": {"type": "host-local"},
        "dns": {"nameservers": ["10.0.0.53"]}
    })
}

/// JSON pointers into [`full_config`] whose value a mutation replaces.
const POINTERS: &[&str] = &[
    "/cniVersion",
    "/cniVersions",
    "/cniVersions/0",
    "/name",
    "/type",
    "/disableCheck",
    "/capabilities",
    "/capabilities/portMappings",
    "/runtimeConfig",
    "/runtimeConfig/portMappings",
    "/runtimeConfig/portMappings/0",
    "/runtimeConfig/portMappings/0/hostPort",
    "/runtimeConfig/portMappings/0/protocol",
    "/runtimeConfig/portMappings/0/hostIP",
    "/runtimeConfig/bandwidth",
    "/runtimeConfig/bandwidth/ingressRate",
    "/runtimeConfig/ips",
    "/runtimeConfig/mac",
    "/runtimeConfig/io.kubernetes.cri.pod-annotations",
    "/runtimeConfig/io.kubernetes.cri.pod-annotations/a",
    "/args",
    "/prevResult",
    "/prevResult/cniVersion",
    "/prevResult/interfaces",
    "/prevResult/interfaces/0",
    "/prevResult/interfaces/0/name",
    "/prevResult/interfaces/0/mtu",
    "/prevResult/ips",
    "/prevResult/ips/0",
    "/prevResult/ips/0/address",
    "/prevResult/ips/0/gateway",
    "/prevResult/ips/0/interface",
    "/prevResult/routes/0",
    "/prevResult/routes/0/dst",
    "/prevResult/routes/0/table",
    "/prevResult/dns",
    "/prevResult/dns/nameservers",
    "/cni.dev/valid-attachments",
    "/cni.dev/valid-attachments/0",
    "/cni.dev/valid-attachments/0/containerID",
    "/ipam",
    "/ipam/type",
    "/dns",
    "/dns/search",
];

/// Whatever parses must print to something that parses again.
fn check_config(value: &Value) {
    if let Ok(config) = NetConf::from_value(value) {
        let printed = config.to_value();
        let reread = NetConf::from_value(&printed);
        assert!(
            reread.is_ok(),
            "reprinted config fails: {printed} -> {reread:?}"
        );
        let _ = config.plugin_config::<Value>();
    }
}

fn check_result(value: &Value) {
    if let Ok(result) = CniResult::from_value(value, Some(Version::V1_0_0)) {
        for version in SUPPORTED_VERSIONS {
            let reread = CniResult::from_value(&result.to_value(version), None).unwrap();
            assert_eq!(reread, result.as_version(version));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = NetConf::from_slice(&bytes);
        let _ = NetConfList::from_slice(&bytes);
        let _ = CniResult::from_slice(&bytes);
        let _ = requested_version(&bytes);
        let _ = CniArgs::parse(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn arbitrary_json(value in json_value()) {
        check_config(&value);
        let _ = NetConfList::from_value(&value).map(|list| list.plugin_netconfs());
        check_result(&value);
        let _ = RuntimeConfig::from_value(&value).map(|rc| (rc.to_value(), rc.requested_ips(), rc.mac_addr()));
        let _ = NetConf::from_slice(value.to_string().as_bytes());
    }

    #[test]
    fn mutated_valid_config(pointer in prop::sample::select(POINTERS), replacement in json_value()) {
        let mut value = full_config();
        if let Some(slot) = value.pointer_mut(pointer) {
            *slot = replacement;
        }
        check_config(&value);
        if let Some(prev) = value.get("prevResult") {
            check_result(prev);
        }
        if let Some(runtime) = value.get("runtimeConfig") {
            let _ = RuntimeConfig::from_value(runtime);
        }
    }

    #[test]
    fn arbitrary_cni_args(text in prop_oneof![
        any::<String>(),
        "[A-Za-z0-9_=;:,./ -]{0,60}",
        "((IgnoreUnknown|IP|MAC|K8S_POD_NAME|X)=[0-9a-f:.,/]{0,20};){0,5}",
    ]) {
        if let Ok(args) = CniArgs::parse(&text) {
            let _ = args.ensure_known(&[]);
            let _ = (args.ips(), args.mac(), args.k8s_pod_name());
        }
    }

    #[test]
    fn arbitrary_env(
        vars in prop::collection::hash_map(
            prop::sample::select(&[
                "CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_ARGS", "CNI_PATH",
            ][..]),
            prop_oneof![
                prop::sample::select(&["ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION", "eth0", "c1", ""][..])
                    .prop_map(str::to_owned),
                any::<String>(),
            ],
            0..7,
        )
    ) {
        let vars: HashMap<&str, String> = vars;
        if let Ok(env) = Env::from_lookup(|name| vars.get(name).cloned()) {
            if env.command.is_attachment_command() {
                prop_assert!(env.attachment().is_some());
            }
        }
    }
}

#[test]
fn full_config_is_valid() {
    // The mutation base must itself parse, or the mutation test proves little.
    let config = NetConf::from_value(&full_config()).unwrap();
    assert_eq!(config.version, Version::V1_1_0);
    check_config(&full_config());
}
