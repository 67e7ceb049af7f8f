//! Shared test support: a server on a loopback port and kube-rs clients for it.
#![allow(dead_code)]

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{Api, Client};
use serde_json::json;
use weft_apiserver::{ApiServer, Config, Listen, RunningServer, User};

pub const AGENT_TOKEN: &str = "agent-token";
pub const AGENT_USER: &str = "system:serviceaccount:kube-system:weft-agent";

pub fn config() -> Config {
    let mut c = Config {
        bookmark_interval_ms: 200,
        ..Config::default()
    };
    c.tokens.insert(AGENT_TOKEN.into(), User::named(AGENT_USER));
    c
}

pub async fn start(config: Config) -> RunningServer {
    ApiServer::new(config)
        .start(vec![Listen::Addr("127.0.0.1:0".parse().unwrap())], None)
        .await
        .expect("server starts")
}

pub fn client_for(server: &RunningServer, token: Option<&str>) -> Client {
    let mut cfg = kube::Config::new(server.url().parse().unwrap());
    cfg.default_namespace = "default".into();
    if let Some(t) = token {
        cfg.auth_info.token = Some(secrecy::SecretString::from(t.to_string()));
    }
    Client::try_from(cfg).expect("client")
}

pub fn node(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"podCIDRs": ["10.244.0.0/24"]},
        "status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady"},
            {"type": "MemoryPressure", "status": "False"}
        ]}
    })
}

pub fn pod(ns: &str, name: &str, node: &str, labels: serde_json::Value) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": ns, "name": name, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox:1.36"}]}
    })
}

pub fn nodes(c: &Client) -> Api<Node> {
    Api::all(c.clone())
}

pub fn pods(c: &Client, ns: &str) -> Api<Pod> {
    Api::namespaced(c.clone(), ns)
}

pub fn status_code(e: &kube::Error) -> Option<(u16, String)> {
    match e {
        kube::Error::Api(s) => Some((s.code, s.reason.clone())),
        _ => None,
    }
}
