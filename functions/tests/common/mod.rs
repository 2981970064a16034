//! Shared helpers of the end-to-end suites: the test application ([`TestApp`], in `app.rs`:
//! where a new test starts), credentials, JSON-RPC requests as real clients send them,
//! in-process and over-the-wire servers, runners, and reads of the audit and session tables.
#![allow(dead_code)]

use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;
use wc_functions::auth::token;
use wc_functions::config::ServerConfig;
use wc_functions::{AppState, app};
use wc_store::credentials::{self, CredentialKind, NewCredential};
use wc_store::testing::TestDatabase;

mod app;
pub use app::*;

/// The modern, stateless protocol revision.
pub const MODERN: &str = "2026-07-28";
/// The legacy revisions served.
pub const LEGACY: [&str; 2] = ["2025-11-25", "2025-06-18"];
/// Every served revision.
pub const VERSIONS: [&str; 3] = ["2025-06-18", "2025-11-25", "2026-07-28"];

/// Every scope a credential can hold.
pub const ALL_SCOPES: [&str; 7] = [
    "project:read",
    "project:write",
    "memory:read",
    "memory:manage",
    "plugin:inspect",
    "audit:read",
    "audit:write",
];

/// One HTTP reply, fully read.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub bytes: Bytes,
    pub body: Value,
}

impl Reply {
    fn new(status: StatusCode, headers: HeaderMap, bytes: Bytes) -> Reply {
        let body = parse_body(&bytes);
        Reply {
            status,
            headers,
            bytes,
            body,
        }
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }

    /// The JSON-RPC error code, if the body is a JSON-RPC error.
    pub fn rpc_code(&self) -> Option<i64> {
        self.body["error"]["code"].as_i64()
    }

    /// The JSON-RPC `result`.
    pub fn result(&self) -> &Value {
        assert!(
            self.body.get("result").is_some(),
            "no JSON-RPC result (HTTP {}): {}",
            self.status,
            self.text()
        );
        &self.body["result"]
    }
}

/// JSON, or the last `data:` line of an event stream, or `null`.
fn parse_body(bytes: &[u8]) -> Value {
    if bytes.is_empty() {
        return Value::Null;
    }
    if let Ok(v) = serde_json::from_slice(bytes) {
        return v;
    }
    let text = String::from_utf8_lossy(bytes);
    text.lines()
        .rev()
        .filter_map(|l| l.strip_prefix("data:"))
        .find_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .unwrap_or(Value::Null)
}

/// Serves one request in-process.
pub async fn send(state: &AppState, req: Request<Body>) -> Reply {
    let resp = app(state.clone()).oneshot(req).await.unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    Reply::new(status, headers, bytes)
}

/// State over the test database's shared pool.
pub fn state(db: &TestDatabase) -> AppState {
    AppState::new(db.pool().clone(), ServerConfig::default())
}

/// State over the test database's shared pool with `config`.
pub fn state_with(db: &TestDatabase, config: ServerConfig) -> AppState {
    AppState::new(db.pool().clone(), config)
}

/// A second, independent instance: its own pool over the same database.
pub fn second_instance(db: &TestDatabase, config: ServerConfig) -> AppState {
    AppState::new(db.new_pool(), config)
}

/// Creates a credential and returns its bearer secret.
pub async fn credential(
    db: &TestDatabase,
    kind: CredentialKind,
    scopes: &[&str],
    projects: &[&str],
) -> String {
    let secret = token::generate(kind);
    let client = db.pool().get().await.unwrap();
    credentials::insert(
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
    secret
}

/// A shared key holding every scope.
pub async fn full_key(db: &TestDatabase) -> String {
    credential(db, CredentialKind::SharedKey, &ALL_SCOPES, &[]).await
}

/// The per-request `_meta` a 2026-07-28 client sends.
pub fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": { "name": "wc-tests", "version": "1.0.0" },
    })
}

