//! The in-memory API server the benchmark's agent talks to, seeded with the synthetic
//! cluster, and the baselines measured against it in the same run: a bare paged list of
//! every object (transfer and JSON framing, nothing decoded), and a plain kube-rs watch
//! that decodes full k8s-openapi objects.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::StreamExt;
use kube::api::WatchEvent;
use kube::Api;
use serde::Deserialize;
use weft_apiserver::{ApiServer, Config, Handle, Listen, RunningServer};

use super::synthetic::{self, Shape};
use crate::lab::netns;

pub struct Server {
    server: Option<RunningServer>,
    pub runtime: tokio::runtime::Runtime,
    /// The port inside the node's namespace (the agent's way in).
    node_port: u16,
    /// `http://127.0.0.1:port` in this namespace (the baselines' way in).
    pub url: String,
}

impl Server {
    /// Serves on loopback inside `node_netns` and in this namespace.
    pub fn start(node_netns: &Path) -> anyhow::Result<Server> {
        let inside = netns::in_netns(node_netns, || {
            Ok(std::net::TcpListener::bind("127.0.0.1:0")?)
        })?;
        let node_port = inside.local_addr()?.port();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let config = Config {
            service_cidrs: vec![synthetic::SERVICE_CIDR.parse()?],
            ..Config::default()
        };
        let server = runtime.block_on(ApiServer::new(config).start(
            vec![
                Listen::Listener(inside),
                Listen::Addr("127.0.0.1:0".parse()?),
            ],
            None,
        ))?;
        let url = format!("http://{}", server.api_addrs()[1]);
        Ok(Server {
            server: Some(server),
            runtime,
            node_port,
            url,
        })
    }

    pub fn handle(&self) -> Handle {
        self.server.as_ref().expect("running").handle().clone()
    }

    pub fn kubeconfig(&self, dir: &Path) -> anyhow::Result<PathBuf> {
        let path = dir.join("agent.kubeconfig");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: bench\ncontexts:\n- name: bench\n  context: {{cluster: bench, user: agent}}\nclusters:\n- name: bench\n  cluster: {{server: \"http://127.0.0.1:{}\"}}\nusers:\n- name: agent\n  user: {{}}\n",
                self.node_port
            ),
        )?;
        Ok(path)
    }

    /// Adds everything but node0 (which the idle phase already has).
    pub fn seed(&self, shape: Shape) -> anyhow::Result<()> {
        let h = self.handle();
        let put = |obj: serde_json::Value| {
            h.apply(obj)
                .map(|_| ())
                .map_err(|e| anyhow::anyhow!("seed: {e:?}"))
        };
        for i in 1..shape.nodes {
            put(synthetic::node(i))?;
        }
        for n in 0..synthetic::NAMESPACES {
            put(synthetic::namespace(n))?;
        }
        for i in 0..shape.pods {
            put(synthetic::pod(i, shape.nodes, 0))?;
        }
        for d in 0..shape.services {
            put(synthetic::service(d))?;
            put(synthetic::endpoint_slice(d, shape.nodes))?;
        }
        Ok(())
    }

    pub fn client(&self) -> anyhow::Result<kube::Client> {
        let _guard = self.runtime.enter();
        Ok(kube::Client::try_from(kube::Config::new(
            self.url.parse()?,
        ))?)
    }

    /// Baseline: every object of the six kinds paged through as the agent lists them
    /// (500 a page), with nothing decoded but each page's continue token.
    pub fn bare_list(&self) -> anyhow::Result<(Duration, usize)> {
        #[derive(Deserialize)]
        struct Page {
            metadata: PageMeta,
        }
        #[derive(Deserialize)]
        struct PageMeta {
            #[serde(rename = "continue", default)]
            next: Option<String>,
        }
        let client = self.client()?;
        let paths = [
            "/api/v1/nodes",
            "/api/v1/namespaces",
            "/api/v1/pods",
            "/api/v1/services",
            "/apis/discovery.k8s.io/v1/endpointslices",
            "/apis/networking.k8s.io/v1/networkpolicies",
        ];
        self.runtime.block_on(async move {
            let started = Instant::now();
            let mut bytes = 0;
            for path in paths {
                let mut next: Option<String> = None;
                loop {
                    let mut url = format!("{path}?limit=500");
                    if let Some(token) = &next {
                        url.push_str(&format!("&continue={token}"));
                    }
                    let request = http::Request::get(url).body(Vec::new())?;
                    let text = client.request_text(request).await?;
                    bytes += text.len();
                    next = serde_json::from_str::<Page>(&text)?
                        .metadata
                        .next
                        .filter(|t| !t.is_empty());
                    if next.is_none() {
                        break;
                    }
                }
            }
            Ok((started.elapsed(), bytes))
        })
    }

    /// Baseline: a plain kube-rs watch of `K` from now, decoding full objects; records when
    /// each event arrived, by the name of its object and its event type.
    pub fn stock_watch<K>(&self) -> anyhow::Result<Arrivals>
    where
        K: kube::Resource<DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug
            + Send
            + 'static,
    {
        let api: Api<K> = Api::all(self.client()?);
        let version = self.handle().resource_version().to_string();
        let arrivals = Arrivals::default();
        let record = arrivals.clone();
        self.runtime.spawn(async move {
            let Ok(stream) = api.watch(&Default::default(), &version).await else {
                return;
            };
            let mut stream = std::pin::pin!(stream);
            while let Some(Ok(event)) = stream.next().await {
                let at = Instant::now();
                let (kind, object) = match event {
                    WatchEvent::Added(o) => ("ADDED", o),
                    WatchEvent::Modified(o) => ("MODIFIED", o),
                    WatchEvent::Deleted(o) => ("DELETED", o),
                    _ => continue,
                };
                let label = object
                    .meta()
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(GENERATION_LABEL).cloned())
                    .unwrap_or_default();
                let name = object.meta().name.clone().unwrap_or_default();
                record.push(format!("{kind} {name} {label}"), at);
            }
        });
        Ok(arrivals)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            self.runtime.block_on(server.shutdown());
        }
    }
}

/// The label the benchmark changes on a pod (the synthetic pods carry it).
pub const GENERATION_LABEL: &str = "weft.dev/bench-generation";

/// When each watched event arrived, keyed `TYPE name label`.
#[derive(Clone, Default)]
pub struct Arrivals(Arc<Mutex<Vec<(String, Instant)>>>);

impl Arrivals {
    fn push(&self, key: String, at: Instant) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((key, at));
    }

    pub fn find(&self, key: &str) -> Option<Instant> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, at)| *at)
    }
}

/// Waits until `done` holds, checking every `every`.
pub fn wait_until(
    what: &str,
    timeout: Duration,
    every: Duration,
    mut done: impl FnMut() -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    while !done()? {
        anyhow::ensure!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(every);
    }
    Ok(())
}

/// Context for an error from the API server's in-process handle.
pub fn api<T>(r: Result<T, weft_apiserver::ApiError>) -> anyhow::Result<T> {
    r.map_err(|e| anyhow::anyhow!("{e:?}"))
        .context("in-memory API server")
}
