//! Server-side printing: the `meta.k8s.io/v1` Table kubectl asks for (`Accept: ...;as=Table`),
//! with the columns `kubectl get` shows for each kind, and `PartialObjectMetadata` for
//! metadata-only clients.

use serde_json::{json, Value};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::meta::parse_time;

/// Go's `duration.HumanDuration`, which the AGE columns use.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

fn age(obj: &Value, field: &Value) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let _ = obj;
    match field.as_str().and_then(parse_time) {
        Some(t) => human_duration(now - t),
        None => "<unknown>".into(),
    }
}

fn s(v: &Value) -> String {
    v.as_str().unwrap_or("").to_string()
}

fn none_if_empty(v: String) -> String {
    if v.is_empty() {
        "<none>".into()
    } else {
        v
    }
}

struct Column {
    name: &'static str,
    ty: &'static str,
    priority: u8,
}

const fn col(name: &'static str, ty: &'static str, priority: u8) -> Column {
    Column { name, ty, priority }
}

fn columns(kind: &str) -> Vec<Column> {
    match kind {
        "Node" => vec![
            col("Name", "string", 0),
            col("Status", "string", 0),
            col("Roles", "string", 0),
            col("Age", "string", 0),
            col("Version", "string", 0),
            col("Internal-IP", "string", 1),
            col("External-IP", "string", 1),
            col("OS-Image", "string", 1),
            col("Kernel-Version", "string", 1),
            col("Container-Runtime", "string", 1),
        ],
        "Pod" => vec![
            col("Name", "string", 0),
            col("Ready", "string", 0),
            col("Status", "string", 0),
            col("Restarts", "string", 0),
            col("Age", "string", 0),
            col("IP", "string", 1),
            col("Node", "string", 1),
            col("Nominated Node", "string", 1),
            col("Readiness Gates", "string", 1),
        ],
        "Service" => vec![
            col("Name", "string", 0),
            col("Type", "string", 0),
            col("Cluster-IP", "string", 0),
            col("External-IP", "string", 0),
            col("Port(s)", "string", 0),
            col("Age", "string", 0),
            col("Selector", "string", 1),
        ],
        "Namespace" => vec![
            col("Name", "string", 0),
            col("Status", "string", 0),
            col("Age", "string", 0),
        ],
        "ConfigMap" => vec![
            col("Name", "string", 0),
            col("Data", "integer", 0),
            col("Age", "string", 0),
        ],
        "ServiceAccount" => vec![
            col("Name", "string", 0),
            col("Secrets", "integer", 0),
            col("Age", "string", 0),
        ],
        "Event" => vec![
            col("Last Seen", "string", 0),
            col("Type", "string", 0),
            col("Reason", "string", 0),
            col("Object", "string", 0),
            col("Message", "string", 0),
        ],
        "EndpointSlice" => vec![
            col("Name", "string", 0),
            col("AddressType", "string", 0),
            col("Ports", "string", 0),
            col("Endpoints", "string", 0),
            col("Age", "string", 0),
        ],
        "NetworkPolicy" => vec![
            col("Name", "string", 0),
            col("Pod-Selector", "string", 0),
            col("Age", "string", 0),
        ],
        "Lease" => vec![
            col("Name", "string", 0),
            col("Holder", "string", 0),
            col("Age", "string", 0),
        ],
        _ => vec![col("Name", "string", 0), col("Age", "string", 0)],
    }
}

fn selector_string(sel: &Value) -> String {
    let mut parts: Vec<String> = sel["matchLabels"]
        .as_object()
        .or(sel
            .as_object()
            .filter(|_| sel.get("matchLabels").is_none() && sel.get("matchExpressions").is_none()))
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    if let Some(exprs) = sel["matchExpressions"].as_array() {
        for e in exprs {
            let values: Vec<String> = e["values"]
                .as_array()
                .map(|a| a.iter().map(s).collect())
                .unwrap_or_default();
            let op = s(&e["operator"]);
            parts.push(match op.as_str() {
                "Exists" => s(&e["key"]),
                "DoesNotExist" => format!("!{}", s(&e["key"])),
                _ => format!(
                    "{} {} ({})",
                    s(&e["key"]),
                    op.to_lowercase(),
                    values.join(",")
                ),
            });
        }
    }
    parts.join(",")
}

