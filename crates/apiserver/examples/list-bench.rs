//! Rough scale check (not a test): 1,000 nodes and 50,000 realistic pods (~5 KB of JSON
//! each), then kube-rs lists every pod in pages of 500, beside the same list in one page.
//! `cargo run --release -p weft-apiserver --example list-bench [pods]`

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::{json, Value};
use std::time::Instant;
use weft_apiserver::{ApiServer, Config, Listen};

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb: f64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

fn pod(i: usize, nodes: usize) -> Value {
    let ns = format!("ns-{}", i % 50);
    let app = format!("app-{}", i % 997);
    let node = format!("node-{:04}", i % nodes);
    let ip = format!("10.{}.{}.{}", 64 + (i >> 16) % 64, (i >> 8) & 255, i & 255);
    let hash = format!("{:010x}", i * 2_654_435_761 % 0xff_ffff_ffff);
    let time = "2026-01-01T00:00:00Z";
    let cond = |t: &str| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": time});
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("{app}-{hash}-{i}"), "namespace": ns,
            "labels": {"app": app, "pod-template-hash": hash, "tier": "backend", "version": "v2"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": time, "prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{app}-{hash}"),
                "uid": format!("7f3c1a2e-0000-4000-8000-{:012x}", i), "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [
                {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": time, "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}},
                   "f:ownerReferences": {".": {}, "k:{\"uid\":\"x\"}": {}}},
                   "f:spec": {"f:containers": {"k:{\"name\":\"main\"}": {".": {}, "f:env": {}, "f:image": {}, "f:imagePullPolicy": {},
                     "f:name": {}, "f:ports": {}, "f:resources": {}, "f:terminationMessagePath": {}, "f:volumeMounts": {}}},
                   "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {}, "f:schedulerName": {}, "f:securityContext": {},
                   "f:terminationGracePeriodSeconds": {}, "f:volumes": {}}}},
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": time, "fieldsType": "FieldsV1", "subresource": "status",
                 "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {}, "f:hostIP": {}, "f:hostIPs": {}, "f:phase": {},
                   "f:podIP": {}, "f:podIPs": {".": {}, "k:{\"ip\":\"x\"}": {".": {}, "f:ip": {}}}, "f:startTime": {}}}}
            ]
        },
        "spec": {
            "nodeName": node, "serviceAccountName": "default", "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
            "containers": [{
                "name": "main", "image": format!("registry.example/{app}:1.2.3"), "imagePullPolicy": "IfNotPresent",
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}, {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
                "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                        {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}},
                        {"name": "LOG_LEVEL", "value": "info"},
                        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}},
                        {"name": "GOMAXPROCS", "valueFrom": {"resourceFieldRef": {"containerName": "main", "resource": "limits.cpu", "divisor": "1"}}},
                        {"name": "UPSTREAM_URL", "value": format!("http://{app}-upstream.{ns}.svc.cluster.local:8080/api/v1")},
                        {"name": "FEATURE_FLAGS", "value": "alpha=false,beta=true,gamma=true,delta=false"}],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                "volumeMounts": [{"name": "config", "mountPath": "/etc/app"},
                                 {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080, "scheme": "HTTP"}, "periodSeconds": 10, "timeoutSeconds": 1,
                                   "successThreshold": 1, "failureThreshold": 3}
            }],
            "volumes": [{"name": "config", "configMap": {"name": format!("{app}-config"), "defaultMode": 420}},
                        {"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]
        },
        "status": {
            "phase": "Running", "hostIP": "192.0.2.10", "hostIPs": [{"ip": "192.0.2.10"}], "podIP": ip, "podIPs": [{"ip": ip}],
            "startTime": time, "qosClass": "Burstable",
            "conditions": [cond("PodReadyToStartContainers"), cond("Initialized"), cond("Ready"), cond("ContainersReady"), cond("PodScheduled")],
            "containerStatuses": [{"name": "main", "ready": true, "started": true, "restartCount": 0,
                "image": format!("registry.example/{app}:1.2.3"), "imageID": format!("registry.example/{app}@sha256:{:064x}", i),
                "containerID": format!("containerd://{:064x}", i * 7919),
                "state": {"running": {"startedAt": time}}, "lastState": {}}]
        }
    })
}

fn main() {
    let pods: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(50_000);
    let nodes = 1_000;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let before = rss_mib();
        let server = ApiServer::new(Config { watch_history: 10_000, ..Config::default() })
            .start(vec![Listen::Addr("127.0.0.1:0".parse().unwrap())], None)
            .await
            .unwrap();
        let h = server.handle();
        for n in 0..50 {
            h.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("ns-{n}")}})).unwrap();
        }
        for n in 0..nodes {
            h.create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("node-{n:04}")}})).unwrap();
        }
        let size = serde_json::to_vec(&pod(12_345, nodes)).unwrap().len();
        let t = Instant::now();
        for i in 0..pods {
            h.apply(pod(i, nodes)).unwrap();
        }
        let seeded = t.elapsed();
        let loaded = rss_mib();
        let client = kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
        let api: Api<Pod> = Api::all(client);
        let mut samples = Vec::new();
        let mut whole = Vec::new();
        let mut raw = Vec::new();
        let raw_client = kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
        for _ in 0..3 {
            // The server's share: the same pages fetched as text, not decoded.
            let t = Instant::now();
            let mut token = String::new();
            loop {
                let uri = format!("/api/v1/pods?limit=500&continue={token}");
                let req = http::Request::get(uri).body(Vec::new()).unwrap();
                let text = raw_client.request_text(req).await.unwrap();
                // The list metadata comes first: read the token without decoding the items.
                let head = &text[..text.len().min(512)];
                token = head
                    .split_once("\"continue\":\"")
                    .and_then(|(_, rest)| rest.split_once('"'))
                    .map(|(t, _)| t.to_string())
                    .unwrap_or_default();
                if token.is_empty() {
                    break;
                }
            }
            raw.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            let mut count = 0;
            let mut token: Option<String> = None;
            loop {
                let mut lp = ListParams::default().limit(500);
                if let Some(t) = &token {
                    lp = lp.continue_token(t);
                }
                let page = api.list(&lp).await.unwrap();
                count += page.items.len();
                token = page.metadata.continue_.filter(|c| !c.is_empty());
                if token.is_none() {
                    break;
                }
            }
            assert_eq!(count, pods);
            samples.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            assert_eq!(api.list(&ListParams::default()).await.unwrap().items.len(), pods);
            whole.push(t.elapsed().as_secs_f64());
        }
        samples.sort_by(f64::total_cmp);
        whole.sort_by(f64::total_cmp);
        raw.sort_by(f64::total_cmp);
        println!("pods: {pods} of ~{size} bytes on {nodes} nodes; seeding through the handle took {:.1}s", seeded.as_secs_f64());
        println!("RSS: {before:.0} MiB at start, {loaded:.0} MiB loaded, {:.0} MiB after the lists", rss_mib());
        println!(
            "kube-rs paged list (limit 500): median {:.2}s (min {:.2}, max {:.2}); one unpaged list (baseline): median {:.2}s; ratio {:.2}",
            samples[1], samples[0], samples[2], whole[1], samples[1] / whole[1]
        );
        println!("the same pages fetched as JSON text (server and transfer only): median {:.2}s", raw[1]);
        server.shutdown().await;
    });
}
