//! Create, get, update (409 on a stale resourceVersion), the status subresource, the three
//! patch types on node taints and conditions, delete with finalizers, and the errors.

use crate::common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use serde_json::json;

#[tokio::test]
async fn metadata_is_filled_like_the_real_server() {
    let server = start(config()).await;
    let client = client_for(&server, None);
    let ns: Api<Namespace> = Api::all(client.clone());
    let created = ns
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "team-a"}})).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(created.labels()["kubernetes.io/metadata.name"], "team-a");
    assert_eq!(
        created.status.as_ref().unwrap().phase.as_deref(),
        Some("Active")
    );
    let uid = created.metadata.uid.clone().unwrap();
    assert_eq!(uid.len(), 36);
    let rv: u64 = created.resource_version().unwrap().parse().unwrap();
    assert!(created.metadata.creation_timestamp.is_some());

    // kube-rs' typed objects drop unknown fields; a raw POST keeps them.
    let cms: Api<kube::api::DynamicObject> = Api::namespaced_with(
        client.clone(),
        "team-a",
        &kube::api::ApiResource::erase::<ConfigMap>(&()),
    );
    let cm = cms
        .create(&PostParams::default(), &serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "cfg-"}, "data": {"a": "1"}, "extra": {"kept": true}})).unwrap())
        .await
        .unwrap();
    assert!(cm.name_any().starts_with("cfg-") && cm.name_any().len() == 9);
    assert!(
        cm.resource_version().unwrap().parse::<u64>().unwrap() > rv,
        "one global counter"
    );
    assert!(
        cm.metadata.generation.is_none(),
        "configmaps have no generation"
    );
    // Unknown fields are stored and served back.
    let raw = server
        .handle()
        .get("v1", "ConfigMap", "team-a", &cm.name_any())
        .unwrap();
    assert_eq!(raw["extra"], json!({"kept": true}));

    let pods: Api<Pod> = pods(&client, "team-a");
    let p = pods
        .create(
            &PostParams::default(),
            &serde_json::from_value(pod("team-a", "p", "n1", json!({}))).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(p.metadata.generation, Some(1));
    assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Pending"));
    assert_eq!(
        p.spec.as_ref().unwrap().restart_policy.as_deref(),
        Some("Always")
    );
    let mut changed = p.clone();
    changed.spec.as_mut().unwrap().active_deadline_seconds = Some(5);
    let p2 = pods
        .replace("p", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_eq!(
        p2.metadata.generation,
        Some(2),
        "a spec change bumps generation"
    );
    let mut labelled = p2.clone();
    labelled.labels_mut().insert("x".into(), "y".into());
    let p3 = pods
        .replace("p", &PostParams::default(), &labelled)
        .await
        .unwrap();
    assert_eq!(
        p3.metadata.generation,
        Some(2),
        "a metadata change does not"
    );
    // A write that changes nothing keeps the version and emits no event.
    let p4 = pods
        .replace("p", &PostParams::default(), &p3)
        .await
        .unwrap();
    assert_eq!(p4.resource_version(), p3.resource_version());
    server.shutdown().await;
}

#[tokio::test]
async fn errors_are_real_status_objects() {
    let server = start(config()).await;
    let client = client_for(&server, None);
    let api: Api<Node> = nodes(&client);
    let n: Node = serde_json::from_value(node("n1")).unwrap();
    let created = api.create(&PostParams::default(), &n).await.unwrap();
    let e = api.create(&PostParams::default(), &n).await.unwrap_err();
    assert_eq!(status_code(&e), Some((409, "AlreadyExists".into())));
    let e = api.get("nope").await.unwrap_err();
    assert_eq!(status_code(&e), Some((404, "NotFound".into())));

    // Update with a stale resourceVersion: 409 Conflict.
    let mut first = created.clone();
    first.labels_mut().insert("a".into(), "1".into());
    api.replace("n1", &PostParams::default(), &first)
        .await
        .unwrap();
    let mut stale = created.clone();
    stale.labels_mut().insert("a".into(), "2".into());
    let e = api
        .replace("n1", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), Some((409, "Conflict".into())));

    let pods: Api<Pod> = pods(&client, "missing-ns");
    let e = pods
        .create(
            &PostParams::default(),
            &serde_json::from_value(pod("missing-ns", "p", "n1", json!({}))).unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), Some((404, "NotFound".into())));
    let pods: Api<Pod> = crate::common::pods(&client, "default");
    let e = pods
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "Bad_Name"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})).unwrap())
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), Some((422, "Invalid".into())));
    let e = pods
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "nocontainers"}, "spec": {"containers": []}}),
            )
            .unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), Some((422, "Invalid".into())));
    let e = pods
        .patch(
            "nope",
            &PatchParams::default(),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Pod"})),
        )
        .await
        .unwrap_err();
    assert_eq!(status_code(&e).map(|s| s.0), Some(404));
    server.shutdown().await;
}

