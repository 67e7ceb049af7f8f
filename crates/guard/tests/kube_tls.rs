//! The API client over real TLS on loopback: a server certificate from a test CA named by
//! the kubeconfig (inline data or a relative file), bearer tokens from a token file, client
//! certificates, and the failures that must not be mistaken for "no fence needed".

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use weft_guard::kube::{get_pod_annotations, ApiError, ApiTarget, Timeouts};

const TIMEOUTS: Timeouts = Timeouts {
    connect: Duration::from_secs(2),
    total: Duration::from_secs(5),
};

struct Pki {
    ca: CertifiedIssuer<'static, KeyPair>,
}

impl Pki {
    fn new(name: &str) -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let ca =
            CertifiedIssuer::self_signed(params, KeyPair::generate().expect("CA key")).expect("CA");
        Pki { ca }
    }

    /// A leaf certificate for `names` and its key, PEM.
    fn leaf(&self, names: &[&str]) -> (String, String) {
        let key = KeyPair::generate().expect("leaf key");
        let params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .expect("leaf params");
        let cert = params.signed_by(&key, &self.ca).expect("sign leaf");
        (cert.pem(), key.serialize_pem())
    }
}

fn der_chain(pem: &str) -> Vec<CertificateDer<'static>> {
    rustls::pki_types::pem::PemObject::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .expect("certificates")
}

fn der_key(pem: &str) -> PrivateKeyDer<'static> {
    let key: PrivatePkcs8KeyDer<'static> =
        rustls::pki_types::pem::PemObject::from_pem_slice(pem.as_bytes()).expect("key");
    key.into()
}

/// An HTTPS server on 127.0.0.1 answering every request with one pod, for `connections`
/// connections; with `client_ca`, it requires a client certificate from that CA.
fn serve(pki: &Pki, client_ca: Option<&Pki>, connections: usize) -> u16 {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("versions");
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(ca.ca.der().clone()).expect("client CA");
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .expect("client verifier");
            builder.with_client_cert_verifier(verifier)
        }
    };
    let (cert, key) = pki.leaf(&["127.0.0.1"]);
    let config = Arc::new(
        builder
            .with_single_cert(der_chain(&cert), der_key(&key))
            .expect("server config"),
    );
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for _ in 0..connections {
            let Ok((tcp, _)) = listener.accept() else {
                return;
            };
            let _ = tcp.set_read_timeout(Some(Duration::from_secs(5)));
            let Ok(conn) = rustls::ServerConnection::new(config.clone()) else {
                continue;
            };
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            let mut reader = BufReader::new(&mut tls);
            let mut authorization = String::new();
            let mut ok = true;
            loop {
                let mut line = String::new();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => {
                        ok = false;
                        break;
                    }
                    Ok(_) if line == "\r\n" => break,
                    Ok(_) => {
                        if let Some(value) = line
                            .strip_prefix("authorization: ")
                            .or_else(|| line.strip_prefix("Authorization: "))
                        {
                            authorization = value.trim().to_string();
                        }
                    }
                }
            }
            if !ok {
                continue;
            }
            let (status, body) = if authorization == "Bearer rotated-token"
                || client_ca_marker(&authorization)
            {
                (
                    200,
                    r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"ns","annotations":{"guard.weft.dev/enabled":"true"}}}"#,
                )
            } else {
                (401, r#"{"kind":"Status","code":401}"#)
            };
            let _ = write!(
                tls,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = tls.flush();
            tls.conn.send_close_notify();
            let _ = tls.flush();
        }
    });
    port
}

/// With client certificates the test sends no token: an empty Authorization is accepted
/// only by servers that verified the client certificate during the handshake.
fn client_ca_marker(authorization: &str) -> bool {
    authorization.is_empty()
}

struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let path =
            std::env::temp_dir().join(format!("weft-guard-tls-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("dir");
        Dir(path)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn kubeconfig(dir: &Path, cluster: &str, user: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {{cluster: k, user: u}}\n\
         clusters:\n- name: k\n  cluster:\n{cluster}\nusers:\n- name: u\n  user:\n{user}\n"
    );
    std::fs::write(&path, text).expect("kubeconfig");
    path
}

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn lookup(path: &Path) -> Result<std::collections::BTreeMap<String, String>, ApiError> {
    let target = ApiTarget::from_kubeconfig(path)?;
    get_pod_annotations(&target, "ns", "p", TIMEOUTS)
}

#[test]
fn token_file_and_ca_file_relative_to_the_kubeconfig() {
    let pki = Pki::new("weft test CA");
    let port = serve(&pki, None, 2);
    let dir = Dir::new("tf");
    std::fs::create_dir_all(dir.0.join("pki")).expect("pki dir");
    std::fs::write(dir.0.join("pki/ca.crt"), pki.ca.pem()).expect("ca");
    std::fs::write(dir.0.join("token"), "first-token\n").expect("token");
    let path = kubeconfig(
        &dir.0,
        &format!("    server: https://127.0.0.1:{port}\n    certificate-authority: pki/ca.crt"),
        "    tokenFile: token",
    );
    let refused = lookup(&path).expect_err("the server does not know this token");
    assert!(
        matches!(refused, ApiError::Status { status: 401, .. }),
        "{refused}"
    );
    // The token file is read on every request: a rotated token is picked up.
    std::fs::write(dir.0.join("token"), "rotated-token\n").expect("token");
    let annotations = lookup(&path).expect("lookup with the rotated token");
    assert_eq!(annotations["guard.weft.dev/enabled"], "true");
}

#[test]
fn an_untrusted_server_is_a_tls_error_not_a_pass() {
    let pki = Pki::new("weft test CA");
    let other = Pki::new("some other CA");
    let port = serve(&pki, None, 2);
    let dir = Dir::new("un");
    let path = kubeconfig(
        &dir.0,
        &format!(
            "    server: https://127.0.0.1:{port}\n    certificate-authority-data: {}",
            b64(&other.ca.pem())
        ),
        "    token: rotated-token",
    );
    let error = lookup(&path).expect_err("a server signed by another CA");
    assert!(matches!(error, ApiError::Tls { .. }), "{error:?}");
    assert!(
        !error.is_transient(),
        "a certificate problem does not go away by retrying"
    );

    // insecure-skip-tls-verify accepts it (the operator said so).
    let path = kubeconfig(
        &dir.0,
        &format!("    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true"),
        "    token: rotated-token",
    );
    lookup(&path).expect("insecure-skip-tls-verify");
}

#[test]
fn client_certificates() {
    let pki = Pki::new("weft test CA");
    let clients = Pki::new("weft client CA");
    let port = serve(&pki, Some(&clients), 2);
    let dir = Dir::new("cc");
    let (cert, key) = clients.leaf(&["system-node-weft"]);
    let cluster = format!(
        "    server: https://127.0.0.1:{port}\n    certificate-authority-data: {}",
        b64(&pki.ca.pem())
    );
    let path = kubeconfig(
        &dir.0,
        &cluster,
        &format!(
            "    client-certificate-data: {}\n    client-key-data: {}",
            b64(&cert),
            b64(&key)
        ),
    );
    let annotations = lookup(&path).expect("lookup with a client certificate");
    assert_eq!(annotations.len(), 1);

    // Without one, the handshake is refused.
    let path = kubeconfig(&dir.0, &cluster, "    token: nothing");
    let error = lookup(&path).expect_err("no client certificate");
    assert!(
        matches!(error, ApiError::Tls { .. } | ApiError::Unreachable { .. }),
        "{error:?}"
    );
}

#[test]
fn a_server_that_never_answers_times_out() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    // Accepts (the kernel does, from the backlog) and never answers.
    let dir = Dir::new("to");
    let path = kubeconfig(
        &dir.0,
        &format!("    server: http://127.0.0.1:{port}"),
        "    token: t",
    );
    let target = ApiTarget::from_kubeconfig(&path).expect("kubeconfig");
    let short = Timeouts {
        connect: Duration::from_millis(200),
        total: Duration::from_millis(300),
    };
    let error = get_pod_annotations(&target, "ns", "p", short).expect_err("no answer");
    assert!(matches!(error, ApiError::Timeout { .. }), "{error:?}");
    assert!(error.is_transient());
    drop(listener);
}
