//! Where the opt-in comes from: runtimeConfig annotations (no API server involved at all),
//! or a GET of the pod from the API server for allowlisted namespaces only, failing closed
//! on every API error or timeout. The API server is a fake speaking real Pod JSON, inside
//! the node namespace where the plugin runs.

mod guard_support;

use std::collections::HashMap;

use guard_support::fake_api::{self, Behaviour, FakeApi};
use guard_support::probe;
use guard_support::*;
use serde_json::{json, Map, Value};
use weft::chain::ChainError;

#[test]
fn probe_entry() {
    probe::entry();
}

fn serving(pod_name: &str, annotations: Map<String, Value>) -> Behaviour {
    serving_spec(pod_name, annotations, fake_api::hardened_spec(PROXY_UID))
}

fn serving_spec(pod_name: &str, annotations: Map<String, Value>, spec: Value) -> Behaviour {
    let mut pods = HashMap::new();
    pods.insert(format!("{POD_NAMESPACE}/{pod_name}"), (annotations, spec));
    Behaviour::Pods(pods)
}

fn udp_refused(pod: &Pod) -> bool {
    probe::run(pod.path(), OTHER_UID, &format!("udp {WORLD_V4} 53")) == "eperm"
}

#[test]
fn runtime_config_annotations_need_no_kubeconfig() {
    let lab = Lab::new("ar");
    let pod = lab.pod("via-runtime").with_annotations(opted_in(PROXY_UID));
    // No kubeconfig and no namespaces: only runtimeConfig can opt a pod in.
    let chain = lab.guarded_chain(false, json!({}));
    let result = chain.add(&pod.att).expect("ADD");
    assert!(lab.has_fence(&pod));
    assert!(udp_refused(&pod));
    chain.check(&pod.att, &result).expect("CHECK");
    chain.del(&pod.att, Some(&result)).expect("DEL");
}

#[test]
fn runtime_config_annotations_win_over_the_api_server() {
    let lab = Lab::new("aw");
    // The API server would say "not opted in"; runtimeConfig says opted in, and is used.
    let api = FakeApi::start(lab.node.path(), serving("both", Map::new()));
    let guard =
        json!({"kubeconfig": api.kubeconfig(lab.dir.path()), "namespaces": [POD_NAMESPACE]});
    let pod = lab.pod("both").with_annotations(opted_in(PROXY_UID));
    let chain = lab.guarded_chain(false, guard);
    let result = chain.add(&pod.att).expect("ADD");
    chain.check(&pod.att, &result).expect("CHECK");
    assert!(lab.has_fence(&pod));
    assert_eq!(
        api.requests(),
        0,
        "no API call when runtimeConfig carries the annotations"
    );
    chain.del(&pod.att, Some(&result)).expect("DEL");
}

#[test]
fn annotations_from_the_api_server() {
    let lab = Lab::new("aa");
    let mut annotations = opted_in(PROXY_UID);
    annotations.insert(ALLOW_CIDRS.into(), json!("203.0.113.2/32"));
    let api = FakeApi::start(lab.node.path(), serving("via-api", annotations));
    let guard = json!({"kubeconfig": api.kubeconfig(lab.dir.path()), "namespaces": [POD_NAMESPACE],
                       "apiConnectTimeoutMs": 1000, "apiTimeoutMs": 2000});
    let pod = lab.pod("via-api");
    let chain = lab.guarded_chain(false, guard);
    let result = chain.add(&pod.att).expect("ADD");
    assert!(lab.has_fence(&pod));
    // The allowed CIDR is open to every UID; anything else is not.
    let world = PongServer::start(lab.world.path());
    assert_eq!(
        probe::run(
            pod.path(),
            OTHER_UID,
            &probe::tcp_action(WORLD_V4.into(), world.port, probe::CONNECT_TIMEOUT_MS)
        ),
        "connected"
    );
    assert_eq!(
        probe::run(pod.path(), OTHER_UID, "udp 198.51.100.1 53"),
        "eperm"
    );
    chain
        .check(&pod.att, &result)
        .expect("CHECK through the API");
    assert_eq!(api.requests(), 2, "one GET for ADD, one for CHECK");
    assert!(
        api.paths()
            .iter()
            .all(|p| p == "/api/v1/namespaces/sandboxes/pods/via-api"),
        "{:?}",
        api.paths()
    );
    chain.del(&pod.att, Some(&result)).expect("DEL");
    assert_eq!(api.requests(), 2, "DEL makes no API call");
}

