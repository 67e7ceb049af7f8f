//! Control endpoints under `/weft-control/` (a path no Kubernetes client uses), served on
//! the API listeners while they are up and always on the control listener, so a test in
//! another process can drive faults and read the request record. JSON in and out; see
//! docs/apiserver.md for the list.

use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};
use std::sync::Arc;

use crate::error::ApiError;
use crate::faults::FaultRule;
use crate::handle::Handle;
use crate::http::query::Query;
use crate::http::read_body;
use crate::http::respond::{error_response, json_response, Body};
use crate::shared::Shared;

fn ok(v: Value) -> Result<Response<Body>, ApiError> {
    Ok(json_response(StatusCode::OK, &v))
}

fn resource_of(v: &Value) -> Option<(String, String)> {
    let plural = v["resource"].as_str()?;
    Some((
        v["group"].as_str().unwrap_or("").to_string(),
        plural.to_string(),
    ))
}

pub async fn handle(
    shared: &Arc<Shared>,
    req: Request<hyper::body::Incoming>,
    path: String,
) -> Response<Body> {
    match run(shared, req, &path).await {
        Ok(r) => r,
        Err(e) => error_response(&e),
    }
}

async fn run(
    shared: &Arc<Shared>,
    req: Request<hyper::body::Incoming>,
    path: &str,
) -> Result<Response<Body>, ApiError> {
    let h = Handle {
        shared: shared.clone(),
    };
    let method = req.method().clone();
    let query = Query::parse(req.uri().query());
    let body = read_body(req.into_body()).await?;
    let json_body = || -> Result<Value, ApiError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(json!({}));
        }
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("control body: {e}")))
    };
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match (method, segs.as_slice()) {
        (Method::GET, ["healthz"]) => ok(json!({"ok": true})),
        (Method::GET, ["state"]) => {
            ok(json!({"up": h.is_up(), "resourceVersion": h.resource_version().to_string()}))
        }
        (Method::POST, ["down"]) => {
            h.set_up(false);
            ok(json!({"up": false}))
        }
        (Method::POST, ["up"]) => {
            h.set_up(true);
            ok(json!({"up": true}))
        }
        (Method::GET, ["requests"]) => {
            let since = query.get("since").and_then(|s| s.parse().ok()).unwrap_or(0);
            let mut items = h.requests(since);
            if let Some(user) = query.get("user") {
                items.retain(|r| r.user == user);
            }
            ok(json!({"items": items, "dropped": shared.recorder().dropped()}))
        }
        (Method::GET, ["requests", "summary"]) => {
            let items: Vec<Value> = h
                .request_summary()
                .into_iter()
                .map(|(g, n)| {
                    let mut v = serde_json::to_value(g).unwrap_or_default();
                    v["count"] = json!(n);
                    v
                })
                .collect();
            ok(json!({"items": items}))
        }
        (Method::DELETE, ["requests"]) => {
            h.clear_requests();
            ok(json!({}))
        }
        (Method::GET, ["faults"]) => ok(json!({"items": h.faults()})),
        (Method::POST, ["faults"]) => {
            let rule: FaultRule = serde_json::from_value(json_body()?)
                .map_err(|e| ApiError::bad_request(format!("fault rule: {e}")))?;
            ok(json!({"id": h.inject(rule)}))
        }
        (Method::DELETE, ["faults"]) => {
            h.clear_faults();
            ok(json!({}))
        }
        (Method::DELETE, ["faults", id]) => {
            let id: u64 = id
                .parse()
                .map_err(|_| ApiError::bad_request("fault id must be a number"))?;
            ok(json!({"removed": h.remove_fault(id)}))
        }
        (Method::POST, ["watches", "drop"]) => {
            let v = json_body()?;
            let r = resource_of(&v);
            h.drop_watches(
                r.as_ref().map(|(g, p)| (g.as_str(), p.as_str())),
                v["abort"].as_bool().unwrap_or(true),
            );
            ok(json!({}))
        }
        (Method::POST, ["expire"]) => {
            let v = json_body()?;
            let r = resource_of(&v);
            h.expire(r.as_ref().map(|(g, p)| (g.as_str(), p.as_str())));
            ok(json!({"resourceVersion": h.resource_version().to_string()}))
        }
        (Method::POST, ["objects"]) => {
            let v = json_body()?;
            let items = match v["items"].as_array() {
                Some(items) => items.clone(),
                None => vec![v],
            };
            let mut created = 0;
            for item in items {
                h.apply(item)?;
                created += 1;
            }
            ok(json!({"applied": created, "resourceVersion": h.resource_version().to_string()}))
        }
        _ => Err(ApiError::new(
            crate::error::Reason::NotFound,
            format!("no control endpoint {path}"),
        )),
    }
}
