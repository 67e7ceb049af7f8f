//! Object metadata the server owns: names, uids, timestamps, and the checks a real server
//! applies to `metadata` before anything else.

use serde_json::{Map, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{cause, ApiError, Cause};

/// RFC 3339 in UTC with second precision, as `metav1.Time` serializes.
pub fn format_time(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

pub fn now() -> String {
    format_time(SystemTime::now())
}

/// Seconds since the epoch of an RFC 3339 UTC time written by [`format_time`] (or with
/// fractional seconds / an offset of `Z`), for the age columns of tables.
pub fn parse_time(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    Some(days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + se)
}

// Howard Hinnant's civil-calendar algorithms.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A cheap, well-mixed 64-bit random number (splitmix64 over time and a counter).
pub fn random_u64() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut z = nanos
        .wrapping_add(
            COUNTER
                .fetch_add(1, Ordering::Relaxed)
                .wrapping_mul(0x9E37_79B9_7F4A_7C15),
        )
        .wrapping_add(u64::from(std::process::id()) << 32);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A random (version 4) UUID, the form the real server gives `metadata.uid`.
pub fn new_uid() -> String {
    let (a, b) = (random_u64(), random_u64());
    let b = (b & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000;
    let a = (a & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000;
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xFFFF,
        a & 0xFFFF,
        b >> 48,
        b & 0xFFFF_FFFF_FFFF
    )
}

/// The five random characters `generateName` appends (consonants and digits, like the
/// real `utilrand.String`).
pub fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut r = random_u64();
    (0..5)
        .map(|_| {
            let c = ALPHABET[(r % ALPHABET.len() as u64) as usize] as char;
            r /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

/// RFC 1123 label: lower-case alphanumerics and `-`, at most 63.
pub fn valid_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// RFC 1123 subdomain: dot-separated labels, at most 253.
pub fn valid_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(valid_dns_label)
}

/// How a kind's names are validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    Subdomain,
    Label,
    /// Any path segment (events, leases, and other kinds validated loosely).
    PathSegment,
}

pub fn name_rule(kind: &str) -> NameRule {
    match kind {
        "Namespace" | "Service" => NameRule::Label,
        "Event" | "Lease" => NameRule::PathSegment,
        _ => NameRule::Subdomain,
    }
}

pub fn validate_name(kind: &str, name: &str) -> Option<Cause> {
    let (ok, what) = match name_rule(kind) {
        NameRule::Label => (
            valid_dns_label(name),
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
        ),
        NameRule::Subdomain => (
            valid_dns_subdomain(name),
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        ),
        NameRule::PathSegment => (
            !name.is_empty() && name != "." && name != ".." && !name.contains('/') && !name.contains('%'),
            "may not contain '/' or '%' and may not be '.' or '..'",
        ),
    };
    (!ok).then(|| {
        cause(
            "FieldValueInvalid",
            "metadata.name",
            format!("Invalid value: {name:?}: {what}"),
        )
    })
}

/// Checks `metadata.labels` and `metadata.annotations` are string maps with valid keys.
pub fn validate_labels(meta: &Map<String, Value>) -> Vec<Cause> {
    use crate::selectors::labels_syntax::{valid_label_key, valid_label_value};
    let mut causes = Vec::new();
    if let Some(labels) = meta.get("labels") {
        match labels {
            Value::Object(m) => {
                for (k, v) in m {
                    if !valid_label_key(k) {
                        causes.push(cause(
                            "FieldValueInvalid",
                            "metadata.labels",
                            format!("Invalid value: {k:?}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"),
                        ));
                    }
                    match v.as_str() {
                        Some(v) if valid_label_value(v) => {}
                        _ => causes.push(cause(
                            "FieldValueInvalid",
                            "metadata.labels",
                            format!("Invalid value: {v}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"),
                        )),
                    }
                }
            }
            Value::Null => {}
            _ => causes.push(cause(
                "FieldValueInvalid",
                "metadata.labels",
                "must be a map of strings",
            )),
        }
    }
    if let Some(annotations) = meta.get("annotations") {
        match annotations {
            Value::Object(m) if m.values().all(Value::is_string) => {}
            Value::Null => {}
            _ => causes.push(cause(
                "FieldValueInvalid",
                "metadata.annotations",
                "must be a map of strings",
            )),
        }
    }
    causes
}

/// `metadata` as a map, or a 400 naming it (the real decoder refuses a non-object).
pub fn metadata_mut<'a>(
    obj: &'a mut Value,
    kind: &str,
) -> Result<&'a mut Map<String, Value>, ApiError> {
    let Some(map) = obj.as_object_mut() else {
        return Err(ApiError::bad_request(format!(
            "{kind} in version cannot be handled: the object is not a JSON object"
        )));
    };
    let meta = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if meta.is_null() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut().ok_or_else(|| {
        ApiError::bad_request(format!(
            "{kind} in version cannot be handled as a {kind}: metadata must be an object"
        ))
    })
}

pub fn str_field<'a>(map: &'a Map<String, Value>, key: &str) -> &'a str {
    map.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The string at a dotted path (`spec.nodeName`), stringifying booleans and numbers the way
/// field selectors compare them.
pub fn path_string(obj: &Value, path: &str) -> Option<String> {
    let mut cur = obj;
    for part in path.split('.') {
        cur = cur.get(part)?;
    }
    match cur {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_round_trips() {
        let t = UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        assert_eq!(format_time(t), "2023-11-14T22:13:20Z");
        assert_eq!(parse_time("2023-11-14T22:13:20Z"), Some(1_700_000_000));
        assert_eq!(
            parse_time("2023-11-14T22:13:20.123456Z"),
            Some(1_700_000_000)
        );
    }

    #[test]
    fn uids_look_like_uuids() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert_ne!(u, new_uid());
    }

    #[test]
    fn names() {
        assert!(valid_dns_label("web-1"));
        assert!(!valid_dns_label("Web"));
        assert!(valid_dns_subdomain("a.b-c"));
        assert!(validate_name("Service", "a.b").is_some());
        assert!(validate_name("Pod", "a.b").is_none());
    }
}
