//! Lambda fidelity: API Gateway HTTP API (v2) events from `tests/data/apigw/` driven through
//! the `lambda_http` adapter in-process give the same status, headers and body as the same
//! requests sent over HTTP to `axum::serve` — for the whole router and for the per-surface
//! routers the per-surface functions serve (MCP tools/list and tools/call, a 401 challenge
//! naming the OAuth resource metadata, that metadata, an audit query, a runner poll). Also: a
//! per-surface router answers the other surfaces' paths with the JSON 404 of an unknown path.

mod common;

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::*;
use serde_json::{Value, json};
use tower::{Service, ServiceExt};
use wc_functions::{AppState, Surfaces, app_for};
use wc_store::testing::TestDatabase;

/// Headers the transport adds or that change per response; everything else must match.
const TRANSPORT: [&str; 4] = ["date", "content-length", "transfer-encoding", "connection"];

/// One response, normalized for comparison.
#[derive(Debug, PartialEq)]
struct Seen {
    status: u16,
    headers: BTreeMap<String, String>,
    body: Value,
}

fn normalize_body(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

/// Reads a fixture, substituting the placeholders.
fn fixture(name: &str, subst: &[(&str, &str)]) -> Value {
    let path = format!("{}/tests/data/apigw/{name}", env!("CARGO_MANIFEST_DIR"));
    let mut text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    for (from, to) in subst {
        text = text.replace(from, to);
    }
    serde_json::from_str(&text).unwrap()
}

/// The event through the `lambda_http` adapter over `router`.
async fn via_lambda(router: axum::Router, event: &Value) -> Seen {
    let request: lambda_http::request::LambdaRequest =
        serde_json::from_value(event.clone()).expect("an API Gateway v2 event");
    let mut adapter = lambda_http::Adapter::from(router);
    let ready = adapter.ready().await.unwrap();
    let response = ready
        .call(lambda_http::LambdaEvent::new(
            request,
            lambda_http::Context::default(),
        ))
        .await
        .unwrap();
    // What the Lambda runtime would send back to API Gateway.
    let out = serde_json::to_value(response).unwrap();
    let body = match out["body"].as_str() {
        Some(b) if out["isBase64Encoded"] == true => STANDARD.decode(b).unwrap(),
        Some(b) => b.as_bytes().to_vec(),
        None => Vec::new(),
    };
    let headers = out["headers"]
        .as_object()
        .map(|h| {
            h.iter()
                .filter(|(k, _)| !TRANSPORT.contains(&k.to_ascii_lowercase().as_str()))
                .map(|(k, v)| (k.to_ascii_lowercase(), v.as_str().unwrap_or("").to_owned()))
                .collect()
        })
        .unwrap_or_default();
    Seen {
        status: out["statusCode"].as_u64().unwrap() as u16,
        headers,
        body: normalize_body(&body),
    }
}

/// The same request as the event, over HTTP to `axum::serve` of `router`.
async fn via_http(base: &str, event: &Value) -> Seen {
    let client = wc_e2e::client::Client::new();
    let method: http::Method = event["requestContext"]["http"]["method"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let url = format!("{base}{}", event["rawPath"].as_str().unwrap());
    let headers: Vec<(&str, &str)> = event["headers"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| *k != "host")
        .map(|(k, v)| (k.as_str(), v.as_str().unwrap()))
        .collect();
    let body = event["body"].as_str().unwrap_or("").to_owned();
    let r = client
        .send(method, &url, &headers, axum::body::Bytes::from(body))
        .await
        .unwrap();
    Seen {
        status: r.status,
        headers: r
            .headers
            .iter()
            .filter(|(k, _)| !TRANSPORT.contains(&k.as_str()))
            .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap().to_owned()))
            .collect(),
        body: normalize_body(&r.body),
    }
}

/// Serves `router` over HTTP on 127.0.0.1; returns the base URL.
async fn serve_router(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    format!("http://{addr}")
}