/// A JSON-RPC request body as a client of `version` sends it (`_meta` added on 2026-07-28).
pub fn rpc(version: &str, id: i64, method: &str, params: Value) -> Value {
    let mut params = match params {
        Value::Null => json!({}),
        p => p,
    };
    if version == MODERN {
        let meta = params
            .as_object_mut()
            .unwrap()
            .entry("_meta")
            .or_insert_with(|| json!({}));
        for (k, v) in modern_meta().as_object().unwrap() {
            meta.as_object_mut().unwrap().insert(k.clone(), v.clone());
        }
    }
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

/// A JSON-RPC notification body.
pub fn notification(method: &str) -> Value {
    json!({ "jsonrpc": "2.0", "method": method })
}

/// A `POST /mcp` of `body` with the headers a `version` client sends: content type, accept,
/// protocol version, and on 2026-07-28 `Mcp-Method` and (for tools/call and tasks/*) `Mcp-Name`.
pub fn mcp_request(version: &str, auth: Option<&str>, body: &Value) -> Request<Body> {
    let mut b = Request::post("/mcp")
        .header(header::HOST, "localhost")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header("mcp-protocol-version", version);
    if let Some(t) = auth {
        b = b.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    if version == MODERN
        && let Some(method) = body["method"].as_str()
    {
        b = b.header("mcp-method", method);
        if method == "tools/call"
            && let Some(name) = body["params"]["name"].as_str()
        {
            b = b.header("mcp-name", header_value(name));
        }
        if method.starts_with("tasks/")
            && let Some(id) = body["params"]["taskId"].as_str()
        {
            b = b.header("mcp-name", header_value(id));
        }
    }
    b.body(Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap()
}

/// `value` as a client puts it in an `Mcp-*` header: as it is when it is printable ASCII
/// without surrounding spaces, otherwise in the spec's `=?base64?…?=` form.
pub fn header_value(value: &str) -> String {
    use base64::Engine as _;
    let plain = value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && value.trim() == value
        && !(value.starts_with("=?base64?") && value.ends_with("?="));
    if plain {
        value.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value)
        )
    }
}

/// Sets (replaces) a header of a built request.
pub fn set_header(req: &mut Request<Body>, name: &str, value: &str) {
    req.headers_mut().insert(
        HeaderName::from_bytes(name.as_bytes()).unwrap(),
        HeaderValue::from_str(value).unwrap(),
    );
}

/// One MCP request of `version`, in-process.
pub async fn mcp(
    state: &AppState,
    version: &str,
    auth: Option<&str>,
    method: &str,
    params: Value,
) -> Reply {
    send(
        state,
        mcp_request(version, auth, &rpc(version, 1, method, params)),
    )
    .await
}

/// `tools/list` on `version`; returns the reply.
pub async fn tools_list(state: &AppState, version: &str, auth: Option<&str>) -> Reply {
    mcp(state, version, auth, "tools/list", json!({})).await
}

/// `tools/call` of `name` with `arguments` on `version`.
pub async fn tools_call(
    state: &AppState,
    version: &str,
    auth: Option<&str>,
    name: &str,
    arguments: Value,
) -> Reply {
    mcp(
        state,
        version,
        auth,
        "tools/call",
        json!({ "name": name, "arguments": arguments }),
    )
    .await
}

/// The names in a tools/list result.
pub fn tool_names(result: &Value) -> Vec<String> {
    result["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools array: {result}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// A `POST` of a JSON body to a REST path.
pub fn rest_request(path: &str, auth: Option<&str>, body: &Value) -> Request<Body> {
    let mut b = Request::post(path).header(header::CONTENT_TYPE, "application/json");
    if let Some(t) = auth {
        b = b.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    b.body(Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap()
}

/// One REST call in-process.
pub async fn rest(state: &AppState, path: &str, auth: Option<&str>, body: Value) -> Reply {
    send(state, rest_request(path, auth, &body)).await
}

/// A real HTTP server over `state` on 127.0.0.1; returns its base URL.
pub async fn serve(state: AppState) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app(state)).await.unwrap();
    });
    format!("http://{addr}")
}

/// An audit row as stored.
#[derive(Debug, Clone)]
pub struct EventRow {
    pub session_id: String,
    pub seq: i64,
    pub endpoint: String,
    pub http_method: String,
    pub action_name: String,
    pub operation: String,
    pub status_code: i32,
    pub success: bool,
    pub summary: Value,
    pub principal_kind: Option<String>,
    pub principal_user_id: Option<String>,
    pub oauth_client_id: Option<String>,
    pub request_id: Option<String>,
}

/// Every `action_events` row, oldest first.
pub async fn events(db: &TestDatabase) -> Vec<EventRow> {
    let client = db.pool().get().await.unwrap();
    client
        .query(
            "SELECT session_id, seq, endpoint, http_method, action_name, operation, status_code, \
               success, summary, principal_kind, principal_user_id, oauth_client_id, request_id \
             FROM action_events ORDER BY occurred_at, id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| EventRow {
            session_id: r.get(0),
            seq: r.get(1),
            endpoint: r.get(2),
            http_method: r.get(3),
            action_name: r.get(4),
            operation: r.get(5),
            status_code: r.get(6),
            success: r.get(7),
            summary: r.get(8),
            principal_kind: r.get(9),
            principal_user_id: r.get(10),
            oauth_client_id: r.get(11),
            request_id: r.get(12),
        })
        .collect()
}

