//! Request paths and methods in the API's terms: which document or resource, which
//! namespace, name and subresource, and the Kubernetes verb.

use std::sync::Arc;

use crate::error::ApiError;
use crate::recorder::Attributes;
use crate::resources::{ResourceDef, Resources};

#[derive(Debug, Clone)]
pub struct ResourceRoute {
    pub def: Arc<ResourceDef>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// The deprecated `/watch/` path prefix.
    pub watch_path: bool,
}

#[derive(Debug, Clone)]
pub enum Route {
    Version,
    Health,
    /// `/api`
    Api,
    /// `/apis`
    Apis,
    Group(String),
    GroupVersion(String, String),
    OpenApi(String),
    Resource(ResourceRoute),
    NotFound,
}

pub fn parse(path: &str, resources: &Resources) -> Route {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["version"] => Route::Version,
        ["healthz" | "livez" | "readyz", ..] => Route::Health,
        ["api"] => Route::Api,
        ["api", v] => Route::GroupVersion(String::new(), v.to_string()),
        ["api", v, rest @ ..] => resource("", v, rest, resources),
        ["apis"] => Route::Apis,
        ["apis", g] => Route::Group(g.to_string()),
        ["apis", g, v] => Route::GroupVersion(g.to_string(), v.to_string()),
        ["apis", g, v, rest @ ..] => resource(g, v, rest, resources),
        ["openapi", ..] => Route::OpenApi(path.to_string()),
        _ => Route::NotFound,
    }
}

fn resource(group: &str, version: &str, rest: &[&str], resources: &Resources) -> Route {
    let (watch_path, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        _ => (false, rest),
    };
    let namespaced_plural = |p: &str| {
        resources
            .find(group, version, p)
            .filter(|d| d.namespaced)
            .cloned()
    };
    let (namespace, plural, tail) = match rest {
        ["namespaces", ns, plural, tail @ ..] if namespaced_plural(plural).is_some() => {
            (Some(ns.to_string()), *plural, tail)
        }
        [plural, tail @ ..] => (None, *plural, tail),
        [] => return Route::NotFound,
    };
    let Some(def) = resources.find(group, version, plural).cloned() else {
        return Route::NotFound;
    };
    if namespace.is_some() && !def.namespaced {
        return Route::NotFound;
    }
    let (name, subresource) = match tail {
        [] => (None, None),
        [name] => (Some(name.to_string()), None),
        [name, sub] if def.subresources.iter().any(|s| s == sub) => {
            (Some(name.to_string()), Some(sub.to_string()))
        }
        _ => return Route::NotFound,
    };
    // A namespaced resource's single object needs its namespace in the path.
    if def.namespaced && namespace.is_none() && name.is_some() {
        return Route::NotFound;
    }
    Route::Resource(ResourceRoute {
        def,
        namespace,
        name,
        subresource,
        watch_path,
    })
}

/// The Kubernetes verb of a request on a resource.
pub fn verb(
    method: &hyper::Method,
    route: &ResourceRoute,
    watch_param: bool,
) -> Result<&'static str, ApiError> {
    use hyper::Method;
    let named = route.name.is_some();
    let verb = match *method {
        Method::GET if route.watch_path || (watch_param && !named) => "watch",
        Method::GET if named => "get",
        Method::GET => "list",
        Method::POST if !named => "create",
        Method::PUT if named => "update",
        Method::PATCH if named => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => "",
    };
    if verb.is_empty() || !route.def.allows(verb) {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({} {})",
            method, route.def.plural
        )));
    }
    Ok(verb)
}

pub fn attributes(verb: &str, route: &ResourceRoute, path: &str) -> Attributes {
    Attributes {
        verb: verb.to_string(),
        api_group: route.def.group.clone(),
        api_version: route.def.version.clone(),
        resource: route.def.plural.clone(),
        subresource: route.subresource.clone().unwrap_or_default(),
        namespace: route.namespace.clone().unwrap_or_default(),
        name: route.name.clone().unwrap_or_default(),
        path: path.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(path: &str) -> Route {
        parse(path, &Resources::new(crate::resources::builtin()))
    }

    #[test]
    fn paths() {
        let Route::Resource(p) = r("/api/v1/namespaces/default/pods/web/status") else {
            panic!()
        };
        assert_eq!(
            (
                p.namespace.as_deref(),
                p.name.as_deref(),
                p.subresource.as_deref()
            ),
            (Some("default"), Some("web"), Some("status"))
        );
        let Route::Resource(p) = r("/api/v1/namespaces/default") else {
            panic!()
        };
        assert_eq!(
            (p.def.plural.as_str(), p.name.as_deref()),
            ("namespaces", Some("default"))
        );
        let Route::Resource(p) = r("/api/v1/namespaces/kube-system/status") else {
            panic!()
        };
        assert_eq!(
            (p.name.as_deref(), p.subresource.as_deref()),
            (Some("kube-system"), Some("status"))
        );
        let Route::Resource(p) = r("/apis/discovery.k8s.io/v1/endpointslices") else {
            panic!()
        };
        assert!(p.namespace.is_none() && p.name.is_none());
        let Route::Resource(p) = r("/api/v1/watch/namespaces/a/pods") else {
            panic!()
        };
        assert!(p.watch_path);
        assert!(matches!(r("/api/v1/pods/x"), Route::NotFound));
        assert!(matches!(r("/api/v1/nodes/x/proxy"), Route::NotFound));
        assert!(matches!(r("/api/v1/namespaces/a/nodes"), Route::NotFound));
    }
}
