//! The server driven by a real kubectl 1.35 (installed by `make deps` into
//! target/tools/bin): discovery, tables, `-o json`, client-side `apply` twice, a watch
//! seeing a change, and `taint`. One server, several kubectl invocations.

mod common;

use common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

fn kubectl_path() -> PathBuf {
    if let Some(p) = std::env::var_os("WEFT_KUBECTL") {
        return PathBuf::from(p);
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/bin/kubectl");
    assert!(
        p.exists(),
        "kubectl not found at {}: run `make deps` (it installs kubectl 1.35 and helm into target/tools/bin), or set WEFT_KUBECTL",
        p.display()
    );
    p
}

struct Kubectl {
    bin: PathBuf,
    dir: tempfile::TempDir,
}

impl Kubectl {
    fn new(server_url: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("weft-kubectl")
            .tempdir()
            .unwrap();
        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: weft\n  cluster:\n    server: {server_url}\nusers:\n- name: agent\n  user:\n    token: {AGENT_TOKEN}\ncontexts:\n- name: weft\n  context:\n    cluster: weft\n    user: agent\n    namespace: default\ncurrent-context: weft\n"
        );
        std::fs::write(dir.path().join("config"), kubeconfig).unwrap();
        Kubectl {
            bin: kubectl_path(),
            dir,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.env("KUBECONFIG", self.dir.path().join("config"))
            .env("HOME", self.dir.path())
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .args(args);
        c
    }

    /// Runs kubectl to completion (off the runtime's threads), returning stdout.
    async fn run(&self, args: &[&str], stdin: Option<&str>) -> String {
        let mut cmd = self.command(args);
        let stdin = stdin.map(str::to_string);
        let out = tokio::task::spawn_blocking(move || {
            cmd.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = cmd.spawn().expect("kubectl runs");
            if let Some(input) = stdin {
                child
                    .stdin
                    .take()
                    .unwrap()
                    .write_all(input.as_bytes())
                    .unwrap();
            }
            child.wait_with_output().unwrap()
        })
        .await
        .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\nstdout: {stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }
}

/// Kills the watching kubectl even when the test fails.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const SERVICE: &str = "apiVersion: v1
kind: Service
metadata:
  name: web
  labels: {app: web}
spec:
  selector: {app: web}
  ports:
  - name: http
    port: 80
    targetPort: 8080
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_against_the_server() {
    let server = start(config()).await;
    let h = server.handle().clone();
    h.apply(node("n1")).unwrap();
    let mut n2 = node("n2");
    n2["status"]["conditions"][0]["status"] = json!("False");
    n2["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] = json!("");
    h.apply(n2).unwrap();
    h.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}))
        .unwrap();
    for (ns, name) in [("default", "a"), ("team-a", "b"), ("team-a", "c")] {
        let mut p = pod(ns, name, "n1", json!({"app": name}));
        p["status"] = json!({"phase": "Running", "podIP": "10.244.0.9"});
        h.apply(p).unwrap();
    }
    let k = Kubectl::new(&server.url());

    let nodes = k.run(&["get", "nodes"], None).await;
    let rows: Vec<Vec<&str>> = nodes
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
        "{nodes}"
    );
    assert_eq!(&rows[1][..3], ["n1", "Ready", "<none>"], "{nodes}");
    assert_eq!(
        &rows[2][..3],
        ["n2", "NotReady", "control-plane"],
        "{nodes}"
    );

    let all: Value =
        serde_json::from_str(&k.run(&["get", "pods", "-A", "-o", "json"], None).await).unwrap();
    assert_eq!(all["kind"], "List");
    let names: Vec<_> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(all["items"][1]["status"]["phase"], "Running");
    let wide = k
        .run(&["get", "pods", "-n", "team-a", "-o", "wide"], None)
        .await;
    assert!(wide.contains("10.244.0.9") && wide.contains("n1"), "{wide}");

    let out = k.run(&["apply", "-f", "-"], Some(SERVICE)).await;
    assert_eq!(out.trim(), "service/web created");
    let first = h.get("v1", "Service", "default", "web").unwrap();
    let ip = first["spec"]["clusterIP"].as_str().unwrap().to_string();
    assert!(ip.starts_with("10.96."));
    let changed = SERVICE.replace("targetPort: 8080", "targetPort: 9090") + "  type: NodePort\n";
    let out = k.run(&["apply", "-f", "-"], Some(&changed)).await;
    assert_eq!(out.trim(), "service/web configured");
    let second = h.get("v1", "Service", "default", "web").unwrap();
    assert_eq!(second["spec"]["ports"][0]["targetPort"], 9090);
    assert_eq!(
        second["spec"]["clusterIP"],
        ip.as_str(),
        "the cluster IP survives the apply"
    );
    assert!(second["spec"]["ports"][0]["nodePort"].as_u64().is_some());
    assert!(
        second["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );
    let out = k.run(&["apply", "-f", "-"], Some(&changed)).await;
    assert_eq!(out.trim(), "service/web unchanged");

    // A watch sees a change made elsewhere.
    let mut watch = ChildGuard(
        k.command(&["get", "services", "web", "--watch", "--output-watch-events"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let (tx, rx) = mpsc::channel();
    let stdout = watch.0.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let mut wait_for = |want: &str| -> String {
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("no {want:?} line from kubectl --watch; saw {seen:?}"));
            seen.push(line.clone());
            if line.starts_with(want) {
                return line;
            }
        }
    };
    wait_for("ADDED");
    // kubectl watches one object from resourceVersion 0 and skips the first (synthetic)
    // event, so the change must come after its watch is open, as on a real server.
    for _ in 0..500 {
        if h.requests(0)
            .iter()
            .any(|r| r.attributes.verb == "watch" && r.attributes.resource == "services")
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut svc = h.get("v1", "Service", "default", "web").unwrap();
    svc["spec"]["type"] = json!("ClusterIP");
    svc["spec"]["ports"][0]
        .as_object_mut()
        .unwrap()
        .remove("nodePort");
    h.apply(svc).unwrap();
    let line = wait_for("MODIFIED");
    assert!(
        line.contains("ClusterIP") && line.contains("80/TCP"),
        "{line}"
    );
    drop(watch);

    let out = k
        .run(&["taint", "nodes", "n1", "dedicated=weft:NoSchedule"], None)
        .await;
    assert_eq!(out.trim(), "node/n1 tainted");
    let n1 = h.get("v1", "Node", "", "n1").unwrap();
    assert_eq!(
        n1["spec"]["taints"],
        json!([{"key": "dedicated", "value": "weft", "effect": "NoSchedule"}])
    );
    let out = k.run(&["taint", "nodes", "n1", "dedicated-"], None).await;
    assert_eq!(out.trim(), "node/n1 untainted");

    // kubectl (clientcmd) attaches credentials only to TLS transports: over plain HTTP its
    // token is never sent, so the record shows every kubectl request as anonymous.
    let record = h.requests(0);
    let others: Vec<_> = record
        .iter()
        .filter(|r| r.user != "system:anonymous")
        .collect();
    assert!(others.is_empty(), "{others:?}");
    assert!(record
        .iter()
        .any(|r| r.attributes.verb == "patch" && r.attributes.resource == "nodes"));
    server.shutdown().await;
}
