//! One GET of a pod, with bounded time and size.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use ureq::tls::{Certificate, ClientCert, PemItem, PrivateKey, RootCerts, TlsConfig};

use super::kubeconfig::{read_limited, ApiTarget, Auth, ClientIdentity};
use super::ApiError;
use crate::config::is_namespace_name;
use crate::pod_security::PodSecurity;

/// Largest pod object accepted (real ones are a few KiB; managed fields can add tens).
const MAX_BODY: u64 = 4 << 20;
/// Longest pod name (a DNS-1123 subdomain).
const MAX_POD_NAME: usize = 253;

/// Connect and total bounds for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    pub connect: Duration,
    pub total: Duration,
}

/// What the guard reads of one pod: its annotations and its security settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    /// Empty when the pod has none.
    pub annotations: BTreeMap<String, String>,
    /// The spec's security settings, or why they could not be read (which only matters
    /// for a pod that opts in).
    pub security: Result<PodSecurity, String>,
}

/// [`get_pod`], keeping only the annotations.
pub fn get_pod_annotations(
    target: &ApiTarget,
    namespace: &str,
    name: &str,
    timeouts: Timeouts,
) -> Result<BTreeMap<String, String>, ApiError> {
    get_pod(target, namespace, name, timeouts).map(|pod| pod.annotations)
}

/// GETs `/api/v1/namespaces/<namespace>/pods/<name>`. Any failure, including a non-2xx
/// answer, an object that is not that pod or a spec field of the wrong type, is an error:
/// the caller cannot tell whether (or how safely) the pod can be fenced.
pub fn get_pod(
    target: &ApiTarget,
    namespace: &str,
    name: &str,
    timeouts: Timeouts,
) -> Result<PodInfo, ApiError> {
    if !is_namespace_name(namespace) {
        return Err(ApiError::BadName(format!(
            "K8S_POD_NAMESPACE {namespace:?} is not a namespace name"
        )));
    }
    if !is_pod_name(name) {
        return Err(ApiError::BadName(format!(
            "K8S_POD_NAME {name:?} is not a pod name"
        )));
    }
    let url = format!(
        "{}/api/v1/namespaces/{namespace}/pods/{name}",
        target.server
    );
    let server = target.server.clone();
    let agent = agent(target, timeouts)?;
    let mut request = agent.get(&url).header("Accept", "application/json");
    if let Some(token) = bearer_token(target)? {
        request = request.header("Authorization", format!("Bearer {token}"));
    }
    let mut response = request.call().map_err(|e| classify(&server, e))?;
    let status = response.status().as_u16();
    let body = response
        .body_mut()
        .with_config()
        .limit(MAX_BODY)
        .read_to_string()
        .map_err(|e| classify(&server, e))?;
    if !(200..300).contains(&status) {
        return Err(ApiError::Status {
            server,
            url,
            status,
            body,
        });
    }
    pod_of(&body, namespace, name).map_err(|reason| ApiError::Response { server, reason })
}

fn agent(target: &ApiTarget, timeouts: Timeouts) -> Result<ureq::Agent, ApiError> {
    let kubeconfig_error = |reason: String| ApiError::Kubeconfig {
        path: "(loaded)".into(),
        reason,
    };
    let mut tls = TlsConfig::builder().disable_verification(target.insecure);
    if let Some(ca) = &target.ca_pem {
        let certs = certificates(ca)
            .map_err(|e| kubeconfig_error(format!("certificate-authority: {e}")))?;
        if certs.is_empty() {
            return Err(kubeconfig_error(
                "certificate-authority holds no certificate".into(),
            ));
        }
        tls = tls.root_certs(RootCerts::Specific(Arc::new(certs)));
    }
    if let Some(identity) = &target.client {
        tls = tls.client_cert(Some(client_cert(identity).map_err(kubeconfig_error)?));
    }
    let config = ureq::Agent::config_builder()
        .timeout_connect(Some(timeouts.connect))
        .timeout_global(Some(timeouts.total))
        .http_status_as_error(false)
        // The API server is named by the kubeconfig only: no proxy from the environment,
        // no redirects to somewhere else.
        .proxy(None)
        .max_redirects(0)
        .tls_config(tls.build())
        .build();
    Ok(config.new_agent())
}

fn certificates(pem: &[u8]) -> Result<Vec<Certificate<'static>>, String> {
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(pem) {
        match item.map_err(|e| e.to_string())? {
            PemItem::Certificate(cert) => certs.push(cert),
            _ => continue,
        }
    }
    Ok(certs)
}

fn client_cert(identity: &ClientIdentity) -> Result<ClientCert, String> {
    let chain = certificates(&identity.cert_pem).map_err(|e| format!("client-certificate: {e}"))?;
    if chain.is_empty() {
        return Err("client-certificate holds no certificate".into());
    }
    let key = PrivateKey::from_pem(&identity.key_pem)
        .map_err(|e| format!("client-key: {e}"))?
        .to_owned();
    Ok(ClientCert::new_with_certs(&chain, key))
}

