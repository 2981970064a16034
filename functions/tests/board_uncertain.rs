//! A completion whose COMMIT outcome the functions cannot know: the database connection breaks
//! while `complete_session_message` is committing. The call must answer
//! `completion_persistence_uncertain`, and retrying it with the same completion key and answer
//! must settle it exactly once, whichever way the COMMIT went: a completion the server did
//! commit is returned again (same answer message, no second answer or completion row), one it
//! never saw is applied once.
//!
//! The break is real, not mocked: the app's pool connects through a small TCP proxy that
//! relays the PostgreSQL wire protocol message by message and, when armed, sabotages the
//! COMMIT of the one transaction that inserts into `session_completions`, either by letting
//! the server commit and swallowing its reply, or by dropping the COMMIT, and then closing
//! both sockets. Everything else (setup, retries) goes through the same proxy unarmed; the
//! database is inspected through the test database's own, unproxied pool.

mod common;

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use common::*;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use wc_functions::AppState;
use wc_functions::config::ServerConfig;
use wc_store::config::{DatabaseConfig, DatabaseUrl};
use wc_store::testing::TestDatabase;

const P: &str = "agent:local:alpha";
const KEY: &str = "complete-1";
const ANSWER: &str = "shipped in abc123";

/// Text of the statement that marks a transaction as the completion's (`wc_store::board`).
const COMPLETION_INSERT: &str = "INSERT INTO session_completions";

/// Upper bound on any one step of a test, so that a broken proxy or pool fails the test
/// instead of hanging it.
const STEP_LIMIT: Duration = Duration::from_secs(30);

/// Awaits `fut`, failing the test when it takes longer than [`STEP_LIMIT`].
async fn bounded<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(STEP_LIMIT, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {STEP_LIMIT:?}"))
}

// ---------------------------------------------------------------------------------------------
// The proxy

/// How the proxy breaks the completion's COMMIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Break {
    /// Forward the COMMIT, let the server answer it, then close the client's socket without
    /// relaying the answer: the transaction is committed, the client cannot know.
    ReplyLost,
    /// Close both sockets instead of forwarding the COMMIT: the server rolls the transaction
    /// back, the client cannot know either.
    CommitLost,
}

/// What the proxy did when a sabotage fired.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Fired {
    /// The server answered the COMMIT with this command tag (`COMMIT`, or `ROLLBACK` for a
    /// failed transaction), and the answer was dropped.
    ReplyLost { server_said: String },
    /// The COMMIT was never sent.
    CommitLost,
}

#[derive(Default)]
struct Control {
    armed: Mutex<Option<Break>>,
    fired: Mutex<Vec<Fired>>,
}

/// A PostgreSQL wire-protocol relay on 127.0.0.1 in front of the real server.
struct PgProxy {
    addr: SocketAddr,
    control: Arc<Control>,
    accept: JoinHandle<()>,
}

impl PgProxy {
    async fn start(upstream: SocketAddr) -> PgProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let control = Arc::new(Control::default());
        let ctl = control.clone();
        let accept = tokio::spawn(async move {
            // Dropping the set (when this task is aborted) aborts every relay.
            let mut relays = JoinSet::new();
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                while relays.try_join_next().is_some() {}
                let ctl = ctl.clone();
                relays.spawn(async move {
                    // A relay ends when either side goes away; its I/O errors are that.
                    let _ = relay(client, upstream, ctl).await;
                });
            }
        });
        PgProxy {
            addr,
            control,
            accept,
        }
    }

    /// Breaks the next COMMIT of a completion transaction, on whichever connection sends it.
    fn arm(&self, how: Break) {
        *self.control.armed.lock().unwrap() = Some(how);
    }

    /// The sabotages that fired so far, oldest first.
    fn fired(&self) -> Vec<Fired> {
        self.control.fired.lock().unwrap().clone()
    }

    /// Whether a sabotage is still waiting for its COMMIT.
    fn armed(&self) -> bool {
        self.control.armed.lock().unwrap().is_some()
    }
}

