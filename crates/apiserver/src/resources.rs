//! The resource table: every kind the server serves is one [`ResourceDef`] entry (group,
//! version, kind, plural, scope, subresources, short names, verbs, selectable fields, patch
//! merge keys). Discovery, routing, storage and selectors all read it, so adding a kind
//! (a CRD such as ClusterNetworkPolicy) is one more entry in [`builtin`] or in
//! [`crate::Config::extra_resources`].

use serde::{Deserialize, Serialize};

/// How a list field merges under a strategic-merge patch (the Go types' `patchStrategy`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatchKey {
    /// Dotted path of field names from the object root; list levels are transparent
    /// (`spec.containers.ports` is `ports` inside every container).
    pub path: String,
    /// `None` for a list of scalars merged as a set (`metadata.finalizers`).
    pub merge_key: Option<String>,
}

/// What the server does with the kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Storage {
    /// Stored, listed, watched.
    Stored,
    /// Create-only "review" kinds (TokenReview, SubjectAccessReview): a POST is answered by
    /// the [`crate::Reviewer`] and nothing is stored.
    Review,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceDef {
    /// `""` for the core group.
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    /// Only `status` is served as a real subresource today.
    pub subresources: Vec<String>,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub verbs: Vec<String>,
    /// Field-selector labels beyond `metadata.name` (and `metadata.namespace` when
    /// namespaced), each with the value a missing field compares as.
    pub selectable_fields: Vec<(String, String)>,
    /// Set `metadata.generation` and bump it when anything outside metadata and status changes.
    pub generation: bool,
    /// Custom resources do not take strategic-merge patches (415 on the real server).
    pub strategic_merge: bool,
    pub patch_keys: Vec<PatchKey>,
    pub storage: Storage,
    /// DELETE answers with the object (pods, services, namespaces) instead of a Status.
    #[serde(default)]
    pub returns_deleted_object: bool,
}

impl ResourceDef {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    pub fn has_status(&self) -> bool {
        self.subresources.iter().any(|s| s == "status")
    }

    pub fn allows(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }

    /// The selectable field labels and their defaults, `metadata.*` first.
    pub fn field_labels(&self) -> Vec<(String, String)> {
        let mut out = vec![("metadata.name".to_string(), String::new())];
        if self.namespaced {
            out.push(("metadata.namespace".to_string(), String::new()));
        }
        out.extend(self.selectable_fields.iter().cloned());
        out
    }

    /// The merge key of the list at `path`, if it merges (`Some(None)`: a set of scalars).
    pub fn patch_key(&self, path: &str) -> Option<Option<&str>> {
        match path {
            "metadata.ownerReferences" => return Some(Some("uid")),
            "metadata.finalizers" => return Some(None),
            _ => {}
        }
        self.patch_keys
            .iter()
            .find(|k| k.path == path)
            .map(|k| k.merge_key.as_deref())
    }

    /// A stored custom resource with the usual CRD defaults (status subresource,
    /// generation, no strategic merge), for one-line registration of a CRD kind.
    pub fn custom(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> Self {
        ResourceDef {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
            singular: kind.to_ascii_lowercase(),
            namespaced,
            subresources: vec!["status".into()],
            short_names: vec![],
            categories: vec![],
            verbs: ALL_VERBS.iter().map(|v| v.to_string()).collect(),
            selectable_fields: vec![],
            generation: true,
            strategic_merge: false,
            patch_keys: vec![],
            storage: Storage::Stored,
            returns_deleted_object: false,
        }
    }
}

pub const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn key(path: &str, merge_key: Option<&str>) -> PatchKey {
    PatchKey {
        path: path.into(),
        merge_key: merge_key.map(str::to_string),
    }
}

fn strs(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn fields(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(k, d)| (k.to_string(), d.to_string()))
        .collect()
}

struct Def {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    status: bool,
    short: &'static [&'static str],
    categories: &'static [&'static str],
    fields: &'static [(&'static str, &'static str)],
    generation: bool,
    keys: &'static [(&'static str, Option<&'static str>)],
}