#[tokio::test]
async fn patches_of_node_taints_and_conditions() {
    let server = start(config()).await;
    let client = client_for(&server, None);
    let api: Api<Node> = nodes(&client);
    api.create(
        &PostParams::default(),
        &serde_json::from_value(node("n1")).unwrap(),
    )
    .await
    .unwrap();

    // Taints have no merge key: a strategic patch replaces the list.
    let taint = |k: &str| json!({"key": k, "effect": "NoSchedule"});
    api.patch(
        "n1",
        &PatchParams::default(),
        &Patch::Strategic(json!({"spec": {"taints": [taint("a"), taint("b")]}})),
    )
    .await
    .unwrap();
    let n = api
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"taints": [taint("c")]}})),
        )
        .await
        .unwrap();
    let keys: Vec<_> = n
        .spec
        .as_ref()
        .unwrap()
        .taints
        .as_ref()
        .unwrap()
        .iter()
        .map(|t| t.key.clone())
        .collect();
    assert_eq!(keys, ["c"]);
    assert_eq!(
        n.spec.as_ref().unwrap().pod_cidrs.as_deref(),
        Some(&["10.244.0.0/24".to_string()][..])
    );

    // Conditions merge by type through the status subresource; other conditions stay.
    let n = api
        .patch_status(
            "n1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"status": {"conditions": [{"type": "NetworkUnavailable", "status": "False", "reason": "WeftReady"}]}})),
        )
        .await
        .unwrap();
    let types: Vec<_> = n
        .status
        .as_ref()
        .unwrap()
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.type_.clone())
        .collect();
    assert_eq!(types, ["NetworkUnavailable", "Ready", "MemoryPressure"]);
    let n = api
        .patch_status(
            "n1",
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"status": {"conditions": [{"type": "Ready", "$patch": "delete"}]}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        n.status
            .as_ref()
            .unwrap()
            .conditions
            .as_ref()
            .unwrap()
            .len(),
        2
    );

    // A status patch never changes spec; a main-resource patch never changes status.
    let n = api
        .patch_status(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": true}, "status": {"phase": "Running"}})),
        )
        .await
        .unwrap();
    assert_eq!(n.spec.as_ref().unwrap().unschedulable, None);
    assert_eq!(n.status.as_ref().unwrap().phase.as_deref(), Some("Running"));
    let n = api
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": true}, "status": {"phase": "Pending"}})),
        )
        .await
        .unwrap();
    assert_eq!(n.spec.as_ref().unwrap().unschedulable, Some(true));
    assert_eq!(n.status.as_ref().unwrap().phase.as_deref(), Some("Running"));

    // JSON patch (RFC 6902), and a failed test op is refused.
    let n = api
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::<()>::Json(
                serde_json::from_value(
                    json!([{"op": "add", "path": "/spec/taints/-", "value": taint("d")}]),
                )
                .unwrap(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(n.spec.unwrap().taints.unwrap().len(), 2);
    let e = api
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::<()>::Json(
                serde_json::from_value(
                    json!([{"op": "test", "path": "/spec/unschedulable", "value": false}]),
                )
                .unwrap(),
            ),
        )
        .await
        .unwrap_err();
    assert_eq!(status_code(&e).map(|s| s.0), Some(422));

    // Pod status podIPs merge by ip.
    let pods: Api<Pod> = pods(&client, "default");
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod("default", "p", "n1", json!({}))).unwrap(),
    )
    .await
    .unwrap();
    pods.patch_status(
        "p",
        &PatchParams::default(),
        &Patch::Strategic(
            json!({"status": {"podIP": "10.244.0.5", "podIPs": [{"ip": "10.244.0.5"}]}}),
        ),
    )
    .await
    .unwrap();
    let p = pods
        .patch_status(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(json!({"status": {"podIPs": [{"ip": "fd00::5"}]}})),
        )
        .await
        .unwrap();
    let ips: Vec<_> = p
        .status
        .unwrap()
        .pod_ips
        .unwrap()
        .into_iter()
        .map(|i| i.ip)
        .collect();
    assert_eq!(ips, ["fd00::5", "10.244.0.5"]);
    server.shutdown().await;
}

#[tokio::test]
async fn finalizers_hold_deletion_and_namespaces_cascade() {
    let server = start(config()).await;
    let client = client_for(&server, None);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(
            json!({"metadata": {"name": "c", "finalizers": ["example.com/hold"]}}),
        )
        .unwrap(),
    )
    .await
    .unwrap();
    let r = cms.delete("c", &DeleteParams::default()).await.unwrap();
    let held = r.left().expect("the object, still there");
    assert!(held.metadata.deletion_timestamp.is_some());
    cms.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(
        status_code(&cms.get("c").await.unwrap_err()).map(|s| s.0),
        Some(404)
    );

    let ns: Api<Namespace> = Api::all(client.clone());
    ns.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "gone"}})).unwrap(),
    )
    .await
    .unwrap();
    let in_ns: Api<ConfigMap> = Api::namespaced(client.clone(), "gone");
    in_ns
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap(),
        )
        .await
        .unwrap();
    ns.delete("gone", &DeleteParams::default()).await.unwrap();
    assert!(server
        .handle()
        .list("v1", "ConfigMap", Some("gone"))
        .unwrap()
        .is_empty());
    server.shutdown().await;
}
