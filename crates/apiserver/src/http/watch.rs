//! Watch streams: events after a resourceVersion (or the current state as synthetic ADDED
//! events first), selection changes turned into ADDED/DELETED as the real watch cache does,
//! BOOKMARKs, an ERROR event with a 410 Status when the version is too old, `timeoutSeconds`,
//! and the drop-watch fault. The stream reads the shared history under the store lock and
//! keeps no per-watch buffer beyond one batch.

use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::json;
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::time::{Duration, Instant};

use super::respond::{Body, Output};
use crate::error::ApiError;
use crate::resources::ResourceDef;
use crate::shared::{Shared, WatchDrop};
use crate::store::{Event, EventKind, ListOptions, ObjRef};
use crate::table;

pub struct WatchRequest {
    pub def: Arc<ResourceDef>,
    pub namespace: Option<String>,
    pub opts: ListOptions,
    pub output: Output,
    pub bookmarks: bool,
    pub send_initial_events: bool,
    pub timeout: Duration,
}

struct State {
    shared: Arc<Shared>,
    req: WatchRequest,
    cursor: u64,
    pending: VecDeque<Bytes>,
    deadline: Instant,
    next_bookmark: Instant,
    bookmark_every: Duration,
    changed: watch::Receiver<u64>,
    drops: watch::Receiver<WatchDrop>,
    done: bool,
    abort: bool,
}

