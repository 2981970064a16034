//! The test application: one per-test database, the router built over it (twice when a test
//! proves that instances share nothing but the database), credentials, tool calls over MCP
//! and REST, runner tokens and the runner protocol, and bounded waits on durable state.
//!
//! A new end-to-end test usually starts with [`TestApp::with_projects`] and calls tools with
//! [`mcp_tool`] or [`action`]; everything it asserts on is read back from the database. A
//! result is read only once it is known to have succeeded ([`TestApp::mcp_ok`], [`output`]) or
//! failed ([`kind`]).

use std::time::{Duration, Instant};

use axum::http::Method;
use serde_json::{Value, json};
use uuid::Uuid;
use wc_functions::AppState;
use wc_functions::auth::token;
use wc_functions::config::ServerConfig;
use wc_runner_protocol::{PROTOCOL_VERSION, PollRequest, QueueKind, RegisterRequest};
use wc_store::credentials::CredentialKind;
use wc_store::testing::TestDatabase;

use super::{
    ALL_SCOPES, MODERN, Reply, TestRunner, credential, mcp_request, register_project, rest, rpc,
    second_instance, send, serve, state_with,
};

/// How long a wait on durable state may take before the test calls it a hang: generous, so
/// only a system that never gets there fails, however loaded the machine.
pub const HANG: Duration = Duration::from_secs(60);

/// A per-test database with the router over it and a shared key holding every scope.
pub struct TestApp {
    /// The test's own database, dropped with the test.
    pub db: TestDatabase,
    /// The first instance: the router's state over the database's shared pool.
    pub st: AppState,
    /// A shared key holding every scope, for every project.
    pub key: String,
}

impl TestApp {
    /// A fresh database, no project registered, the default configuration.
    pub async fn new() -> TestApp {
        TestApp::with_config(&[], ServerConfig::default()).await
    }

    /// A fresh database with `projects` (`agent:<client>:<name>`) registered.
    pub async fn with_projects(projects: &[&str]) -> TestApp {
        TestApp::with_config(projects, ServerConfig::default()).await
    }

    /// A fresh database with `projects` registered and instances built with `config`.
    pub async fn with_config(projects: &[&str], config: ServerConfig) -> TestApp {
        let db = TestDatabase::new().await;
        for p in projects {
            register_project(&db, p).await;
        }
        let st = state_with(&db, config);
        let key = credential(&db, CredentialKind::SharedKey, &ALL_SCOPES, &[]).await;
        TestApp { db, st, key }
    }

    /// A second, independent instance: the router built again, with the first instance's
    /// configuration, over its own pool of the same database. What one instance did, the
    /// other can only know from the database.
    pub fn second(&self) -> AppState {
        second_instance(&self.db, (*self.st.deps.config).clone())
    }

    /// A credential of `kind` with `scopes` for `projects` (empty: every project).
    pub async fn token(&self, kind: CredentialKind, scopes: &[&str], projects: &[&str]) -> String {
        credential(&self.db, kind, scopes, projects).await
    }

    /// A runner token for runner `client_id`, replacing any earlier one (and forgetting the
    /// runner's registered instances).
    pub async fn runner_token(&self, client_id: &str) -> String {
        runner_token(&self.db, client_id).await
    }

    /// Serves the first instance over TCP on 127.0.0.1; returns its base URL.
    pub async fn serve(&self) -> String {
        serve(self.st.clone()).await
    }

    /// The real runner agent in this process as runner `client_id`, serving `projects`
    /// (`name → root`), connected to the first instance over TCP and registered.
    pub async fn runner(
        &self,
        client_id: &str,
        projects: &[(&str, &std::path::Path)],
    ) -> TestRunner {
        TestRunner::start(&self.db, &self.st, client_id, projects).await
    }

    /// `tool` over modern MCP with the shared key; its structured result.
    pub async fn mcp_tool(&self, tool: &str, args: Value) -> Value {
        mcp_tool(&self.st, &self.key, tool, args).await
    }

    /// `tool` over modern MCP with the shared key, which must succeed; its output. The way to
    /// read a result: a failure fails the test here, with the whole result, instead of being
    /// read as an empty output.
    pub async fn mcp_ok(&self, tool: &str, args: Value) -> Value {
        let v = self.mcp_tool(tool, args).await;
        assert_eq!(v["success"], true, "{tool}: expected success: {v}");
        v["output"].clone()
    }

