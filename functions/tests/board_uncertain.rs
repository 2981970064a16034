//! A completion whose COMMIT outcome the functions cannot know: the database connection breaks
//! while `complete_session_message` is committing. The call must answer
//! `completion_persistence_uncertain`, and retrying it with the same completion key and answer
//! must settle it exactly once, whichever way the COMMIT went: a completion the server did
//! commit is returned again (same answer message, no second answer or completion row), one it
//! never saw is applied once.
//!
//! The break is real, not mocked: the app's pool connects through a small TCP proxy
//! (`wc_store::testing::pg_proxy`) that
//! relays the PostgreSQL wire protocol message by message and, when armed, sabotages the
//! COMMIT of the one transaction that inserts into `session_completions`, either by letting
//! the server commit and swallowing its reply, or by dropping the COMMIT, and then closing
//! both sockets. Everything else (setup, retries) goes through the same proxy unarmed; the
//! database is inspected through the test database's own, unproxied pool.

mod common;

use std::future::Future;
use std::time::Duration;

use axum::http::StatusCode;
use common::*;
use serde_json::{Value, json};
use wc_functions::AppState;
use wc_functions::config::ServerConfig;
use wc_store::testing::TestDatabase;
use wc_store::testing::pg_proxy::{Break, Fired, PgProxy, proxied_pool, server_addr};

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

/// How many `message_completed` events the session holds: the completion's evidence, written
/// in the completion's own transaction (the tool names its session as a target, so no call
/// pair lands there without a recorder).
async fn completion_events(b: &Board) -> usize {
    ledger(&b.db, &b.session)
        .await
        .into_iter()
        .filter(|e| e.kind == "message_completed")
        .count()
}

#[tokio::test]
async fn a_commit_whose_reply_is_lost_is_uncertain_and_its_retry_replays_it() {
    let b = Board::new().await;

    b.proxy.arm(Break::ReplyLost, COMPLETION_INSERT, 1);
    let r = b.complete().await;
    assert_eq!(
        b.proxy.fired(),
        vec![Fired::ReplyLost {
            server_said: "COMMIT".into()
        }],
        "the proxy must have swallowed the server's COMMIT answer (result: {r})"
    );
    assert_uncertain(&r);
    // The completion's evidence committed with it.
    assert_eq!(completion_events(&b).await, 1);

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
    assert_eq!(
        completion_events(&b).await,
        1,
        "a replay wrote evidence again"
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

    b.proxy.arm(Break::CommitLost, COMPLETION_INSERT, 1);
    let r = b.complete().await;
    assert_eq!(
        b.proxy.fired(),
        vec![Fired::CommitLost],
        "the proxy must have dropped the completion's COMMIT (result: {r})"
    );
    assert_uncertain(&r);
    // Its evidence was rolled back with it.
    assert_eq!(completion_events(&b).await, 0);

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
    assert_eq!(
        completion_events(&b).await,
        1,
        "the completion's evidence, once"
    );
    assert_eq!(b.proxy.fired().len(), 1);
}
