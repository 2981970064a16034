//! Acknowledged board writes are durable: a real `wc-local` is killed with SIGKILL the moment
//! the success reply of a board write arrives (no graceful stop, nothing flushed or drained),
//! restarted on the same database, and the write must be there whole: the message rows, the
//! ledger evidence of the call, and for a completion the record its key replays, so a retry
//! after the crash returns the acknowledged result again. Run over REST and over MCP against a
//! given database, and over REST against wc-local's own embedded cluster (which the kernel
//! stops when wc-local dies).

mod common;

use std::path::PathBuf;

use http::Method;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use wc_e2e::client::Client;
use wc_e2e::server::{LocalOptions, LocalServer, process_alive};
use wc_store::testing::TestDatabase;

const TOKEN: &str = "board-durability-token-0123456789";
const PROJECT: &str = "agent:local:demo";

fn bin() -> PathBuf {
    wc_e2e::server::workspace_binary("wc-local")
}

/// How the calls reach the server.
#[derive(Debug, Clone, Copy)]
enum Surface {
    /// `POST /api/actions/{tool}`, wrapper fields in the body.
    Rest,
    /// `tools/call` on `/mcp` (2026-07-28, stateless), wrapper fields as tool arguments.
    Mcp,
}

/// One wc-local deployment: a working directory with the project, a database, a fixed token.
/// Every `start` is a new process over the same database.
struct Deployment {
    dir: PathBuf,
    opts: LocalOptions,
    surface: Surface,
    http: Client,
}

