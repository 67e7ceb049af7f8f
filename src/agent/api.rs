//! Every request the agent makes to the API server, in one place: the RBAC the agent needs
//! is exactly this list (a test checks the kinds registry and the node writes against it).

/// One kind of request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiCall {
    pub verb: &'static str,
    /// API group; empty for the core group.
    pub group: &'static str,
    pub resource: &'static str,
    pub subresource: Option<&'static str>,
    /// Why the agent makes it.
    pub why: &'static str,
}

const fn call(
    verb: &'static str,
    group: &'static str,
    resource: &'static str,
    subresource: Option<&'static str>,
    why: &'static str,
) -> ApiCall {
    ApiCall {
        verb,
        group,
        resource,
        subresource,
        why,
    }
}

/// The agent's requests. Lists and watches are cluster-wide (every node, and every pod:
/// policy needs their labels and addresses); writes touch only this node's own Node.
pub const API_CALLS: &[ApiCall] = &[
    call("list", "", "nodes", None, "peers' pod CIDRs and addresses"),
    call("watch", "", "nodes", None, "peers' pod CIDRs and addresses"),
    call(
        "list",
        "",
        "namespaces",
        None,
        "namespace labels for policy",
    ),
    call(
        "watch",
        "",
        "namespaces",
        None,
        "namespace labels for policy",
    ),
    call(
        "list",
        "",
        "pods",
        None,
        "pod addresses, labels and named ports",
    ),
    call(
        "watch",
        "",
        "pods",
        None,
        "pod addresses, labels and named ports",
    ),
    call("list", "", "services", None, "Services"),
    call("watch", "", "services", None, "Services"),
    call(
        "list",
        "discovery.k8s.io",
        "endpointslices",
        None,
        "Service endpoints",
    ),
    call(
        "watch",
        "discovery.k8s.io",
        "endpointslices",
        None,
        "Service endpoints",
    ),
    call(
        "list",
        "networking.k8s.io",
        "networkpolicies",
        None,
        "NetworkPolicy",
    ),
    call(
        "watch",
        "networking.k8s.io",
        "networkpolicies",
        None,
        "NetworkPolicy",
    ),
    call(
        "get",
        "",
        "nodes",
        None,
        "this node's taints before changing them",
    ),
    call(
        "patch",
        "",
        "nodes",
        None,
        "this node's agent-not-ready taint",
    ),
    call(
        "patch",
        "",
        "nodes",
        Some("status"),
        "this node's NetworkUnavailable condition",
    ),
];

/// Whether the agent makes this request.
pub fn allowed(verb: &str, group: &str, resource: &str, subresource: Option<&str>) -> bool {
    API_CALLS.iter().any(|c| {
        c.verb == verb && c.group == group && c.resource == resource && c.subresource == subresource
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_watched_kind_is_listed_and_watched() {
        for kind in crate::agent::kinds::all() {
            let info = kind.id.info;
            for verb in ["list", "watch"] {
                assert!(
                    allowed(verb, info.group, info.plural, None),
                    "{verb} {}",
                    info.plural
                );
            }
        }
        let watched = crate::agent::kinds::all().len();
        let reads = API_CALLS
            .iter()
            .filter(|c| c.verb == "list" || c.verb == "watch")
            .count();
        assert_eq!(
            reads,
            2 * watched,
            "no list or watch beyond the watched kinds"
        );
    }
}