impl Drop for PgProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// One direction of the wire, cut into whole protocol messages.
struct Frames {
    buf: Vec<u8>,
    /// The next message is the untyped startup message (no type byte).
    startup: bool,
}

/// One protocol message as it travelled.
struct Frame {
    tag: Option<u8>,
    raw: Vec<u8>,
}

impl Frame {
    /// The message's contents after the type byte and length.
    fn body(&self) -> &[u8] {
        &self.raw[if self.tag.is_some() { 5 } else { 4 }..]
    }

    /// The message's leading NUL-terminated strings.
    fn strings(&self) -> impl Iterator<Item = String> + '_ {
        self.body()
            .split(|b| *b == 0)
            .map(|s| String::from_utf8_lossy(s).into_owned())
    }
}

impl Frames {
    fn new(startup: bool) -> Frames {
        Frames {
            buf: Vec::with_capacity(16 * 1024),
            startup,
        }
    }

    /// The next whole message, if it has arrived.
    fn next(&mut self) -> Option<Frame> {
        let header = if self.startup { 0 } else { 1 };
        let len_bytes = self.buf.get(header..header + 4)?;
        let len = u32::from_be_bytes(len_bytes.try_into().unwrap()) as usize;
        assert!(len >= 4, "malformed protocol message length {len}");
        if self.buf.len() < header + len {
            return None;
        }
        let raw: Vec<u8> = self.buf.drain(..header + len).collect();
        let tag = (!self.startup).then(|| raw[0]);
        self.startup = false;
        Some(Frame { tag, raw })
    }
}

/// Whether a simple query opens or ends a transaction.
fn transaction_boundary(query: &str) -> bool {
    let first = query.split_whitespace().next().unwrap_or("");
    ["BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT"]
        .iter()
        .any(|w| first.eq_ignore_ascii_case(w))
}

/// Relays one client connection to `upstream`, message by message.
///
/// Every `Sync` and simple `Query` the client sends (and the startup) is answered by exactly
/// one `ReadyForQuery`, in order, so counting both tells which request each server message
/// answers: that is how the reply to a sabotaged COMMIT is told apart from late replies to
/// earlier requests (tokio-postgres closes statements without waiting for the answer).
async fn relay(
    client: TcpStream,
    upstream: SocketAddr,
    control: Arc<Control>,
) -> std::io::Result<()> {
    let server = TcpStream::connect(upstream).await?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let (mut client_rx, mut client_tx) = client.into_split();
    let (mut server_rx, mut server_tx) = server.into_split();
    // sslmode=disable: the startup message comes first and nothing else is untyped.
    let mut up = Frames::new(true);
    let mut down = Frames::new(false);
    // Prepared statements of this connection, by name, and whether the open transaction
    // ran the completion's insert.
    let mut statements: HashMap<String, String> = HashMap::new();
    let mut completing = false;
    let mut requests_sent: u64 = 0;
    let mut answers_relayed: u64 = 0;
    // The request number of a COMMIT whose answer is to be swallowed, and its command tag.
    let mut swallow: Option<u64> = None;
    let mut server_said = String::new();
    loop {
        tokio::select! {
            n = client_rx.read_buf(&mut up.buf) => {
                if n? == 0 {
                    return Ok(());
                }
                while let Some(m) = up.next() {
                    match m.tag {
                        None | Some(b'S') => requests_sent += 1,
                        Some(b'P') => {
                            let mut s = m.strings();
                            let name = s.next().unwrap_or_default();
                            let query = s.next().unwrap_or_default();
                            statements.insert(name, query);
                        }
                        Some(b'B') => {
                            let mut s = m.strings();
                            let _portal = s.next();
                            let name = s.next().unwrap_or_default();
                            if statements.get(&name).is_some_and(|q| q.contains(COMPLETION_INSERT)) {
                                completing = true;
                            }
                        }
                        Some(b'Q') => {
                            requests_sent += 1;
                            let query = m.strings().next().unwrap_or_default();
                            let query = query.trim();
                            if completing && query.eq_ignore_ascii_case("COMMIT") {
                                let armed = control.armed.lock().unwrap().take();
                                match armed {
                                    Some(Break::CommitLost) => {
                                        control.fired.lock().unwrap().push(Fired::CommitLost);
                                        return Ok(());
                                    }
                                    Some(Break::ReplyLost) => swallow = Some(requests_sent),
                                    None => {}
                                }
                            }
                            if transaction_boundary(query) {
                                completing = false;
                            }
                        }
                        _ => {}
                    }
                    server_tx.write_all(&m.raw).await?;
                }
            }
            n = server_rx.read_buf(&mut down.buf) => {
                if n? == 0 {
                    return Ok(());
                }
                while let Some(m) = down.next() {
                    if swallow == Some(answers_relayed + 1) {
                        match m.tag {
                            Some(b'C') => server_said = m.strings().next().unwrap_or_default(),
                            Some(b'E') => server_said = "an error".into(),
                            Some(b'Z') => {
                                control.fired.lock().unwrap().push(Fired::ReplyLost {
                                    server_said: std::mem::take(&mut server_said),
                                });
                                return Ok(());
                            }
                            _ => {}
                        }
                        continue;
                    }
                    if m.tag == Some(b'Z') {
                        answers_relayed += 1;
                    }
                    client_tx.write_all(&m.raw).await?;
                }
            }
        }
    }
}