/// Every column of every audit row and session, as text (for leak checks).
pub async fn audit_tables_text(db: &TestDatabase) -> String {
    let client = db.pool().get().await.unwrap();
    let mut out = String::new();
    for table in ["action_events", "action_sessions"] {
        for row in client
            .query(&format!("SELECT to_jsonb(t)::text FROM {table} t"), &[])
            .await
            .unwrap()
        {
            out.push_str(&row.get::<_, String>(0));
            out.push('\n');
        }
    }
    out
}

/// How many audit sessions exist.
pub async fn session_count(db: &TestDatabase) -> i64 {
    let client = db.pool().get().await.unwrap();
    client
        .query_one("SELECT count(*) FROM action_sessions", &[])
        .await
        .unwrap()
        .get(0)
}

/// Runs one SQL statement on the test database.
pub async fn sql(db: &TestDatabase, statement: &str) {
    let client = db.pool().get().await.unwrap();
    client.batch_execute(statement).await.unwrap();
}

/// The audit row of the request whose reply carried `reply`'s request id.
pub async fn event_of(db: &TestDatabase, reply: &Reply) -> EventRow {
    let id = reply.headers["x-request-id"].to_str().unwrap().to_owned();
    let rows: Vec<EventRow> = events(db)
        .await
        .into_iter()
        .filter(|e| e.request_id.as_deref() == Some(id.as_str()))
        .collect();
    assert_eq!(rows.len(), 1, "request {id} has {} audit rows", rows.len());
    rows.into_iter().next().unwrap()
}

/// A writer that keeps what the log subscriber writes.
#[derive(Clone, Default)]
pub struct Captured(pub Arc<Mutex<Vec<u8>>>);

impl Captured {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Captures this thread's logs, in the server's format at debug, until the guard drops.
pub fn capture_logs() -> (Captured, tracing::subscriber::DefaultGuard) {
    let logs = Captured::default();
    let guard = tracing::subscriber::set_default(wc_functions::telemetry::subscriber_with_writer(
        logs.clone(),
    ));
    (logs, guard)
}

// ---------------------------------------------------------------------------------------------
// Projects and Workflow Sessions

/// Registers project `id` (`agent:<client>:<name>`) directly in the store.
pub async fn register_project(db: &TestDatabase, id: &str) {
    let mut parts = id.splitn(3, ':');
    let (_, client_id, name) = (parts.next(), parts.next(), parts.next());
    let client = db.pool().get().await.unwrap();
    wc_store::projects::register(
        &client,
        id,
        name.unwrap_or(id),
        client_id.unwrap_or("local"),
    )
    .await
    .unwrap();
}

/// Creates a credential in authority group `group` (`None`: a group of its own) and returns
/// its bearer secret.
pub async fn credential_in_group(
    db: &TestDatabase,
    kind: CredentialKind,
    scopes: &[&str],
    projects: &[&str],
    group: Option<&str>,
) -> String {
    let secret = token::generate(kind);
    let client = db.pool().get().await.unwrap();
    credentials::insert(
        &client,
        &NewCredential {
            kind,
            label: Some("test".into()),
            authority_group: group.map(str::to_owned),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            projects: projects.iter().map(|s| s.to_string()).collect(),
            secret_sha256: token::digest(&secret),
        },
    )
    .await
    .unwrap();
    secret
}

/// A Workflow Session ledger row as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerRow {
    pub seq: i64,
    pub kind: String,
    pub call_id: uuid::Uuid,
    pub invocation_id: uuid::Uuid,
    pub role: String,
    pub tool_name: Option<String>,
    pub payload: Value,
}

/// Every retained event of Workflow Session `id`, ascending by seq.
pub async fn ledger(db: &TestDatabase, id: &str) -> Vec<LedgerRow> {
    let client = db.pool().get().await.unwrap();
    client
        .query(
            "SELECT seq, kind, call_id, invocation_id, role, tool_name, payload FROM session_events \
             WHERE session_id = $1 ORDER BY seq",
            &[&id],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| LedgerRow {
            seq: r.get(0),
            kind: r.get(1),
            call_id: r.get(2),
            invocation_id: r.get(3),
            role: r.get(4),
            tool_name: r.get(5),
            payload: r.get(6),
        })
        .collect()
}

