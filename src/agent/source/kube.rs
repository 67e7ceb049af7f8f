//! The Kubernetes source: one kube-rs watcher per kind (paged initial list, bookmarks,
//! relist on `410 Gone`, backoff on errors), decoding each object straight from the API
//! server's JSON into the kind's compact type.
//!
//! Objects are decoded one by one from their raw JSON inside the list or watch event, so a
//! malformed object becomes an issue naming it and the field, while the rest of its page or
//! stream is kept (a typed list would fail as a whole and the watcher would retry forever).
//! This relies on the API server writing a watch event's `type` before its `object`, as
//! Kubernetes' encoder does.

use std::borrow::Cow;
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::utils::{Backoff, StreamBackoff};
use kube::runtime::watcher::{self, watcher, Event};
use kube::{Api, Client};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use weft_kubeconfig::{ApiTarget, Auth};
use weft_model::decode::decode_str;
use weft_model::{Issue, ObjectKey, Update, Watched};

use super::SourceMsg;

/// Objects per page of an initial list (the API server's own default chunk size).
pub const PAGE_SIZE: u32 = 500;
/// Most updates sent as one batch: a burst is applied (and reconciled) together.
const MAX_BATCH: usize = 512;

/// One object as the watcher sees it: just enough metadata for the watcher's bookkeeping,
/// and the already compacted value (or why it was refused).
#[derive(Clone, Debug)]
pub struct KubeObject<T: Watched> {
    meta: ObjectMeta,
    key: Option<ObjectKey>,
    value: Result<T, Vec<Issue>>,
}

impl<'de, T: Watched> Deserialize<'de> for KubeObject<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(deserializer)?;
        let mut decoded = decode_str::<T>(raw.get());
        if decoded.resource_version.is_empty() {
            // A kind whose wire type does not read it: the watcher needs it to resume.
            decoded.resource_version = resource_version_of(raw.get());
        }
        let meta = ObjectMeta {
            name: decoded.key.as_ref().map(|k| k.name.to_string()),
            namespace: decoded
                .key
                .as_ref()
                .and_then(|k| k.namespace.as_ref().map(|n| n.to_string())),
            resource_version: Some(decoded.resource_version),
            ..ObjectMeta::default()
        };
        Ok(KubeObject {
            meta,
            key: decoded.key,
            value: decoded.value,
        })
    }
}

/// `metadata.resourceVersion` alone, skipping the rest of the object.
fn resource_version_of(text: &str) -> String {
    #[derive(Deserialize)]
    struct Object {
        #[serde(default)]
        metadata: Metadata,
    }
    #[derive(Default, Deserialize)]
    struct Metadata {
        #[serde(rename = "resourceVersion", default)]
        resource_version: Option<String>,
    }
    serde_json::from_str::<Object>(text)
        .ok()
        .and_then(|o| o.metadata.resource_version)
        .unwrap_or_default()
}

impl<T: Watched> kube::Resource for KubeObject<T> {
    type DynamicType = ();
    type Scope = kube::core::DynamicResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        T::KIND.kind.into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        T::KIND.group.into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        T::KIND.version.into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        T::KIND.plural.into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

/// The update an event makes, or `None` for an object without a name.
fn update<T: Watched>(event: Event<KubeObject<T>>) -> Result<Update<T>, String> {
    let named = |object: KubeObject<T>| match object.key {
        Some(key) => Ok((key, object.value)),
        None => Err(object
            .value
            .err()
            .unwrap_or_default()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")),
    };
    Ok(match event {
        Event::Init => Update::Init,
        Event::InitDone => Update::InitDone,
        Event::InitApply(object) | Event::Apply(object) => {
            let (key, value) = named(object)?;
            Update::Apply(key, value)
        }
        Event::Delete(object) => Update::Delete(named(object)?.0),
    })
}

/// Watches every object of `T` in the cluster and sends the changes, until the agent stops
/// listening. Errors are reported and retried with kube-rs' default backoff.
pub async fn watch<T: Watched>(client: Client, tx: mpsc::Sender<SourceMsg>) {
    let api: Api<KubeObject<T>> = Api::all(client);
    let config = watcher::Config::default().page_size(PAGE_SIZE);
    let mut events = StreamBackoff::new(watcher(api, config), WatchBackoff::default()).boxed();
    while let Some(first) = events.next().await {
        let mut pending = Some(first);
        let mut batch = Vec::new();
        // Take what has already arrived too, so a burst is one batch.
        while let Some(event) = pending.take() {
            match event {
                Ok(event) => match update(event) {
                    Ok(u) => batch.push(u),
                    Err(issue) => {
                        let trouble = SourceMsg::Trouble {
                            kind: T::KIND.kind,
                            error: format!("an object without a name was skipped: {issue}"),
                        };
                        if tx.send(trouble).await.is_err() {
                            return;
                        }
                    }
                },
                Err(e) => {
                    let trouble = SourceMsg::Trouble {
                        kind: T::KIND.kind,
                        error: trouble_text(&e),
                    };
                    if tx.send(trouble).await.is_err() {
                        return;
                    }
                }
            }
            if batch.len() < MAX_BATCH {
                pending = events.next().now_or_never().flatten();
            }
        }
        if !batch.is_empty() && tx.send(SourceMsg::batch(batch)).await.is_err() {
            return;
        }
    }
}

/// Exponential backoff between a kind's failed lists and watches (0.5 s doubling to 30 s,
/// ±25 % jitter), reset once the source works again. kube-rs' default keeps backing off
/// until two minutes pass without an error, so an agent that lived through an outage
/// could wait half a minute to see the cluster again; a network agent should not. An
/// answer that follows an error within a second does not count as working (a watch that
/// fails as soon as it starts must not hammer the API server).
#[derive(Debug)]
pub struct WatchBackoff {
    next: Duration,
    failed_at: Option<std::time::Instant>,
}

const BACKOFF_FIRST: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

impl Default for WatchBackoff {
    fn default() -> WatchBackoff {
        WatchBackoff {
            next: BACKOFF_FIRST,
            failed_at: None,
        }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let now = std::time::Instant::now();
        self.failed_at = Some(now);
        let base = self.next;
        self.next = (self.next * 2).min(BACKOFF_MAX);
        // Jitter from the clock: no two kinds (or nodes) retry in lockstep.
        let noise = (now_nanos() % 1000) as f64 / 1000.0;
        Some(base.mul_f64(0.75 + noise / 2.0))
    }
}

fn now_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        if self
            .failed_at
            .is_none_or(|at| at.elapsed() >= Duration::from_secs(1))
        {
            *self = WatchBackoff::default();
        }
    }
}