/// The address the test database's server answers on, as seen over TCP.
async fn server_addr(db: &TestDatabase) -> SocketAddr {
    let c = db.pool().get().await.unwrap();
    let row = c
        .query_one("SELECT host(inet_server_addr()), inet_server_port()", &[])
        .await
        .unwrap();
    let (host, port): (Option<String>, Option<i32>) = (row.get(0), row.get(1));
    let (Some(host), Some(port)) = (host, port) else {
        panic!("the test server must be reached over TCP for the proxy to stand in front of it");
    };
    SocketAddr::new(
        host.parse::<IpAddr>().unwrap(),
        u16::try_from(port).unwrap(),
    )
}

/// A pool over the test database whose connections all go through `proxy`.
fn proxied_pool(db: &TestDatabase, proxy: &PgProxy) -> wc_store::Pool {
    fn quoted(v: &str) -> String {
        format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'"))
    }
    let cfg = db.url().pg_config();
    let mut conn = format!(
        "host={} port={} dbname={} user={} sslmode=disable",
        proxy.addr.ip(),
        proxy.addr.port(),
        quoted(cfg.get_dbname().unwrap_or("postgres")),
        quoted(cfg.get_user().unwrap_or("postgres")),
    );
    if let Some(pw) = cfg.get_password() {
        conn.push_str(&format!(
            " password={}",
            quoted(&String::from_utf8_lossy(pw))
        ));
    }
    let url = DatabaseUrl::parse(&conn).unwrap();
    let config = DatabaseConfig {
        max_connections: 4,
        acquire_timeout: Duration::from_secs(5),
        ..DatabaseConfig::new(url)
    };
    wc_store::pool::build_pool(&config).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Tool calls

/// One MCP `tools/call` on the modern revision; returns the structured result.
async fn call(st: &AppState, key: &str, tool: &str, args: Value) -> Value {
    let body = rpc(
        MODERN,
        1,
        "tools/call",
        json!({ "name": tool, "arguments": args }),
    );
    let r = bounded(tool, send(st, mcp_request(MODERN, Some(key), &body))).await;
    assert_eq!(r.status, StatusCode::OK, "{tool}: {}", r.text());
    r.result()["structuredContent"].clone()
}

#[track_caller]
fn out(v: &Value) -> &Value {
    assert_eq!(v["success"], true, "expected success: {v}");
    &v["output"]
}

/// A session with one open todo and the fence of its assignment, all made through the
/// proxied app.
struct Board {
    db: TestDatabase,
    proxy: PgProxy,
    st: AppState,
    key: String,
    session: String,
    todo: String,
    fence: String,
}

impl Board {
    async fn new() -> Board {
        let db = TestDatabase::new().await;
        register_project(&db, P).await;
        let key = full_key(&db).await;
        let proxy = PgProxy::start(server_addr(&db).await).await;
        let st = AppState::new(proxied_pool(&db, &proxy), ServerConfig::default());

        let r = call(
            &st,
            &key,
            "work_on_project",
            json!({ "project": P, "instruction": "coordinate" }),
        )
        .await;
        let session = out(&r)["session_id"].as_str().unwrap().to_owned();
        let r = call(
            &st,
            &key,
            "post_session_message",
            json!({ "session_id": session, "kind": "todo", "body": "ship the release" }),
        )
        .await;
        let todo = out(&r)["message_id"].as_str().unwrap().to_owned();
        let r = call(
            &st,
            &key,
            "get_session_assignment",
            json!({ "session_id": session, "message_id": todo }),
        )
        .await;
        let fence = out(&r)["assignment_fence"]
            .as_str()
            .expect("an open todo has a fence")
            .to_owned();
        assert!(
            proxy.fired().is_empty(),
            "the unarmed proxy broke something"
        );
        Board {
            db,
            proxy,
            st,
            key,
            session,
            todo,
            fence,
        }
    }

    /// `complete_session_message` of the todo with [`KEY`] and [`ANSWER`].
    async fn complete(&self) -> Value {
        call(
            &self.st,
            &self.key,
            "complete_session_message",
            json!({ "session_id": self.session, "message_id": self.todo,
                    "expected_assignment_fence": self.fence,
                    "completion_key": KEY, "answer": ANSWER }),
        )
        .await
    }

    /// The board as stored, read past the proxy.
    async fn stored(&self) -> Stored {
        let c = self.db.pool().get().await.unwrap();
        let r = c
            .query_one(
                "SELECT m.status, m.answer_message_id, w.message_observation_revision, \
                   (SELECT coalesce(jsonb_agg(a.id), '[]') FROM session_messages a \
                     WHERE a.session_id = w.id AND a.kind = 'answer'), \
                   (SELECT coalesce(jsonb_agg(jsonb_build_object('key', c.completion_key, \
                       'todo', c.todo_id, 'result', c.result)), '[]') \
                     FROM session_completions c WHERE c.session_id = w.id) \
                 FROM session_messages m JOIN workflow_sessions w ON w.id = m.session_id \
                 WHERE m.id = $1",
                &[&self.todo],
            )
            .await
            .unwrap();
        let answers: Value = r.get(3);
        let completions: Value = r.get(4);
        Stored {
            status: r.get(0),
            answer_message_id: r.get(1),
            revision: r.get(2),
            answers: answers.as_array().unwrap().clone(),
            completions: completions.as_array().unwrap().clone(),
        }
    }

    /// The stored completion, which must be the only one, under [`KEY`] for the todo.
    async fn completed(&self) -> Stored {
        let s = self.stored().await;
        assert_eq!(s.status, "completed", "the todo is not completed: {s:?}");
        assert_eq!(s.answers.len(), 1, "expected exactly one answer: {s:?}");
        assert_eq!(
            s.completions.len(),
            1,
            "expected exactly one completion: {s:?}"
        );
        let c = &s.completions[0];
        assert_eq!(c["key"], KEY, "{s:?}");
        assert_eq!(c["todo"], json!(self.todo), "{s:?}");
        assert_eq!(
            s.answer_message_id.as_deref(),
            s.answers[0].as_str(),
            "{s:?}"
        );
        assert_eq!(c["result"]["answer_message_id"], s.answers[0], "{s:?}");
        s
    }
}

/// The todo and the board around it, as stored.
#[derive(Debug, Clone, PartialEq)]
struct Stored {
    status: String,
    answer_message_id: Option<String>,
    /// The session's message observation revision: any board change moves it.
    revision: i64,
    /// Ids of the session's answer messages.
    answers: Vec<Value>,
    /// `{key, todo, result}` of the session's completions.
    completions: Vec<Value>,
}

/// A successful completion result that is the stored one.
#[track_caller]
fn assert_is_stored_completion(r: &Value, stored: &Stored) {
    let o = out(r);
    assert_eq!(o["state_changed"], true, "{r}");
    assert_eq!(o["status"], "completed", "{r}");
    let result = &stored.completions[0]["result"];
    assert_eq!(o["answer_message_id"], result["answer_message_id"], "{r}");
    assert_eq!(o["completed_at"], result["completed_at"], "{r}");
}

#[track_caller]
fn assert_uncertain(r: &Value) {
    assert_eq!(r["success"], false, "expected a failure: {r}");
    assert_eq!(
        r["error"]["kind"], "completion_persistence_uncertain",
        "a broken COMMIT must be reported as uncertain: {r}"
    );
    assert_eq!(r["error"]["field"], "completion_key", "{r}");
}

// ---------------------------------------------------------------------------------------------
// Tests

/// How many `tool_call_started` events of `complete_session_message` the session holds, and
/// how many distinct call ids they carry (one call, one pair).
async fn completion_calls(b: &Board) -> (usize, usize) {
    let started: Vec<_> = ledger(&b.db, &b.session)
        .await
        .into_iter()
        .filter(|e| {
            e.kind == "tool_call_started"
                && e.tool_name.as_deref() == Some("complete_session_message")
        })
        .collect();
    let calls: std::collections::BTreeSet<_> = started.iter().map(|e| e.call_id).collect();
    (started.len(), calls.len())
}

#[tokio::test]
async fn a_commit_whose_reply_is_lost_is_uncertain_and_its_retry_replays_it() {
    let b = Board::new().await;

    b.proxy.arm(Break::ReplyLost);
    let r = b.complete().await;
    assert_eq!(
        b.proxy.fired(),
        vec![Fired::ReplyLost {
            server_said: "COMMIT".into()
        }],
        "the proxy must have swallowed the server's COMMIT answer (result: {r})"
    );
    assert_uncertain(&r);
    // The call's business pair committed with the completion; it is not written twice.
    assert_eq!(completion_calls(&b).await, (1, 1), "one call, one pair");

    // The server did commit: one completion, one answer.
    let committed = b.completed().await;

    // The retry, through the same app and pool (the broken connection must not be reused).
    let r = b.complete().await;
    assert_is_stored_completion(&r, &committed);
    assert_eq!(b.stored().await, committed, "the retry changed the board");

    // And again: still the same result, still no second effect.
    let r = b.complete().await;
    assert_is_stored_completion(&r, &committed);
    assert_eq!(
        b.stored().await,
        committed,
        "the second retry changed the board"
    );
    assert!(!b.proxy.armed());
    assert_eq!(b.proxy.fired().len(), 1);
}

#[tokio::test]
async fn a_commit_lost_before_the_server_is_uncertain_and_its_retry_applies_once() {
    let b = Board::new().await;
    let before = b.stored().await;
    assert_eq!(before.status, "open");
    assert!(
        before.answers.is_empty() && before.completions.is_empty(),
        "{before:?}"
    );

    b.proxy.arm(Break::CommitLost);
    let r = b.complete().await;
    assert_eq!(
        b.proxy.fired(),
        vec![Fired::CommitLost],
        "the proxy must have dropped the completion's COMMIT (result: {r})"
    );
    assert_uncertain(&r);
    // Its business pair was rolled back with it; the kernel wrote it afterwards, once.
    assert_eq!(completion_calls(&b).await, (1, 1), "one call, one pair");

    // The server never saw the COMMIT: nothing of the completion is stored.
    assert_eq!(
        b.stored().await,
        before,
        "an uncommitted completion left traces"
    );

    // The retry applies the completion, once.
    let r = b.complete().await;
    let committed = b.completed().await;
    assert_is_stored_completion(&r, &committed);
    assert_eq!(
        committed.revision,
        before.revision + 2,
        "the completion must change the board exactly once (todo and answer)"
    );

    // A further retry replays it.
    let r = b.complete().await;
    assert_is_stored_completion(&r, &committed);
    assert_eq!(b.stored().await, committed, "the replay changed the board");
    assert_eq!(b.proxy.fired().len(), 1);
}
