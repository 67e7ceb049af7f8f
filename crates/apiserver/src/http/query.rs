//! Query strings: percent-decoding and the parameters of lists, watches and writes.

use std::collections::BTreeMap;

use crate::error::ApiError;
use crate::resources::ResourceDef;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::ListOptions;

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub struct Query(BTreeMap<String, String>);

impl Query {
    pub fn parse(q: Option<&str>) -> Self {
        let mut map = BTreeMap::new();
        for pair in q.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            map.insert(decode(k), decode(v));
        }
        Query(map)
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true") | Some("1"))
    }

    pub fn dry_run(&self) -> Result<bool, ApiError> {
        match self.get("dryRun") {
            None | Some("") => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!(
                "dryRun: Unsupported value: {other:?}: supported values: \"All\""
            ))),
        }
    }

    pub fn list_options(&self, def: &ResourceDef) -> Result<ListOptions, ApiError> {
        let limit = match self.get("limit") {
            None | Some("") => None,
            Some(l) => Some(l.parse::<i64>().map_err(|_| {
                ApiError::bad_request(format!("limit: Invalid value: {l:?}: must be an integer"))
            })?),
        };
        Ok(ListOptions {
            labels: LabelSelector::parse(self.get("labelSelector").unwrap_or(""))?,
            fields: FieldSelector::parse(
                self.get("fieldSelector").unwrap_or(""),
                &def.field_labels(),
            )?,
            limit: limit.filter(|l| *l > 0).map(|l| l as usize),
            continue_token: self
                .get("continue")
                .filter(|c| !c.is_empty())
                .map(str::to_string),
            resource_version: self.get("resourceVersion").map(str::to_string),
            resource_version_match: self.get("resourceVersionMatch").map(str::to_string),
        })
    }

    pub fn timeout_seconds(&self) -> Option<u64> {
        self.get("timeoutSeconds").and_then(|t| t.parse().ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes() {
        let q = Query::parse(Some("labelSelector=app%3Dweb%2Ctier+in+%28a%29&watch=1&x"));
        assert_eq!(q.get("labelSelector"), Some("app=web,tier in (a)"));
        assert!(q.flag("watch"));
        assert_eq!(q.get("x"), Some(""));
        assert_eq!(Query::parse(Some("a=%zz%4")).get("a"), Some("%zz%4"));
    }
}