struct Fixtures {
    _db: TestDatabase,
    state: AppState,
    subst: Vec<(&'static str, String)>,
}

async fn setup() -> Fixtures {
    let mut config = wc_functions::config::ServerConfig::default();
    // The HTTP side reaches the server as 127.0.0.1:<port>; the events say `localhost`.
    config.allowed_hosts.push("localhost".into());
    // An OAuth resource server, for the metadata route and the challenge naming it (no token
    // is verified here, so the keys are never read).
    config.oauth = wc_functions::auth::OAuthSettings::from_values(
        Some("https://auth.fidelity.example".into()),
        Some("https://localhost/mcp".into()),
        None,
        Some("/nonexistent/jwks.json".into()),
        None,
    )
    .unwrap();
    let app = TestApp::with_config(&["agent:local:alpha"], config).await;
    // A runner with a registered instance, for the poll.
    let runner_token = app.runner_token("fidelity").await;
    let TestApp { db, st: state, key } = app;
    let instance = uuid::Uuid::now_v7();
    let register = json!({
        "protocol_version": 1, "instance_id": instance, "projects": ["alpha"],
        "agent_version": "test", "queue": "api_poll", "max_concurrency": 1
    });
    let r = send(
        &state,
        rest_request("/runner/v1/register", Some(&runner_token), &register),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    Fixtures {
        _db: db,
        state,
        subst: vec![
            ("__TOKEN__", key),
            ("__RUNNER_TOKEN__", runner_token),
            ("__INSTANCE__", instance.to_string()),
        ],
    }
}

impl Fixtures {
    fn event(&self, name: &str, request_id: &str) -> Value {
        let mut subst: Vec<(&str, &str)> =
            self.subst.iter().map(|(a, b)| (*a, b.as_str())).collect();
        subst.push(("__REQUEST_ID__", request_id));
        fixture(name, &subst)
    }
}

/// Every fixture, with the route group that serves it and the status it answers.
const FIXTURES: [(&str, Surfaces, u16); 6] = [
    ("mcp-tools-list.json", Surfaces::MCP, 200),
    ("mcp-tools-call.json", Surfaces::MCP, 200),
    // No token: the 401 challenge names the RFC 9728 metadata, headers and all.
    ("mcp-unauthorized.json", Surfaces::MCP, 401),
    ("oauth-metadata.json", Surfaces::MCP, 200),
    ("audit-sessions.json", Surfaces::AUDIT, 200),
    ("runner-poll.json", Surfaces::RUNNER, 200),
];

#[tokio::test]
async fn api_gateway_events_answer_as_the_http_server_does() {
    let f = setup().await;
    for surfaces in [None, Some(())] {
        for (i, (name, surface, status)) in FIXTURES.iter().enumerate() {
            let router = || match surfaces {
                None => app_for(f.state.clone(), Surfaces::ALL),
                Some(()) => app_for(f.state.clone(), *surface),
            };
            let base = serve_router(router()).await;
            // The same request id on both sides, so the echoed header agrees.
            let request_id = format!("fidelity-{i}");
            let event = f.event(name, &request_id);
            let lambda = via_lambda(router(), &event).await;
            let http = via_http(&base, &event).await;
            assert_eq!(lambda.status, *status, "{name}: {lambda:?}");
            if *name == "mcp-unauthorized.json" {
                assert_eq!(
                    lambda.headers.get("www-authenticate").map(String::as_str),
                    Some(
                        r#"Bearer realm="wc", resource_metadata="https://localhost/.well-known/oauth-protected-resource/mcp""#
                    ),
                    "{name}"
                );
            }
            if *name == "audit-sessions.json" {
                // The answer lists audit sessions whose counters the requests themselves
                // move; compare the shape and the stable fields.
                assert_eq!(lambda.headers, http.headers, "{name}");
                let stable = |v: &Value| {
                    v["sessions"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|s| (s["session_id"].clone(), s["status"].clone()))
                        .collect::<Vec<_>>()
                };
                assert_eq!(stable(&lambda.body), stable(&http.body), "{name}");
            } else {
                assert_eq!(lambda, http, "{name} (surfaces {surfaces:?})");
            }
        }
    }
}

#[tokio::test]
async fn a_surface_router_serves_only_its_routes() {
    let f = setup().await;
    let event = f.event("mcp-tools-list.json", "only-mcp");
    // The runner router does not serve /mcp: the JSON 404 of an unknown path.
    let seen = via_lambda(app_for(f.state.clone(), Surfaces::RUNNER), &event).await;
    assert_eq!(seen.status, 404, "{seen:?}");
    assert_eq!(seen.body["error"]["kind"], "not_found");
    // Health is on the REST surface.
    let r = app_for(f.state.clone(), Surfaces::REST)
        .oneshot(
            axum::http::Request::get("/healthz")
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}
