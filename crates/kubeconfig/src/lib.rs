//! Where a weft Kubernetes client sends requests and how it authenticates: a kubeconfig
//! (current-context -> cluster: server, CA, insecure flag; user: bearer token or token file,
//! or a client certificate) or the in-cluster service account. Exec plugins, auth providers
//! and basic auth are refused by name: node software must not run programs or prompt.
//!
//! Two clients share this: the egress guard's blocking one-GET client (no tokio on the CNI
//! path) and the agent's kube-rs client, which builds its `kube::Config` from an
//! [`ApiTarget`]. Nothing here talks to a server.

use std::path::{Path, PathBuf};

use base64::Engine;
use serde::Deserialize;

/// The kubeconfig, or a file it names, is missing or invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("kubeconfig {path}: {reason}")]
pub struct KubeconfigError {
    /// The file the problem is in (or the kubeconfig naming it).
    pub path: String,
    pub reason: String,
}

/// The in-cluster service account's directory (token, CA bundle, namespace).
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Largest kubeconfig, CA, certificate, key or token file read (they are a few KiB).
const MAX_FILE: u64 = 1 << 20;

/// Where to send requests and how to authenticate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiTarget {
    /// `https://host:port` (or `http://` for a local test server), no trailing slash.
    pub server: String,
    /// PEM bundle of CAs to trust; `None` with `https` means the bundled web roots.
    pub ca_pem: Option<Vec<u8>>,
    /// `insecure-skip-tls-verify`.
    pub insecure: bool,
    pub client: Option<ClientIdentity>,
    pub auth: Auth,
}

/// A client certificate and its key, both PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientIdentity {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
}

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientIdentity { .. }")
    }
}

/// How requests are authorised.
#[derive(Clone, PartialEq, Eq)]
pub enum Auth {
    None,
    Token(String),
    /// Re-read on every request: projected service-account tokens rotate.
    TokenFile(PathBuf),
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::None => f.write_str("None"),
            Auth::Token(_) => f.write_str("Token(..)"),
            Auth::TokenFile(path) => write!(f, "TokenFile({})", path.display()),
        }
    }
}

#[derive(Debug, Deserialize)]
struct Raw {
    #[serde(rename = "current-context")]
    current_context: Option<String>,
    #[serde(default)]
    contexts: Vec<NamedContext>,
    #[serde(default)]
    clusters: Vec<NamedCluster>,
    #[serde(default)]
    users: Vec<NamedUser>,
}

#[derive(Debug, Deserialize)]
struct NamedContext {
    name: String,
    context: RawContext,
}

#[derive(Debug, Deserialize)]
struct RawContext {
    cluster: String,
    user: Option<String>,
}

#[derive(Debug, Deserialize)]
struct NamedCluster {
    name: String,
    cluster: RawCluster,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawCluster {
    server: String,
    certificate_authority: Option<String>,
    certificate_authority_data: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: bool,
    tls_server_name: Option<String>,
    proxy_url: Option<String>,
}

#[derive(Debug, Deserialize)]
struct NamedUser {
    name: String,
    user: RawUser,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawUser {
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<String>,
    client_certificate: Option<String>,
    client_certificate_data: Option<String>,
    client_key: Option<String>,
    client_key_data: Option<String>,
    username: Option<String>,
    exec: Option<serde_yaml::Value>,
    auth_provider: Option<serde_yaml::Value>,
}

impl ApiTarget {
    /// Loads the kubeconfig at `path`. Relative file names inside it resolve against its
    /// directory, as kubectl does.
    pub fn from_kubeconfig(path: &Path) -> Result<ApiTarget, KubeconfigError> {
        let fail = |reason: String| KubeconfigError {
            path: path.display().to_string(),
            reason,
        };
        let text = read_limited(path).map_err(&fail)?;
        let raw: Raw =
            serde_yaml::from_slice(&text).map_err(|e| fail(format!("not a kubeconfig: {e}")))?;
        let base = path.parent().unwrap_or(Path::new("/"));
        resolve(raw, base).map_err(fail)
    }

    /// The in-cluster service account, as kubelet mounts it into a pod:
    /// `KUBERNETES_SERVICE_HOST`/`KUBERNETES_SERVICE_PORT` and the token and CA under
    /// [`SERVICE_ACCOUNT_DIR`]. The token is re-read on every request (it rotates).
    pub fn in_cluster() -> Result<ApiTarget, KubeconfigError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        ApiTarget::in_cluster_from(
            var("KUBERNETES_SERVICE_HOST").as_deref(),
            var("KUBERNETES_SERVICE_PORT").as_deref(),
            Path::new(SERVICE_ACCOUNT_DIR),
        )
    }

