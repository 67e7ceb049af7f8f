//! The request record: every request with its verb, resource, subresource, namespace,
//! name, API group/version and authenticated user, so a test can prove which calls a
//! component made (for example, that the agent's RBAC grants are minimal).

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// What a request does, in Kubernetes' terms (the RBAC request attributes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attributes {
    /// get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: String,
    pub api_group: String,
    pub api_version: String,
    /// Empty for a non-resource request (discovery, `/version`, `/openapi/...`).
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// The URL path (without the query).
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestRecord {
    pub seq: u64,
    pub user: String,
    #[serde(flatten)]
    pub attributes: Attributes,
    /// The HTTP status answered (200 for a watch that started).
    pub code: u16,
}

/// One line of the summary: distinct (user, verb, group, resource, subresource, namespace).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    pub user: String,
    pub verb: String,
    pub api_group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
}

#[derive(Debug, Default)]
pub struct Recorder {
    entries: VecDeque<RequestRecord>,
    summary: BTreeMap<Grant, u64>,
    next_seq: u64,
    dropped: u64,
    limit: usize,
}

impl Recorder {
    pub fn new(limit: usize) -> Self {
        Recorder {
            limit: limit.max(1),
            ..Default::default()
        }
    }

    pub fn record(&mut self, user: &str, attributes: Attributes, code: u16) {
        self.next_seq += 1;
        let grant = Grant {
            user: user.to_string(),
            verb: attributes.verb.clone(),
            api_group: attributes.api_group.clone(),
            resource: attributes.resource.clone(),
            subresource: attributes.subresource.clone(),
            namespace: attributes.namespace.clone(),
        };
        *self.summary.entry(grant).or_default() += 1;
        self.entries.push_back(RequestRecord {
            seq: self.next_seq,
            user: user.to_string(),
            attributes,
            code,
        });
        while self.entries.len() > self.limit {
            self.entries.pop_front();
            self.dropped += 1;
        }
    }

    /// Records with `seq > after`.
    pub fn since(&self, after: u64) -> Vec<RequestRecord> {
        let start = self.entries.partition_point(|r| r.seq <= after);
        self.entries.iter().skip(start).cloned().collect()
    }

    pub fn summary(&self) -> Vec<(Grant, u64)> {
        self.summary.iter().map(|(g, n)| (g.clone(), *n)).collect()
    }

    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.summary.clear();
        self.dropped = 0;
    }
}
