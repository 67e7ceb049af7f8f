//! Readiness gating. The agent owns the `node.weft.dev/agent-not-ready:NoSchedule` taint:
//! it is removed only when the node's network is ready (the node reconcilers, the conflist
//! last, succeeded; and the guard's kernel self-test where the guard is enabled), and put
//! back when one of those stops holding. With it, weft sets `NetworkUnavailable=False`
//! (reason `WeftIsUp`), as other network plugins do, which also lets the node controller
//! lift `node.kubernetes.io/network-unavailable`. docs/kubernetes.md explains the boot race
//! and how a node registered with the taint closes it.
//!
//! The [`NodeReadiness`] reconciler compares what it wants with what the Node store shows
//! and asks the [`publish`] task to write only on a difference; that task patches only the
//! agent's own taint (JSON merge of the taint list, guarded by the object's
//! resourceVersion so a concurrent change is retried, never overwritten) and its own
//! condition (strategic merge keyed by condition type).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::watch;
use tracing::{info, warn};
use weft_model::{
    KindId, NodeSpec, ObjectKey, AGENT_NOT_READY_EFFECT, AGENT_NOT_READY_TAINT,
    NETWORK_UNAVAILABLE, NETWORK_UP_REASON,
};

use super::apply::Changes;
use super::node::NodeEnv;
use super::reconcile::{Input, Reconciler};

/// The reconcilers whose success makes the node ready.
pub fn gates(egress_guard: bool) -> Vec<&'static str> {
    let mut gates: Vec<&'static str> = super::apply::cniconf::WRITTEN_AFTER.to_vec();
    gates.push("cni-config");
    if egress_guard {
        gates.push("guard-selftest");
    }
    gates
}

pub struct NodeReadiness {
    pub gates: Vec<&'static str>,
    pub desired: watch::Sender<Option<bool>>,
}

impl Reconciler<NodeEnv> for NodeReadiness {
    fn name(&self) -> &'static str {
        "node-readiness"
    }

    fn reads(&self) -> Vec<KindId> {
        vec![KindId::of::<NodeSpec>()]
    }

    fn watches_health(&self) -> bool {
        true
    }

    fn reconcile(&mut self, env: &mut NodeEnv, input: &Input<'_>) -> anyhow::Result<Changes> {
        let ready = input.health.all_ok(&self.gates).is_ok();
        let key = ObjectKey::cluster(&env.settings.node_name);
        let marks = input.stores.get::<NodeSpec>()?.get(&key).map(|n| n.marks);
        let in_place = marks.is_some_and(|m| {
            if ready {
                !m.not_ready_taint && m.network_up
            } else {
                m.not_ready_taint
            }
        });
        if in_place {
            return Ok(Changes::default());
        }
        // Always notifies, so a mark someone else changed is checked again.
        self.desired.send_replace(Some(ready));
        Ok(Changes {
            updated: 1,
            ..Changes::default()
        })
    }
}

const RETRY_FIRST: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(30);
/// Conflicts retried at once before backing off (another writer is busy on the node).
const CONFLICT_RETRIES: usize = 5;

/// Writes the readiness marks the reconciler asks for, retrying until they hold.
pub async fn publish(client: Client, node: String, mut desired: watch::Receiver<Option<bool>>) {
    let api: Api<Node> = Api::all(client);
    loop {
        if desired.changed().await.is_err() {
            return;
        }
        let mut wait = RETRY_FIRST;
        loop {
            let Some(ready) = *desired.borrow_and_update() else {
                break;
            };
            match write_marks(&api, &node, ready).await {
                Ok(()) => break,
                Err(e) => {
                    warn!(node = %node, ready, error = format!("{e:#}"), "cannot update the node's readiness marks; retrying");
                    // A newer wish cuts the wait short.
                    let _ = tokio::time::timeout(wait, desired.changed()).await;
                    wait = (wait * 2).min(RETRY_MAX);
                }
            }
        }
    }
}

async fn write_marks(api: &Api<Node>, name: &str, ready: bool) -> anyhow::Result<()> {
    let mut conflicts = 0;
    loop {
        match write_taint(api, name, ready).await {
            Err(kube::Error::Api(status)) if status.code == 409 && conflicts < CONFLICT_RETRIES => {
                conflicts += 1;
            }
            Err(e) => return Err(e.into()),
            Ok(()) => break,
        }
    }
    if ready {
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        );
        let patch = json!({"status": {"conditions": [{
            "type": NETWORK_UNAVAILABLE,
            "status": "False",
            "reason": NETWORK_UP_REASON,
            "message": "weft is running on this node",
            "lastTransitionTime": now,
            "lastHeartbeatTime": now,
        }]}});
        api.patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await?;
    }
    Ok(())
}

fn ours(t: &Taint) -> bool {
    t.key == AGENT_NOT_READY_TAINT && t.effect == AGENT_NOT_READY_EFFECT
}