#[test]
fn namespaces_outside_the_allowlist_pass_through_without_a_request() {
    let lab = Lab::new("an");
    let api = FakeApi::start(lab.node.path(), serving("elsewhere", opted_in(PROXY_UID)));
    let guard =
        json!({"kubeconfig": api.kubeconfig(lab.dir.path()), "namespaces": ["other-namespace"]});
    let pod = lab.pod("elsewhere");
    let chain = lab.guarded_chain(false, guard);
    let result = chain.add(&pod.att).expect("ADD");
    chain.check(&pod.att, &result).expect("CHECK");
    chain.del(&pod.att, Some(&result)).expect("DEL");
    assert!(!lab.has_fence(&pod));
    assert_eq!(api.requests(), 0);
}

/// ADD through the chain must fail in the guard; returns (code, message).
fn add_fails(lab: &Lab, pod: &Pod, guard: Value) -> (u32, String) {
    let chain = lab.guarded_chain(false, guard);
    let outcome = match chain.add(&pod.att) {
        Ok(_) => panic!("ADD succeeded"),
        Err(ChainError::Plugin { plugin, error, .. }) => {
            assert_eq!(plugin, "weft-guard", "{}", error.msg);
            (error.code, error.msg)
        }
        Err(other) => panic!("unexpected failure: {other}"),
    };
    assert!(!lab.has_fence(pod), "a failed ADD leaves no fence");
    chain.del(&pod.att, None).expect("DEL after a failed ADD");
    outcome
}

#[test]
fn api_errors_fail_closed() {
    let lab = Lab::new("ae");
    let cases: [(Behaviour, u32, &str); 4] = [
        (Behaviour::Status(500), 11, "HTTP 500"),
        (Behaviour::Status(403), 101, "HTTP 403"),
        (
            serving("someone-else", opted_in(PROXY_UID)),
            101,
            "HTTP 404",
        ),
        (Behaviour::Hang, 11, "did not answer in time"),
    ];
    for (behaviour, code, words) in cases {
        let api = FakeApi::start(lab.node.path(), behaviour.clone());
        let guard = json!({"kubeconfig": api.kubeconfig(lab.dir.path()), "namespaces": [POD_NAMESPACE],
                           "apiConnectTimeoutMs": 300, "apiTimeoutMs": 300});
        let pod = lab.pod("failing");
        let (got_code, msg) = add_fails(&lab, &pod, guard);
        assert_eq!(got_code, code, "{behaviour:?}: {msg}");
        assert!(
            msg.contains(words) && msg.contains("sandboxes/failing"),
            "{behaviour:?}: {msg}"
        );
        assert_eq!(api.requests(), 1, "{behaviour:?}");
    }
}

#[test]
fn unreachable_api_server_and_bad_credentials_fail_closed() {
    let lab = Lab::new("au");
    let api = FakeApi::start(lab.node.path(), serving("p", opted_in(PROXY_UID)));
    let kubeconfig = api.kubeconfig(lab.dir.path());
    let text = std::fs::read_to_string(&kubeconfig).expect("kubeconfig");
    // A token the server does not accept.
    let wrong = lab.dir.path().join("wrong-token");
    std::fs::write(&wrong, text.replace(fake_api::TOKEN, "not-the-token")).expect("write");
    let pod = lab.pod("p");
    let (code, msg) = add_fails(
        &lab,
        &pod,
        json!({"kubeconfig": wrong, "namespaces": [POD_NAMESPACE]}),
    );
    assert_eq!(code, 101, "{msg}");
    assert!(msg.contains("HTTP 401"), "{msg}");
    // Nothing listens on the port any more.
    let port = api.port;
    drop(api);
    let _ = port;
    let (code, msg) = add_fails(
        &lab,
        &pod,
        json!({"kubeconfig": kubeconfig, "namespaces": [POD_NAMESPACE]}),
    );
    assert_eq!(code, 11, "{msg}");
    assert!(msg.contains("unreachable"), "{msg}");
    // A kubeconfig that is not there.
    let (code, msg) = add_fails(
        &lab,
        &pod,
        json!({"kubeconfig": "/nonexistent/weft/kubeconfig", "namespaces": ["*"]}),
    );
    assert_eq!(code, 101, "{msg}");
    assert!(msg.contains("/nonexistent/weft/kubeconfig"), "{msg}");
}

