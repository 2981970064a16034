//! The server process and its surroundings under attack: other processes of the same user
//! reading `/proc`, callers writing into the logs, and a database that goes away or was never
//! migrated (retryable `unavailable`, never `internal`).

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::{Value, json};
use wc_functions::AppState;
use wc_functions::config::ServerConfig;
use wc_functions::telemetry::MAX_LOGGED_CHARS;
use wc_store::config::{DatabaseConfig, DatabaseUrl};
use wc_store::testing::TestDatabase;
use wc_store::testing::pg_proxy::{Break, Fired, PgProxy, proxied_pool, server_addr};

use crate::common::*;

/// The account the process tests run as: any unprivileged user will do.
const NOBODY: u32 = 65534;

// ---------------------------------------------------------------------------------------------
// Non-dumpable server processes

/// A process of `NOBODY` reading `/proc/<pid>/environ`: its output, or the refusal.
fn read_environ_as_nobody(pid: u32) -> Result<Vec<u8>, String> {
    let out = Command::new("cat")
        .arg(format!("/proc/{pid}/environ"))
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap();
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_process_of_the_same_user_cannot_read_wc_local_environment() {
    let db = TestDatabase::new().await;
    let dir = std::env::temp_dir().join(format!("wc-dump-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    nix::unistd::chown(
        &dir,
        Some(nix::unistd::Uid::from_raw(NOBODY)),
        Some(nix::unistd::Gid::from_raw(NOBODY)),
    )
    .unwrap();
    // The build directory may not be open to other users: run a copy the user can execute.
    let bin = dir.join("wc-local");
    std::fs::copy(wc_e2e::server::workspace_binary("wc-local"), &bin).unwrap();
    let marker = format!("wc-secret-marker-{}", uuid::Uuid::new_v4().simple());
    let mut server = Command::new(&bin)
        .current_dir(&dir)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("DATABASE_URL", db.url().expose())
        .env("WC_LOCAL_TOKEN", &marker)
        .args(["--listen", "127.0.0.1:0", "--no-runner"])
        .uid(NOBODY)
        .gid(NOBODY)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = server.stdout.take().unwrap();
    let ready = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|l| l.starts_with("Press Ctrl-C"))
    })
    .await
    .unwrap();
    assert!(ready, "wc-local did not start as an unprivileged user");
    let pid = server.id();

    // The secret is in its environment (root, which bypasses the protection, sees it)...
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    assert!(String::from_utf8_lossy(&environ).contains(&marker));
    // ...but another process of the same user is refused.
    let err = read_environ_as_nobody(pid).expect_err("the environment of wc-local was readable");
    assert!(err.contains("Permission denied"), "{err}");

    // The same read of an ordinary (dumpable) process of that user succeeds: the refusal above
    // is wc-local's doing, not the reader's.
    let mut plain = Command::new("sleep")
        .arg("60")
        .env_clear()
        .env("MARKER", &marker)
        .uid(NOBODY)
        .gid(NOBODY)
        .spawn()
        .unwrap();
    let seen = read_environ_as_nobody(plain.id()).expect("a dumpable process's environment");
    assert!(String::from_utf8_lossy(&seen).contains(&marker));
    plain.kill().unwrap();
    plain.wait().unwrap();

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = tokio::task::spawn_blocking(move || server.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success(), "{status}");
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Caller-chosen text in the logs

/// Every string in a JSON log line, nested fields included.
fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

