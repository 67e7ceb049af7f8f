//! A synthetic cluster with objects shaped like the API server's: managedFields,
//! ownerReferences, conditions, container statuses, about 5 KB of JSON per Pod. Every
//! address comes from documentation or the lab's ranges; nothing here is ever routed.

use serde_json::{json, Value};

/// The pods' cluster CIDR (the lab's).
pub const POD_CIDR: &str = "10.244.0.0/16";
/// The Services' CIDR.
pub const SERVICE_CIDR: &str = "10.96.0.0/12";

/// How big the cluster is.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub nodes: u32,
    pub pods: u32,
    pub services: u32,
}

const TIME: &str = "2026-11-02T10:00:00Z";

fn uid(kind: u32, n: u32) -> String {
    format!("{kind:08x}-0000-4000-8000-{n:012x}")
}

/// Most nodes: the pod CIDR holds 1,024 /26s.
pub const MAX_NODES: u32 = 1024;

/// Node `i`'s pod CIDR (0-based): the i-th /26 of the pod CIDR.
pub fn node_cidr(i: u32) -> String {
    format!("10.244.{}.{}/26", i / 4, (i % 4) * 64)
}

/// Pod `i`'s address, inside its node's /26.
fn pod_ip(i: u32, nodes: u32) -> String {
    let nodes = nodes.max(1);
    let (node, k) = (i % nodes, (i / nodes) % 62);
    format!("10.244.{}.{}", node / 4, (node % 4) * 64 + 1 + k)
}

/// Node `i`'s underlay address (198.18.0.0/15, the benchmarking range).
pub fn node_ip(i: u32) -> String {
    format!("198.18.{}.{}", (i + 1) / 250, (i + 1) % 250 + 1)
}

pub fn node_name(i: u32) -> String {
    format!("node{i}")
}

pub fn node(i: u32) -> Value {
    let name = node_name(i);
    let condition = |t: &str, s: &str, reason: &str| {
        json!({"type": t, "status": s, "reason": reason, "message": format!("kubelet {reason}"),
               "lastHeartbeatTime": TIME, "lastTransitionTime": TIME})
    };
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name, "uid": uid(1, i), "creationTimestamp": TIME,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                       "kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "m5.large",
                       "topology.kubernetes.io/zone": format!("zone-{}", i % 3)},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                            "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
            "managedFields": [{"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": TIME,
                               "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:conditions": {}, "f:addresses": {}}}}]
        },
        "spec": {"podCIDR": node_cidr(i), "podCIDRs": [node_cidr(i)], "providerID": format!("synthetic://{name}")},
        "status": {
            "addresses": [{"type": "InternalIP", "address": node_ip(i)}, {"type": "Hostname", "address": name}],
            "capacity": {"cpu": "2", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "1900m", "memory": "7Gi", "pods": "110"},
            "conditions": [condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                           condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                           condition("PIDPressure", "False", "KubeletHasSufficientPID"),
                           condition("Ready", "True", "KubeletReady")],
            "nodeInfo": {"kubeletVersion": "v1.33.0", "containerRuntimeVersion": "containerd://1.7.0",
                         "kernelVersion": "6.18.0", "osImage": "Debian GNU/Linux 12", "architecture": "amd64",
                         "operatingSystem": "linux", "machineID": format!("{i:032x}"), "systemUUID": uid(9, i),
                         "bootID": uid(8, i), "kubeProxyVersion": "", "containerRuntimeVersion2": ""},
            "images": [{"names": ["registry.example/app@sha256:0123456789abcdef"], "sizeBytes": 123456789}]
        }
    })
}

pub fn namespace(i: u32) -> Value {
    let name = format!("ns{i}");
    json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "uid": uid(2, i), "creationTimestamp": TIME,
                     "labels": {"kubernetes.io/metadata.name": name, "team": format!("team{}", i % 7)}},
        "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}
    })
}

/// Pods per deployment: pods of one deployment share their labels and ports.
pub const REPLICAS: u32 = 5;
pub const NAMESPACES: u32 = 50;

/// The name of pod `i`: its deployment's name, its ReplicaSet's hash and an index.
pub fn pod_name(i: u32) -> String {
    let deployment = i / REPLICAS;
    format!(
        "app{deployment}-{:010x}-{:05}",
        deployment.wrapping_mul(2654435761),
        i % REPLICAS
    )
}