#[test]
fn an_invalid_contract_from_the_api_fails_closed() {
    let lab = Lab::new("ac");
    let mut newer = opted_in(PROXY_UID);
    newer.insert(CONTRACT_VERSION.into(), json!("2"));
    let api = FakeApi::start(lab.node.path(), serving("newer", newer));
    let pod = lab.pod("newer");
    let (code, msg) = add_fails(
        &lab,
        &pod,
        json!({"kubeconfig": api.kubeconfig(lab.dir.path()), "namespaces": ["*"]}),
    );
    assert_eq!(code, 7, "{msg}");
    assert!(
        msg.contains(CONTRACT_VERSION) && msg.contains("contract version 2"),
        "{msg}"
    );
}

#[test]
fn invalid_contracts_through_runtime_config_fail_closed() {
    let lab = Lab::new("ai");
    let cases: [(&str, &str, &str); 5] = [
        (PROXY_UID_KEY, "0", "allowRootProxy"),
        (PROXY_UID_KEY, "-5", "is not a UID"),
        (CONTRACT_VERSION, "7", "contract version 7"),
        (ALLOW_CIDRS, "10.0.0.1/8", "host bits"),
        (ENABLED, "yes", "neither"),
    ];
    for (key, value, words) in cases {
        let mut annotations = opted_in(PROXY_UID);
        annotations.insert(key.into(), json!(value));
        let pod = lab.pod("invalid").with_annotations(annotations);
        let (code, msg) = add_fails(&lab, &pod, json!({}));
        assert_eq!(code, 7, "{key}={value}: {msg}");
        assert!(
            msg.contains(key) && msg.contains(words),
            "{key}={value}: {msg}"
        );
    }
    let mut missing = opted_in(PROXY_UID);
    missing.remove(CONTRACT_VERSION);
    let pod = lab.pod("unversioned").with_annotations(missing);
    let (code, msg) = add_fails(&lab, &pod, json!({}));
    assert_eq!(code, 7, "{msg}");
    assert!(
        msg.contains(CONTRACT_VERSION) && msg.contains("missing"),
        "{msg}"
    );
    // Root as the proxy, when the netconf allows it.
    let mut root = opted_in(0);
    root.insert(PROXY_UID_KEY.into(), json!("0"));
    let pod = lab.pod("root-proxy").with_annotations(root);
    let chain = lab.guarded_chain(false, json!({"allowRootProxy": true}));
    let result = chain.add(&pod.att).expect("ADD with a root proxy allowed");
    assert!(udp_refused(&pod), "uid 1000 is still fenced");
    chain.del(&pod.att, Some(&result)).expect("DEL");
}

