//! Authentication, the request record, injected errors and delays, the server going down
//! and coming back with its state, and the control endpoints.

use crate::common::*;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use std::time::{Duration, Instant};
use weft_apiserver::{Action, FaultRule, Match};

#[tokio::test]
async fn tokens_users_and_the_record() {
    let mut cfg = config();
    cfg.anonymous_user = None;
    let server = start(cfg).await;
    server.handle().create(node("n1")).unwrap();
    let agent: Api<Node> = nodes(&client_for(&server, Some(AGENT_TOKEN)));
    agent.get("n1").await.unwrap();
    agent
        .list(&ListParams::default().fields("metadata.name=n1"))
        .await
        .unwrap();
    let e = nodes(&client_for(&server, Some("wrong")))
        .get("n1")
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), Some((401, "Unauthorized".into())));
    let e = nodes(&client_for(&server, None))
        .get("n1")
        .await
        .unwrap_err();
    assert_eq!(status_code(&e).map(|s| s.0), Some(401));

    let mine: Vec<_> = server
        .handle()
        .requests(0)
        .into_iter()
        .filter(|r| r.user == AGENT_USER)
        .collect();
    let verbs: Vec<_> = mine
        .iter()
        .map(|r| {
            (
                r.attributes.verb.as_str(),
                r.attributes.resource.as_str(),
                r.attributes.name.as_str(),
                r.code,
            )
        })
        .collect();
    assert_eq!(
        verbs,
        [("get", "nodes", "n1", 200), ("list", "nodes", "", 200)]
    );
    assert_eq!(mine[0].attributes.api_version, "v1");
    let summary = server.handle().request_summary();
    assert!(summary.iter().any(|(g, n)| g.user == AGENT_USER
        && g.verb == "list"
        && g.resource == "nodes"
        && *n == 1));
    server.shutdown().await;
}

#[tokio::test]
async fn injected_errors_delays_and_down_up() {
    let server = start(config()).await;
    let h = server.handle().clone();
    h.create(node("n1")).unwrap();
    let api: Api<Node> = nodes(&client_for(&server, None));
    let id = h.inject(FaultRule {
        matches: Match {
            verb: Some("get".into()),
            resource: Some("nodes".into()),
            ..Default::default()
        },
        action: Action::Error {
            code: 500,
            message: None,
            retry_after_seconds: None,
        },
        times: Some(1),
    });
    assert!(id > 0);
    let e = api.get("n1").await.unwrap_err();
    assert_eq!(status_code(&e), Some((500, "InternalError".into())));
    api.get("n1").await.unwrap();
    // kube-rs retries 429 (honouring Retry-After) and gets through.
    h.clear_requests();
    h.inject(FaultRule {
        matches: Match {
            verb: Some("list".into()),
            ..Default::default()
        },
        action: Action::Error {
            code: 429,
            message: Some("slow down".into()),
            retry_after_seconds: Some(0),
        },
        times: Some(2),
    });
    api.list(&ListParams::default()).await.unwrap();
    let codes: Vec<u16> = h.requests(0).iter().map(|r| r.code).collect();
    assert_eq!(codes, [429, 429, 200]);
    h.inject(FaultRule {
        matches: Match::default(),
        action: Action::Delay { millis: 300 },
        times: Some(1),
    });
    let t = Instant::now();
    api.get("n1").await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(300));

    // Down: connections are refused (and the open ones closed); up: same state.
    h.set_up(false);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let addr = server.api_addrs()[0];
    let refused = tokio::net::TcpStream::connect(addr).await.unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    assert!(api.get("n1").await.is_err());
    h.create(node("n2")).unwrap();
    h.set_up(true);
    let mut ok = None;
    for _ in 0..50 {
        if let Ok(n) = api.get("n2").await {
            ok = Some(n);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(ok.is_some(), "the server serves again with its state");
    server.shutdown().await;
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "the port is released"
    );
}

#[tokio::test]
async fn control_endpoints_over_http() {
    let cfg = config();
    let server = weft_apiserver::ApiServer::new(cfg)
        .start(
            vec![weft_apiserver::Listen::Addr("127.0.0.1:0".parse().unwrap())],
            Some(weft_apiserver::Listen::Addr("127.0.0.1:0".parse().unwrap())),
        )
        .await
        .unwrap();
    let control = {
        let mut c = kube::Config::new(server.control_url().unwrap().parse().unwrap());
        c.default_namespace = "default".into();
        kube::Client::try_from(c).unwrap()
    };
    let call = |method: &str, path: &str, body: serde_json::Value| {
        let req = http::Request::builder()
            .method(method)
            .uri(format!("/weft-control/{path}"))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap())
            .unwrap();
        let control = control.clone();
        async move {
            serde_json::from_str::<serde_json::Value>(&control.request_text(req).await.unwrap())
                .unwrap()
        }
    };
    let r = call(
        "POST",
        "objects",
        serde_json::json!({"items": [node("n1"), node("n2")]}),
    )
    .await;
    assert_eq!(r["applied"], 2);
    let api: Api<Node> = nodes(&client_for(&server, Some(AGENT_TOKEN)));
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        2
    );
    let r = call("POST", "faults", serde_json::json!({"match": {"verb": "get"}, "action": {"type": "error", "code": 503}, "times": 1})).await;
    assert!(r["id"].as_u64().is_some());
    api.get("n1").await.expect("kube-rs retries a 503");
    let r = call(
        "GET",
        "requests?user=system:serviceaccount:kube-system:weft-agent",
        serde_json::json!({}),
    )
    .await;
    let codes: Vec<_> = r["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["verb"].as_str().unwrap().to_string(),
                i["code"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        codes,
        [
            ("list".to_string(), 200),
            ("get".to_string(), 503),
            ("get".to_string(), 200)
        ]
    );
    call("POST", "down", serde_json::json!({})).await;
    assert!(api.get("n1").await.is_err());
    let state = call("GET", "state", serde_json::json!({})).await;
    assert_eq!(state["up"], false);
    call("POST", "up", serde_json::json!({})).await;
    let mut back = false;
    for _ in 0..50 {
        if api.get("n1").await.is_ok() {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(back);
    call("POST", "expire", serde_json::json!({"resource": "nodes"})).await;
    let summary = call("GET", "requests/summary", serde_json::json!({})).await;
    assert!(!summary["items"].as_array().unwrap().is_empty());
    server.shutdown().await;
}
