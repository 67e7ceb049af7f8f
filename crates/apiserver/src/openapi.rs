//! The OpenAPI v3 documents kubectl reads before `apply`: per group version, the PATCH
//! operations with their `x-kubernetes-group-version-kind` and the `fieldValidation` and
//! `dryRun` query parameters, so kubectl leaves validation to the server (this server
//! accepts unknown fields) and builds its strategic-merge patches from its built-in types.
//! No schemas are published (`components.schemas` is empty); `/openapi/v2` is not served.

use serde_json::{json, Map, Value};

use crate::resources::Resources;

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// A stable hash of the document set, for the `?hash=` kubectl caches by.
fn hash(resources: &Resources) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for d in resources.all() {
        (&d.group, &d.version, &d.plural, &d.subresources).hash(&mut h);
    }
    format!("{:016X}", h.finish())
}

/// `/openapi/v3`: the index of group-version documents.
pub fn index(resources: &Resources) -> Value {
    let h = hash(resources);
    let mut paths = Map::new();
    for (group, versions) in resources.groups() {
        for v in versions {
            let p = gv_path(&group, &v);
            paths.insert(
                p.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={h}")}),
            );
        }
    }
    json!({"paths": paths})
}

/// `/openapi/v3/<api|apis/group>/<version>`; `None` for an unknown group version.
pub fn group_version(resources: &Resources, gv: &str, server_version: &str) -> Option<Value> {
    let defs: Vec<_> = resources
        .all()
        .iter()
        .filter(|d| gv_path(&d.group, &d.version) == gv.trim_matches('/'))
        .collect();
    if defs.is_empty() {
        return None;
    }
    let params = json!([
        {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}}
    ]);
    let mut paths = Map::new();
    for d in defs {
        let prefix = format!("/{}", gv_path(&d.group, &d.version));
        let item = if d.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", d.plural)
        } else {
            format!("{prefix}/{}/{{name}}", d.plural)
        };
        let gvk = json!({"group": d.group, "version": d.version, "kind": d.kind});
        let op = json!({
            "operationId": format!("patch{}", d.kind),
            "parameters": params,
            "responses": {"200": {"description": "OK"}},
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk,
        });
        let mut targets = vec![item.clone()];
        targets.extend(d.subresources.iter().map(|s| format!("{item}/{s}")));
        for t in targets {
            paths.insert(t, json!({"patch": op}));
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": server_version},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}
