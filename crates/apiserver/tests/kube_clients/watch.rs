//! watcher(): list then watch, bookmarks, a dropped watch resumed, expiry → 410 → relist,
//! selection changes seen as ADDED/DELETED.

use crate::common::*;
use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher::{self, Event};
use kube::ResourceExt;
use serde_json::json;
use std::time::Duration;

async fn next<S, K>(s: &mut S) -> Event<K>
where
    S: futures_util::Stream<Item = Result<Event<K>, watcher::Error>> + Unpin,
{
    tokio::time::timeout(Duration::from_secs(10), s.next())
        .await
        .expect("an event within 10s")
        .expect("stream open")
        .expect("no watcher error")
}

fn name_of<K: kube::Resource>(e: &Event<K>) -> (&'static str, String) {
    match e {
        Event::Apply(k) => ("apply", k.name_any()),
        Event::Delete(k) => ("delete", k.name_any()),
        Event::Init => ("init", String::new()),
        Event::InitApply(k) => ("init-apply", k.name_any()),
        Event::InitDone => ("init-done", String::new()),
    }
}

#[tokio::test]
async fn watcher_lists_then_watches() {
    let server = start(config()).await;
    let h = server.handle();
    h.create(node("n1")).unwrap();
    h.create(node("n2")).unwrap();
    let client = client_for(&server, Some(AGENT_TOKEN));
    let api: Api<Node> = nodes(&client);
    let mut s = watcher::watcher(api.clone(), watcher::Config::default()).boxed();
    assert_eq!(name_of(&next(&mut s).await), ("init", String::new()));
    assert_eq!(name_of(&next(&mut s).await), ("init-apply", "n1".into()));
    assert_eq!(name_of(&next(&mut s).await), ("init-apply", "n2".into()));
    assert_eq!(name_of(&next(&mut s).await), ("init-done", String::new()));
    api.create(
        &PostParams::default(),
        &serde_json::from_value(node("n3")).unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(name_of(&next(&mut s).await), ("apply", "n3".into()));
    api.patch(
        "n3",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
    )
    .await
    .unwrap();
    match next(&mut s).await {
        Event::Apply(n) => assert_eq!(n.labels().get("x").map(String::as_str), Some("y")),
        other => panic!("expected the modification, got {:?}", name_of(&other)),
    }
    api.delete("n1", &DeleteParams::default()).await.unwrap();
    assert_eq!(name_of(&next(&mut s).await), ("delete", "n1".into()));

    // The streaming-list strategy (sendInitialEvents + the initial-events-end bookmark).
    let mut s2 =
        watcher::watcher(api.clone(), watcher::Config::default().streaming_lists()).boxed();
    assert_eq!(name_of(&next(&mut s2).await), ("init", String::new()));
    let mut seen = vec![];
    loop {
        match next(&mut s2).await {
            Event::InitApply(n) => seen.push(n.name_any()),
            Event::InitDone => break,
            other => panic!("unexpected {:?}", name_of(&other)),
        }
    }
    assert_eq!(seen, ["n2", "n3"]);
    server.shutdown().await;
}

#[tokio::test]
async fn raw_watch_sends_bookmarks_and_410_for_expired_versions() {
    let server = start(config()).await;
    let client = client_for(&server, None);
    let api: Api<Node> = nodes(&client);
    server.handle().create(node("n1")).unwrap();
    let rv = api
        .list(&Default::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut w = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    server.handle().create(node("n2")).unwrap();
    let mut bookmark = None;
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(5), w.try_next())
        .await
        .unwrap()
        .unwrap()
    {
        match ev {
            WatchEvent::Added(n) => assert_eq!(n.name_any(), "n2"),
            WatchEvent::Bookmark(b) => {
                bookmark = Some(b.metadata.resource_version);
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    let bookmark = bookmark.expect("a bookmark");
    assert!(bookmark.parse::<u64>().unwrap() > rv.parse::<u64>().unwrap());

    server.handle().expire(None);
    let mut w = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    match tokio::time::timeout(Duration::from_secs(5), w.try_next())
        .await
        .unwrap()
        .unwrap()
    {
        Some(WatchEvent::Error(s)) => {
            assert_eq!(s.code, 410);
            assert_eq!(s.reason, "Expired");
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    // A watch from the current version still works after the expiry.
    let now = server.handle().resource_version().to_string();
    let mut w = api
        .watch(&WatchParams::default().timeout(1), &now)
        .await
        .unwrap()
        .boxed();
    server.handle().create(node("n3")).unwrap();
    match tokio::time::timeout(Duration::from_secs(5), w.try_next())
        .await
        .unwrap()
        .unwrap()
    {
        Some(WatchEvent::Added(n)) => assert_eq!(n.name_any(), "n3"),
        other => panic!("expected n3, got {other:?}"),
    }
    // timeoutSeconds=1: the server ends the stream by itself (bookmarks may come first).
    loop {
        match tokio::time::timeout(Duration::from_secs(5), w.try_next())
            .await
            .expect("the watch ends")
        {
            Ok(None) => break,
            Ok(Some(WatchEvent::Bookmark(_))) => continue,
            other => panic!("unexpected {other:?}"),
        }
    }
    server.shutdown().await;
}

#[tokio::test]
async fn dropped_watch_is_resumed_and_expiry_makes_kube_rs_relist() {
    let server = start(config()).await;
    let h = server.handle().clone();
    h.create(node("n1")).unwrap();
    let client = client_for(&server, Some(AGENT_TOKEN));
    let api: Api<Node> = nodes(&client);
    // Drive the watcher in its own task so its watch request is made while the test waits.
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut s = watcher::watcher(api, watcher::Config::default()).boxed();
        while let Some(item) = s.next().await {
            if tx.send(item).is_err() {
                break;
            }
        }
    });
    let mut s = tokio_stream_from(rx);
    for _ in 0..3 {
        next(&mut s).await; // Init, InitApply(n1), InitDone
    }
    let lists = |h: &weft_apiserver::Handle| {
        h.requests(0)
            .iter()
            .filter(|r| r.attributes.verb == "list")
            .count()
    };
    let watches = |h: &weft_apiserver::Handle| {
        h.requests(0)
            .iter()
            .filter(|r| r.attributes.verb == "watch")
            .count()
    };
    assert_eq!(lists(&h), 1);
    // Wait for the watch to be open, then cut it mid-stream.
    for _ in 0..100 {
        if watches(&h) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    h.drop_watches(None, true);
    h.create(node("n2")).unwrap();
    assert_eq!(name_of(&next(&mut s).await), ("apply", "n2".into()));
    assert_eq!(
        lists(&h),
        1,
        "a dropped watch resumes from its version without a relist"
    );
    assert_eq!(watches(&h), 2);

    // Expire every version and cut the watch: the resumed watch gets 410 and kube-rs relists.
    h.expire(None);
    h.drop_watches(None, false);
    h.create(node("n3")).unwrap();
    let mut saw_init = false;
    let mut saw_gone = false;
    let mut relisted = vec![];
    loop {
        let item = tokio::time::timeout(Duration::from_secs(10), s.next())
            .await
            .expect("an event")
            .expect("open");
        let ev = match item {
            Err(watcher::Error::WatchError(status)) if status.code == 410 => {
                saw_gone = true;
                continue;
            }
            Err(e) => panic!("watcher error {e}"),
            Ok(ev) => ev,
        };
        match ev {
            Event::Init => saw_init = true,
            Event::InitApply(n) => relisted.push(n.name_any()),
            Event::InitDone => break,
            Event::Apply(n) if n.name_any() == "n3" && !saw_init => {}
            other => panic!("unexpected {:?}", name_of(&other)),
        }
    }
    assert!(saw_init && saw_gone);
    assert_eq!(relisted, ["n1", "n2", "n3"]);
    assert_eq!(lists(&h), 2);
    driver.abort();
    server.shutdown().await;
}

fn tokio_stream_from<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<T>,
) -> std::pin::Pin<Box<dyn futures_util::Stream<Item = T> + Send>> {
    Box::pin(futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)))
}

#[tokio::test]
async fn selector_watch_sees_objects_move_in_and_out() {
    let server = start(config()).await;
    let client = client_for(&server, None);
    let api: Api<Pod> = pods(&client, "default");
    server
        .handle()
        .create(pod("default", "p1", "n1", json!({"app": "web"})))
        .unwrap();
    server
        .handle()
        .create(pod("default", "p2", "n1", json!({"app": "db"})))
        .unwrap();
    let rv = server.handle().resource_version().to_string();
    let mut w = api
        .watch(
            &WatchParams::default()
                .labels("app in (web)")
                .disable_bookmarks(),
            &rv,
        )
        .await
        .unwrap()
        .boxed();
    let relabel = |name: &'static str, app: &'static str| {
        let api = api.clone();
        async move {
            api.patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"app": app}}})),
            )
            .await
            .unwrap()
        }
    };
    relabel("p2", "web").await; // moves in
    relabel("p1", "db").await; // moves out
    relabel("p2", "web").await; // no change: no event at all
    server
        .handle()
        .create(pod("default", "p3", "n1", json!({"app": "web"})))
        .unwrap();
    let mut got = vec![];
    while got.len() < 3 {
        let ev = tokio::time::timeout(Duration::from_secs(5), w.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        got.push(match ev {
            WatchEvent::Added(p) => format!("ADDED {}", p.name_any()),
            WatchEvent::Modified(p) => format!("MODIFIED {}", p.name_any()),
            WatchEvent::Deleted(p) => format!("DELETED {} app={}", p.name_any(), p.labels()["app"]),
            other => panic!("unexpected {other:?}"),
        });
    }
    // The object leaving the selection is shown as it was before the change.
    assert_eq!(got, ["ADDED p2", "DELETED p1 app=web", "ADDED p3"]);
    server.shutdown().await;
}

#[tokio::test]
async fn metadata_watcher_gets_partial_objects() {
    let server = start(config()).await;
    server.handle().create(node("n1")).unwrap();
    let client = client_for(&server, None);
    // Api<PartialObjectMeta<K>> asks for metadata only (as=PartialObjectMetadataList).
    let api: Api<kube::core::PartialObjectMeta<Node>> = Api::all(client);
    let mut s = watcher::watcher(api, watcher::Config::default()).boxed();
    let mut names = vec![];
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), s.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        match ev {
            Event::Init => {}
            Event::InitApply(m) => names.push(m.name_any()),
            Event::InitDone => break,
            other => panic!("unexpected {:?}", name_of(&other)),
        }
    }
    assert_eq!(names, ["n1"]);
    server.handle().create(node("n2")).unwrap();
    match tokio::time::timeout(Duration::from_secs(10), s.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
    {
        Event::Apply(m) => {
            assert_eq!(m.name_any(), "n2");
            assert_eq!(m.labels()["kubernetes.io/hostname"], "n2");
        }
        other => panic!("unexpected {:?}", name_of(&other)),
    }
    server.shutdown().await;
}
