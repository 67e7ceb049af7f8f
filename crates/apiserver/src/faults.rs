//! Fault injection: error answers (500, 429 with Retry-After, 503, ...), delays, and
//! dropped connections for requests matching a rule, a given number of times or until
//! cleared. Watches can also be dropped mid-stream and versions expired (see `Handle`).

use serde::{Deserialize, Serialize};

use crate::recorder::Attributes;

/// Which requests a rule applies to; an empty field matches anything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Match {
    pub verb: Option<String>,
    pub api_group: Option<String>,
    pub resource: Option<String>,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub user: Option<String>,
}

impl Match {
    pub fn matches(&self, user: &str, a: &Attributes) -> bool {
        let ok = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        ok(&self.verb, &a.verb)
            && ok(&self.api_group, &a.api_group)
            && ok(&self.resource, &a.resource)
            && ok(&self.subresource, &a.subresource)
            && ok(&self.namespace, &a.namespace)
            && ok(&self.name, &a.name)
            && ok(&self.user, user)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub enum Action {
    /// Answer with a Status of this code (reason from the code: 429 TooManyRequests, 500
    /// InternalError, 503 ServiceUnavailable, 504 Timeout, ...).
    Error {
        code: u16,
        #[serde(default)]
        message: Option<String>,
        #[serde(default)]
        retry_after_seconds: Option<u32>,
    },
    /// Hold the request this long, then serve it.
    Delay { millis: u64 },
    /// Close the connection without an answer.
    Drop,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultRule {
    #[serde(default, rename = "match")]
    pub matches: Match,
    pub action: Action,
    /// How many requests it applies to; `None` until cleared.
    #[serde(default)]
    pub times: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActiveFault {
    pub id: u64,
    #[serde(flatten)]
    pub rule: FaultRule,
}

#[derive(Debug, Default)]
pub struct Faults {
    rules: Vec<ActiveFault>,
    next_id: u64,
}

impl Faults {
    pub fn add(&mut self, rule: FaultRule) -> u64 {
        self.next_id += 1;
        self.rules.push(ActiveFault {
            id: self.next_id,
            rule,
        });
        self.next_id
    }

    pub fn remove(&mut self, id: u64) -> bool {
        let before = self.rules.len();
        self.rules.retain(|r| r.id != id);
        before != self.rules.len()
    }

    pub fn clear(&mut self) {
        self.rules.clear();
    }

    pub fn list(&self) -> Vec<ActiveFault> {
        self.rules.clone()
    }

    /// The actions for a request (delays first), consuming one use of each matching rule.
    pub fn take(&mut self, user: &str, a: &Attributes) -> Vec<Action> {
        let mut out = Vec::new();
        for r in &mut self.rules {
            if r.rule.matches.matches(user, a) && r.rule.times != Some(0) {
                if let Some(t) = &mut r.rule.times {
                    *t -= 1;
                }
                out.push(r.rule.action.clone());
            }
        }
        self.rules.retain(|r| r.rule.times != Some(0));
        out.sort_by_key(|a| !matches!(a, Action::Delay { .. }));
        out
    }
}