#[tokio::test]
async fn caller_chosen_text_reaches_the_logs_bounded_and_escaped() {
    let db = TestDatabase::new().await;
    let key = full_key(&db).await;
    let state = state(&db);
    // One thread: the MCP transport's tasks log into the same capture.
    let (logs, _guard) = capture_logs();
    let evil = format!(
        "evil\n{{\"level\":\"ERROR\"}}\u{1b}[31m\u{202e}{}",
        "z".repeat(5000)
    );

    // An unknown MCP tool with a long, control-laden name (the transport logs error answers).
    let reply = send(
        &state,
        mcp_request(
            LEGACY[0],
            Some(&key),
            &rpc(
                LEGACY[0],
                1,
                "tools/call",
                json!({ "name": evil, "arguments": {} }),
            ),
        ),
    )
    .await;
    assert_eq!(reply.rpc_code(), Some(-32602), "{}", reply.text());
    // Unknown tools on REST, one named in the body, one in the path, and an unknown path.
    let reply = rest(
        &state,
        "/api/tools/call",
        Some(&key),
        json!({ "tool": &evil[..40], "arguments": {} }),
    )
    .await;
    assert!(reply.status.is_client_error(), "{}", reply.text());
    let long = "x".repeat(5000);
    let reply = rest(
        &state,
        &format!("/api/actions/{long}"),
        Some(&key),
        json!({}),
    )
    .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.text());
    let reply = rest(&state, &format!("/api/{long}"), Some(&key), json!({})).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.text());
    // A caller-chosen request id and audit session id that are too long to be used.
    let mut req = rest_request("/api/tools/list", Some(&key), &json!({}));
    set_header(&mut req, "x-request-id", &long);
    set_header(&mut req, "x-action-session-id", &long);
    assert_eq!(send(&state, req).await.status, StatusCode::OK);
    // A Host far longer than any real one is refused before the MCP transport logs it.
    let mut req = mcp_request(
        LEGACY[0],
        Some(&key),
        &rpc(LEGACY[0], 1, "tools/list", json!({})),
    );
    set_header(&mut req, "host", &format!("{long}.example"));
    let reply = send(&state, req).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text());

    let text = logs.text();
    let mut seen_tool = false;
    let mut seen_path = false;
    for line in text.lines() {
        let entry: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let mut values = Vec::new();
        strings(&entry, &mut values);
        for v in values {
            assert!(
                v.chars().count() <= MAX_LOGGED_CHARS + 200,
                "an unbounded value ({} chars) reached the log: {}…",
                v.chars().count(),
                &v[..300]
            );
            assert!(
                !v.chars().any(|c| c.is_control() || c == '\u{202e}'),
                "a control character reached the log: {v:?}"
            );
            // The transport logs the answer's Debug form, which doubles the escapes.
            seen_tool |= v.contains(
                r#"unknown tool: evil\\u{a}{\"level\":\"ERROR\"}\\u{1b}[31m\\u{202e}zzz"#,
            ) && v.contains("more bytes)");
            seen_path |= v.starts_with("/api/actions/xxx") && v.ends_with("more bytes)");
        }
        assert!(
            !line.contains(&long),
            "a 5000-character value reached the log"
        );
    }
    assert!(
        seen_tool,
        "the unknown tool's answer was not logged:\n{text}"
    );
    assert!(seen_path, "the long path was not logged:\n{text}");
}

// ---------------------------------------------------------------------------------------------
// A database that goes away, or was never migrated: `unavailable`, retryable

/// The query `authenticate` looks a bearer token up with.
const CREDENTIAL_LOOKUP: &str = "FROM credentials WHERE secret_sha256";
/// The query `list_projects` reads with.
const PROJECT_LIST: &str = "FROM projects WHERE removed_at IS NULL ORDER BY id";

/// A REST `tools/call` of `list_projects`.
async fn list_projects_rest(state: &AppState, key: &str) -> Reply {
    rest(
        state,
        "/api/tools/call",
        Some(key),
        json!({ "tool": "list_projects", "arguments": {} }),
    )
    .await
}

/// Asserts the opaque, retryable HTTP answer of a server-side outage.
fn assert_http_unavailable(reply: &Reply) {
    assert_eq!(
        reply.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        reply.text()
    );
    assert_eq!(
        reply.body["error"]["kind"],
        "unavailable",
        "{}",
        reply.text()
    );
}

