//! /healthz, /readyz, /status and /metrics over a deliberately tiny HTTP/1.1 responder: the
//! agent serves four fixed GET paths to local probes, scrapers and `weft status`, nothing more.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Reads up to the end of the request head (a client may send it in several segments),
/// within a size and time bound.
async fn read_head(stream: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
        let n = tokio::time::timeout_at(deadline, stream.read(&mut buf))
            .await
            .ok()?
            .ok()?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    Some(head)
}

/// What the endpoints report.
pub struct Views {
    /// /readyz: ready, or the reason not.
    pub ready: watch::Receiver<Result<(), String>>,
    /// /status: every reconciler's state and every store's size.
    pub status: watch::Receiver<String>,
}

pub async fn serve(
    listener: TcpListener,
    views: Views,
    registry: Arc<prometheus_client::registry::Registry>,
) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        let ready = views.ready.clone();
        let status = views.status.clone();
        let registry = registry.clone();
        tokio::spawn(async move {
            let Some(head) = read_head(&mut stream).await else {
                return;
            };
            let request = String::from_utf8_lossy(&head);
            let path = request.split_whitespace().nth(1).unwrap_or("");
            let (status, content_type, body) = match path {
                "/healthz" => ("200 OK", "text/plain", "ok\n".to_string()),
                "/status" => ("200 OK", "text/plain", status.borrow().clone()),
                "/readyz" => match &*ready.borrow() {
                    Ok(()) => ("200 OK", "text/plain", "ready\n".to_string()),
                    Err(reason) => (
                        "503 Service Unavailable",
                        "text/plain",
                        format!("not ready: {reason}\n"),
                    ),
                },
                "/metrics" => {
                    let mut text = String::new();
                    match prometheus_client::encoding::text::encode(&mut text, &registry) {
                        Ok(()) => (
                            "200 OK",
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                            text,
                        ),
                        Err(_) => (
                            "500 Internal Server Error",
                            "text/plain",
                            "encoding failed\n".to_string(),
                        ),
                    }
                }
                _ => ("404 Not Found", "text/plain", "not found\n".to_string()),
            };
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
        });
    }
}
