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
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
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
        let decoded = decode_str::<T>(raw.get());
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
    let mut events = watcher(api, config).default_backoff().boxed();
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

fn trouble_text(e: &watcher::Error) -> String {
    match e {
        watcher::Error::WatchError(status) if status.code == 410 => {
            "410 Gone: the watch fell too far behind; relisting".to_string()
        }
        other => {
            let mut text = other.to_string();
            let mut source = std::error::Error::source(other);
            while let Some(s) = source {
                text.push_str(&format!(": {s}"));
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