fn bearer_token(target: &ApiTarget) -> Result<Option<String>, ApiError> {
    let token = match &target.auth {
        Auth::None => return Ok(None),
        Auth::Token(token) => token.clone(),
        Auth::TokenFile(path) => {
            let bytes = read_limited(path).map_err(|reason| ApiError::Kubeconfig {
                path: path.display().to_string(),
                reason,
            })?;
            String::from_utf8(bytes)
                .map_err(|_| ApiError::Kubeconfig {
                    path: path.display().to_string(),
                    reason: "token file is not UTF-8".into(),
                })?
                .trim()
                .to_string()
        }
    };
    if token.is_empty() || token.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err(ApiError::Kubeconfig {
            path: "(token)".into(),
            reason: "the token is empty or contains spaces or control characters".into(),
        });
    }
    Ok(Some(token))
}

fn classify(server: &str, error: ureq::Error) -> ApiError {
    let server = server.to_string();
    match error {
        ureq::Error::Timeout(which) => ApiError::Timeout {
            server,
            reason: format!("{which} timeout"),
        },
        ureq::Error::Io(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
            ) =>
        {
            ApiError::Timeout {
                server,
                reason: e.to_string(),
            }
        }
        ureq::Error::BodyExceedsLimit(limit) => ApiError::Response {
            server,
            reason: format!("the answer is larger than {limit} bytes"),
        },
        ureq::Error::Rustls(e) => ApiError::Tls {
            server,
            reason: e.to_string(),
        },
        ureq::Error::Tls(e) => ApiError::Tls {
            server,
            reason: e.to_string(),
        },
        ureq::Error::Io(e) if e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()) => {
            ApiError::Tls {
                server,
                reason: e.to_string(),
            }
        }
        ureq::Error::Protocol(e) => ApiError::Response {
            server,
            reason: format!("not HTTP/1.1: {e}"),
        },
        other => ApiError::Unreachable {
            server,
            reason: other.to_string(),
        },
    }
}

/// The pod's annotations and security settings, after checking the object is the pod
/// asked for.
fn pod_of(body: &str, namespace: &str, name: &str) -> Result<PodInfo, String> {
    let pod: Value = serde_json::from_str(body).map_err(|e| format!("not JSON: {e}"))?;
    let annotations = annotations_of(&pod, namespace, name)?;
    // Only an opted-in pod's spec matters, so a spec that cannot be read fails only those.
    let security = PodSecurity::from_pod(&pod);
    Ok(PodInfo {
        annotations,
        security,
    })
}

fn annotations_of(
    pod: &Value,
    namespace: &str,
    name: &str,
) -> Result<BTreeMap<String, String>, String> {
    let kind = pod.get("kind").and_then(Value::as_str);
    if kind != Some("Pod") {
        return Err(format!("kind is {kind:?}, not \"Pod\""));
    }
    let metadata = pod.get("metadata").ok_or("no metadata")?;
    let got_name = metadata.get("name").and_then(Value::as_str);
    let got_namespace = metadata.get("namespace").and_then(Value::as_str);
    if got_name != Some(name) || got_namespace != Some(namespace) {
        return Err(format!(
            "asked for pod {namespace}/{name}, got {}/{}",
            got_namespace.unwrap_or("?"),
            got_name.unwrap_or("?")
        ));
    }
    match metadata.get("annotations") {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                other => Err(format!("annotation {k:?} is {other}, not a string")),
            })
            .collect(),
        Some(other) => Err(format!("metadata.annotations is {other}, not an object")),
    }
}

/// A DNS-1123 subdomain: what pod names are.
fn is_pod_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_POD_NAME
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && label
                    .as_bytes()
                    .first()
                    .is_some_and(u8::is_ascii_alphanumeric)
                && label
                    .as_bytes()
                    .last()
                    .is_some_and(u8::is_ascii_alphanumeric)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_names() {
        for good in ["p", "web-1", "a.b-c.d"] {
            assert!(is_pod_name(good), "{good}");
        }
        for bad in ["", "A", "a..b", "-a", "a/b", "a?b", "a b", "..", "a.-b"] {
            assert!(!is_pod_name(bad), "{bad}");
        }
    }

    #[test]
    fn reads_annotations_of_the_right_pod_only() {
        let pod = r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"n",
            "annotations":{"a":"1","guard.weft.dev/enabled":"true"}},"spec":{}}"#;
        let got = pod_of(pod, "n", "p").unwrap().annotations;
        assert_eq!(got["guard.weft.dev/enabled"], "true");
        assert!(pod_of(pod, "n", "q")
            .unwrap_err()
            .contains("asked for pod n/q"));
        let bare = r#"{"kind":"Pod","metadata":{"name":"p","namespace":"n"}}"#;
        assert!(pod_of(bare, "n", "p").unwrap().annotations.is_empty());
        let status = r#"{"kind":"Status","status":"Failure"}"#;
        assert!(pod_of(status, "n", "p").is_err());
        let numeric =
            r#"{"kind":"Pod","metadata":{"name":"p","namespace":"n","annotations":{"a":1}}}"#;
        assert!(pod_of(numeric, "n", "p").is_err());
        assert!(pod_of("nope", "n", "p").is_err());
    }

    #[test]
    fn bad_names_never_reach_the_network() {
        let target = ApiTarget {
            server: "http://127.0.0.1:1".into(),
            ca_pem: None,
            insecure: false,
            client: None,
            auth: Auth::None,
        };
        let timeouts = Timeouts {
            connect: Duration::from_millis(10),
            total: Duration::from_millis(10),
        };
        for (ns, name) in [("../x", "p"), ("n", "p/../../secrets")] {
            let error = get_pod_annotations(&target, ns, name, timeouts).unwrap_err();
            assert!(matches!(error, ApiError::BadName(_)), "{error}");
        }
    }
}