/// The stored row of Workflow Session `id`.
pub async fn session_row(db: &TestDatabase, id: &str) -> wc_store::sessions::SessionRow {
    let client = db.pool().get().await.unwrap();
    let parsed = wc_domain::SessionId::parse(id).expect("a session id");
    wc_store::sessions::get(&client, &parsed)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("no workflow session {id}"))
}

/// (workflow sessions, session events) in the whole database.
pub async fn workflow_totals(db: &TestDatabase) -> (i64, i64) {
    let client = db.pool().get().await.unwrap();
    let row = client
        .query_one(
            "SELECT (SELECT count(*) FROM workflow_sessions), (SELECT count(*) FROM session_events)",
            &[],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

/// Every session's id and `events_observed`, by id: a fingerprint of all ledger state.
pub async fn workflow_state(db: &TestDatabase) -> Vec<(String, i64, String, String, Value)> {
    let client = db.pool().get().await.unwrap();
    client
        .query(
            "SELECT id, events_observed, lifecycle, mode, execution_context FROM workflow_sessions ORDER BY id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Runners

/// A runner agent running in this process against a served state, for projects given as
/// `name → root` of runner client `client_id`.
pub struct TestRunner {
    /// Base URL of the served state.
    pub base_url: String,
    /// The runner's token.
    pub token: String,
    stop: tokio::sync::watch::Sender<wc_runner_agent::agent::Stop>,
    joined: Option<tokio::task::JoinHandle<Result<(), wc_runner_agent::agent::AgentError>>>,
}

impl TestRunner {
    /// Creates the runner's token, serves `state` over TCP (or uses `base_url`), starts the
    /// agent and waits until it has registered.
    pub async fn start(
        db: &TestDatabase,
        state: &AppState,
        client_id: &str,
        projects: &[(&str, &std::path::Path)],
    ) -> TestRunner {
        let base_url = serve(state.clone()).await;
        Self::start_at(db, &base_url, client_id, projects).await
    }

    /// Like [`TestRunner::start`] against an already served base URL.
    pub async fn start_at(
        db: &TestDatabase,
        base_url: &str,
        client_id: &str,
        projects: &[(&str, &std::path::Path)],
    ) -> TestRunner {
        Self::launch(db, base_url, client_id, projects, None, None).await
    }

    /// A runner serving `projects` that also lets callers open checkouts beneath `open`,
    /// making worktrees in `store`.
    pub async fn start_opening(
        db: &TestDatabase,
        state: &AppState,
        client_id: &str,
        projects: &[(&str, &std::path::Path)],
        open: &std::path::Path,
        store: &std::path::Path,
    ) -> TestRunner {
        let base_url = serve(state.clone()).await;
        let workspaces =
            wc_runner_agent::opened::Workspaces::new(&[open.to_path_buf()], store).unwrap();
        Self::launch(db, &base_url, client_id, projects, None, Some(workspaces)).await
    }

    /// Creates the runner's token, starts the agent (receiving from `sqs` when given:
    /// `(local SQS, queue URL, visibility)`) and waits until it has registered.
    async fn launch(
        db: &TestDatabase,
        base_url: &str,
        client_id: &str,
        projects: &[(&str, &std::path::Path)],
        sqs: Option<(&wc_store::testing::sqs::LocalSqs, &str, std::time::Duration)>,
        workspaces: Option<wc_runner_agent::opened::Workspaces>,
    ) -> TestRunner {
        let token = runner_token(db, client_id).await;
        let mut cfg = wc_runner_agent::config::RunnerConfig::embedded(
            base_url,
            client_id,
            wc_runner_agent::config::Secret::new(token.clone()),
            projects
                .iter()
                .map(|(n, p)| (n.to_string(), p.to_path_buf()))
                .collect(),
            wc_runner_agent::config::Limits::default(),
            Default::default(),
        )
        .unwrap();
        if let Some(workspaces) = workspaces {
            cfg = cfg.with_workspaces(workspaces);
        }
        let mut opts = wc_runner_agent::agent::AgentOptions {
            stop_policy: wc_runner_agent::exec::StopPolicy {
                interrupt_grace: std::time::Duration::from_millis(300),
                terminate_grace: std::time::Duration::from_millis(300),
                drain_after_exit: std::time::Duration::from_millis(200),
            },
            ..Default::default()
        };
        if let Some((local, queue_url, visibility)) = sqs {
            cfg = cfg
                .with_sqs(
                    queue_url,
                    Some(local.endpoint()),
                    Some(wc_store::testing::sqs::REGION),
                )
                .unwrap();
            opts.poll_wait = std::time::Duration::from_secs(1);
            opts.sqs_visibility = visibility;
            opts.sqs_credentials = Some(wc_store::testing::sqs::credentials());
        }
        let before = registered_instance(db, client_id).await;
        let (stop, rx) = tokio::sync::watch::channel(wc_runner_agent::agent::Stop::Run);
        let joined = tokio::spawn(wc_runner_agent::agent::run(cfg, opts, rx));
        await_registration(db, client_id, before).await;
        TestRunner {
            base_url: base_url.to_owned(),
            token,
            stop,
            joined: Some(joined),
        }
    }

    /// Stops the agent (`Now`: running work is cancelled and reported) and waits for it.
    pub async fn stop(mut self) -> Result<(), wc_runner_agent::agent::AgentError> {
        let _ = self.stop.send(wc_runner_agent::agent::Stop::Now);
        self.joined.take().unwrap().await.unwrap()
    }
}

impl Drop for TestRunner {
    fn drop(&mut self) {
        let _ = self.stop.send(wc_runner_agent::agent::Stop::Now);
    }
}

// ---------------------------------------------------------------------------------------------
// Runners receiving from SQS

impl TestRunner {
    /// Like [`TestRunner::start_at`], the runner receiving its work from the SQS queue
    /// `queue_url` of the local SQS `sqs`: 1 s long polls, messages hidden for `visibility`
    /// (and kept hidden while their work runs).
    pub async fn start_sqs_at(
        db: &TestDatabase,
        base_url: &str,
        client_id: &str,
        projects: &[(&str, &std::path::Path)],
        sqs: &wc_store::testing::sqs::LocalSqs,
        queue_url: &str,
        visibility: std::time::Duration,
    ) -> TestRunner {
        Self::launch(
            db,
            base_url,
            client_id,
            projects,
            Some((sqs, queue_url, visibility)),
            None,
        )
        .await
    }
}

// ---------------------------------------------------------------------------------------------
// MCP tasks (io.modelcontextprotocol/tasks)

/// `_meta` of a 2026-07-28 request that declares the tasks extension.
pub fn declaring() -> Value {
    let mut meta = modern_meta();
    meta["io.modelcontextprotocol/clientCapabilities"] =
        json!({ "extensions": { "io.modelcontextprotocol/tasks": {} } });
    meta
}

/// A JSON-RPC request of `method` on instance `st` with `key`, declaring the extension
/// when `tasks`; the reply.
pub async fn tasks_rpc(
    st: &AppState,
    key: &str,
    method: &str,
    params: Value,
    tasks: bool,
) -> Reply {
    let mut body = rpc(MODERN, 7, method, params);
    if tasks {
        body["params"]["_meta"] = declaring();
    }
    send(st, mcp_request(MODERN, Some(key), &body)).await
}

/// `tools/call` of `tool` declaring the extension; the JSON-RPC result.
pub async fn call_as_task(st: &AppState, key: &str, tool: &str, args: Value) -> Value {
    let r = tasks_rpc(
        st,
        key,
        "tools/call",
        json!({ "name": tool, "arguments": args }),
        true,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.result().clone()
}

/// `tasks/get` of `id`; the reply.
pub async fn task_get(st: &AppState, key: &str, id: &str) -> Reply {
    tasks_rpc(st, key, "tasks/get", json!({ "taskId": id }), true).await
}

/// `tasks/cancel` of `id`; the reply.
pub async fn task_cancel(st: &AppState, key: &str, id: &str) -> Reply {
    tasks_rpc(st, key, "tasks/cancel", json!({ "taskId": id }), true).await
}

/// Polls `id` on `st` until it is terminal; the last `tasks/get` result.
pub async fn task_until_terminal(st: &AppState, key: &str, id: &str) -> Value {
    eventually("the task ends", async || {
        let r = task_get(st, key, id).await;
        let t = r.result().clone();
        matches!(
            t["status"].as_str(),
            Some("completed" | "failed" | "cancelled")
        )
        .then_some(t)
    })
    .await
}