    /// `POST /api/actions/{tool}` with the shared key.
    pub async fn action(&self, tool: &str, args: Value) -> Reply {
        action(&self.st, &self.key, tool, args).await
    }
}

/// A test application whose project `agent:local:<name>` is served from a temporary root by
/// the real runner agent (runner `local`), connected to the first instance and registered.
/// Dereferences to its [`TestApp`].
pub struct RunnerApp {
    /// The application the runner is connected to.
    pub app: TestApp,
    /// The project's root directory.
    pub root: tempfile::TempDir,
    /// The connected runner; stopped when dropped.
    pub runner: TestRunner,
}

impl RunnerApp {
    /// Registers project `agent:local:{name}` and starts its runner.
    pub async fn start(name: &str) -> RunnerApp {
        RunnerApp::start_with(name, ServerConfig::default()).await
    }

    /// [`RunnerApp::start`] with instances built with `config`.
    pub async fn start_with(name: &str, config: ServerConfig) -> RunnerApp {
        let app = TestApp::with_config(&[&format!("agent:local:{name}")], config).await;
        let root = tempfile::tempdir().unwrap();
        let runner = app.runner("local", &[(name, root.path())]).await;
        RunnerApp { app, root, runner }
    }

    /// The canonical project root (what the runner resolves a cwd against).
    pub fn root(&self) -> std::path::PathBuf {
        self.root.path().canonicalize().unwrap()
    }
}

impl std::ops::Deref for RunnerApp {
    type Target = TestApp;
    fn deref(&self) -> &TestApp {
        &self.app
    }
}

// ---------------------------------------------------------------------------------------------
// Tool calls

/// One `tools/call` of `tool` on the modern MCP revision with `key`; returns the structured
/// `{success, output?, error?}` result after checking that the transport agrees with it
/// (HTTP 200, `isError` exactly when the result is not a success).
pub async fn mcp_tool(st: &AppState, key: &str, tool: &str, args: Value) -> Value {
    let body = rpc(
        MODERN,
        1,
        "tools/call",
        json!({ "name": tool, "arguments": args }),
    );
    let r = send(st, mcp_request(MODERN, Some(key), &body)).await;
    assert_eq!(r.status, 200, "{tool}: {}", r.text());
    let result = r.result();
    let sc = result["structuredContent"].clone();
    assert_eq!(
        result["isError"],
        json!(sc["success"] != true),
        "{tool}: {result}"
    );
    sc
}

/// `POST /api/actions/{tool}` with `key` and `args` as the body.
pub async fn action(st: &AppState, key: &str, tool: &str, args: Value) -> Reply {
    rest(st, &format!("/api/actions/{tool}"), Some(key), args).await
}

/// `tool` on the REST surface with `key`: its named action, or `POST /api/tools/call` for a
/// tool without one.
pub async fn rest_call(st: &AppState, key: &str, tool: &str, args: Value) -> Reply {
    if named_action(tool) {
        action(st, key, tool, args).await
    } else {
        rest_tools_call(st, key, tool, args).await
    }
}

/// Whether `tool` has a named REST action (`POST /api/actions/{tool}`).
pub fn named_action(tool: &str) -> bool {
    wc_functions::tools::all()
        .iter()
        .any(|s| s.meta.name == tool && wc_functions::rest::openapi::is_named(s.meta.name))
}

/// `POST /api/tools/call` of `tool` with `key`.
pub async fn rest_tools_call(st: &AppState, key: &str, tool: &str, arguments: Value) -> Reply {
    rest(
        st,
        "/api/tools/call",
        Some(key),
        json!({ "tool": tool, "arguments": arguments }),
    )
    .await
}

/// The output of a successful result.
#[track_caller]
pub fn output(v: &Value) -> &Value {
    assert_eq!(v["success"], true, "expected success: {v}");
    &v["output"]
}

/// The error kind of a failed result.
#[track_caller]
pub fn kind(v: &Value) -> &str {
    assert_eq!(v["success"], false, "expected a failure: {v}");
    v["error"]["kind"].as_str().expect("error.kind")
}

// ---------------------------------------------------------------------------------------------
// Runners

/// Creates (or rotates) runner `client_id`'s token and returns the secret. Rotating forgets
/// the runner's registered instances, so the next registration is the current one.
pub async fn runner_token(db: &TestDatabase, client_id: &str) -> String {
    let secret = wc_functions::runner_api::auth::generate();
    let client = db.pool().get().await.unwrap();
    wc_store::runners::create(&client, client_id, None, &token::digest(&secret), true)
        .await
        .unwrap()
        .unwrap();
    secret
}