fn node_cells(o: &Value) -> Vec<Value> {
    let ready = o["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .map(|c| match c["status"].as_str() {
            Some("True") => "Ready",
            Some("False") => "NotReady",
            _ => "Unknown",
        })
        .unwrap_or("Unknown");
    let mut status = ready.to_string();
    if o["spec"]["unschedulable"] == json!(true) {
        status.push_str(",SchedulingDisabled");
    }
    let mut roles: Vec<String> = o["metadata"]["labels"]
        .as_object()
        .map(|l| {
            l.keys()
                .filter_map(|k| {
                    k.strip_prefix("node-role.kubernetes.io/")
                        .map(str::to_string)
                })
                .filter(|r| !r.is_empty())
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    let addr = |ty: &str| {
        o["status"]["addresses"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["type"] == ty))
            .map(|x| s(&x["address"]))
            .unwrap_or_default()
    };
    let info = &o["status"]["nodeInfo"];
    vec![
        json!(s(&o["metadata"]["name"])),
        json!(status),
        json!(none_if_empty(roles.join(","))),
        json!(age(o, &o["metadata"]["creationTimestamp"])),
        json!(s(&info["kubeletVersion"])),
        json!(none_if_empty(addr("InternalIP"))),
        json!(none_if_empty(addr("ExternalIP"))),
        json!(none_if_empty(s(&info["osImage"]))),
        json!(none_if_empty(s(&info["kernelVersion"]))),
        json!(none_if_empty(s(&info["containerRuntimeVersion"]))),
    ]
}

fn pod_cells(o: &Value) -> Vec<Value> {
    let total = o["spec"]["containers"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0);
    let statuses = o["status"]["containerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let ready = statuses
        .iter()
        .filter(|c| c["ready"] == json!(true))
        .count();
    let restarts: i64 = statuses
        .iter()
        .filter_map(|c| c["restartCount"].as_i64())
        .sum();
    let mut reason = o["status"]["reason"]
        .as_str()
        .or(o["status"]["phase"].as_str())
        .unwrap_or("")
        .to_string();
    for c in &statuses {
        if let Some(r) = c["state"]["waiting"]["reason"]
            .as_str()
            .filter(|r| !r.is_empty())
        {
            reason = r.to_string();
        } else if let Some(r) = c["state"]["terminated"]["reason"]
            .as_str()
            .filter(|r| !r.is_empty())
        {
            reason = r.to_string();
        }
    }
    if o["metadata"].get("deletionTimestamp").is_some() {
        reason = "Terminating".into();
    }
    let gates = o["spec"]["readinessGates"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0);
    vec![
        json!(s(&o["metadata"]["name"])),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts.to_string()),
        json!(age(o, &o["metadata"]["creationTimestamp"])),
        json!(none_if_empty(s(&o["status"]["podIP"]))),
        json!(none_if_empty(s(&o["spec"]["nodeName"]))),
        json!(none_if_empty(s(&o["status"]["nominatedNodeName"]))),
        json!(if gates == 0 {
            "<none>".to_string()
        } else {
            format!("0/{gates}")
        }),
    ]
}