impl Deployment {
    /// `database_url: None` is the embedded cluster under the deployment's directory.
    fn new(database_url: Option<String>, surface: Surface) -> Deployment {
        // Under the system temp directory, which the `postgres` account of an embedded
        // cluster can traverse.
        let dir = std::env::temp_dir().join(format!(
            "wc-board-durability-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(dir.join("demo")).unwrap();
        let mut opts = LocalOptions::in_dir(&dir);
        opts.database_url = database_url;
        opts.token = Some(TOKEN.into());
        opts.args = vec![
            "--no-runner".into(),
            "--project".into(),
            format!("demo={}", dir.join("demo").display()),
        ];
        Deployment {
            dir,
            opts,
            surface,
            http: Client::new(),
        }
    }

    fn start(&self) -> LocalServer {
        LocalServer::spawn(&bin(), &self.opts).unwrap()
    }

    /// Sends one tool call and returns the raw reply body, without judging it.
    async fn send(&self, server: &LocalServer, tool: &str, args: &Value) -> Value {
        let auth = format!("Bearer {TOKEN}");
        let reply = match self.surface {
            Surface::Rest if common::named_action(tool) => self
                .http
                .post_json(
                    &format!("{}/api/actions/{tool}", server.base_url),
                    Some(TOKEN),
                    args,
                )
                .await
                .unwrap(),
            Surface::Rest => self
                .http
                .post_json(
                    &format!("{}/api/tools/call", server.base_url),
                    Some(TOKEN),
                    &json!({ "tool": tool, "arguments": args }),
                )
                .await
                .unwrap(),
            Surface::Mcp => {
                let body = common::rpc(
                    common::MODERN,
                    1,
                    "tools/call",
                    json!({ "name": tool, "arguments": args }),
                );
                let headers = [
                    ("content-type", "application/json"),
                    ("accept", "application/json, text/event-stream"),
                    ("mcp-protocol-version", common::MODERN),
                    ("mcp-method", "tools/call"),
                    ("mcp-name", tool),
                    ("authorization", auth.as_str()),
                ];
                self.http
                    .send(
                        Method::POST,
                        &format!("{}/mcp", server.base_url),
                        &headers,
                        serde_json::to_vec(&body).unwrap(),
                    )
                    .await
                    .unwrap()
            }
        };
        let body = reply.json();
        match self.surface {
            Surface::Rest => body,
            Surface::Mcp => {
                assert_eq!(reply.status, 200, "{tool}: {body}");
                body["result"]["structuredContent"].clone()
            }
        }
    }

    /// A successful call's `output`.
    async fn call(&self, server: &LocalServer, tool: &str, args: Value) -> Value {
        let result = self.send(server, tool, &args).await;
        output(tool, result)
    }

    /// A call after which `server` is killed the instant its reply is in; the call's `output`
    /// (the reply is judged only once the process is gone).
    async fn call_then_kill(&self, server: LocalServer, tool: &str, args: Value) -> Value {
        let result = self.send(&server, tool, &args).await;
        sigkill(server);
        output(tool, result)
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn output(tool: &str, result: Value) -> Value {
    assert_eq!(result["success"], true, "{tool} failed: {result}");
    result["output"].clone()
}

/// `kill -9` and wait until the process is gone.
fn sigkill(server: LocalServer) {
    let pid = server.pid() as i32;
    kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    // Dropping the handle reaps the process (waiting for it to exit if need be).
    drop(server);
    assert!(!process_alive(pid), "wc-local {pid} survived SIGKILL");
}

/// The session's board as `list_session_messages` shows it, oldest first.
async fn board(d: &Deployment, server: &LocalServer, session: &str) -> Vec<Value> {
    let listed = d
        .call(
            server,
            "list_session_messages",
            json!({ "session_id": session }),
        )
        .await;
    let mut messages = listed["messages"].as_array().unwrap().clone();
    messages.reverse();
    messages
}

/// The ledger of `session` as `(kind, role, tool_name, payload)`, oldest first.
async fn ledger(db: &TestDatabase, session: &str) -> Vec<(String, String, Option<String>, Value)> {
    let client = db.pool().get().await.unwrap();
    client
        .query(
            "SELECT kind, role, tool_name, payload FROM session_events WHERE session_id = $1 ORDER BY seq",
            &[&session],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect()
}

/// Whether the ledger holds a successful `tool_call_finished` of `tool` in `role`.
fn finished(ledger: &[(String, String, Option<String>, Value)], tool: &str, role: &str) -> bool {
    ledger.iter().any(|(kind, r, t, payload)| {
        kind == "tool_call_finished"
            && r == role
            && t.as_deref() == Some(tool)
            && payload["success"] == true
    })
}

/// What survives of the acknowledged writes, read straight from the database.
async fn message_rows(db: &TestDatabase, session: &str) -> Vec<Value> {
    let client = db.pool().get().await.unwrap();
    client
        .query(
            "SELECT id, kind, status, body, author_session_id, reply_to, answer_message_id \
             FROM session_messages WHERE session_id = $1 ORDER BY number",
            &[&session],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| {
            json!({
                "id": r.get::<_, String>(0),
                "kind": r.get::<_, String>(1),
                "status": r.get::<_, String>(2),
                "body": r.get::<_, String>(3),
                "author_session_id": r.get::<_, Option<String>>(4),
                "reply_to": r.get::<_, Option<String>>(5),
                "answer_message_id": r.get::<_, Option<String>>(6),
            })
        })
        .collect()
}

/// The whole story against one deployment: post, crash, check; complete, crash, check and
/// replay. With `db`, the database is also read directly (the embedded cluster is private).
async fn post_and_complete_across_sigkills(d: &Deployment, db: Option<&TestDatabase>) {
    let todo_body = "move the resolver cache behind the feature flag";
    let answer = "done: flag resolver_cache, default off";

    // First process: two windows' sessions and a baseline, then the post; killed on the reply.
    let first = d.start();
    let session = |s: &Value| s["session_id"].as_str().unwrap().to_owned();
    let coord = session(
        &d.call(
            &first,
            "work_on_project",
            json!({ "project": PROJECT, "instruction": "coordinate the resolver work" }),
        )
        .await,
    );
    let worker = session(
        &d.call(
            &first,
            "work_on_project",
            json!({ "project": PROJECT, "instruction": "take resolver todos" }),
        )
        .await,
    );
    let baseline = d
        .call(
            &first,
            "observe_session_messages",
            json!({ "session_id": coord }),
        )
        .await;
    assert_eq!(baseline["baseline"], true, "{baseline}");
    let token0 = baseline["token"].as_str().unwrap().to_owned();
    let posted = d
        .call_then_kill(
            first,
            "post_session_message",
            json!({
                "session_id": coord,
                "kind": "todo",
                "body": todo_body,
                "recording_session_id": coord,
            }),
        )
        .await;
    let todo = posted["message_id"].as_str().unwrap().to_owned();

    // Second process on the same database: the acknowledged post is all there.
    let second = d.start();
    let shown = board(d, &second, &coord).await;
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert_eq!(shown[0]["message_id"], todo.as_str());
    assert_eq!(shown[0]["kind"], "todo");
    assert_eq!(shown[0]["status"], "open");
    assert_eq!(shown[0]["body"], todo_body);
    assert_eq!(shown[0]["author_session_id"], coord.as_str());
    if let Some(db) = db {
        let rows = message_rows(db, &coord).await;
        assert_eq!(
            rows,
            vec![json!({
                "id": todo, "kind": "todo", "status": "open", "body": todo_body,
                "author_session_id": coord, "reply_to": null, "answer_message_id": null,
            })]
        );
        let events = ledger(db, &coord).await;
        assert!(
            events
                .iter()
                .any(|(k, _, _, p)| k == "message_posted" && p["message_id"] == todo.as_str()),
            "no message_posted evidence: {events:?}"
        );
        // The coordinator recorded its own post: the recorder pair is its record of the call.
        assert!(
            finished(&events, "post_session_message", "recorder"),
            "the post's recorder tool_call_finished was acknowledged but not committed: {events:?}"
        );
    }
    // A token issued by the killed process still reads the change: the revision and the token
    // secret are durable too.
    let seen = d
        .call(
            &second,
            "observe_session_messages",
            json!({ "session_id": coord, "token": token0 }),
        )
        .await;
    let seen_ids: Vec<&Value> = seen["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["message_id"])
        .collect();
    assert_eq!(seen_ids, [&json!(todo)], "{seen}");

    // The worker completes the todo on the second process, which is killed on the reply.
    let assignment = d
        .call(
            &second,
            "get_session_assignment",
            json!({ "session_id": coord, "message_id": todo, "recording_session_id": worker }),
        )
        .await;
    assert_eq!(
        assignment["assignment"]["completable"], true,
        "{assignment}"
    );
    let complete = json!({
        "session_id": coord,
        "message_id": todo,
        "expected_assignment_fence": assignment["assignment_fence"],
        "completion_key": "worker-1:resolver-flag",
        "answer": answer,
        "recording_session_id": worker,
    });
    let completed = d
        .call_then_kill(second, "complete_session_message", complete.clone())
        .await;
    assert_eq!(completed["state_changed"], true, "{completed}");
    let answer_id = completed["answer_message_id"].as_str().unwrap().to_owned();

    // Third process: the completion and its answer are there, and the retry of the
    // acknowledged completion returns exactly what was acknowledged.
    let third = d.start();
    let shown = board(d, &third, &coord).await;
    let ids: Vec<&Value> = shown.iter().map(|m| &m["message_id"]).collect();
    assert_eq!(ids, [&json!(todo), &json!(answer_id)], "{shown:?}");
    assert_eq!(shown[0]["status"], "completed");
    assert_eq!(shown[0]["answer_message_id"], answer_id.as_str());
    assert_eq!(shown[1]["kind"], "answer");
    assert_eq!(shown[1]["reply_to"], todo.as_str());
    assert_eq!(shown[1]["body"], answer);
    assert_eq!(shown[1]["author_session_id"], worker.as_str());
    if let Some(db) = db {
        let rows = message_rows(db, &coord).await;
        assert_eq!(
            rows,
            vec![
                json!({
                    "id": todo, "kind": "todo", "status": "completed", "body": todo_body,
                    "author_session_id": coord, "reply_to": null, "answer_message_id": answer_id,
                }),
                json!({
                    "id": answer_id, "kind": "answer", "status": "open", "body": answer,
                    "author_session_id": worker, "reply_to": todo, "answer_message_id": null,
                }),
            ]
        );
        let client = db.pool().get().await.unwrap();
        let kept: Vec<(String, String)> = client
            .query(
                "SELECT completion_key, todo_id FROM session_completions WHERE session_id = $1",
                &[&coord],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        assert_eq!(kept, [("worker-1:resolver-flag".to_owned(), todo.clone())]);
        let events = ledger(db, &coord).await;
        assert!(
            events.iter().any(|(k, _, _, p)| k == "message_completed"
                && p["message_id"] == todo.as_str()
                && p["answer_message_id"] == answer_id.as_str()),
            "no message_completed evidence: {events:?}"
        );
        let worker_events = ledger(db, &worker).await;
        assert!(
            finished(&worker_events, "complete_session_message", "recorder"),
            "the completion's recorder tool_call_finished was acknowledged but not committed: {worker_events:?}"
        );
    }
    let replay = d
        .call(&third, "complete_session_message", complete.clone())
        .await;
    assert_eq!(replay, completed, "the retry after the crash differs");
    let after_replay = board(d, &third, &coord).await;
    assert_eq!(after_replay, shown, "the replay changed the board");
    assert!(third.interrupt().unwrap().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_rest_writes_survive_sigkill() {
    let db = TestDatabase::empty().await;
    let d = Deployment::new(Some(db.url().expose().to_owned()), Surface::Rest);
    post_and_complete_across_sigkills(&d, Some(&db)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_mcp_writes_survive_sigkill() {
    let db = TestDatabase::empty().await;
    let d = Deployment::new(Some(db.url().expose().to_owned()), Surface::Mcp);
    post_and_complete_across_sigkills(&d, Some(&db)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_sigkill_with_the_embedded_cluster() {
    let d = Deployment::new(None, Surface::Rest);
    post_and_complete_across_sigkills(&d, None).await;
}