fn trouble_text(e: &watcher::Error) -> String {
    match e {
        watcher::Error::WatchError(status) if status.code == 410 => {
            "410 Gone: the watch fell too far behind; relisting".to_string()
        }
        other => {
            // Each layer's message often repeats its source's: keep what is new.
            let mut text = other.to_string();
            let mut source = std::error::Error::source(other);
            while let Some(s) = source {
                let part = s.to_string();
                if !text.contains(&part) {
                    text.push_str(": ");
                    text.push_str(&part);
                }
                source = s.source();
            }
            text
        }
    }
}

/// A kube-rs client for the API server `target` names.
pub fn client(target: &ApiTarget) -> anyhow::Result<Client> {
    use base64::Engine;
    let url = target
        .server
        .parse::<http::Uri>()
        .map_err(|e| anyhow::anyhow!("API server URL {:?}: {e}", target.server))?;
    let mut config = kube::Config::new(url);
    if let Some(pem) = &target.ca_pem {
        let certs: Vec<Vec<u8>> = pem::parse_many(pem)
            .map_err(|e| anyhow::anyhow!("certificate authority: {e}"))?
            .into_iter()
            .filter(|p| p.tag() == "CERTIFICATE")
            .map(pem::Pem::into_contents)
            .collect();
        anyhow::ensure!(
            !certs.is_empty(),
            "certificate authority: no certificate in the bundle"
        );
        config.root_cert = Some(certs);
    }
    config.accept_invalid_certs = target.insecure;
    match &target.auth {
        Auth::None => {}
        Auth::Token(token) => config.auth_info.token = Some(token.clone().into()),
        Auth::TokenFile(path) => config.auth_info.token_file = Some(path.display().to_string()),
    }
    if let Some(identity) = &target.client {
        let b64 = base64::engine::general_purpose::STANDARD;
        config.auth_info.client_certificate_data = Some(b64.encode(&identity.cert_pem));
        config.auth_info.client_key_data = Some(b64.encode(&identity.key_pem).into());
    }
    // A watch is idle for minutes at a time; kube-rs' own read timeout covers it.
    config.connect_timeout = Some(Duration::from_secs(10));
    Ok(Client::try_from(config)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Request, Response};
    use kube::client::Body;
    use weft_model::{Applied, Pod, Stores};

    type ApiHandle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

    fn pod(name: &str, rv: u32, app: &str) -> String {
        serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": name, "namespace": "shop", "resourceVersion": rv.to_string(),
                "uid": format!("00000000-0000-0000-0000-{rv:012}"),
                "labels": {"app": app},
                "managedFields": [{"manager": "kubelet", "operation": "Update"}]
            },
            "spec": {"nodeName": "node1", "containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 80}]}]},
            "status": {"phase": "Running", "podIPs": [{"ip": format!("10.244.1.{rv}")}],
                       "containerStatuses": [{"name": "c", "ready": true}]}
        })
        .to_string()
    }

    fn bad(rv: u32) -> String {
        format!(
            r#"{{"metadata":{{"name":"bad","namespace":"shop","resourceVersion":"{rv}"}},"spec":{{"containers":[{{"ports":[{{"containerPort":"eighty"}}]}}]}}}}"#
        )
    }

    fn list(rv: u32, items: &[String]) -> String {
        format!(
            r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}"}},"items":[{}]}}"#,
            items.join(",")
        )
    }

    /// A watch event as the API server writes it: `type` first.
    fn event(kind: &str, object: &str) -> String {
        format!("{{\"type\":\"{kind}\",\"object\":{object}}}\n")
    }

    async fn answer(api: &mut ApiHandle, expect: &[&str], body: String) -> String {
        let (request, send) = api.next_request().await.expect("the watcher asks");
        let uri = request.uri().to_string();
        for part in expect {
            assert!(uri.contains(part), "{uri} lacks {part}");
        }
        send.send_response(Response::new(Body::from(body.into_bytes())));
        uri
    }

    fn apply(
        stores: &mut Stores,
        msg: SourceMsg,
        changes: &mut Vec<usize>,
        troubles: &mut Vec<String>,
    ) {
        match msg {
            SourceMsg::Update(update) => {
                let Applied { changed, .. } = update.apply(stores);
                changes.push(changed);
            }
            SourceMsg::Trouble { error, .. } => troubles.push(error),
            SourceMsg::Issues { .. } => {}
        }
    }

    #[test]
    fn backoff_grows_to_its_cap_and_resets_only_after_working_a_while() {
        let mut b = WatchBackoff::default();
        let delays: Vec<Duration> = (0..10).map(|_| b.next().unwrap()).collect();
        assert!(delays[0] >= Duration::from_millis(375) && delays[0] <= Duration::from_millis(625));
        assert!(delays[9] <= BACKOFF_MAX.mul_f64(1.25) && delays[9] >= BACKOFF_MAX.mul_f64(0.75));
        b.reset();
        assert!(
            b.next().unwrap() > Duration::from_secs(20),
            "an answer right after an error is no recovery"
        );
        b.failed_at = Some(std::time::Instant::now() - Duration::from_secs(2));
        b.reset();
        assert!(b.next().unwrap() < Duration::from_secs(1));
    }

    /// List, watch, 410 Gone, relist: a malformed pod is named and skipped, the relist
    /// reports only what changed while the watch was down, and what was deleted meanwhile
    /// goes.
    #[tokio::test]
    async fn list_watch_gone_relist_without_a_storm() {
        let (service, mut api) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, "default");
        let (tx, mut rx) = mpsc::channel(64);
        tokio::spawn(watch::<Pod>(client, tx));

        let server = tokio::spawn(async move {
            answer(
                &mut api,
                &["/api/v1/pods?", "limit=500"],
                list(10, &[pod("p1", 1, "web"), bad(2), pod("p2", 3, "web")]),
            )
            .await;
            let stream = [
                event("ADDED", &pod("p3", 11, "web")),
                event("MODIFIED", &pod("p1", 12, "api")),
                event("DELETED", &pod("p2", 13, "web")),
                event(
                    "BOOKMARK",
                    r#"{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"14"}}"#,
                ),
                event(
                    "ERROR",
                    r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","message":"too old resource version","code":410}"#,
                ),
            ]
            .concat();
            answer(
                &mut api,
                &[
                    "watch=true",
                    "resourceVersion=10",
                    "allowWatchBookmarks=true",
                ],
                stream,
            )
            .await;
            // The relist: p1 as the watch left it, p3 deleted and p4 added while away.
            answer(
                &mut api,
                &["limit=500"],
                list(20, &[pod("p1", 12, "api"), bad(2), pod("p4", 15, "web")]),
            )
            .await;
            let (request, _pending) = api.next_request().await.expect("a new watch");
            let uri = request.uri().to_string();
            (uri, api, _pending)
        });

        let mut stores = Stores::default();
        stores.register::<Pod>();
        let (mut changes, mut troubles) = (Vec::new(), Vec::new());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !server.is_finished() {
            let msg = tokio::time::timeout_at(deadline, rx.recv())
                .await
                .expect("events in time")
                .expect("the source runs");
            apply(&mut stores, msg, &mut changes, &mut troubles);
        }
        while let Ok(Some(msg)) = tokio::time::timeout(Duration::from_millis(200), rx.recv()).await
        {
            apply(&mut stores, msg, &mut changes, &mut troubles);
        }
        let (last_watch, _api, _pending) = server.await.unwrap();
        assert!(last_watch.contains("resourceVersion=20"), "{last_watch}");

        let store = stores.get::<Pod>().unwrap();
        let mut names: Vec<String> = store.iter().map(|(k, _)| k.to_string()).collect();
        names.sort();
        assert_eq!(names, ["shop/p1", "shop/p4"]);
        let p1 = store.get(&ObjectKey::namespaced("shop", "p1")).unwrap();
        assert_eq!(p1.labels.get("app"), Some("api"));
        let issues: Vec<String> = store.issues().map(ToString::to_string).collect();
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert!(
            issues[0].starts_with("Pod/shop/bad spec.containers[0].ports[0].containerPort:"),
            "{issues:?}"
        );
        assert!(troubles.iter().any(|t| t.contains("410")), "{troubles:?}");
        // 2 listed + 3 watched + the relist: p4 added and p3 dropped, nothing else.
        assert_eq!(changes.iter().sum::<usize>(), 2 + 3 + 2, "{changes:?}");
    }
}