impl Def {
    fn build(self) -> ResourceDef {
        ResourceDef {
            group: self.group.into(),
            version: self.version.into(),
            kind: self.kind.into(),
            plural: self.plural.into(),
            singular: self.kind.to_ascii_lowercase(),
            namespaced: self.namespaced,
            subresources: if self.status {
                strs(&["status"])
            } else {
                vec![]
            },
            short_names: strs(self.short),
            categories: strs(self.categories),
            verbs: strs(ALL_VERBS),
            selectable_fields: fields(self.fields),
            generation: self.generation,
            strategic_merge: true,
            patch_keys: self.keys.iter().map(|(p, k)| key(p, *k)).collect(),
            storage: Storage::Stored,
            returns_deleted_object: matches!(self.kind, "Pod" | "Service" | "Namespace"),
        }
    }
}

const CONTAINER_KEYS: [(&str, Option<&str>); 4] = [
    ("ports", Some("containerPort")),
    ("env", Some("name")),
    ("volumeMounts", Some("mountPath")),
    ("volumeDevices", Some("devicePath")),
];

fn pod_keys() -> Vec<PatchKey> {
    let mut keys = vec![
        key("spec.volumes", Some("name")),
        key("spec.imagePullSecrets", Some("name")),
        key("spec.hostAliases", Some("ip")),
        key("spec.topologySpreadConstraints", Some("topologyKey")),
        key("spec.schedulingGates", Some("name")),
        key("spec.resourceClaims", Some("name")),
        key("status.conditions", Some("type")),
        key("status.hostIPs", Some("ip")),
        key("status.podIPs", Some("ip")),
        key("status.resourceClaimStatuses", Some("name")),
    ];
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        keys.push(key(&format!("spec.{list}"), Some("name")));
        for (field, merge) in CONTAINER_KEYS {
            keys.push(key(&format!("spec.{list}.{field}"), merge));
        }
    }
    for list in [
        "initContainerStatuses",
        "containerStatuses",
        "ephemeralContainerStatuses",
    ] {
        keys.push(key(
            &format!("status.{list}.volumeMounts"),
            Some("mountPath"),
        ));
        keys.push(key(
            &format!("status.{list}.allocatedResourcesStatus"),
            Some("name"),
        ));
    }
    keys
}

