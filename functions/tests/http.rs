//! The HTTP skeleton and bearer auth, served in-process over a real database.

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;
use wc_functions::auth::{AuthError, Scope, token};
use wc_functions::config::ServerConfig;
use wc_functions::{AppState, app};
use wc_store::credentials::{self, CredentialKind, NewCredential};
use wc_store::testing::TestDatabase;

use common::capture_logs;

struct Reply {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: Value,
}

async fn send(state: &AppState, req: Request<Body>) -> Reply {
    let resp = app(state.clone()).oneshot(req).await.unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap()
    };
    Reply {
        status,
        headers,
        body,
    }
}

fn get(path: &str, auth: Option<&str>) -> Request<Body> {
    let mut b = Request::get(path);
    if let Some(a) = auth {
        b = b.header(header::AUTHORIZATION, a);
    }
    b.body(Body::empty()).unwrap()
}

async fn create(
    db: &TestDatabase,
    kind: CredentialKind,
    scopes: &[&str],
    projects: &[&str],
) -> (String, uuid::Uuid) {
    let secret = token::generate(kind);
    let client = db.pool().get().await.unwrap();
    let cred = credentials::insert(
        &client,
        &NewCredential {
            kind,
            label: Some("test".into()),
            authority_group: None,
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            projects: projects.iter().map(|s| s.to_string()).collect(),
            secret_sha256: token::digest(&secret),
        },
    )
    .await
    .unwrap();
    (secret, cred.id)
}

fn state(db: &TestDatabase) -> AppState {
    AppState::new(db.pool().clone(), ServerConfig::default())
}

#[tokio::test]
async fn healthz_reports_database_and_version_with_a_request_id() {
    let db = TestDatabase::new().await;
    let r = send(&state(&db), get("/healthz", None)).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["status"], "ok");
    assert_eq!(r.body["version"], wc_functions::VERSION);
    assert_eq!(r.body["database"]["reachable"], true);
    assert_eq!(
        r.body["database"]["schema_level"],
        r.body["database"]["expected_schema_level"]
    );
    let id = r.headers.get("x-request-id").unwrap().to_str().unwrap();
    assert!(uuid::Uuid::parse_str(id).is_ok(), "{id}");
}

#[tokio::test]
async fn healthz_is_503_on_an_unmigrated_database() {
    let db = TestDatabase::empty().await;
    let r = send(&state(&db), get("/healthz", None)).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.body["status"], "schema_outdated");
    assert_eq!(r.body["database"]["schema_level"], Value::Null);
}

#[tokio::test]
async fn an_unreachable_database_gives_opaque_503s() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = wc_store::config::DatabaseUrl::parse(&format!(
        "postgres://postgres:pw-do-not-leak@127.0.0.1:{port}/x"
    ))
    .unwrap();
    let mut cfg = wc_store::config::DatabaseConfig::new(url);
    cfg.acquire_timeout = std::time::Duration::from_millis(500);
    let pool = wc_store::pool::build_pool(&cfg).unwrap();
    let st = AppState::new(pool, ServerConfig::default());
    let r = send(&st, get("/healthz", None)).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.body["database"]["reachable"], false);
    let r = send(
        &st,
        get(
            "/api/whoami",
            Some("Bearer wcsk_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
        ),
    )
    .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.body["error"]["kind"], "unavailable");
    let text = r.body.to_string();
    assert!(
        !text.contains("pw-do-not-leak") && !text.contains(&port.to_string()),
        "{text}"
    );
    assert!(r.body["error"]["request_id"].is_string());
}

#[tokio::test]
async fn caller_request_ids_are_echoed_only_when_plain() {
    let db = TestDatabase::new().await;
    let st = state(&db);
    let req = Request::get("/healthz")
        .header("x-request-id", "trace-42")
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&st, req).await.headers["x-request-id"], "trace-42");
    let req = Request::get("/healthz")
        .header("x-request-id", "bad id with spaces")
        .body(Body::empty())
        .unwrap();
    let got = send(&st, req).await.headers["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(uuid::Uuid::parse_str(&got).is_ok(), "{got}");
}

#[tokio::test]
async fn unknown_routes_are_json_404s() {
    let db = TestDatabase::new().await;
    let r = send(&state(&db), get("/nope", None)).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.body["error"]["kind"], "not_found");
}

