//! Lists: consistent pages (`limit`/`continue`) served from the state at the list's
//! resourceVersion, reconstructed from the event history when objects changed since, and
//! `resourceVersion`/`resourceVersionMatch` semantics of the real server.

use base64::Engine;
use serde_json::json;
use std::collections::BTreeMap;

use super::{Key, ObjRef, Store};
use crate::error::{ApiError, Reason};
use crate::resources::ResourceDef;
use crate::selectors::{FieldSelector, LabelSelector};

#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
}

#[derive(Debug, Clone)]
pub struct ListPage {
    pub items: Vec<ObjRef>,
    pub resource_version: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<u64>,
}

impl ListOptions {
    pub fn matches(&self, obj: &super::StoredObject) -> bool {
        self.labels.matches(&obj.labels) && self.fields.matches(&obj.fields)
    }
}

fn encode_continue(rv: u64, key: &Key, namespaced: bool) -> String {
    let start = if namespaced {
        format!("{}/{}\u{0}", key.0, key.1)
    } else {
        format!("{}\u{0}", key.1)
    };
    let token = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": start});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

fn decode_continue(token: &str, namespaced: bool) -> Result<(u64, Key), ApiError> {
    let bad = |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|_| bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)"))?;
    let v: serde_json::Value =
        serde_json::from_slice(&raw).map_err(|_| bad("not a JSON continue token"))?;
    if v["v"] != "meta.k8s.io/v1" {
        return Err(bad("server does not recognize this encoded key"));
    }
    let rv = v["rv"]
        .as_u64()
        .filter(|rv| *rv > 0)
        .ok_or_else(|| bad("incorrect encoded start resourceVersion"))?;
    let start = v["start"].as_str().ok_or_else(|| bad("missing start"))?;
    let start = start.strip_suffix('\u{0}').unwrap_or(start);
    let key = if namespaced {
        let (ns, name) = start
            .split_once('/')
            .ok_or_else(|| bad("malformed start key"))?;
        (ns.to_string(), name.to_string())
    } else {
        (String::new(), start.to_string())
    };
    Ok((rv, key))
}

fn too_large(requested: u64, current: u64) -> ApiError {
    let mut err = ApiError::new(
        Reason::Timeout,
        format!("Too large resource version: {requested}, current: {current}"),
    );
    err.retry_after_seconds = Some(1);
    err.causes.push(crate::error::cause(
        "ResourceVersionTooLarge",
        "",
        "Too large resource version",
    ));
    err
}