/// Adds or removes the agent's taint, leaving every other taint as it is.
async fn write_taint(api: &Api<Node>, name: &str, ready: bool) -> Result<(), kube::Error> {
    let node = api.get(name).await?;
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let present = taints.iter().any(ours);
    let wanted: Vec<Taint> = if ready && present {
        taints.into_iter().filter(|t| !ours(t)).collect()
    } else if !ready && !present {
        let mut t = taints;
        t.push(Taint {
            key: AGENT_NOT_READY_TAINT.into(),
            effect: AGENT_NOT_READY_EFFECT.into(),
            value: None,
            time_added: None,
        });
        t
    } else {
        return Ok(());
    };
    let patch = json!({
        "metadata": {"resourceVersion": node.metadata.resource_version},
        "spec": {"taints": wanted},
    });
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    info!(node = %name, ready, "{} the {AGENT_NOT_READY_TAINT} taint", if ready { "removed" } else { "added" });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Method, Request, Response, StatusCode};
    use kube::client::Body;

    type ApiHandle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

    fn node(rv: &str, taints: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "resourceVersion": rv},
            "spec": {"taints": taints}
        }))
        .unwrap()
    }

    async fn next(
        api: &mut ApiHandle,
    ) -> (
        Method,
        String,
        Option<String>,
        serde_json::Value,
        tower_test::mock::SendResponse<Response<Body>>,
    ) {
        let (request, send) = api.next_request().await.expect("a request");
        let method = request.method().clone();
        let uri = request.uri().to_string();
        let content_type = request
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string());
        let bytes = request.into_body().collect_bytes().await.unwrap();
        let body = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
        (method, uri, content_type, body, send)
    }

    /// Removing the taint keeps every other taint, sends the resourceVersion it read, and
    /// on 409 reads again and retries; then the condition is patched on the status.
    #[tokio::test]
    async fn ready_removes_only_our_taint_retries_conflicts_and_sets_the_condition() {
        let (service, mut api) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, "default");
        let nodes: Api<Node> = Api::all(client);
        let writer = tokio::spawn(async move { write_marks(&nodes, "n1", true).await });

        let other = json!({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"});
        let ours = json!({"key": AGENT_NOT_READY_TAINT, "effect": AGENT_NOT_READY_EFFECT});
        for (attempt, rv) in ["7", "8"].iter().enumerate() {
            let (method, uri, _, _, send) = next(&mut api).await;
            assert_eq!((method, uri.as_str()), (Method::GET, "/api/v1/nodes/n1"));
            send.send_response(Response::new(Body::from(node(rv, json!([other, ours])))));
            let (method, uri, content_type, body, send) = next(&mut api).await;
            assert_eq!(method, Method::PATCH);
            assert!(uri.starts_with("/api/v1/nodes/n1?"), "{uri}");
            assert_eq!(
                content_type.as_deref(),
                Some("application/merge-patch+json")
            );
            assert_eq!(body["metadata"]["resourceVersion"], json!(rv));
            assert_eq!(body["spec"]["taints"], json!([other]));
            if attempt == 0 {
                let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409});
                let mut response = Response::new(Body::from(serde_json::to_vec(&status).unwrap()));
                *response.status_mut() = StatusCode::CONFLICT;
                send.send_response(response);
            } else {
                send.send_response(Response::new(Body::from(node("9", json!([other])))));
            }
        }
        let (method, uri, content_type, body, send) = next(&mut api).await;
        assert_eq!(method, Method::PATCH);
        assert!(uri.starts_with("/api/v1/nodes/n1/status?"), "{uri}");
        assert_eq!(
            content_type.as_deref(),
            Some("application/strategic-merge-patch+json")
        );
        let condition = &body["status"]["conditions"][0];
        assert_eq!(condition["type"], json!(NETWORK_UNAVAILABLE));
        assert_eq!(condition["status"], json!("False"));
        assert_eq!(condition["reason"], json!(NETWORK_UP_REASON));
        send.send_response(Response::new(Body::from(node("10", json!([other])))));
        writer.await.unwrap().unwrap();
    }

    /// Not ready: the taint goes on next to the others; nothing else is written.
    #[tokio::test]
    async fn not_ready_adds_the_taint_and_nothing_else() {
        let (service, mut api) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let nodes: Api<Node> = Api::all(Client::new(service, "default"));
        let writer = tokio::spawn(async move { write_marks(&nodes, "n1", false).await });
        let other =
            json!({"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"});
        let (_, _, _, _, send) = next(&mut api).await;
        send.send_response(Response::new(Body::from(node("3", json!([other])))));
        let (method, _, _, body, send) = next(&mut api).await;
        assert_eq!(method, Method::PATCH);
        assert_eq!(
            body["spec"]["taints"],
            json!([other, {"key": AGENT_NOT_READY_TAINT, "effect": AGENT_NOT_READY_EFFECT}])
        );
        send.send_response(Response::new(Body::from(node("4", json!([])))));
        writer.await.unwrap().unwrap();
        drop(api);
    }
}