#[tokio::test]
async fn oversized_bodies_are_413_whether_declared_or_streamed() {
    let db = TestDatabase::new().await;
    let cfg = ServerConfig {
        max_body_bytes: 4096,
        ..ServerConfig::default()
    };
    let st = AppState::new(db.pool().clone(), cfg);
    let declared = Request::post("/api/whoami")
        .header(header::CONTENT_LENGTH, "5000")
        .body(Body::from(vec![b'x'; 5000]))
        .unwrap();
    let r = send(&st, declared).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(r.body["error"]["kind"], "payload_too_large");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("4096")
    );
    // No Content-Length header: the limit trips while reading the body.
    let undeclared = Request::post("/api/whoami")
        .body(Body::from(vec![b'y'; 6000]))
        .unwrap();
    assert!(undeclared.headers().get(header::CONTENT_LENGTH).is_none());
    let r = send(&st, undeclared).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    // At the limit is fine (and reaches auth).
    let ok = Request::post("/api/whoami")
        .body(Body::from(vec![b'z'; 4096]))
        .unwrap();
    assert_eq!(send(&st, ok).await.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn bearer_auth_accepts_active_tokens_and_challenges_everything_else() {
    let db = TestDatabase::new().await;
    let st = state(&db);
    let (secret, id) = create(
        &db,
        CredentialKind::Project,
        &["project:read"],
        &["agent:local:a"],
    )
    .await;

    let ok = send(&st, get("/api/whoami", Some(&format!("Bearer {secret}")))).await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.body);
    assert_eq!(ok.body["principal_kind"], "project_credential");
    assert_eq!(ok.body["scopes"], serde_json::json!(["project:read"]));
    assert_eq!(ok.body["projects"], serde_json::json!(["agent:local:a"]));
    assert!(!ok.body.to_string().contains(&secret));

    let missing = send(&st, get("/api/whoami", None)).await;
    assert_eq!(missing.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        missing.headers[header::WWW_AUTHENTICATE],
        r#"Bearer realm="wc""#
    );
    assert_eq!(missing.body["error"]["kind"], "unauthorized");

    let wrong_scheme = send(&st, get("/api/whoami", Some(&format!("Basic {secret}")))).await;
    assert_eq!(wrong_scheme.status, StatusCode::UNAUTHORIZED);

    let mut near_miss = secret.clone();
    near_miss.pop();
    near_miss.push(if secret.ends_with('A') { 'B' } else { 'A' });
    for bad in [
        format!("Bearer {near_miss}"),
        "Bearer short".into(),
        "Bearer".into(),
        format!("Bearer {}", "x".repeat(600)),
    ] {
        let r = send(&st, get("/api/whoami", Some(&bad))).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{bad}");
        let challenge = r.headers[header::WWW_AUTHENTICATE].to_str().unwrap();
        assert!(
            challenge.starts_with("Bearer ") && challenge.contains(r#"error="invalid_token""#),
            "{challenge}"
        );
        assert_eq!(r.body["error"]["kind"], "invalid_token");
    }

    let revoked = wc_store::credentials::revoke(db.pool(), id).await.unwrap();
    assert!(matches!(
        revoked.applied(),
        Some(wc_store::credentials::Revocation::Revoked(_))
    ));
    let r = send(&st, get("/api/whoami", Some(&format!("Bearer {secret}")))).await;
    assert_eq!(
        r.status,
        StatusCode::UNAUTHORIZED,
        "revoked token must stop working at once"
    );
    assert!(
        r.headers[header::WWW_AUTHENTICATE]
            .to_str()
            .unwrap()
            .contains("invalid_token")
    );
}

#[tokio::test]
async fn insufficient_scope_is_a_403_naming_the_scope() {
    use axum::response::IntoResponse;
    let resp = AuthError::InsufficientScope(Scope::AuditRead).into_response();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        resp.headers()[header::WWW_AUTHENTICATE],
        r#"Bearer realm="wc", error="insufficient_scope", scope="audit:read""#
    );
    let body: Value =
        serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(body["error"]["kind"], "insufficient_scope");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("audit:read")
    );
}

#[tokio::test(flavor = "current_thread")]
async fn tokens_never_reach_the_logs() {
    let db = TestDatabase::new().await;
    let st = state(&db);
    let (secret, _) = create(&db, CredentialKind::SharedKey, &["project:read"], &[]).await;
    let (logs, _guard) = capture_logs();
    let wrong = format!("{secret}tail");
    let mut ids = Vec::new();
    for auth in [
        format!("Bearer {secret}"),
        format!("Bearer {wrong}"),
        format!("bearer {secret}"),
    ] {
        let req = Request::get("/api/whoami")
            .header(header::AUTHORIZATION, &auth)
            .body(Body::empty())
            .unwrap();
        let r = send(&st, req).await;
        ids.push(r.headers["x-request-id"].to_str().unwrap().to_owned());
    }
    let text = logs.text();
    // The capture works: every request left its access line with its id.
    for id in &ids {
        assert!(text.contains(id), "request {id} not logged:\n{text}");
    }
    assert!(!text.contains(&secret), "token leaked into logs:\n{text}");
    assert!(!text.contains(&secret[5..]), "token body leaked into logs");
}
