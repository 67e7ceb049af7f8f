//! A tiny Kubernetes API server stand-in: plain HTTP/1.1 on 127.0.0.1 inside a namespace the
//! test created (the node's, where the plugin runs), serving real Pod JSON at
//! `/api/v1/namespaces/<ns>/pods/<name>`, or misbehaving on purpose. It counts requests so
//! a test can prove none was made.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{json, Map, Value};

pub const TOKEN: &str = "weft-test-token";

/// How the server answers.
#[derive(Debug, Clone)]
pub enum Behaviour {
    /// Serve these pods (`"<ns>/<name>"` -> annotations, spec); others are 404.
    Pods(HashMap<String, (Map<String, Value>, Value)>),
    /// Answer every request with this status and a Status object.
    Status(u16),
    /// Read the request and never answer.
    Hang,
}

pub struct FakeApi {
    pub port: u16,
    requests: Arc<AtomicUsize>,
    paths: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FakeApi {
    /// Starts the server on 127.0.0.1 inside `netns`.
    pub fn start(netns: &Path, behaviour: Behaviour) -> FakeApi {
        let listener = super::in_netns(netns, || {
            TcpListener::bind("127.0.0.1:0").expect("bind the fake API server")
        });
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let port = listener.local_addr().expect("local addr").port();
        let requests = Arc::new(AtomicUsize::new(0));
        let paths = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (requests, paths, stop) = (requests.clone(), paths.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut held = Vec::new();
                while !stop.load(Ordering::Acquire) {
                    match listener.accept() {
                        Ok((conn, _)) => {
                            if let Some(conn) = handle(conn, &behaviour, &requests, &paths) {
                                held.push(conn);
                            }
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        FakeApi {
            port,
            requests,
            paths,
            stop,
            thread: Some(thread),
        }
    }

    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::Acquire)
    }

    pub fn paths(&self) -> Vec<String> {
        self.paths.lock().map(|p| p.clone()).unwrap_or_default()
    }

    /// A kubeconfig naming this server with a bearer token, written into `dir`.
    pub fn kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: test\n\
             contexts:\n- name: test\n  context: {{cluster: fake, user: node}}\n\
             clusters:\n- name: fake\n  cluster: {{server: \"http://127.0.0.1:{}\"}}\n\
             users:\n- name: node\n  user: {{token: {TOKEN}}}\n",
            self.port
        );
        std::fs::write(&path, text).expect("write kubeconfig");
        path
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Serves one connection; returns it when it must be held open (Hang).
fn handle(
    conn: TcpStream,
    behaviour: &Behaviour,
    requests: &AtomicUsize,
    paths: &Mutex<Vec<String>>,
) -> Option<TcpStream> {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reader = BufReader::new(conn.try_clone().ok()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line).ok()?;
    let mut authorization = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("authorization") {
                authorization = value.trim().to_string();
            }
        }
    }
    requests.fetch_add(1, Ordering::AcqRel);
    let path = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_string();
    if let Ok(mut list) = paths.lock() {
        list.push(path.clone());
    }
    let (status, body) = match behaviour {
        Behaviour::Hang => return Some(conn),
        Behaviour::Status(code) => (*code, status_object(*code, "injected failure")),
        Behaviour::Pods(_) if authorization != format!("Bearer {TOKEN}") => {
            (401, status_object(401, "Unauthorized"))
        }
        Behaviour::Pods(pods) => {
            match pod_of(&path).and_then(|key| pods.get(&key).map(|a| (key, a))) {
                Some((key, (annotations, spec))) => (200, pod_object(&key, annotations, spec)),
                None => (404, status_object(404, "pods not found")),
            }
        }
    };
    let body = body.to_string();
    let mut conn = conn;
    let _ = write!(
        conn,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    None
}

fn pod_of(path: &str) -> Option<String> {
    let rest = path.strip_prefix("/api/v1/namespaces/")?;
    let (ns, rest) = rest.split_once('/')?;
    let name = rest.strip_prefix("pods/")?;
    Some(format!("{ns}/{name}"))
}

/// The spec of a sandbox pod the guard accepts: an agent container as UID 1000 that drops
/// every capability and cannot escalate, and its proxy as `proxy_uid`.
pub fn hardened_spec(proxy_uid: u32) -> Value {
    json!({
        "securityContext": {"runAsUser": 1000, "runAsNonRoot": true},
        "containers": [
            {"name": "agent", "image": "sandbox:latest",
             "securityContext": {"allowPrivilegeEscalation": false,
                                 "capabilities": {"drop": ["ALL"]}}},
            {"name": "proxy", "image": "proxy:latest",
             "securityContext": {"runAsUser": proxy_uid, "allowPrivilegeEscalation": false,
                                 "capabilities": {"drop": ["ALL"]}}}
        ],
        "nodeName": "node-1"
    })
}

/// A Pod object as the API server returns it (trimmed, but real in shape).
fn pod_object(key: &str, annotations: &Map<String, Value>, spec: &Value) -> Value {
    let (ns, name) = key.split_once('/').unwrap_or(("default", key));
    json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "name": name, "namespace": ns, "uid": "4b2c9a0e-1c1f-4f4e-9c55-2d2f0c7f1a01",
            "resourceVersion": "12345", "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "sandbox"}, "annotations": annotations
        },
        "spec": spec,
        "status": {"phase": "Pending"}
    })
}

fn status_object(code: u16, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "code": code})
}