impl Store {
    pub fn list(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> Result<ListPage, ApiError> {
        let state = self.state(def)?;
        let current = self.rv;
        let rv_param = opts.resource_version.as_deref().filter(|s| !s.is_empty());
        let parse_rv = |s: &str| {
            s.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!("invalid resource version: {s:?}")).with_code(400)
            })
        };
        let (at, start_after) = if let Some(token) = &opts.continue_token {
            if rv_param.is_some_and(|s| s != "0") {
                return Err(ApiError::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
            let (rv, key) = decode_continue(token, def.namespaced)?;
            if rv < state.history.compacted() {
                let mut err = ApiError::expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.");
                // The real server offers an inconsistent continuation from the current state.
                err.continue_token = Some(encode_continue(current, &key, def.namespaced));
                return Err(err.with_code(410));
            }
            (rv, Some(key))
        } else {
            match (rv_param, opts.resource_version_match.as_deref().filter(|s| !s.is_empty())) {
                (None, Some(_)) => {
                    return Err(ApiError::bad_request(
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    ))
                }
                (None, None) | (Some("0"), None) | (Some("0"), Some("NotOlderThan")) => (current, None),
                (Some("0"), Some(m)) => {
                    return Err(ApiError::bad_request(format!(
                        "resourceVersionMatch \"{m}\" is forbidden for resourceVersion \"0\""
                    )))
                }
                (Some(s), None) | (Some(s), Some("NotOlderThan")) => {
                    let rv = parse_rv(s)?;
                    if rv > current {
                        return Err(too_large(rv, current));
                    }
                    (current, None)
                }
                (Some(s), Some("Exact")) => {
                    let rv = parse_rv(s)?;
                    if rv > current {
                        return Err(too_large(rv, current));
                    }
                    if rv < state.history.compacted() {
                        return Err(ApiError::expired(
                            "The resourceVersion for the provided list is too old.",
                        )
                        .with_code(410));
                    }
                    (rv, None)
                }
                (Some(_), Some(m)) => {
                    return Err(ApiError::bad_request(format!(
                        "resourceVersionMatch: Unsupported value: \"{m}\": supported values: \"Exact\", \"NotOlderThan\", \"\""
                    )))
                }
            }
        };
        let overrides = if at < current {
            state.history.overrides_at(at).ok_or_else(|| {
                ApiError::expired("The resourceVersion for the provided list is too old.")
                    .with_code(410)
            })?
        } else {
            BTreeMap::new()
        };

        let lower = match (&start_after, ns) {
            (Some(k), _) => std::ops::Bound::Excluded(k.clone()),
            (None, Some(ns)) => std::ops::Bound::Included((ns.to_string(), String::new())),
            (None, None) => std::ops::Bound::Unbounded,
        };
        let range = (lower.clone(), std::ops::Bound::Unbounded);
        let current_iter = state
            .objects
            .range(range.clone())
            .map(|(k, o)| (k, Some(o)));
        let override_iter = overrides.range(range).map(|(k, o)| (k, o.as_ref()));
        let in_ns = |k: &Key| ns.is_none_or(|ns| k.0 == ns);
        let selecting = !opts.labels.is_empty() || !opts.fields.is_empty();
        let limit = opts.limit.filter(|l| *l > 0);

        let mut items = Vec::new();
        let mut continue_token = None;
        let mut remaining = 0u64;
        let mut last_key: Option<Key> = None;
        for (key, obj) in merge(current_iter, override_iter) {
            if !in_ns(key) {
                break;
            }
            let Some(obj) = obj else { continue };
            if !opts.matches(obj) {
                continue;
            }
            if let Some(limit) = limit {
                if items.len() >= limit {
                    if continue_token.is_none() {
                        if let Some(last) = &last_key {
                            continue_token = Some(encode_continue(at, last, def.namespaced));
                        }
                    }
                    if selecting {
                        break;
                    }
                    remaining += 1;
                    continue;
                }
            }
            last_key = Some(key.clone());
            items.push(obj.clone());
        }
        Ok(ListPage {
            items,
            resource_version: at,
            remaining: (continue_token.is_some() && !selecting).then_some(remaining),
            continue_token,
        })
    }
}

/// Merges the current objects with the undo overrides (override wins) in key order.
fn merge<'a>(
    current: impl Iterator<Item = (&'a Key, Option<&'a ObjRef>)>,
    overrides: impl Iterator<Item = (&'a Key, Option<&'a ObjRef>)>,
) -> impl Iterator<Item = (&'a Key, Option<&'a ObjRef>)> {
    let mut a = current.peekable();
    let mut b = overrides.peekable();
    std::iter::from_fn(move || match (a.peek(), b.peek()) {
        (Some((ka, _)), Some((kb, _))) => {
            if ka < kb {
                a.next()
            } else if kb < ka {
                b.next()
            } else {
                a.next();
                b.next()
            }
        }
        (Some(_), None) => a.next(),
        (None, Some(_)) => b.next(),
        (None, None) => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip() {
        let key = ("ns".to_string(), "pod-1".to_string());
        let t = encode_continue(42, &key, true);
        assert_eq!(decode_continue(&t, true).unwrap(), (42, key));
        assert_eq!(decode_continue("garbage!", true).unwrap_err().code, 400);
    }
}