/// Asserts a tool result of kind `unavailable` on REST (HTTP 503).
fn assert_tool_unavailable(reply: &Reply) {
    assert_eq!(
        reply.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        reply.text()
    );
    assert_eq!(reply.body["success"], false, "{}", reply.text());
    assert_eq!(
        reply.body["error"]["kind"],
        "unavailable",
        "{}",
        reply.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_lost_during_authentication_answers_503_unavailable_and_a_retry_succeeds() {
    let db = TestDatabase::new().await;
    let key = full_key(&db).await;
    let proxy = PgProxy::start(server_addr(&db).await).await;
    let state = AppState::new(proxied_pool(&db, &proxy), ServerConfig::default());
    assert_eq!(
        list_projects_rest(&state, &key).await.status,
        StatusCode::OK
    );

    proxy.arm(Break::StatementLost, CREDENTIAL_LOOKUP, 1);
    assert_http_unavailable(&list_projects_rest(&state, &key).await);
    assert_eq!(proxy.fired(), [Fired::StatementLost]);

    proxy.arm(Break::StatementLost, CREDENTIAL_LOOKUP, 1);
    let reply = tools_call(&state, MODERN, Some(&key), "list_projects", json!({})).await;
    assert_http_unavailable(&reply);
    assert_eq!(proxy.fired().len(), 2);

    // The outage was transient: the same calls now succeed.
    assert_eq!(
        list_projects_rest(&state, &key).await.status,
        StatusCode::OK
    );
    let reply = tools_call(&state, MODERN, Some(&key), "list_projects", json!({})).await;
    assert_eq!(reply.result()["isError"], false, "{}", reply.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_lost_during_a_tool_call_answers_unavailable_and_a_retry_succeeds() {
    let db = TestDatabase::new().await;
    let key = full_key(&db).await;
    let proxy = PgProxy::start(server_addr(&db).await).await;
    let state = AppState::new(proxied_pool(&db, &proxy), ServerConfig::default());

    proxy.arm(Break::StatementLost, PROJECT_LIST, 1);
    assert_tool_unavailable(&list_projects_rest(&state, &key).await);
    assert_eq!(proxy.fired(), [Fired::StatementLost]);

    proxy.arm(Break::StatementLost, PROJECT_LIST, 1);
    let reply = tools_call(&state, MODERN, Some(&key), "list_projects", json!({})).await;
    let result = reply.result();
    assert_eq!(result["isError"], true, "{}", reply.text());
    assert_eq!(
        result["structuredContent"]["error"]["kind"],
        "unavailable",
        "{}",
        reply.text()
    );
    assert_eq!(proxy.fired().len(), 2);

    assert_eq!(
        list_projects_rest(&state, &key).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn a_database_that_does_not_answer_at_all_answers_503_unavailable() {
    // Nothing listens on port 1.
    let url = DatabaseUrl::parse("postgres://postgres@127.0.0.1:1/wc").unwrap();
    let pool = wc_store::pool::build_pool(&DatabaseConfig {
        acquire_timeout: Duration::from_secs(2),
        ..DatabaseConfig::new(url)
    })
    .unwrap();
    let state = AppState::new(pool, ServerConfig::default());
    let key = "wcsk_a-plausible-token-that-cannot-be-looked-up";
    assert_http_unavailable(&list_projects_rest(&state, key).await);
    let reply = tools_call(&state, MODERN, Some(key), "list_projects", json!({})).await;
    assert_http_unavailable(&reply);
}

#[tokio::test]
async fn an_unmigrated_database_answers_503_unavailable_not_500() {
    let db = TestDatabase::empty().await;
    let state = state(&db);
    let key = "wcsk_a-plausible-token-on-an-empty-database";
    assert_http_unavailable(&list_projects_rest(&state, key).await);
    let reply = tools_call(&state, MODERN, Some(key), "list_projects", json!({})).await;
    assert_http_unavailable(&reply);
    let req = Request::get("/api/whoami")
        .header(header::AUTHORIZATION, format!("Bearer {key}"))
        .body(Body::empty())
        .unwrap();
    assert_http_unavailable(&send(&state, req).await);
}

#[tokio::test]
async fn a_database_missing_a_tool_table_answers_unavailable_from_the_tool() {
    let db = TestDatabase::new().await;
    let key = full_key(&db).await;
    let state = state(&db);
    assert_eq!(
        list_projects_rest(&state, &key).await.status,
        StatusCode::OK
    );
    // Authentication still works; the tool's table is gone (a schema behind the server).
    sql(&db, "DROP TABLE projects CASCADE").await;
    assert_tool_unavailable(&list_projects_rest(&state, &key).await);
    let reply = tools_call(&state, MODERN, Some(&key), "list_projects", json!({})).await;
    let result = reply.result();
    assert_eq!(result["isError"], true, "{}", reply.text());
    assert_eq!(
        result["structuredContent"]["error"]["kind"],
        "unavailable",
        "{}",
        reply.text()
    );
}
