//! Label selectors (`metav1.LabelSelector`): validated once, matched many times.

use std::fmt;

use crate::names::{label_key_problem, label_value_problem};
use crate::view::Labels;
use crate::wire;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    pub values: Vec<String>,
}

/// Every requirement must hold; the empty selector selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Selector {
    /// `matchLabels`, sorted by key.
    pub match_labels: Vec<(String, String)>,
    pub match_expressions: Vec<Requirement>,
}

impl Selector {
    pub fn everything() -> Selector {
        Selector::default()
    }

    pub fn is_everything(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    pub fn matches(&self, labels: &dyn Labels) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v.as_str()))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }

    /// Validates a wire selector; `field` is its JSON path, for the issues.
    pub fn from_wire(sel: &wire::LabelSelector, field: &str) -> Result<Selector, Vec<Problem>> {
        let mut problems = Vec::new();
        let mut match_labels: Vec<(String, String)> = Vec::new();
        for (k, v) in sel.match_labels.iter().flatten() {
            let f = format!("{field}.matchLabels[{k:?}]");
            if let Some(p) = label_key_problem(k) {
                problems.push(Problem::new(&f, format!("invalid label key: {p}")));
            }
            if let Some(p) = label_value_problem(v) {
                problems.push(Problem::new(&f, format!("invalid label value: {p}")));
            }
            match_labels.push((k.clone(), v.clone()));
        }
        match_labels.sort();
        let mut match_expressions = Vec::new();
        for (i, req) in sel.match_expressions.iter().flatten().enumerate() {
            let f = format!("{field}.matchExpressions[{i}]");
            if let Some(p) = label_key_problem(&req.key) {
                problems.push(Problem::new(
                    format!("{f}.key"),
                    format!("invalid label key {:?}: {p}", req.key),
                ));
            }
            let values = req.values.clone().unwrap_or_default();
            let operator = match req.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    problems.push(Problem::new(
                        format!("{f}.operator"),
                        format!("{other:?} is not one of In, NotIn, Exists, DoesNotExist"),
                    ));
                    continue;
                }
            };
            match operator {
                Operator::In | Operator::NotIn if values.is_empty() => problems.push(Problem::new(
                    format!("{f}.values"),
                    "must be non-empty for In and NotIn",
                )),
                Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                    problems.push(Problem::new(
                        format!("{f}.values"),
                        "must be empty for Exists and DoesNotExist",
                    ))
                }
                _ => {}
            }
            for (j, v) in values.iter().enumerate() {
                if let Some(p) = label_value_problem(v) {
                    problems.push(Problem::new(
                        format!("{f}.values[{j}]"),
                        format!("invalid label value: {p}"),
                    ));
                }
            }
            match_expressions.push(Requirement {
                key: req.key.clone(),
                operator,
                values,
            });
        }
        if problems.is_empty() {
            Ok(Selector {
                match_labels,
                match_expressions,
            })
        } else {
            Err(problems)
        }
    }
}

impl Requirement {
    pub fn matches(&self, labels: &dyn Labels) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::In => value.is_some_and(|v| self.values.iter().any(|x| x == v)),
            Operator::NotIn => value.is_none_or(|v| !self.values.iter().any(|x| x == v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_everything() {
            return write!(f, "{{}}");
        }
        let mut parts: Vec<String> = self
            .match_labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        for r in &self.match_expressions {
            parts.push(match r.operator {
                Operator::In => format!("{} in ({})", r.key, r.values.join(",")),
                Operator::NotIn => format!("{} notin ({})", r.key, r.values.join(",")),
                Operator::Exists => r.key.clone(),
                Operator::DoesNotExist => format!("!{}", r.key),
            });
        }
        write!(f, "{}", parts.join(","))
    }
}

/// One thing wrong with one field, before it is attached to an object as an `Issue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub field: String,
    pub message: String,
}

impl Problem {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem {
            field: field.into(),
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn sel(json: &str) -> Result<Selector, Vec<Problem>> {
        Selector::from_wire(&serde_json::from_str(json).unwrap(), "spec.podSelector")
    }

    #[test]
    fn operators_follow_the_api() {
        let l = labels(&[("pod", "a"), ("tier", "web")]);
        assert!(sel("{}").unwrap().matches(&l));
        assert!(sel(r#"{"matchLabels":{"pod":"a"}}"#).unwrap().matches(&l));
        assert!(!sel(r#"{"matchLabels":{"pod":"b"}}"#).unwrap().matches(&l));
        let e = |op: &str, vals: &str| {
            sel(&format!(
                r#"{{"matchExpressions":[{{"key":"pod","operator":"{op}"{vals}}}]}}"#
            ))
            .unwrap()
        };
        assert!(e("In", r#","values":["a","b"]"#).matches(&l));
        assert!(!e("In", r#","values":["b"]"#).matches(&l));
        assert!(e("NotIn", r#","values":["b"]"#).matches(&l));
        assert!(!e("NotIn", r#","values":["a"]"#).matches(&l));
        // NotIn and DoesNotExist hold for a pod without the key at all.
        assert!(e("NotIn", r#","values":["a"]"#).matches(&labels(&[])));
        assert!(e("Exists", "").matches(&l));
        assert!(!e("DoesNotExist", "").matches(&l));
        assert!(e("DoesNotExist", "").matches(&labels(&[])));
    }

    #[test]
    fn refusals_name_the_field() {
        let p = sel(r#"{"matchExpressions":[{"key":"pod","operator":"Equals","values":["a"]}]}"#)
            .unwrap_err();
        assert_eq!(p[0].field, "spec.podSelector.matchExpressions[0].operator");
        let p = sel(r#"{"matchExpressions":[{"key":"pod","operator":"In"}]}"#).unwrap_err();
        assert_eq!(p[0].field, "spec.podSelector.matchExpressions[0].values");
        let p = sel(r#"{"matchExpressions":[{"key":"pod","operator":"Exists","values":["a"]}]}"#)
            .unwrap_err();
        assert_eq!(p[0].field, "spec.podSelector.matchExpressions[0].values");
        let p = sel(r#"{"matchLabels":{"bad key":"a"}}"#).unwrap_err();
        assert!(p[0].field.starts_with("spec.podSelector.matchLabels"));
        let p = sel(r#"{"matchLabels":{"pod":"-a"}}"#).unwrap_err();
        assert!(p[0].message.contains("label value"));
    }
}