fn frame(kind: &str, object: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(object.len() + 32);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(object);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

fn render(req: &WatchRequest, kind: &str, obj: &ObjRef) -> Bytes {
    match req.output {
        Output::Json | Output::AggregatedDiscovery(_) => frame(kind, &obj.bytes),
        Output::PartialMetadata => frame(
            kind,
            &serde_json::to_vec(&table::partial_metadata(&obj.value())).unwrap_or_default(),
        ),
        Output::Table(include) => {
            let t = table::table(
                &req.def.kind,
                &[obj.value()],
                json!({"resourceVersion": obj.rv.to_string()}),
                include,
            );
            frame(kind, &serde_json::to_vec(&t).unwrap_or_default())
        }
    }
}

fn selected(req: &WatchRequest, obj: &ObjRef) -> bool {
    req.namespace
        .as_deref()
        .is_none_or(|ns| obj.namespace == ns)
        && req.opts.matches(obj)
}

/// The previous state, shown as deleted at the event's version.
fn restamp(def: &ResourceDef, prev: &ObjRef, rv: u64) -> Option<ObjRef> {
    let mut v = prev.value();
    v["metadata"]["resourceVersion"] = json!(rv.to_string());
    crate::store::StoredObject::build(def, &v, rv)
        .ok()
        .map(Arc::new)
}

fn encode(req: &WatchRequest, ev: &Event) -> Option<Bytes> {
    let now = ev.kind != EventKind::Deleted && selected(req, &ev.object);
    let before = ev.prev.as_ref().is_some_and(|p| selected(req, p));
    match (now, before) {
        (true, false) => Some(render(req, "ADDED", &ev.object)),
        (true, true) => Some(render(req, "MODIFIED", &ev.object)),
        (false, true) if ev.kind == EventKind::Deleted => Some(render(req, "DELETED", &ev.object)),
        (false, true) => {
            let prev = ev.prev.as_ref()?;
            restamp(&req.def, prev, ev.rv).map(|o| render(req, "DELETED", &o))
        }
        (false, false) => None,
    }
}

fn bookmark(req: &WatchRequest, rv: u64, initial_end: bool) -> Bytes {
    let (kind, api_version) = match req.output {
        Output::PartialMetadata => (
            "PartialObjectMetadata".to_string(),
            "meta.k8s.io/v1".to_string(),
        ),
        _ => (req.def.kind.clone(), req.def.api_version()),
    };
    let mut meta = json!({"resourceVersion": rv.to_string(), "creationTimestamp": null});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let obj = json!({"kind": kind, "apiVersion": api_version, "metadata": meta});
    frame("BOOKMARK", &serde_json::to_vec(&obj).unwrap_or_default())
}

fn error_event(e: &ApiError) -> Bytes {
    frame(
        "ERROR",
        &serde_json::to_vec(&e.to_status()).unwrap_or_default(),
    )
}

/// Starts a watch: validates the version and queues the initial events.
pub fn start(shared: Arc<Shared>, req: WatchRequest) -> Result<Body, ApiError> {
    let mut pending = VecDeque::new();
    let rv_param = req.opts.resource_version.clone().unwrap_or_default();
    let mut changed = shared.changed.subscribe();
    changed.mark_unchanged();
    let drops = shared.drops.subscribe();
    let cursor = {
        let store = shared.store();
        let current = store.current_rv();
        if req.send_initial_events || rv_param.is_empty() || rv_param == "0" {
            for obj in store.snapshot(&req.def, req.namespace.as_deref()) {
                if req.opts.matches(&obj) {
                    pending.push_back(render(&req, "ADDED", &obj));
                }
            }
            if req.send_initial_events && req.bookmarks {
                pending.push_back(bookmark(&req, current, true));
            }
            current
        } else {
            let rv: u64 = rv_param.parse().map_err(|_| {
                ApiError::bad_request(format!("invalid resource version: {rv_param:?}"))
            })?;
            if rv > current {
                let mut e = ApiError::new(
                    crate::error::Reason::Timeout,
                    format!("Too large resource version: {rv}, current: {current}"),
                );
                e.retry_after_seconds = Some(1);
                return Err(e);
            }
            rv
        }
    };
    let now = Instant::now();
    let bookmark_every = Duration::from_millis(shared.config.bookmark_interval_ms.max(10));
    let state = State {
        deadline: now
            .checked_add(req.timeout)
            .unwrap_or(now + Duration::from_secs(365 * 86_400)),
        next_bookmark: now + bookmark_every,
        bookmark_every,
        shared,
        req,
        cursor,
        pending,
        changed,
        drops,
        done: false,
        abort: false,
    };
    let stream = futures_util::stream::unfold(state, next).map(|r| r.map(Frame::data));
    Ok(BodyExt::boxed(StreamBody::new(stream)))
}

async fn next(mut st: State) -> Option<(Result<Bytes, std::io::Error>, State)> {
    loop {
        if let Some(b) = st.pending.pop_front() {
            return Some((Ok(b), st));
        }
        if st.abort {
            st.abort = false;
            st.done = true;
            return Some((
                Err(std::io::Error::other("watch dropped by fault injection")),
                st,
            ));
        }
        if st.done {
            return None;
        }
        if st.drops.has_changed().unwrap_or(false) {
            let order = st.drops.borrow_and_update().clone();
            if order.applies(&st.req.def) {
                if order.abort {
                    st.abort = true;
                } else {
                    st.done = true;
                }
                continue;
            }
        }
        st.changed.borrow_and_update();
        let fetched = {
            let store = st.shared.store();
            store
                .events_since(&st.req.def, st.cursor, 512)
                .map(|evs| (evs, store.current_rv()))
        };
        match fetched {
            Err(e) => {
                st.pending.push_back(error_event(&e));
                st.done = true;
                continue;
            }
            Ok((events, _)) if !events.is_empty() => {
                for ev in &events {
                    st.cursor = ev.rv;
                    if let Some(b) = encode(&st.req, ev) {
                        st.pending.push_back(b);
                    }
                }
                continue;
            }
            Ok((_, current)) => st.cursor = st.cursor.max(current),
        }
        let now = Instant::now();
        if now >= st.deadline {
            return None;
        }
        if st.req.bookmarks && now >= st.next_bookmark {
            st.next_bookmark = now + st.bookmark_every;
            st.pending.push_back(bookmark(&st.req, st.cursor, false));
            continue;
        }
        let wake = if st.req.bookmarks {
            st.deadline.min(st.next_bookmark)
        } else {
            st.deadline
        };
        tokio::select! {
            biased;
            r = st.drops.changed() => {
                if r.is_err() {
                    return None;
                }
                // Handled at the top of the loop.
                st.drops.mark_changed();
            }
            r = st.changed.changed() => {
                if r.is_err() {
                    return None;
                }
            }
            _ = tokio::time::sleep_until(wake) => {}
        }
    }
}