/// The instance runner `client_id` has registered, if any.
pub async fn registered_instance(db: &TestDatabase, client_id: &str) -> Option<Uuid> {
    let client = db.pool().get().await.unwrap();
    wc_store::runners::get(&client, client_id)
        .await
        .unwrap()
        .and_then(|r| r.instance_id)
}

/// Waits until runner `client_id` has registered an instance other than `before`; returns it.
pub async fn await_registration(db: &TestDatabase, client_id: &str, before: Option<Uuid>) -> Uuid {
    eventually(&format!("runner {client_id} registers"), async || {
        registered_instance(db, client_id)
            .await
            .filter(|&now| Some(now) != before)
    })
    .await
}

/// The runner protocol (`/runner/v1/*`) spoken over a real connection, as a runner would.
#[derive(Clone)]
pub struct RunnerApi {
    base: String,
    /// The runner token requests carry.
    pub token: String,
    http: wc_e2e::client::Client,
}

impl RunnerApi {
    /// The protocol against the server at `base`, authenticated with `token`.
    pub fn new(base: &str, token: &str) -> RunnerApi {
        RunnerApi {
            base: base.to_owned(),
            token: token.to_owned(),
            http: wc_e2e::client::Client::new(),
        }
    }

    /// `POST /runner/v1/{op}` of raw `body` bearing `auth` (none: no `Authorization`).
    pub async fn post_raw(
        &self,
        op: &str,
        body: Vec<u8>,
        auth: Option<&str>,
    ) -> wc_e2e::client::Reply {
        let url = format!("{}/runner/v1/{op}", self.base);
        let bearer = auth.map(|t| format!("Bearer {t}"));
        let mut headers = vec![("content-type", "application/json")];
        if let Some(b) = &bearer {
            headers.push(("authorization", b.as_str()));
        }
        self.http
            .send(Method::POST, &url, &headers, body)
            .await
            .unwrap()
    }

    /// `POST /runner/v1/{op}` of `body` with the runner token.
    pub async fn post(&self, op: &str, body: &impl serde::Serialize) -> wc_e2e::client::Reply {
        self.post_raw(op, serde_json::to_vec(body).unwrap(), Some(&self.token))
            .await
    }

    /// Registers `instance` serving `projects` from the API-poll queue, one item at a time.
    pub async fn register(&self, instance: Uuid, projects: &[&str]) -> wc_e2e::client::Reply {
        self.post("register", &register_request(instance, projects, "test"))
            .await
    }

    /// One poll of `instance` that does not wait, for at most one item.
    pub async fn poll(&self, instance: Uuid) -> wc_e2e::client::Reply {
        self.post("poll", &poll_request(instance)).await
    }
}

/// A registration of `instance` serving `projects` from the API-poll queue, one item at a time.
pub fn register_request(instance: Uuid, projects: &[&str], agent_version: &str) -> RegisterRequest {
    RegisterRequest {
        protocol_version: PROTOCOL_VERSION,
        instance_id: instance,
        projects: projects.iter().map(|p| p.to_string()).collect(),
        agent_version: agent_version.into(),
        queue: QueueKind::ApiPoll,
        max_concurrency: 1,
        work_kinds: wc_runner_protocol::WorkKind::UNANNOUNCED.to_vec(),
    }
}

/// A poll of `instance` that does not wait, for at most one item.
pub fn poll_request(instance: Uuid) -> PollRequest {
    PollRequest {
        instance_id: instance,
        wait_ms: 0,
        max_items: 1,
    }
}

// ---------------------------------------------------------------------------------------------
// Waiting on durable state

/// Polls `probe` until it yields a value, and returns it. Fails only after [`HANG`]: a wait
/// bounds a hang, it never measures how fast the system is.
pub async fn eventually<T>(what: &str, probe: impl AsyncFnMut() -> Option<T>) -> T {
    eventually_within(what, HANG, probe).await
}

/// [`eventually`] with its own bound, for waits that a test needs to end before some other
/// deadline of the system under test (a lease, a timeout it configured).
pub async fn eventually_within<T>(
    what: &str,
    within: Duration,
    mut probe: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(Instant::now() < deadline, "never happened: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