fn service_cells(o: &Value) -> Vec<Value> {
    let spec = &o["spec"];
    let ty = spec["type"].as_str().unwrap_or("ClusterIP");
    let external = match ty {
        "ExternalName" => s(&spec["externalName"]),
        "LoadBalancer" => {
            let ingress: Vec<String> = o["status"]["loadBalancer"]["ingress"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|i| {
                            i["ip"]
                                .as_str()
                                .or(i["hostname"].as_str())
                                .unwrap_or("")
                                .to_string()
                        })
                        .collect()
                })
                .unwrap_or_default();
            if ingress.is_empty() {
                "<pending>".into()
            } else {
                ingress.join(",")
            }
        }
        _ => none_if_empty(
            spec["externalIPs"]
                .as_array()
                .map(|a| a.iter().map(s).collect::<Vec<_>>().join(","))
                .unwrap_or_default(),
        ),
    };
    let ports: Vec<String> = spec["ports"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|p| {
                    let proto = p["protocol"].as_str().unwrap_or("TCP");
                    match p["nodePort"].as_u64() {
                        Some(n) => format!("{}:{n}/{proto}", p["port"]),
                        None => format!("{}/{proto}", p["port"]),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    vec![
        json!(s(&o["metadata"]["name"])),
        json!(ty),
        json!(none_if_empty(s(&spec["clusterIP"]))),
        json!(external),
        json!(none_if_empty(ports.join(","))),
        json!(age(o, &o["metadata"]["creationTimestamp"])),
        json!(none_if_empty(selector_string(&spec["selector"]))),
    ]
}

fn cells(kind: &str, o: &Value) -> Vec<Value> {
    let name = json!(s(&o["metadata"]["name"]));
    let created = age(o, &o["metadata"]["creationTimestamp"]);
    match kind {
        "Node" => node_cells(o),
        "Pod" => pod_cells(o),
        "Service" => service_cells(o),
        "Namespace" => vec![name, json!(s(&o["status"]["phase"])), json!(created)],
        "ConfigMap" => {
            let n = o["data"].as_object().map(|m| m.len()).unwrap_or(0)
                + o["binaryData"].as_object().map(|m| m.len()).unwrap_or(0);
            vec![name, json!(n), json!(created)]
        }
        "ServiceAccount" => vec![
            name,
            json!(o["secrets"].as_array().map(Vec::len).unwrap_or(0)),
            json!(created),
        ],
        "Event" => {
            // core/v1 and events.k8s.io/v1 name the same things differently.
            let last = [
                &o["lastTimestamp"],
                &o["deprecatedLastTimestamp"],
                &o["eventTime"],
                &o["metadata"]["creationTimestamp"],
            ]
            .into_iter()
            .find(|v| v.is_string())
            .map(|v| age(o, v))
            .unwrap_or_else(|| "<unknown>".into());
            let inv = if o["involvedObject"].is_object() {
                &o["involvedObject"]
            } else {
                &o["regarding"]
            };
            let message = o["message"].as_str().or(o["note"].as_str()).unwrap_or("");
            vec![
                json!(last),
                json!(s(&o["type"])),
                json!(s(&o["reason"])),
                json!(format!(
                    "{}/{}",
                    s(&inv["kind"]).to_lowercase(),
                    s(&inv["name"])
                )),
                json!(message),
            ]
        }
        "EndpointSlice" => {
            let ports: Vec<String> = o["ports"]
                .as_array()
                .map(|a| a.iter().map(|p| p["port"].to_string()).collect())
                .unwrap_or_default();
            let addrs: Vec<String> = o["endpoints"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .flat_map(|e| e["addresses"].as_array().cloned().unwrap_or_default())
                        .map(|x| s(&x))
                        .collect()
                })
                .unwrap_or_default();
            let shown = if addrs.len() > 3 {
                format!("{} + {} more...", addrs[..3].join(","), addrs.len() - 3)
            } else {
                addrs.join(",")
            };
            vec![
                name,
                json!(s(&o["addressType"])),
                json!(if ports.is_empty() {
                    "<unset>".to_string()
                } else {
                    ports.join(",")
                }),
                json!(if shown.is_empty() {
                    "<unset>".to_string()
                } else {
                    shown
                }),
                json!(created),
            ]
        }
        "NetworkPolicy" => {
            let sel = selector_string(&o["spec"]["podSelector"]);
            vec![
                name,
                json!(if sel.is_empty() {
                    "<none>".to_string()
                } else {
                    sel
                }),
                json!(created),
            ]
        }
        "Lease" => vec![name, json!(s(&o["spec"]["holderIdentity"])), json!(created)],
        _ => vec![name, json!(created)],
    }
}

/// `includeObject`: what each row carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

pub fn partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj["metadata"].clone(),
    })
}

/// A Table of `objects` (all of one kind), with list metadata.
pub fn table(kind: &str, objects: &[Value], list_meta: Value, include: IncludeObject) -> Value {
    let defs: Vec<Value> = columns(kind)
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "type": c.ty,
                "format": if c.name == "Name" { "name" } else { "" },
                "description": "",
                "priority": c.priority,
            })
        })
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut row = json!({"cells": cells(kind, o)});
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => row["object"] = partial_metadata(o),
                IncludeObject::Object => row["object"] = o.clone(),
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": defs,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_like_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(150), "2m30s");
        assert_eq!(human_duration(3600), "60m");
        assert_eq!(human_duration(4 * 3600 + 60), "4h1m");
        assert_eq!(human_duration(3 * 86_400), "3d");
        assert_eq!(human_duration(30 * 86_400), "30d");
    }

    #[test]
    fn node_and_service_rows() {
        let node = json!({"metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/control-plane": ""}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.35.0"}}});
        let c = cells("Node", &node);
        assert_eq!(c[1], "Ready,SchedulingDisabled");
        assert_eq!(c[2], "control-plane");
        let svc = json!({"metadata": {"name": "s"}, "spec": {"type": "NodePort", "clusterIP": "10.96.0.5",
            "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}], "selector": {"app": "x"}}});
        let c = cells("Service", &svc);
        assert_eq!(c[4], "80:30080/TCP");
        assert_eq!(c[6], "app=x");
    }
}
