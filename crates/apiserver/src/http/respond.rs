//! Response bodies and content negotiation: JSON objects and lists assembled from stored
//! bytes (no re-encoding), Tables and PartialObjectMetadata on request, Status errors.

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::{header, Response, StatusCode};
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::resources::ResourceDef;
use crate::store::{ListPage, ObjRef};
use crate::table::{self, IncludeObject};

pub type Body = BoxBody<Bytes, std::io::Error>;

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

pub fn bytes_response(
    code: StatusCode,
    content_type: &str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    let mut r = Response::new(full(body));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_str(content_type)
            .unwrap_or(header::HeaderValue::from_static("application/json")),
    );
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-cache, private"),
    );
    r
}

pub fn json_response(code: StatusCode, v: &Value) -> Response<Body> {
    bytes_response(
        code,
        "application/json",
        serde_json::to_vec(v).unwrap_or_default(),
    )
}

pub fn error_response(e: &ApiError) -> Response<Body> {
    let code = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = json_response(code, &e.to_status());
    if let Some(retry) = e.retry_after_seconds {
        if let Ok(v) = header::HeaderValue::from_str(&retry.to_string()) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
    }
    r
}

/// What the client asked to receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Json,
    Table(IncludeObject),
    PartialMetadata,
    /// `apidiscovery.k8s.io` v2 (or v2beta1 when `false`).
    AggregatedDiscovery(bool),
}

/// Picks the first media type of `Accept` this server can produce; 406 when none.
pub fn negotiate(accept: Option<&str>, include: Option<&str>) -> Result<Output, ApiError> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok(Output::Json);
    };
    let include = match include {
        Some("None") => IncludeObject::None,
        Some("Object") => IncludeObject::Object,
        _ => IncludeObject::Metadata,
    };
    for item in accept.split(',') {
        let mut parts = item.split(';').map(str::trim);
        let media = parts.next().unwrap_or("");
        let params: Vec<(&str, &str)> = parts.filter_map(|p| p.split_once('=')).collect();
        let param = |k: &str| params.iter().find(|(pk, _)| *pk == k).map(|(_, v)| *v);
        if !matches!(media, "application/json" | "*/*" | "application/*") {
            continue;
        }
        match (param("as"), param("g"), param("v")) {
            (None, _, _) => return Ok(Output::Json),
            (Some("Table"), Some("meta.k8s.io"), Some("v1" | "v1beta1")) => {
                return Ok(Output::Table(include))
            }
            (
                Some("PartialObjectMetadata" | "PartialObjectMetadataList"),
                Some("meta.k8s.io"),
                Some("v1" | "v1beta1"),
            ) => return Ok(Output::PartialMetadata),
            (Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io"), Some("v2")) => {
                return Ok(Output::AggregatedDiscovery(true))
            }
            (Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io"), Some("v2beta1")) => {
                return Ok(Output::AggregatedDiscovery(false))
            }
            _ => continue,
        }
    }
    Err(ApiError::new(
        crate::error::Reason::NotAcceptable,
        format!("only the following media types are accepted: application/json, application/json;as=Table;v=v1;g=meta.k8s.io (got {accept})"),
    ))
}

pub fn object_response(
    code: StatusCode,
    obj: &ObjRef,
    def: &ResourceDef,
    output: Output,
) -> Response<Body> {
    match output {
        Output::Json | Output::AggregatedDiscovery(_) => {
            bytes_response(code, "application/json", obj.bytes.clone())
        }
        Output::PartialMetadata => json_response(code, &table::partial_metadata(&obj.value())),
        Output::Table(include) => json_response(
            code,
            &table::table(
                &def.kind,
                &[obj.value()],
                json!({"resourceVersion": obj.rv.to_string()}),
                include,
            ),
        ),
    }
}

fn list_meta(page: &ListPage) -> Value {
    let mut meta = json!({"resourceVersion": page.resource_version.to_string()});
    if let Some(c) = &page.continue_token {
        meta["continue"] = json!(c);
    }
    if let Some(n) = page.remaining {
        meta["remainingItemCount"] = json!(n);
    }
    meta
}

pub fn list_response(def: &ResourceDef, page: &ListPage, output: Output) -> Response<Body> {
    match output {
        Output::Json | Output::AggregatedDiscovery(_) => {
            let head = json!({"kind": def.list_kind(), "apiVersion": def.api_version(), "metadata": list_meta(page)});
            let head = serde_json::to_vec(&head).unwrap_or_default();
            let total: usize = page.items.iter().map(|o| o.bytes.len() + 1).sum();
            let mut body = Vec::with_capacity(head.len() + total + 16);
            // `{"apiVersion":..,"kind":..,"metadata":{..}` + `,"items":[...]}`
            body.extend_from_slice(&head[..head.len() - 1]);
            body.extend_from_slice(b",\"items\":[");
            for (i, o) in page.items.iter().enumerate() {
                if i > 0 {
                    body.push(b',');
                }
                body.extend_from_slice(&o.bytes);
            }
            body.extend_from_slice(b"]}");
            bytes_response(StatusCode::OK, "application/json", body)
        }
        Output::PartialMetadata => {
            let items: Vec<Value> = page
                .items
                .iter()
                .map(|o| table::partial_metadata(&o.value()))
                .collect();
            json_response(
                StatusCode::OK,
                &json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta(page), "items": items}),
            )
        }
        Output::Table(include) => {
            let items: Vec<Value> = page.items.iter().map(|o| o.value()).collect();
            json_response(
                StatusCode::OK,
                &table::table(&def.kind, &items, list_meta(page), include),
            )
        }
    }
}

/// The Status of a successful delete of a kind that does not return the object.
pub fn success_status(def: &ResourceDef, obj: &ObjRef) -> Value {
    let mut details = json!({"name": obj.name, "kind": def.plural, "uid": obj.uid});
    if !def.group.is_empty() {
        details["group"] = json!(def.group);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}