/// The node has no BPF LSM that confines the pod's processes, so a pod whose containers
/// could go around the fence (raw frames, the proxy's identity) is refused, naming the
/// container, what it holds and what to change; nothing is left behind.
#[test]
fn pods_whose_containers_can_leave_the_fence_are_refused() {
    let lab = Lab::new("ap");
    let spec = fake_api::hardened_spec;
    let agent = "/containers/0/securityContext";
    let cases: [(&str, Value, &str); 7] = [
        (
            "/containers/0/securityContext/capabilities",
            json!({"drop": ["CHOWN"]}),
            "keeps CAP_NET_RAW",
        ),
        (
            "/containers/0/securityContext/capabilities",
            json!({"add": ["NET_ADMIN"], "drop": ["ALL"]}),
            "adds capability NET_ADMIN",
        ),
        (
            "/containers/0/securityContext/runAsUser",
            json!(0),
            "runs as root",
        ),
        ("/securityContext", json!({}), "sets no runAsUser"),
        (
            "/containers/0/securityContext/allowPrivilegeEscalation",
            json!(true),
            "may gain privileges",
        ),
        (
            "/containers/0/securityContext/privileged",
            json!(true),
            "is privileged",
        ),
        ("/hostNetwork", json!(true), "hostNetwork"),
    ];
    for (pointer, value, words) in cases {
        let mut bad = spec(PROXY_UID);
        let (parent, key) = pointer.rsplit_once('/').expect("pointer");
        bad.pointer_mut(parent).expect("parent")[key] = value.clone();
        let api = FakeApi::start(
            lab.node.path(),
            serving_spec("leaky", opted_in(PROXY_UID), bad),
        );
        let guard =
            json!({"kubeconfig": api.kubeconfig(lab.dir.path()), "namespaces": [POD_NAMESPACE]});
        let pod = lab.pod("leaky");
        let (code, msg) = add_fails(&lab, &pod, guard);
        assert_eq!(code, 7, "{pointer}={value}: {msg}");
        assert!(
            msg.contains(words) && msg.contains("no BPF LSM"),
            "{pointer}={value}: {msg}"
        );
        if pointer.starts_with(agent) {
            assert!(msg.contains("container \"agent\""), "{msg}");
        }
    }

    // A pod fenced while its spec was safe fails CHECK once the spec reads otherwise
    // (an API server answering for the same pod with another spec).
    let good = FakeApi::start(lab.node.path(), serving("later", opted_in(PROXY_UID)));
    let pod = lab.pod("later");
    let chain = lab.guarded_chain(
        false,
        json!({"kubeconfig": good.kubeconfig(lab.dir.path()), "namespaces": [POD_NAMESPACE]}),
    );
    let result = chain.add(&pod.att).expect("ADD of a hardened pod");
    let mut root = spec(PROXY_UID);
    root["securityContext"]["runAsUser"] = json!(0);
    let bad = FakeApi::start(
        lab.node.path(),
        serving_spec("later", opted_in(PROXY_UID), root),
    );
    let changed_dir = TempDir::new("apk");
    let changed = lab.guarded_chain(
        false,
        json!({"kubeconfig": bad.kubeconfig(changed_dir.path()), "namespaces": [POD_NAMESPACE]}),
    );
    match changed.check(&pod.att, &result) {
        Err(ChainError::Plugin { error, .. }) => {
            assert_eq!(error.code, 100, "{}", error.msg);
            assert!(error.msg.contains("runs as root"), "{}", error.msg);
        }
        other => panic!("CHECK of a pod that runs as root: {other:?}"),
    }
    chain.del(&pod.att, Some(&result)).expect("DEL");
}

/// Annotations through runtimeConfig carry no spec: without the netconf's statement that
/// admission guarantees it, the pod is refused (and no API call is made for it).
#[test]
fn runtime_config_without_a_guarantee_is_refused() {
    let lab = Lab::new("ag");
    let api = FakeApi::start(lab.node.path(), serving("fast", opted_in(PROXY_UID)));
    let pod = lab.pod("fast").with_annotations(opted_in(PROXY_UID));
    let guard = json!({"podSecurityGuarantee": null,
                       "kubeconfig": api.kubeconfig(lab.dir.path()), "namespaces": [POD_NAMESPACE]});
    let (code, msg) = add_fails(&lab, &pod, guard);
    assert_eq!(code, 7, "{msg}");
    assert!(
        msg.contains("runtimeConfig")
            && msg.contains("\"podSecurityGuarantee\": \"admission-policy\""),
        "{msg}"
    );
    assert_eq!(api.requests(), 0);
    let (code, msg) = add_fails(&lab, &pod, json!({"podSecurityGuarantee": "trust-me"}));
    assert_eq!(code, 7, "{msg}");
    assert!(msg.contains("podSecurityGuarantee"), "{msg}");
}