    /// [`ApiTarget::in_cluster`] from explicit values (tests use a scratch directory).
    pub fn in_cluster_from(
        host: Option<&str>,
        port: Option<&str>,
        account_dir: &Path,
    ) -> Result<ApiTarget, KubeconfigError> {
        let fail = |path: &Path, reason: String| KubeconfigError {
            path: path.display().to_string(),
            reason,
        };
        let env = Path::new("KUBERNETES_SERVICE_HOST");
        let host = host.ok_or_else(|| {
            fail(
                env,
                "not set: not running in a pod (use a kubeconfig outside a cluster)".into(),
            )
        })?;
        let port = port.unwrap_or("443");
        if !matches!(port.parse::<u16>(), Ok(p) if p != 0) {
            return Err(fail(
                Path::new("KUBERNETES_SERVICE_PORT"),
                format!("{port:?} is not a port"),
            ));
        }
        // An IPv6 service address needs brackets in a URL.
        let authority = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let ca_path = account_dir.join("ca.crt");
        let ca_pem = read_limited(&ca_path).map_err(|e| fail(&ca_path, e))?;
        let token = account_dir.join("token");
        std::fs::metadata(&token).map_err(|e| fail(&token, e.to_string()))?;
        Ok(ApiTarget {
            server: format!("https://{authority}"),
            ca_pem: Some(ca_pem),
            insecure: false,
            client: None,
            auth: Auth::TokenFile(token),
        })
    }
}

fn resolve(raw: Raw, base: &Path) -> Result<ApiTarget, String> {
    let context_name = raw
        .current_context
        .filter(|c| !c.is_empty())
        .ok_or("current-context is not set")?;
    let context = raw
        .contexts
        .into_iter()
        .find(|c| c.name == context_name)
        .ok_or_else(|| format!("current-context {context_name:?} is not in contexts"))?
        .context;
    let cluster = raw
        .clusters
        .into_iter()
        .find(|c| c.name == context.cluster)
        .ok_or_else(|| {
            format!(
                "cluster {:?} (of context {context_name:?}) is not in clusters",
                context.cluster
            )
        })?
        .cluster;
    let user = match &context.user {
        None => RawUser::default(),
        Some(name) => {
            raw.users
                .into_iter()
                .find(|u| &u.name == name)
                .ok_or_else(|| {
                    format!("user {name:?} (of context {context_name:?}) is not in users")
                })?
                .user
        }
    };

    let (server, ca_pem, insecure) = cluster_settings(cluster, base)?;
    let (client, auth) = user_settings(user, base)?;
    let sends_credentials = client.is_some() || !matches!(auth, Auth::None);
    if sends_credentials && !server.starts_with("https://") && !is_loopback_server(&server) {
        return Err(format!(
            "credentials would be sent in clear text to {server}; use https"
        ));
    }
    Ok(ApiTarget {
        server,
        ca_pem,
        insecure,
        client,
        auth,
    })
}

/// The server URL (no trailing slash), the CA bundle and the insecure flag.
fn cluster_settings(
    cluster: RawCluster,
    base: &Path,
) -> Result<(String, Option<Vec<u8>>, bool), String> {
    let server = cluster.server.trim_end_matches('/').to_string();
    let authority = server
        .strip_prefix("https://")
        .or_else(|| server.strip_prefix("http://"))
        .ok_or_else(|| format!("cluster server {:?} is not an http(s) URL", cluster.server))?;
    if authority.is_empty() || authority.starts_with('/') || authority.contains(['?', '#', '@']) {
        return Err(format!(
            "cluster server {:?} must be scheme://host[:port][/path] without user, query or fragment",
            cluster.server
        ));
    }
    if cluster.tls_server_name.is_some() {
        return Err("clusters[].cluster.tls-server-name is not supported".into());
    }
    if cluster.proxy_url.is_some() {
        return Err("clusters[].cluster.proxy-url is not supported".into());
    }
    let ca_pem = pem_source(
        base,
        cluster.certificate_authority.as_deref(),
        cluster.certificate_authority_data.as_deref(),
        "certificate-authority",
    )?;
    Ok((server, ca_pem, cluster.insecure_skip_tls_verify))
}

/// The client certificate and the bearer token source.
fn user_settings(user: RawUser, base: &Path) -> Result<(Option<ClientIdentity>, Auth), String> {
    if user.exec.is_some() {
        return Err("users[].user.exec is not supported: a CNI plugin does not run credential programs; use a token or tokenFile".into());
    }
    if user.auth_provider.is_some() {
        return Err("users[].user.auth-provider is not supported; use a token or tokenFile".into());
    }
    if user.username.is_some() {
        return Err(
            "users[].user.username (basic auth) is not supported; use a token or tokenFile".into(),
        );
    }
    let cert = pem_source(
        base,
        user.client_certificate.as_deref(),
        user.client_certificate_data.as_deref(),
        "client-certificate",
    )?;
    let key = pem_source(
        base,
        user.client_key.as_deref(),
        user.client_key_data.as_deref(),
        "client-key",
    )?;
    let client = match (cert, key) {
        (None, None) => None,
        (Some(cert_pem), Some(key_pem)) => Some(ClientIdentity { cert_pem, key_pem }),
        (Some(_), None) => return Err("client-certificate is set without client-key".into()),
        (None, Some(_)) => return Err("client-key is set without client-certificate".into()),
    };
    let auth = match (user.token.filter(|t| !t.is_empty()), user.token_file) {
        (Some(_), Some(_)) => return Err("users[].user sets both token and tokenFile".into()),
        (Some(token), None) => Auth::Token(token),
        (None, Some(file)) => Auth::TokenFile(relative_to(base, &file)),
        (None, None) => Auth::None,
    };
    Ok((client, auth))
}

/// Whether the server's host is exactly a loopback address or `localhost` (a name like
/// `127.0.0.1.example.com` is not).
fn is_loopback_server(server: &str) -> bool {
    let rest = server
        .strip_prefix("http://")
        .or_else(|| server.strip_prefix("https://"))
        .unwrap_or(server);
    let authority = rest.split('/').next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A PEM blob from either a file or base64 `-data`; both set is ambiguous.
fn pem_source(
    base: &Path,
    file: Option<&str>,
    data: Option<&str>,
    field: &str,
) -> Result<Option<Vec<u8>>, String> {
    match (
        file.filter(|f| !f.is_empty()),
        data.filter(|d| !d.is_empty()),
    ) {
        (Some(_), Some(_)) => Err(format!("both {field} and {field}-data are set")),
        (Some(file), None) => {
            let path = relative_to(base, file);
            read_limited(&path)
                .map(Some)
                .map_err(|e| format!("{field}: {e}"))
        }
        (None, Some(data)) => base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map(Some)
            .map_err(|e| format!("{field}-data is not base64: {e}")),
        (None, None) => Ok(None),
    }
}

fn relative_to(base: &Path, file: &str) -> PathBuf {
    let path = Path::new(file);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    }
}

/// Reads a whole small file, refusing anything larger than [`MAX_FILE`].
pub fn read_limited(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(format!(
            "{} is larger than {MAX_FILE} bytes",
            path.display()
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(yaml: &str) -> Result<ApiTarget, String> {
        let raw: Raw = serde_yaml::from_str(yaml).map_err(|e| e.to_string())?;
        resolve(raw, Path::new("/etc/weft"))
    }

    const TOKEN: &str = r#"
apiVersion: v1
kind: Config
current-context: node
contexts:
- name: other
  context: {cluster: nope, user: nope}
- name: node
  context: {cluster: c1, user: u1}
clusters:
- name: c1
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority-data: LS0tLS1CRUdJTg==
users:
- name: u1
  user:
    token: abc
"#;

    #[test]
    fn token_user_and_ca_data() {
        let target = load(TOKEN).unwrap();
        assert_eq!(target.server, "https://10.0.0.1:6443");
        assert_eq!(target.ca_pem.as_deref(), Some(&b"-----BEGIN"[..]));
        assert_eq!(target.auth, Auth::Token("abc".into()));
        assert!(!target.insecure);
        assert!(target.client.is_none());
        assert!(
            !format!("{target:?}").contains("abc"),
            "tokens stay out of debug output"
        );
    }

    #[test]
    fn token_file_resolves_relative_to_the_kubeconfig() {
        let yaml = TOKEN.replace("token: abc", "tokenFile: sa/token");
        assert_eq!(
            load(&yaml).unwrap().auth,
            Auth::TokenFile(PathBuf::from("/etc/weft/sa/token"))
        );
    }

    #[test]
    fn refusals_are_named() {
        let cases = [
            (
                TOKEN.replace("current-context: node", "current-context: x"),
                "current-context",
            ),
            (
                TOKEN.replace("server: https://10.0.0.1:6443/", "server: ftp://x"),
                "not an http(s) URL",
            ),
            (
                TOKEN.replace("server: https://10.0.0.1:6443/", "server: https://u@h"),
                "without user",
            ),
            (TOKEN.replace("token: abc", "exec: {command: aws}"), "exec"),
            (TOKEN.replace("token: abc", "username: admin"), "basic auth"),
            (
                TOKEN.replace("token: abc", "token: abc\n    tokenFile: /t"),
                "both token and tokenFile",
            ),
            (
                TOKEN.replace("token: abc", "client-certificate-data: eA=="),
                "without client-key",
            ),
            (
                TOKEN.replace(
                    "certificate-authority-data: LS0tLS1CRUdJTg==",
                    "certificate-authority-data: '!!'",
                ),
                "base64",
            ),
            (
                TOKEN.replace(
                    "server: https://10.0.0.1:6443/",
                    "server: http://10.0.0.1:8080",
                ),
                "clear text",
            ),
            (
                TOKEN.replace(
                    "    certificate-authority-data",
                    "    tls-server-name: x\n    certificate-authority-data",
                ),
                "tls-server-name",
            ),
        ];
        for (yaml, expected) in cases {
            let error = load(&yaml).unwrap_err();
            assert!(error.contains(expected), "{expected}: {error}");
        }
    }

    #[test]
    fn plain_http_to_loopback_is_allowed() {
        let yaml = TOKEN
            .replace(
                "server: https://10.0.0.1:6443/",
                "server: http://127.0.0.1:8080",
            )
            .replace("    certificate-authority-data: LS0tLS1CRUdJTg==\n", "");
        let target = load(&yaml).unwrap();
        assert_eq!(target.server, "http://127.0.0.1:8080");
        assert_eq!(target.ca_pem, None);
    }

    #[test]
    fn loopback_means_exactly_loopback() {
        for yes in [
            "http://127.0.0.1:8080",
            "http://[::1]:1",
            "http://localhost",
            "http://127.1.2.3/p",
        ] {
            assert!(is_loopback_server(yes), "{yes}");
        }
        for no in [
            "http://127.0.0.1.nip.io",
            "http://localhost.example.com:80",
            "http://10.0.0.1",
            "http://[::2]:1",
        ] {
            assert!(!is_loopback_server(no), "{no}");
        }
    }

    #[test]
    fn missing_files_name_the_path() {
        let error = ApiTarget::from_kubeconfig(Path::new("/nonexistent/weft/kc")).unwrap_err();
        assert!(
            error.to_string().contains("/nonexistent/weft/kc"),
            "{error}"
        );
    }

    #[test]
    fn in_cluster_uses_the_service_account_and_brackets_ipv6() {
        let dir = std::env::temp_dir().join(format!("weft-kubeconfig-sa-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ca.crt"), "-----BEGIN CERTIFICATE-----").unwrap();
        std::fs::write(dir.join("token"), "t0k3n").unwrap();
        let v4 = ApiTarget::in_cluster_from(Some("10.96.0.1"), Some("443"), &dir).unwrap();
        assert_eq!(v4.server, "https://10.96.0.1:443");
        assert_eq!(v4.auth, Auth::TokenFile(dir.join("token")));
        assert!(v4.ca_pem.is_some() && !v4.insecure);
        let v6 = ApiTarget::in_cluster_from(Some("fd00::1"), None, &dir).unwrap();
        assert_eq!(v6.server, "https://[fd00::1]:443");
        let error = ApiTarget::in_cluster_from(None, None, &dir).unwrap_err();
        assert!(
            error.to_string().contains("KUBERNETES_SERVICE_HOST"),
            "{error}"
        );
        let error = ApiTarget::in_cluster_from(Some("h"), Some("0"), &dir).unwrap_err();
        assert!(
            error.to_string().contains("KUBERNETES_SERVICE_PORT"),
            "{error}"
        );
        std::fs::remove_file(dir.join("token")).unwrap();
        let error = ApiTarget::in_cluster_from(Some("h"), None, &dir).unwrap_err();
        assert!(error.to_string().contains("token"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
