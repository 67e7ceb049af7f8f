//! The API server's syntax rules for the names policy carries, so weft refuses exactly what
//! the API server refuses (refusing more would leave an accepted policy unenforced).

/// A label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters (alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric).
pub fn label_key_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if let Some(problem) = dns_subdomain_problem(prefix) {
            return Some(format!("prefix {prefix:?} {problem}"));
        }
    }
    if name.is_empty() {
        return Some("name part must not be empty".into());
    }
    label_name_problem(name)
}

/// A label value: empty, or at most 63 characters like a label name.
pub fn label_value_problem(value: &str) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    label_name_problem(value)
}

fn label_name_problem(s: &str) -> Option<String> {
    if s.len() > 63 {
        return Some(format!("{s:?} is longer than 63 characters"));
    }
    let bytes = s.as_bytes();
    let inner_ok = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.';
    if !bytes[0].is_ascii_alphanumeric()
        || !bytes[bytes.len() - 1].is_ascii_alphanumeric()
        || !bytes.iter().all(|&b| inner_ok(b))
    {
        return Some(format!(
            "{s:?} must be alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
        ));
    }
    None
}

fn dns_subdomain_problem(s: &str) -> Option<String> {
    if s.is_empty() || s.len() > 253 {
        return Some("must be 1 to 253 characters".into());
    }
    for label in s.split('.') {
        let b = label.as_bytes();
        let ok = !b.is_empty()
            && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
            && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
            && b.iter()
                .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-');
        if !ok {
            return Some("must be a lowercase DNS subdomain".into());
        }
    }
    None
}

/// A named port (IANA_SVC_NAME): 1 to 15 lowercase alphanumerics or `-`, at least one
/// letter, no leading, trailing or doubled `-`.
pub fn port_name_problem(name: &str) -> Option<String> {
    let b = name.as_bytes();
    if b.is_empty() || b.len() > 15 {
        return Some(format!("{name:?} must be 1 to 15 characters"));
    }
    if !b
        .iter()
        .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
    {
        return Some(format!(
            "{name:?} may only contain lowercase letters, digits and '-'"
        ));
    }
    if !b.iter().any(|c| c.is_ascii_lowercase()) {
        return Some(format!("{name:?} must contain at least one letter"));
    }
    if b[0] == b'-' || b[b.len() - 1] == b'-' || name.contains("--") {
        return Some(format!(
            "{name:?} must not start or end with '-' or contain '--'"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_keys() {
        for good in ["app", "kubernetes.io/metadata.name", "a.b-c_d", "x/y", "A1"] {
            assert_eq!(label_key_problem(good), None, "{good}");
        }
        for bad in [
            "",
            "/x",
            "-a",
            "a-",
            "Upper.Case/x",
            "a/b/c",
            &"k".repeat(64),
        ] {
            assert!(label_key_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn label_values() {
        for good in ["", "b", "v1.2", "A_b-c"] {
            assert_eq!(label_value_problem(good), None, "{good}");
        }
        for bad in ["-b", "b.", "a b", "ü"] {
            assert!(label_value_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn port_names() {
        for good in ["http", "serve-80-tcp", "h2c", "a"] {
            assert_eq!(port_name_problem(good), None, "{good}");
        }
        for bad in [
            "",
            "80",
            "HTTP",
            "-http",
            "http-",
            "a--b",
            "sixteen-chars-xx",
        ] {
            assert!(port_name_problem(bad).is_some(), "{bad}");
        }
    }
}
