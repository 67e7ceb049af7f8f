//! Lists: resourceVersion, paging with limit/continue (consistent across changes, 410 when
//! too old), label selectors in their full syntax, field selectors.

use crate::common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams};
use kube::ResourceExt;
use serde_json::json;

#[tokio::test]
async fn paging_is_consistent_and_expires() {
    let server = start(config()).await;
    let h = server.handle();
    for i in 0..1200 {
        h.create(pod(
            "default",
            &format!("p{i:04}"),
            "n1",
            json!({"i": i.to_string()}),
        ))
        .unwrap();
    }
    let client = client_for(&server, None);
    let api: Api<Pod> = pods(&client, "default");
    let first = api.list(&ListParams::default().limit(500)).await.unwrap();
    assert_eq!(first.items.len(), 500);
    assert_eq!(first.metadata.remaining_item_count, Some(700));
    let token = first.metadata.continue_.clone().unwrap();
    let rv = first.metadata.resource_version.clone().unwrap();
    // Changes after the first page do not show in the rest of this list.
    api.delete("p1100", &DeleteParams::default()).await.unwrap();
    h.create(pod("default", "p9999", "n1", json!({}))).unwrap();
    let mut names: Vec<String> = first.items.iter().map(|p| p.name_any()).collect();
    let mut token = Some(token);
    while let Some(t) = token {
        let page = api
            .list(&ListParams::default().limit(500).continue_token(&t))
            .await
            .unwrap();
        assert_eq!(page.metadata.resource_version.as_deref(), Some(rv.as_str()));
        names.extend(page.items.iter().map(|p| p.name_any()));
        token = page.metadata.continue_.filter(|c| !c.is_empty());
    }
    assert_eq!(names.len(), 1200);
    assert!(names.contains(&"p1100".to_string()) && !names.contains(&"p9999".to_string()));
    let fresh = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(fresh.items.len(), 1200);
    assert!(
        fresh
            .metadata
            .resource_version
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > rv.parse::<u64>().unwrap()
    );

    // A continue token from before a compaction is 410 Expired.
    let page = api.list(&ListParams::default().limit(10)).await.unwrap();
    h.expire(None);
    let e = api
        .list(
            &ListParams::default()
                .limit(10)
                .continue_token(page.metadata.continue_.as_deref().unwrap()),
        )
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), Some((410, "Expired".into())));
    server.shutdown().await;
}

#[tokio::test]
async fn label_and_field_selectors() {
    let server = start(config()).await;
    let h = server.handle();
    h.create(pod(
        "default",
        "a",
        "n1",
        json!({"app": "web", "tier": "front"}),
    ))
    .unwrap();
    h.create(pod(
        "default",
        "b",
        "n2",
        json!({"app": "web", "tier": "back"}),
    ))
    .unwrap();
    h.create(pod("default", "c", "n1", json!({"app": "db"})))
        .unwrap();
    h.create(pod("kube-system", "d", "n2", json!({"app": "dns"})))
        .unwrap();
    let client = client_for(&server, None);
    let all: Api<Pod> = Api::all(client.clone());
    let names =
        |l: kube::core::ObjectList<Pod>| l.items.iter().map(|p| p.name_any()).collect::<Vec<_>>();
    let sel = |s: &'static str| {
        let all = all.clone();
        async move { names(all.list(&ListParams::default().labels(s)).await.unwrap()) }
    };
    assert_eq!(sel("app=web").await, ["a", "b"]);
    assert_eq!(sel("app==web,tier!=front").await, ["b"]);
    assert_eq!(sel("app in (db,dns)").await, ["c", "d"]);
    assert_eq!(sel("app notin (web),tier").await, Vec::<String>::new());
    assert_eq!(sel("tier").await, ["a", "b"]);
    assert_eq!(sel("!tier").await, ["c", "d"]);
    let fields = |s: &'static str| {
        let all = all.clone();
        async move { names(all.list(&ListParams::default().fields(s)).await.unwrap()) }
    };
    assert_eq!(fields("spec.nodeName=n1").await, ["a", "c"]);
    assert_eq!(
        fields("spec.nodeName=n2,metadata.namespace=kube-system").await,
        ["d"]
    );
    assert_eq!(fields("metadata.name=b").await, ["b"]);
    assert_eq!(
        fields("metadata.name!=b,spec.nodeName!=n2").await,
        ["a", "c"]
    );
    assert_eq!(fields("status.phase=Pending").await.len(), 4);
    let e = all
        .list(&ListParams::default().fields("spec.bogus=1"))
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), Some((400, "BadRequest".into())));
    let e = all
        .list(&ListParams::default().labels("a in ("))
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), Some((400, "BadRequest".into())));
    // Selectors and paging together.
    let page = all
        .list(&ListParams::default().labels("app").limit(2))
        .await
        .unwrap();
    assert_eq!(names(page.clone()), ["a", "b"]);
    let rest = all
        .list(
            &ListParams::default()
                .labels("app")
                .limit(2)
                .continue_token(page.metadata.continue_.as_deref().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(names(rest), ["c", "d"]);
    server.shutdown().await;
}