/// The kinds weft uses, as a 1.35 API server serves them.
pub fn builtin() -> Vec<ResourceDef> {
    let core = |kind, plural, namespaced, status, short, fields, keys| Def {
        group: "",
        version: "v1",
        kind,
        plural,
        namespaced,
        status,
        short,
        categories: &[],
        fields,
        generation: false,
        keys,
    };
    let mut pods = Def {
        categories: &["all"],
        generation: true,
        ..core(
            "Pod",
            "pods",
            true,
            true,
            &["po"],
            &[
                ("spec.nodeName", ""),
                ("spec.restartPolicy", ""),
                ("spec.schedulerName", ""),
                ("spec.serviceAccountName", ""),
                ("spec.hostNetwork", "false"),
                ("status.phase", ""),
                ("status.podIP", ""),
                ("status.nominatedNodeName", ""),
            ],
            &[],
        )
    }
    .build();
    pods.patch_keys = pod_keys();
    let mut services = Def {
        categories: &["all"],
        ..core(
            "Service",
            "services",
            true,
            true,
            &["svc"],
            &[("spec.clusterIP", ""), ("spec.type", "")],
            &[
                ("spec.ports", Some("port")),
                ("status.conditions", Some("type")),
            ],
        )
    }
    .build();
    services.singular = "service".into();
    vec![
        core(
            "Namespace",
            "namespaces",
            false,
            true,
            &["ns"],
            &[("status.phase", "")],
            &[("status.conditions", Some("type"))],
        )
        .build(),
        core(
            "Node",
            "nodes",
            false,
            true,
            &["no"],
            &[("spec.unschedulable", "false")],
            &[
                ("spec.podCIDRs", None),
                ("status.conditions", Some("type")),
                ("status.addresses", Some("type")),
            ],
        )
        .build(),
        pods,
        services,
        core("ConfigMap", "configmaps", true, false, &["cm"], &[], &[]).build(),
        core(
            "ServiceAccount",
            "serviceaccounts",
            true,
            false,
            &["sa"],
            &[],
            &[("secrets", Some("name"))],
        )
        .build(),
        core(
            "Event",
            "events",
            true,
            false,
            &["ev"],
            &[
                ("involvedObject.kind", ""),
                ("involvedObject.namespace", ""),
                ("involvedObject.name", ""),
                ("involvedObject.uid", ""),
                ("involvedObject.apiVersion", ""),
                ("involvedObject.resourceVersion", ""),
                ("involvedObject.fieldPath", ""),
                ("reason", ""),
                ("reportingComponent", ""),
                ("source", ""),
                ("type", ""),
            ],
            &[],
        )
        .build(),
        // Its own store here (the real server serves core and events.k8s.io Events from one).
        Def {
            group: "events.k8s.io",
            version: "v1",
            kind: "Event",
            plural: "events",
            namespaced: true,
            status: false,
            short: &["ev"],
            categories: &[],
            fields: &[
                ("regarding.kind", ""),
                ("regarding.namespace", ""),
                ("regarding.name", ""),
                ("regarding.uid", ""),
                ("reason", ""),
                ("reportingController", ""),
                ("type", ""),
            ],
            generation: false,
            keys: &[],
        }
        .build(),
        Def {
            group: "discovery.k8s.io",
            version: "v1",
            kind: "EndpointSlice",
            plural: "endpointslices",
            namespaced: true,
            status: false,
            short: &[],
            categories: &[],
            fields: &[("addressType", "")],
            generation: true,
            keys: &[],
        }
        .build(),
        Def {
            group: "networking.k8s.io",
            version: "v1",
            kind: "NetworkPolicy",
            plural: "networkpolicies",
            namespaced: true,
            status: false,
            short: &["netpol"],
            categories: &[],
            fields: &[],
            generation: true,
            keys: &[],
        }
        .build(),
        Def {
            group: "coordination.k8s.io",
            version: "v1",
            kind: "Lease",
            plural: "leases",
            namespaced: true,
            status: false,
            short: &[],
            categories: &[],
            fields: &[],
            generation: false,
            keys: &[],
        }
        .build(),
        review("authentication.k8s.io", "TokenReview", "tokenreviews"),
        review(
            "authorization.k8s.io",
            "SubjectAccessReview",
            "subjectaccessreviews",
        ),
    ]
}

fn review(group: &str, kind: &str, plural: &str) -> ResourceDef {
    ResourceDef {
        verbs: strs(&["create"]),
        subresources: vec![],
        generation: false,
        storage: Storage::Review,
        ..ResourceDef::custom(group, "v1", kind, plural, false)
    }
}

/// The resource table in use: lookups by (group, version, plural) and by kind.
#[derive(Debug, Clone)]
pub struct Resources {
    defs: Vec<std::sync::Arc<ResourceDef>>,
}

impl Resources {
    pub fn new(defs: Vec<ResourceDef>) -> Self {
        Resources {
            defs: defs.into_iter().map(std::sync::Arc::new).collect(),
        }
    }

    pub fn all(&self) -> &[std::sync::Arc<ResourceDef>] {
        &self.defs
    }

    pub fn find(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<&std::sync::Arc<ResourceDef>> {
        self.defs
            .iter()
            .find(|d| d.group == group && d.version == version && d.plural == plural)
    }

    /// By `apiVersion` and `kind` as written in an object.
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<&std::sync::Arc<ResourceDef>> {
        self.defs
            .iter()
            .find(|d| d.api_version() == api_version && d.kind == kind)
    }

    /// The groups in discovery order (core first, then by first appearance).
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for d in &self.defs {
            match out.iter_mut().find(|(g, _)| *g == d.group) {
                Some((_, versions)) => {
                    if !versions.contains(&d.version) {
                        versions.push(d.version.clone());
                    }
                }
                None => out.push((d.group.clone(), vec![d.version.clone()])),
            }
        }
        out
    }
}
