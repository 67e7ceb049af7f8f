//! The resource verbs: get, list, watch, create, update, patch, delete, deletecollection.

use hyper::{header, Request, Response, StatusCode};
use serde_json::{json, Value};
use std::sync::Arc;
use tokio::time::Duration;

use super::query::Query;
use super::respond::{
    self, error_response, json_response, list_response, negotiate, object_response, Body,
};
use super::router::ResourceRoute;
use super::watch::{self, WatchRequest};
use crate::config::User;
use crate::error::ApiError;
use crate::patch::PatchType;
use crate::resources::Storage;
use crate::shared::Shared;
use crate::store::{DeleteOptions, DeleteOutcome, WriteCtx};

fn content_type(req: &Request<hyper::body::Incoming>) -> String {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// Decodes a create/update body (JSON or YAML), refusing other media types with 415.
fn decode_object(ct: &str, body: &[u8]) -> Result<Value, ApiError> {
    let base = ct.split(';').next().unwrap_or("").trim();
    match base {
        "" | "application/json" | "*/*" => serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        }),
        "application/yaml" | "application/x-yaml" | "text/yaml" => serde_yaml::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error converting YAML to JSON: {e}"))),
        other => Err(ApiError::unsupported_media_type(other)),
    }
}

pub async fn resource(
    shared: &Arc<Shared>,
    req: Request<hyper::body::Incoming>,
    route: ResourceRoute,
    verb: &str,
    query: Query,
    user: &User,
) -> Response<Body> {
    match run(shared, req, route, verb, query, user).await {
        Ok(r) => r,
        Err(e) => error_response(&e),
    }
}

async fn run(
    shared: &Arc<Shared>,
    req: Request<hyper::body::Incoming>,
    route: ResourceRoute,
    verb: &str,
    query: Query,
    user: &User,
) -> Result<Response<Body>, ApiError> {
    let def = route.def.clone();
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let output = negotiate(accept.as_deref(), query.get("includeObject"))?;
    let ns = route.namespace.clone().unwrap_or_default();
    let name = route.name.clone().unwrap_or_default();
    let status = route.subresource.as_deref() == Some("status");
    let ctx = WriteCtx {
        user: user.name.clone(),
        dry_run: query.dry_run()?,
    };
    if def.storage == Storage::Review {
        let body = super::read_body(req.into_body()).await?;
        let v = decode_object("", &body)?;
        let answer = shared.reviewer.review(&def, v, user)?;
        return Ok(json_response(StatusCode::CREATED, &answer));
    }
    match verb {
        "get" => {
            let obj = shared.store().get(&def, &ns, &name)?;
            Ok(object_response(StatusCode::OK, &obj, &def, output))
        }
        "list" => {
            let opts = query.list_options(&def)?;
            let page = shared
                .store()
                .list(&def, route.namespace.as_deref(), &opts)?;
            Ok(list_response(&def, &page, output))
        }
        "watch" => {
            let mut opts = query.list_options(&def)?;
            if let Some(n) = route.name.clone() {
                // `/watch/.../name`: a watch of one object.
                opts.fields.terms.push(crate::selectors::FieldTerm {
                    field: "metadata.name".into(),
                    value: n,
                    negated: false,
                });
            }
            let timeout =
                query
                    .timeout_seconds()
                    .map(Duration::from_secs)
                    .unwrap_or(Duration::from_secs(
                        shared.config.default_watch_timeout_secs,
                    ));
            let body = watch::start(
                shared.clone(),
                WatchRequest {
                    def: def.clone(),
                    namespace: route.namespace.clone(),
                    opts,
                    output,
                    bookmarks: query.flag("allowWatchBookmarks"),
                    send_initial_events: query.flag("sendInitialEvents"),
                    timeout,
                },
            )?;
            let mut r = Response::new(body);
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/json"),
            );
            r.headers_mut().insert(
                header::CACHE_CONTROL,
                header::HeaderValue::from_static("no-cache, private"),
            );
            Ok(r)
        }
        "create" => {
            let ct = content_type(&req);
            let body = super::read_body(req.into_body()).await?;
            let v = decode_object(&ct, &body)?;
            let obj = {
                let mut store = shared.store();
                let obj = store.create(&def, &ns, v, &ctx)?;
                shared.notify(store.current_rv());
                obj
            };
            Ok(object_response(StatusCode::CREATED, &obj, &def, output))
        }
        "update" => {
            let ct = content_type(&req);
            let body = super::read_body(req.into_body()).await?;
            let v = decode_object(&ct, &body)?;
            let (obj, created) = {
                let mut store = shared.store();
                let r = store.update(&def, &ns, &name, v, status, &ctx)?;
                shared.notify(store.current_rv());
                r
            };
            let code = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(object_response(code, &obj, &def, output))
        }
        "patch" => {
            let ct = content_type(&req);
            let patch_type = PatchType::from_content_type(&ct)
                .ok_or_else(|| ApiError::unsupported_media_type(&ct))?;
            let body = super::read_body(req.into_body()).await?;
            let obj = {
                let mut store = shared.store();
                let obj = store.patch(&def, &ns, &name, patch_type, &body, status, &ctx)?;
                shared.notify(store.current_rv());
                obj
            };
            Ok(object_response(StatusCode::OK, &obj, &def, output))
        }
        "delete" => {
            let body = super::read_body(req.into_body()).await?;
            let opts = delete_options(&body)?;
            let dry_run = ctx.dry_run || opts.1;
            let ctx = WriteCtx { dry_run, ..ctx };
            let outcome = {
                let mut store = shared.store();
                let r = store.delete(&def, &ns, &name, &opts.0, &ctx)?;
                shared.notify(store.current_rv());
                r
            };
            Ok(match outcome {
                DeleteOutcome::Finalizing(o) => object_response(StatusCode::OK, &o, &def, output),
                DeleteOutcome::Deleted(o) if def.returns_deleted_object => {
                    object_response(StatusCode::OK, &o, &def, output)
                }
                DeleteOutcome::Deleted(o) => {
                    json_response(StatusCode::OK, &respond::success_status(&def, &o))
                }
            })
        }
        "deletecollection" => {
            let opts = query.list_options(&def)?;
            let (items, rv) = {
                let mut store = shared.store();
                let items =
                    store.delete_collection(&def, route.namespace.as_deref(), &opts, &ctx)?;
                let rv = store.current_rv();
                shared.notify(rv);
                (items, rv)
            };
            let page = crate::store::ListPage {
                items,
                resource_version: rv,
                continue_token: None,
                remaining: None,
            };
            Ok(list_response(&def, &page, respond::Output::Json))
        }
        other => Err(ApiError::method_not_allowed(format!(
            "verb {other} is not served"
        ))),
    }
}

/// A DELETE body (`DeleteOptions`): preconditions and dryRun.
fn delete_options(body: &[u8]) -> Result<(DeleteOptions, bool), ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok((DeleteOptions::default(), false));
    }
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("decoding DeleteOptions: {e}")))?;
    let s = |v: &Value| v.as_str().map(str::to_string);
    let dry_run = v["dryRun"]
        .as_array()
        .is_some_and(|a| a.contains(&json!("All")));
    Ok((
        DeleteOptions {
            precondition_uid: s(&v["preconditions"]["uid"]),
            precondition_rv: s(&v["preconditions"]["resourceVersion"]),
        },
        dry_run,
    ))
}