/// Pod `i` (0-based), on node `i % nodes`, with `generation` folded into one label so the
/// benchmark can change a pod in a way the store sees.
pub fn pod(i: u32, nodes: u32, generation: u32) -> Value {
    let deployment = i / REPLICAS;
    let ns = format!("ns{}", deployment % NAMESPACES);
    let app = format!("app{deployment}");
    let hash = format!("{:010x}", deployment.wrapping_mul(2654435761));
    let name = pod_name(i);
    let node = i % nodes.max(1);
    let ip = pod_ip(i, nodes);
    let container = |c: &str, port: u32| {
        json!({
            "name": c, "image": format!("registry.example/{app}/{c}:v1.2.3"), "imagePullPolicy": "IfNotPresent",
            "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"},
                      {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
            "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                    {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}},
                    {"name": "LOG_LEVEL", "value": "info"}],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
            "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": port, "scheme": "HTTP"}, "periodSeconds": 10,
                              "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": port, "scheme": "HTTP"}, "periodSeconds": 5,
                               "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"
        })
    };
    let status = |c: &str| {
        json!({"name": c, "ready": true, "started": true, "restartCount": 0,
               "image": format!("registry.example/{app}/{c}:v1.2.3"),
               "imageID": "registry.example/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
               "containerID": format!("containerd://{:064x}", u64::from(i) * 7919),
               "state": {"running": {"startedAt": TIME}}, "lastState": {}})
    };
    let condition = |t: &str| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": TIME});
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": ns, "uid": uid(3, i), "creationTimestamp": TIME,
            "generateName": format!("{app}-{hash}-"),
            "labels": {"app": app, "pod-template-hash": hash, "tier": if deployment.is_multiple_of(2) { "frontend" } else { "backend" },
                       "weft.dev/bench-generation": generation.to_string()},
            "annotations": {"kubectl.kubernetes.io/restartedAt": TIME},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{app}-{hash}"),
                                 "uid": uid(4, deployment), "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [
                {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": TIME,
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}},
                     "f:ownerReferences": {".": {}, "k:{\"uid\":\"x\"}": {}}}, "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {}, "f:ports": {}}}}}},
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": TIME, "subresource": "status",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}}},
                     "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {}, "f:podIPs": {".": {}, "k:{\"ip\":\"x\"}": {}}, "f:startTime": {}}}}
            ]
        },
        "spec": {
            "containers": [container("app", 8080), container("sidecar", 8081)],
            "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "serviceAccount": "default", "nodeName": node_name(node),
            "securityContext": {}, "schedulerName": "default-scheduler", "priority": 0, "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]
        },
        "status": {
            "phase": "Running", "hostIP": node_ip(node), "hostIPs": [{"ip": node_ip(node)}],
            "podIP": ip, "podIPs": [{"ip": ip}], "startTime": TIME, "qosClass": "Burstable",
            "conditions": [condition("PodReadyToStartContainers"), condition("Initialized"), condition("Ready"),
                           condition("ContainersReady"), condition("PodScheduled")],
            "containerStatuses": [status("app"), status("sidecar")]
        }
    })
}

/// The Service of deployment `d` (one per deployment, the first `services` deployments).
pub fn service(d: u32) -> Value {
    let ns = format!("ns{}", d % NAMESPACES);
    let name = format!("svc{d}");
    // Past the range's network address and the first few (the API server keeps those).
    let n = d + 16;
    let ip = format!("10.{}.{}.{}", 96 + (n >> 16), (n >> 8) & 0xff, n & 0xff);
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": ns, "uid": uid(5, d), "creationTimestamp": TIME,
                     "labels": {"app": format!("app{d}")},
                     "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "time": TIME,
                                        "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:ports": {}, "f:selector": {}}}}]},
        "spec": {"type": "ClusterIP", "clusterIP": ip, "clusterIPs": [ip], "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                 "selector": {"app": format!("app{d}")}, "sessionAffinity": "None", "internalTrafficPolicy": "Cluster",
                 "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": "http"}]},
        "status": {"loadBalancer": {}}
    })
}

/// The EndpointSlice of Service `d`: its deployment's pods.
pub fn endpoint_slice(d: u32, nodes: u32) -> Value {
    let ns = format!("ns{}", d % NAMESPACES);
    let endpoints: Vec<Value> = (0..REPLICAS)
        .map(|r| {
            let i = d * REPLICAS + r;
            let ip = pod_ip(i, nodes);
            json!({"addresses": [ip], "conditions": {"ready": true, "serving": true, "terminating": false},
                   "nodeName": node_name(i % nodes.max(1)),
                   "targetRef": {"kind": "Pod", "namespace": ns, "name": format!("app{d}-{r}"), "uid": uid(3, i)}})
        })
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("svc{d}-abcde"), "namespace": ns, "uid": uid(6, d),
                     "generateName": format!("svc{d}-"), "creationTimestamp": TIME,
                     "labels": {"kubernetes.io/service-name": format!("svc{d}"),
                                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": format!("svc{d}"), "uid": uid(5, d),
                                          "controller": true, "blockOwnerDeletion": true}]},
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_model::decode::decode_str;
    use weft_model::{NodeSpec, Pod};

    #[test]
    fn objects_are_realistic_and_valid() {
        let text = pod(12345, 1000, 0).to_string();
        assert!(
            (4000..7000).contains(&text.len()),
            "a pod is {} bytes",
            text.len()
        );
        assert!(decode_str::<Pod>(&text).value.is_ok());
        for i in [0, 199, 200, MAX_NODES - 1] {
            let node = decode_str::<NodeSpec>(&node(i).to_string());
            assert!(node.value.is_ok(), "{:?}", node.value);
        }
        assert_eq!(node_cidr(MAX_NODES - 1), "10.244.255.192/26");
    }
}
