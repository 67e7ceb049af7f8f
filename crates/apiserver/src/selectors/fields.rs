//! Field selectors: `field=value`, `field==value`, `field!=value`, comma-separated, with
//! `\` escaping `,`, `=`, `!` and `\` in values. Only the resource's selectable fields are
//! accepted (400 `field label not supported`, as the real server answers).

use crate::error::ApiError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldTerm {
    pub field: String,
    pub value: String,
    pub negated: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    pub terms: Vec<FieldTerm>,
}

fn split_unescaped(input: &str, sep: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut escaped = false;
    for c in input.chars() {
        if escaped {
            cur.push('\\');
            cur.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    if escaped {
        cur.push('\\');
    }
    out.push(cur);
    out
}

fn unescape(value: &str) -> Result<String, ApiError> {
    let mut out = String::new();
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(e @ ('\\' | ',' | '=' | '!')) => out.push(e),
                Some(e) => {
                    return Err(ApiError::bad_request(format!(
                        "invalid field selector: invalid escape sequence: \\{e}"
                    )))
                }
                None => {
                    return Err(ApiError::bad_request(
                        "invalid field selector: unterminated escape sequence",
                    ))
                }
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

impl FieldSelector {
    /// Parses `input` and checks every field against `supported` (field label, default).
    pub fn parse(input: &str, supported: &[(String, String)]) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        if input.trim().is_empty() {
            return Ok(FieldSelector { terms });
        }
        for part in split_unescaped(input, ',') {
            let (field, value, negated) = if let Some(i) = find_op(&part, "!=") {
                (&part[..i], &part[i + 2..], true)
            } else if let Some(i) = find_op(&part, "==") {
                (&part[..i], &part[i + 2..], false)
            } else if let Some(i) = find_op(&part, "=") {
                (&part[..i], &part[i + 1..], false)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{input}'; can't understand '{part}'"
                )));
            };
            let field = field.trim().to_string();
            if !supported.iter().any(|(f, _)| *f == field) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            terms.push(FieldTerm {
                field,
                value: unescape(value)?,
                negated,
            });
        }
        Ok(FieldSelector { terms })
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// `fields` holds every selectable field of the object (see `store::object`).
    pub fn matches(&self, fields: &[(String, String)]) -> bool {
        self.terms.iter().all(|t| {
            let value = fields
                .iter()
                .find(|(f, _)| *f == t.field)
                .map(|(_, v)| v.as_str())
                .unwrap_or("");
            (value == t.value) != t.negated
        })
    }

    /// The value required by an equality term on `field` (e.g. `metadata.name=x`).
    pub fn required(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| t.field == field && !t.negated)
            .map(|t| t.value.as_str())
    }
}

/// The byte index of the first unescaped `op` in `s`.
fn find_op(s: &str, op: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            i += 2;
            continue;
        }
        if s[i..].starts_with(op) {
            return Some(i);
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn supported() -> Vec<(String, String)> {
        vec![
            ("metadata.name".into(), String::new()),
            ("spec.nodeName".into(), String::new()),
        ]
    }

    #[test]
    fn parses_and_matches() {
        let s =
            FieldSelector::parse("spec.nodeName=n1,metadata.name!=a\\,b", &supported()).unwrap();
        let fields = vec![
            ("metadata.name".to_string(), "a,b".to_string()),
            ("spec.nodeName".to_string(), "n1".to_string()),
        ];
        assert!(!s.matches(&fields));
        let s = FieldSelector::parse("spec.nodeName==n1", &supported()).unwrap();
        assert!(s.matches(&fields));
        let s = FieldSelector::parse("spec.nodeName=", &supported()).unwrap();
        assert!(!s.matches(&fields));
    }

    #[test]
    fn unsupported_field_is_400() {
        let err = FieldSelector::parse("spec.foo=x", &supported()).unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(err.message, "field label not supported: spec.foo");
        assert_eq!(
            FieldSelector::parse("nonsense", &supported())
                .unwrap_err()
                .code,
            400
        );
    }
}
