//! Discovery as kubectl 1.35 and kube-rs read it: `/version`, the legacy documents
//! (`/api`, `/api/v1`, `/apis`, `/apis/<group>`, `/apis/<group>/<version>`) and the
//! aggregated v2 documents (`APIGroupDiscoveryList`) kubectl asks for first.

use serde_json::{json, Value};

use crate::resources::{ResourceDef, Resources};

pub const AGGREGATED_V2: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
pub const AGGREGATED_V2BETA1: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

pub fn version(git_version: &str) -> Value {
    let trimmed = git_version.trim_start_matches('v');
    let mut parts = trimmed.split('.');
    let major = parts.next().unwrap_or("1");
    let minor = parts.next().unwrap_or("0");
    json!({
        "major": major,
        "minor": minor,
        "emulationMajor": major,
        "emulationMinor": minor,
        "minCompatibilityMajor": major,
        "minCompatibilityMinor": minor,
        "gitVersion": git_version,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.25.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

fn subresource_verbs(sub: &str) -> Vec<&'static str> {
    match sub {
        "status" => vec!["get", "patch", "update"],
        _ => vec!["get"],
    }
}

fn legacy_resources(defs: &[&ResourceDef]) -> Vec<Value> {
    let mut out = Vec::new();
    for d in defs {
        let mut r = json!({
            "name": d.plural,
            "singularName": d.singular,
            "namespaced": d.namespaced,
            "kind": d.kind,
            "verbs": d.verbs,
        });
        if !d.short_names.is_empty() {
            r["shortNames"] = json!(d.short_names);
        }
        if !d.categories.is_empty() {
            r["categories"] = json!(d.categories);
        }
        out.push(r);
        for sub in &d.subresources {
            out.push(json!({
                "name": format!("{}/{sub}", d.plural),
                "singularName": "",
                "namespaced": d.namespaced,
                "kind": d.kind,
                "verbs": subresource_verbs(sub),
            }));
        }
    }
    out
}

fn in_group_version<'a>(
    resources: &'a Resources,
    group: &str,
    version: &str,
) -> Vec<&'a ResourceDef> {
    resources
        .all()
        .iter()
        .map(|d| d.as_ref())
        .filter(|d| d.group == group && d.version == version)
        .collect()
}

/// `/api/v1` or `/apis/<group>/<version>`; `None` for an unknown group version.
pub fn resource_list(resources: &Resources, group: &str, version: &str) -> Option<Value> {
    let defs = in_group_version(resources, group, version);
    if defs.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": legacy_resources(&defs),
    }))
}

pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]
    })
}

fn group_doc(group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({
        "name": group,
        "versions": vs,
        "preferredVersion": vs[0],
    })
}

pub fn api_group_list(resources: &Resources) -> Value {
    let groups: Vec<Value> = resources
        .groups()
        .iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, v)| group_doc(g, v))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn api_group(resources: &Resources, group: &str) -> Option<Value> {
    let (_, versions) = resources
        .groups()
        .into_iter()
        .find(|(g, _)| g == group && !g.is_empty())?;
    let mut doc = group_doc(group, &versions);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

fn aggregated_resource(d: &ResourceDef) -> Value {
    let kind = json!({"group": d.group, "version": d.version, "kind": d.kind});
    let mut r = json!({
        "resource": d.plural,
        "responseKind": kind,
        "scope": if d.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": d.singular,
        "verbs": d.verbs,
    });
    if !d.short_names.is_empty() {
        r["shortNames"] = json!(d.short_names);
    }
    if !d.categories.is_empty() {
        r["categories"] = json!(d.categories);
    }
    if !d.subresources.is_empty() {
        r["subresources"] = json!(d
            .subresources
            .iter()
            .map(|s| json!({"subresource": s, "responseKind": kind, "verbs": subresource_verbs(s)}))
            .collect::<Vec<_>>());
    }
    r
}

/// The aggregated document of `/api` (`core == true`) or `/apis`, as `apiVersion`
/// (`apidiscovery.k8s.io/v2` or `v2beta1`).
pub fn aggregated(resources: &Resources, core: bool, api_version: &str) -> Value {
    let items: Vec<Value> = resources
        .groups()
        .iter()
        .filter(|(g, _)| g.is_empty() == core)
        .map(|(g, versions)| {
            let vs: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let defs = in_group_version(resources, g, v);
                    json!({
                        "version": v,
                        "resources": defs.iter().map(|d| aggregated_resource(d)).collect::<Vec<_>>(),
                        "freshness": "Current",
                    })
                })
                .collect();
            let meta = if g.is_empty() {
                json!({"creationTimestamp": null})
            } else {
                json!({"name": g, "creationTimestamp": null})
            };
            json!({"metadata": meta, "versions": vs})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": api_version,
        "metadata": {},
        "items": items,
    })
}
