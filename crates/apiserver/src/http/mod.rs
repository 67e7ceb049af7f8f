//! The HTTP face of the server: authentication, routing, the request record, faults, and
//! dispatch to discovery, the resource handlers, watches and the control endpoints.

mod handlers;
pub mod query;
pub mod respond;
pub mod router;
pub mod watch;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::{header, Method, Request, Response, StatusCode};
use std::sync::Arc;

use crate::error::ApiError;
use crate::faults::Action;
use crate::recorder::Attributes;
use crate::shared::Shared;
use respond::{error_response, json_response, negotiate, Body, Output};
use router::Route;

/// The largest request body accepted (the real server's limit is 3 MiB).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

pub async fn read_body(body: hyper::body::Incoming) -> Result<Bytes, ApiError> {
    http_body_util::Limited::new(body, MAX_BODY)
        .collect()
        .await
        .map(|c| c.to_bytes())
        .map_err(|e| {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                ApiError::new(
                    crate::error::Reason::RequestEntityTooLarge,
                    "the request body is too large",
                )
            } else {
                ApiError::bad_request(format!("reading the request body: {e}"))
            }
        })
}

fn header_str(req: &Request<hyper::body::Incoming>, name: header::HeaderName) -> Option<&str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// What `handle` returns: a response, or "close the connection without one".
pub enum Outcome {
    Respond(Response<Body>),
    Drop,
}

/// Serves one request. `control_only`: the control listener, which answers nothing but
/// `/weft-control/...`.
pub async fn handle(
    shared: Arc<Shared>,
    req: Request<hyper::body::Incoming>,
    local: String,
    control_only: bool,
) -> Outcome {
    let path = req.uri().path().to_string();
    if let Some(rest) = path.strip_prefix("/weft-control") {
        return Outcome::Respond(crate::control::handle(&shared, req, rest.to_string()).await);
    }
    if control_only {
        return Outcome::Respond(not_found());
    }
    let user =
        match crate::auth::authenticate(&shared.config, header_str(&req, header::AUTHORIZATION)) {
            Ok(u) => u,
            Err(e) => {
                let attrs = Attributes {
                    verb: req.method().as_str().to_lowercase(),
                    path: path.clone(),
                    ..Default::default()
                };
                shared.recorder().record("", attrs, 401);
                return Outcome::Respond(error_response(&e));
            }
        };
    let query = query::Query::parse(req.uri().query());
    let route = router::parse(&path, shared.store().resources());
    let (attrs, verb_error) = match &route {
        Route::Resource(r) => match router::verb(req.method(), r, query.flag("watch")) {
            Ok(verb) => (router::attributes(verb, r, &path), None),
            Err(e) => (
                router::attributes(&req.method().as_str().to_lowercase(), r, &path),
                Some(e),
            ),
        },
        _ => (
            Attributes {
                verb: req.method().as_str().to_lowercase(),
                path: path.clone(),
                ..Default::default()
            },
            None,
        ),
    };
    let actions = shared.faults().take(&user.name, &attrs);
    let mut injected = None;
    for action in actions {
        match action {
            Action::Delay { millis } => {
                tokio::time::sleep(std::time::Duration::from_millis(millis)).await
            }
            Action::Drop => {
                shared.recorder().record(&user.name, attrs, 0);
                return Outcome::Drop;
            }
            Action::Error {
                code,
                message,
                retry_after_seconds,
            } => {
                injected.get_or_insert((code, message, retry_after_seconds));
            }
        }
    }
    let response = if let Some((code, message, retry)) = injected {
        error_response(&injected_error(code, message, retry))
    } else if let Some(e) = verb_error {
        error_response(&e)
    } else if !shared.authorizer.allowed(&user, &attrs) {
        error_response(&crate::auth::forbidden(&user, &attrs))
    } else {
        match route {
            Route::Resource(r) => {
                handlers::resource(&shared, req, r, &attrs.verb, query, &user).await
            }
            other => document(&shared, &req, other, &local),
        }
    };
    shared
        .recorder()
        .record(&user.name, attrs, response.status().as_u16());
    Outcome::Respond(response)
}

fn injected_error(code: u16, message: Option<String>, retry: Option<u32>) -> ApiError {
    use crate::error::Reason;
    let reason = match code {
        400 => Reason::BadRequest,
        401 => Reason::Unauthorized,
        403 => Reason::Forbidden,
        404 => Reason::NotFound,
        409 => Reason::Conflict,
        410 => Reason::Expired,
        422 => Reason::Invalid,
        429 => Reason::TooManyRequests,
        503 => Reason::ServiceUnavailable,
        504 => Reason::Timeout,
        _ => Reason::InternalError,
    };
    let mut e = ApiError::new(
        reason,
        message.unwrap_or_else(|| format!("injected fault: {code}")),
    )
    .with_code(code);
    e.retry_after_seconds = retry.or((code == 429).then_some(1));
    e
}

/// Discovery, version, health and OpenAPI documents.
fn document(
    shared: &Shared,
    req: &Request<hyper::body::Incoming>,
    route: Route,
    local: &str,
) -> Response<Body> {
    if req.method() != Method::GET {
        return error_response(&ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource",
        ));
    }
    let output = match negotiate(header_str(req, header::ACCEPT), None) {
        Ok(o) => o,
        Err(e) => return error_response(&e),
    };
    let store = shared.store();
    let resources = store.resources();
    let aggregated = |core: bool| match output {
        Output::AggregatedDiscovery(v2) => {
            let (av, ct) = if v2 {
                ("apidiscovery.k8s.io/v2", crate::discovery::AGGREGATED_V2)
            } else {
                (
                    "apidiscovery.k8s.io/v2beta1",
                    crate::discovery::AGGREGATED_V2BETA1,
                )
            };
            let doc = crate::discovery::aggregated(resources, core, av);
            Some(respond::bytes_response(
                StatusCode::OK,
                ct,
                serde_json::to_vec(&doc).unwrap_or_default(),
            ))
        }
        _ => None,
    };
    match route {
        Route::Version => json_response(
            StatusCode::OK,
            &crate::discovery::version(&shared.config.version),
        ),
        Route::Health => respond::bytes_response(StatusCode::OK, "text/plain; charset=utf-8", "ok"),
        Route::Api => aggregated(true).unwrap_or_else(|| {
            json_response(StatusCode::OK, &crate::discovery::api_versions(local))
        }),
        Route::Apis => aggregated(false).unwrap_or_else(|| {
            json_response(StatusCode::OK, &crate::discovery::api_group_list(resources))
        }),
        Route::Group(g) => match crate::discovery::api_group(resources, &g) {
            Some(doc) => json_response(StatusCode::OK, &doc),
            None => not_found(),
        },
        Route::GroupVersion(g, v) => match crate::discovery::resource_list(resources, &g, &v) {
            Some(doc) => json_response(StatusCode::OK, &doc),
            None => not_found(),
        },
        Route::OpenApi(path) => match path.trim_end_matches('/').strip_prefix("/openapi/v3") {
            Some("") => json_response(StatusCode::OK, &crate::openapi::index(resources)),
            Some(gv) => {
                match crate::openapi::group_version(resources, gv, &shared.config.version) {
                    Some(doc) => json_response(StatusCode::OK, &doc),
                    None => not_found(),
                }
            }
            None => not_found(),
        },
        Route::NotFound | Route::Resource(_) => not_found(),
    }
}

fn not_found() -> Response<Body> {
    error_response(&ApiError::new(
        crate::error::Reason::NotFound,
        "the server could not find the requested resource",
    ))
}
