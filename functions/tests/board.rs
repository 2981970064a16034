//! The session message board end to end, through the real router over stateless MCP against a
//! real database: posts, listing, resolution, assignments and fenced, idempotent completion
//! (including races across two instances), observation tokens and their refusals, retention
//! and `history_lost`, waiting observers, ACKs and `session_attention`, and refusals that write
//! nothing.

mod common;

use std::collections::BTreeSet;

use common::*;
use serde_json::{Value, json};
use wc_functions::AppState;
use wc_functions::config::ServerConfig;
use wc_store::credentials::CredentialKind;
use wc_store::testing::TestDatabase;

const P: &str = "agent:local:alpha";
const Q: &str = "agent:local:beta";

/// One MCP `tools/call` on the modern revision; returns the structured result.
async fn call(st: &AppState, key: &str, tool: &str, args: Value) -> Value {
    mcp_tool(st, key, tool, args).await
}

#[track_caller]
fn out(v: &Value) -> &Value {
    assert_eq!(v["success"], true, "expected success: {v}");
    &v["output"]
}

#[track_caller]
fn kind(v: &Value) -> String {
    assert_eq!(v["success"], false, "expected a failure: {v}");
    v["error"]["kind"].as_str().unwrap().to_owned()
}

async fn session(st: &AppState, key: &str, project: &str) -> String {
    let r = call(
        st,
        key,
        "work_on_project",
        json!({ "project": project, "instruction": "coordinate" }),
    )
    .await;
    out(&r)["session_id"].as_str().unwrap().to_owned()
}

async fn post(st: &AppState, key: &str, s: &str, kind: &str, body: &str) -> String {
    let r = call(
        st,
        key,
        "post_session_message",
        json!({ "session_id": s, "kind": kind, "body": body }),
    )
    .await;
    out(&r)["message_id"].as_str().unwrap().to_owned()
}

async fn reply(st: &AppState, key: &str, s: &str, to: &str, body: &str) -> String {
    let r = call(
        st,
        key,
        "post_session_message",
        json!({ "session_id": s, "kind": "answer", "body": body, "reply_to": to }),
    )
    .await;
    out(&r)["message_id"].as_str().unwrap().to_owned()
}

async fn assignment(st: &AppState, key: &str, s: &str, todo: &str) -> Value {
    let r = call(
        st,
        key,
        "get_session_assignment",
        json!({ "session_id": s, "message_id": todo }),
    )
    .await;
    out(&r).clone()
}

async fn fence(st: &AppState, key: &str, s: &str, todo: &str) -> String {
    assignment(st, key, s, todo).await["assignment_fence"]
        .as_str()
        .expect("a completable todo has a fence")
        .to_owned()
}

async fn complete(
    st: &AppState,
    key: &str,
    s: &str,
    todo: &str,
    fence: &str,
    ck: &str,
    answer: &str,
) -> Value {
    call(
        st,
        key,
        "complete_session_message",
        json!({ "session_id": s, "message_id": todo, "expected_assignment_fence": fence,
                "completion_key": ck, "answer": answer }),
    )
    .await
}

async fn observe(st: &AppState, key: &str, s: &str, token: Option<&str>, limit: u32) -> Value {
    let mut args = json!({ "session_id": s, "limit": limit });
    if let Some(t) = token {
        args["token"] = json!(t);
    }
    call(st, key, "observe_session_messages", args).await
}

/// The board state of session `s`: (message revision, retained messages, completions,
/// the messages' own versions summed). Refused calls leave it unchanged (their ledger pair
/// is evidence of the call, not board state).
async fn footprint(db: &TestDatabase, s: &str) -> (i64, i64, i64, i64) {
    let c = db.pool().get().await.unwrap();
    let r = c
        .query_one(
            "SELECT message_observation_revision, \
               (SELECT count(*) FROM session_messages WHERE session_id = $1), \
               (SELECT count(*) FROM session_completions WHERE session_id = $1), \
               (SELECT coalesce(sum(version), 0)::bigint FROM session_messages WHERE session_id = $1) \
             FROM workflow_sessions WHERE id = $1",
            &[&s],
        )
        .await
        .unwrap();
    (r.get(0), r.get(1), r.get(2), r.get(3))
}

/// Posts `n` open notes to `s` straight through the store (fast filling up to retention).
async fn fill(db: &TestDatabase, s: &str, n: usize) {
    let actor = wc_store::board::Actor::new(uuid::Uuid::now_v7(), "test");
    for i in 0..n {
        let m = wc_store::testing::note(&format!("filler {i}"));
        wc_store::board::post(
            db.pool(),
            &wc_domain::SessionId::parse(s).unwrap(),
            m,
            actor.clone(),
        )
        .await
        .unwrap()
        .unwrap();
    }
}

/// The board counters kept on the session row agree with the message rows.
async fn assert_counters(db: &TestDatabase, s: &str) {
    let c = db.pool().get().await.unwrap();
    let r = c
        .query_one(
            "SELECT messages_retained::bigint, open_ack_required::bigint, \
               (SELECT count(*) FROM session_messages WHERE session_id = $1), \
               (SELECT count(*) FROM session_messages WHERE session_id = $1 AND ack_required AND status = 'open'), \
               message_observation_revision, \
               (SELECT coalesce(max(observation_revision), 0) FROM session_messages WHERE session_id = $1) \
             FROM workflow_sessions WHERE id = $1",
            &[&s],
        )
        .await
        .unwrap();
    let (retained, open_ack, rows, open_ack_rows, rev, max_rev): (i64, i64, i64, i64, i64, i64) =
        (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5));
    assert_eq!(retained, rows, "messages_retained");
    assert_eq!(open_ack, open_ack_rows, "open_ack_required");
    assert!(max_rev <= rev, "a message revision above the session's");
}

fn unknown_msg() -> String {
    format!("wc_msg_{}", "Z".repeat(22))
}

#[tokio::test]
async fn posts_list_and_resolve_with_authors_only_from_recorders() {
    let TestApp { db: _db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let c = session(&st, &key, P).await;
    let w = session(&st, &key, P).await;

    // Unrecorded: no author. Recorded in w: w is the author.
    let note = post(&st, &key, &c, "note", "plain note").await;
    let mut args = json!({ "session_id": c, "kind": "question", "body": "which branch?",
                           "priority": "high", "ack_required": true,
                           "recording_session_id": w });
    let r = call(&st, &key, "post_session_message", args.take()).await;
    let q = out(&r)["message"].clone();
    assert_eq!(q["author_session_id"], json!(w));
    assert_eq!(q["priority"], "high");
    assert_eq!(q["ack_required"], true);
    assert_eq!(q["status"], "open");
    assert_eq!(q["number"], 2);

    let r = call(
        &st,
        &key,
        "list_session_messages",
        json!({ "session_id": c }),
    )
    .await;
    let listed = out(&r);
    assert_eq!(listed["total"], 2);
    assert_eq!(listed["messages"][0]["kind"], "question", "newest first");
    assert_eq!(listed["messages"][1]["message_id"], json!(note));
    assert_eq!(listed["messages"][1]["author_session_id"], Value::Null);
    assert_eq!(listed["counts"]["open_questions"], 1);
    assert_eq!(listed["counts"]["open_ack_required"], 1);

    // Resolve: a real change once, then no change.
    let qid = q["message_id"].as_str().unwrap();
    for (changed, status) in [(true, "resolved"), (false, "resolved")] {
        let r = call(
            &st,
            &key,
            "resolve_session_message",
            json!({ "session_id": c, "message_id": qid }),
        )
        .await;
        assert_eq!(out(&r)["state_changed"], changed);
        assert_eq!(out(&r)["status"], status);
    }
    let r = call(
        &st,
        &key,
        "list_session_messages",
        json!({ "session_id": c, "status": "open" }),
    )
    .await;
    assert_eq!(out(&r)["total"], 1);
    assert_eq!(out(&r)["counts"]["open_ack_required"], 0);

    // Bodies are redacted before storage.
    let secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";
    let r = call(
        &st,
        &key,
        "post_session_message",
        json!({ "session_id": c, "kind": "note", "body": format!("use token {secret} please") }),
    )
    .await;
    assert_eq!(out(&r)["message"]["body_redacted"], true);
    assert!(
        !out(&r)["message"]["body"]
            .as_str()
            .unwrap()
            .contains(secret)
    );
}

#[tokio::test]
async fn bad_input_is_refused_with_typed_errors_and_writes_nothing() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let c = session(&st, &key, P).await;
    let other = session(&st, &key, P).await;
    let note = post(&st, &key, &c, "note", "a note").await;
    let todo = post(&st, &key, &c, "todo", "a todo").await;
    let f = fence(&st, &key, &c, &todo).await;
    let foreign_todo = post(&st, &key, &other, "todo", "elsewhere").await;
    let foreign_fence = fence(&st, &key, &other, &foreign_todo).await;
    // Another authority group's key sees nothing of c.
    let stranger = credential_in_group(
        &db,
        CredentialKind::SharedKey,
        &ALL_SCOPES,
        &[],
        Some("someone-else"),
    )
    .await;
    let before = footprint(&db, &c).await;
    let cases: Vec<(&str, String, Value, &str)> = vec![
        (
            "unknown message",
            key.clone(),
            json!({"tool": "resolve_session_message", "args": {"session_id": c, "message_id": unknown_msg()}}),
            "unknown_message",
        ),
        (
            "message of another session",
            key.clone(),
            json!({"tool": "resolve_session_message", "args": {"session_id": c, "message_id": foreign_todo}}),
            "unknown_message",
        ),
        (
            "reply to an unknown message",
            key.clone(),
            json!({"tool": "post_session_message", "args": {"session_id": c, "kind": "answer", "body": "x", "reply_to": unknown_msg()}}),
            "unknown_message",
        ),
        (
            "another authority group",
            stranger.clone(),
            json!({"tool": "post_session_message", "args": {"session_id": c, "kind": "note", "body": "x"}}),
            "unknown_session_id",
        ),
        (
            "another authority group's assignment",
            stranger.clone(),
            json!({"tool": "get_session_assignment", "args": {"session_id": c, "message_id": todo}}),
            "unknown_session_id",
        ),
        (
            "completing a note",
            key.clone(),
            json!({"tool": "complete_session_message", "args": {"session_id": c, "message_id": note, "expected_assignment_fence": f, "completion_key": "k1", "answer": "x"}}),
            "invalid_assignment_fence",
        ),
        (
            "a fence of another todo",
            key.clone(),
            json!({"tool": "complete_session_message", "args": {"session_id": c, "message_id": todo, "expected_assignment_fence": foreign_fence, "completion_key": "k1", "answer": "x"}}),
            "invalid_assignment_fence",
        ),
        (
            "a malformed fence",
            key.clone(),
            json!({"tool": "complete_session_message", "args": {"session_id": c, "message_id": todo, "expected_assignment_fence": "wcf1_nope", "completion_key": "k1", "answer": "x"}}),
            "invalid_assignment_fence",
        ),
        (
            "an oversized body",
            key.clone(),
            json!({"tool": "post_session_message", "args": {"session_id": c, "kind": "note", "body": "é".repeat(4001)}}),
            "invalid_arguments",
        ),
        (
            "an answer without reply_to",
            key.clone(),
            json!({"tool": "post_session_message", "args": {"session_id": c, "kind": "answer", "body": "x"}}),
            "invalid_arguments",
        ),
        (
            "a NUL in a body",
            key.clone(),
            json!({"tool": "post_session_message", "args": {"session_id": c, "kind": "note", "body": "a\u{0}b"}}),
            "invalid_arguments",
        ),
        (
            "an assignment of a note",
            key.clone(),
            json!({"tool": "get_session_assignment", "args": {"session_id": c, "message_id": note}}),
            "not_a_todo",
        ),
        (
            "a bad completion key",
            key.clone(),
            json!({"tool": "complete_session_message", "args": {"session_id": c, "message_id": todo, "expected_assignment_fence": f, "completion_key": "has space", "answer": "x"}}),
            "invalid_arguments",
        ),
    ];
    for (what, k, case, expected) in cases {
        let tool = case["tool"].as_str().unwrap();
        let events = ledger(&db, &c).await;
        let r = call(&st, &k, tool, case["args"].clone()).await;
        assert_eq!(kind(&r), expected, "{what}: {r}");
        assert_eq!(footprint(&db, &c).await, before, "{what} wrote something");
        // The board tools name their session as a target: a refusal with no recorder leaves
        // its ledger as it was.
        assert_eq!(ledger(&db, &c).await, events, "{what} wrote to the ledger");
    }
    // A fence presented for a note: the fence names another message.
    let r = call(
        &st,
        &key,
        "complete_session_message",
        json!({"session_id": c, "message_id": note, "expected_assignment_fence": f,
               "completion_key": "k1", "answer": "x"}),
    )
    .await;
    assert_eq!(r["error"]["reason"], "wrong_message");

    // Nine ACK ids are invalid params on MCP, before any tool runs.
    let nine: Vec<String> = (0..9).map(|_| unknown_msg()).collect();
    let body = rpc(
        MODERN,
        1,
        "tools/call",
        json!({"name": "list_session_messages",
               "arguments": {"session_id": c, "recording_session_id": c, "ack_session_message_ids": nine}}),
    );
    let reply = send(&st, mcp_request(MODERN, Some(&key), &body)).await;
    assert_eq!(reply.rpc_code(), Some(-32602), "{}", reply.text());
    assert_eq!(footprint(&db, &c).await, before);

    // A closed session's board accepts nothing.
    call(&st, &key, "close_session", json!({"session_id": c})).await;
    let r = call(
        &st,
        &key,
        "post_session_message",
        json!({"session_id": c, "kind": "note", "body": "late"}),
    )
    .await;
    assert_eq!(kind(&r), "session_closed");
}

#[tokio::test]
async fn fences_go_stale_on_assignment_changes_only_and_completion_is_idempotent() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let c = session(&st, &key, P).await;
    let w = session(&st, &key, P).await;
    let todo = post(&st, &key, &c, "todo", "implement the parser").await;
    let first = assignment(&st, &key, &c, &todo).await;
    assert_eq!(first["assignment"]["completable"], true);
    assert_eq!(first["assignment"]["replies"], json!([]));
    let f1 = first["assignment_fence"].as_str().unwrap().to_owned();

    // Unrelated traffic and ACK bookkeeping do not stale the fence.
    let other = post(&st, &key, &c, "note", "unrelated").await;
    let ackme = {
        let r = call(
            &st,
            &key,
            "post_session_message",
            json!({"session_id": c, "kind": "note", "body": "ack me", "ack_required": true}),
        )
        .await;
        out(&r)["message_id"].as_str().unwrap().to_owned()
    };
    call(
        &st,
        &key,
        "session_summary",
        json!({"session_id": c, "recording_session_id": c, "ack_session_message_ids": [ackme]}),
    )
    .await;
    call(
        &st,
        &key,
        "resolve_session_message",
        json!({"session_id": c, "message_id": other}),
    )
    .await;
    assert_eq!(
        fence(&st, &key, &c, &todo).await,
        f1,
        "the fence is unchanged"
    );

    // A direct reply stales it: the old fence completes nothing and gets the current state.
    let hint = reply(&st, &key, &c, &todo, "note: use nom").await;
    let before = footprint(&db, &c).await;
    let r = complete(&st, &key, &c, &todo, &f1, "w1-a", "done").await;
    let o = out(&r);
    assert_eq!(o["state_changed"], false);
    assert_eq!(o["assignment"]["replies"][0]["message_id"], json!(hint));
    assert_eq!(
        footprint(&db, &c).await,
        before,
        "a stale completion writes nothing"
    );
    let f2 = o["assignment_fence"].as_str().unwrap().to_owned();
    assert_ne!(f2, f1);
    assert_eq!(
        fence(&st, &key, &c, &todo).await,
        f2,
        "the fresh fence is current"
    );

    // Resolving the reply is assignment-local too.
    call(
        &st,
        &key,
        "resolve_session_message",
        json!({"session_id": c, "message_id": hint}),
    )
    .await;
    let r = complete(&st, &key, &c, &todo, &f2, "w1-b", "done").await;
    assert_eq!(out(&r)["state_changed"], false);
    let f3 = out(&r)["assignment_fence"].as_str().unwrap().to_owned();

    // Completion with a current fence, recorded in w: w is the answer's author.
    let args = json!({"session_id": c, "message_id": todo, "expected_assignment_fence": f3,
                      "completion_key": "w1-c", "answer": "parser merged",
                      "recording_session_id": w});
    let done = call(&st, &key, "complete_session_message", args.clone()).await;
    let d = out(&done).clone();
    assert_eq!(d["state_changed"], true);
    assert_eq!(d["status"], "completed");
    let answer = d["answer_message_id"].as_str().unwrap().to_owned();
    let after = footprint(&db, &c).await;

    // The same key and payload from the same window: the original result, no new effect.
    let again = call(&st, &key, "complete_session_message", args.clone()).await;
    assert_eq!(out(&again), &d);
    assert_eq!(footprint(&db, &c).await, after, "a replay writes nothing");
    // The same key and answer without that recorder (another window) is another intent.
    let r = complete(&st, &key, &c, &todo, &f3, "w1-c", "parser merged").await;
    assert_eq!(kind(&r), "completion_key_conflict");
    // The same key with another payload: a conflict.
    let r = complete(&st, &key, &c, &todo, &f3, "w1-c", "something else").await;
    assert_eq!(kind(&r), "completion_key_conflict");
    // A new key after completion: stale, nothing to complete.
    let r = complete(&st, &key, &c, &todo, &f3, "w2", "me too").await;
    assert_eq!(out(&r)["state_changed"], false);
    assert_eq!(out(&r)["status"], "completed");
    assert_eq!(out(&r)["assignment_fence"], Value::Null);
    assert_eq!(
        out(&r)["assignment"]["non_completable_reason"],
        "todo_completed"
    );

    let a = assignment(&st, &key, &c, &todo).await;
    assert_eq!(a["assignment_fence"], Value::Null);
    let replies: Vec<&Value> = a["assignment"]["replies"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    assert_eq!(replies.len(), 2);
    assert_eq!(replies[1]["message_id"], json!(answer));
    assert_eq!(replies[1]["author_session_id"], json!(w));
    assert_eq!(a["assignment"]["todo"]["answer_message_id"], json!(answer));

    // Evidence in the ledger: one message_completed, carrying no bodies.
    let events = ledger(&db, &c).await;
    let completed: Vec<_> = events
        .iter()
        .filter(|e| e.kind == "message_completed")
        .collect();
    assert_eq!(completed.len(), 1);
    assert!(!completed[0].payload.to_string().contains("parser merged"));
}

#[tokio::test]
async fn sixteen_racing_workers_complete_once_and_twenty_replays_agree() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let st_b = second_instance(&db, ServerConfig::default());
    let c = session(&st, &key, P).await;
    let todo = post(&st, &key, &c, "todo", "one winner").await;
    let f = fence(&st, &key, &c, &todo).await;
    let mut tasks = Vec::new();
    for i in 0..16 {
        let st = if i % 2 == 0 { st.clone() } else { st_b.clone() };
        let (key, c, todo, f) = (key.clone(), c.clone(), todo.clone(), f.clone());
        tasks.push(tokio::spawn(async move {
            complete(
                &st,
                &key,
                &c,
                &todo,
                &f,
                &format!("worker-{i}"),
                &format!("answer {i}"),
            )
            .await
        }));
    }
    let mut won = 0;
    for t in tasks {
        let r = t.await.unwrap();
        match out(&r)["state_changed"].as_bool().unwrap() {
            true => won += 1,
            false => assert_eq!(out(&r)["status"], "completed"),
        }
    }
    assert_eq!(won, 1);
    assert_eq!(footprint(&db, &c).await.2, 1, "one completion");
    let r = call(
        &st,
        &key,
        "list_session_messages",
        json!({"session_id": c, "kind": "answer"}),
    )
    .await;
    assert_eq!(out(&r)["total"], 1, "one answer");

    // One key, twenty concurrent sends: one effect, identical results.
    let todo = post(&st, &key, &c, "todo", "idempotent").await;
    let f = fence(&st, &key, &c, &todo).await;
    let mut tasks = Vec::new();
    for i in 0..20 {
        let st = if i % 2 == 0 { st.clone() } else { st_b.clone() };
        let (key, c, todo, f) = (key.clone(), c.clone(), todo.clone(), f.clone());
        tasks.push(tokio::spawn(async move {
            complete(&st, &key, &c, &todo, &f, "same-key", "same answer").await
        }));
    }
    let mut results = BTreeSet::new();
    for t in tasks {
        let r = t.await.unwrap();
        assert_eq!(out(&r)["state_changed"], true, "{r}");
        results.insert(out(&r).to_string());
    }
    assert_eq!(results.len(), 1, "identical results: {results:#?}");
    assert_eq!(footprint(&db, &c).await.2, 2);
}

#[tokio::test]
async fn observation_pages_every_change_once_and_refuses_bad_tokens() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let c = session(&st, &key, P).await;
    let other = session(&st, &key, P).await;
    post(&st, &key, &c, "note", "before the baseline").await;
    let base = observe(&st, &key, &c, None, 50).await;
    let b = out(&base);
    assert_eq!(b["baseline"], true);
    assert_eq!(b["messages"], json!([]));
    let t0 = b["token"].as_str().unwrap().to_owned();

    // Nothing new: unchanged, same position.
    let r = observe(&st, &key, &c, Some(&t0), 50).await;
    assert_eq!(out(&r)["messages"], json!([]));
    assert_eq!(out(&r)["has_more"], false);

    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(post(&st, &key, &c, "note", &format!("n{i}")).await);
    }
    // Resolving n1 collapses its two changes into one entry at its final state, placed at
    // its latest change.
    call(
        &st,
        &key,
        "resolve_session_message",
        json!({"session_id": c, "message_id": ids[1]}),
    )
    .await;
    let mut seen = Vec::new();
    let mut token = t0.clone();
    let mut pages = 0;
    loop {
        let r = observe(&st, &key, &c, Some(&token), 2).await;
        let o = out(&r);
        pages += 1;
        for m in o["messages"].as_array().unwrap() {
            seen.push((
                m["message_id"].as_str().unwrap().to_owned(),
                m["status"].as_str().unwrap().to_owned(),
            ));
        }
        token = o["token"].as_str().unwrap().to_owned();
        assert_eq!(o["history_lost"], false);
        if o["has_more"] == false {
            break;
        }
    }
    assert_eq!(pages, 3);
    let expected: Vec<(String, String)> = [0, 2, 3, 4, 1]
        .iter()
        .map(|&i| {
            (
                ids[i].clone(),
                if i == 1 { "resolved" } else { "open" }.to_owned(),
            )
        })
        .collect();
    assert_eq!(seen, expected);
    // Caught up.
    let r = observe(&st, &key, &c, Some(&token), 50).await;
    assert_eq!(out(&r)["messages"], json!([]));

    // Tokens survive a restart: a new instance with its own pool (and no shared memory).
    let restarted = second_instance(&db, ServerConfig::default());
    post(&restarted, &key, &c, "note", "after restart").await;
    let r = observe(&restarted, &key, &c, Some(&token), 50).await;
    assert_eq!(out(&r)["messages"].as_array().unwrap().len(), 1);

    // Refusals: wrong session, altered, oversized, future, and a fence in place of a token.
    let other_token = out(&observe(&st, &key, &other, None, 1).await)["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut altered = t0.clone().into_bytes();
    let last = altered.len() - 3;
    altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    let todo = post(&st, &key, &c, "todo", "t").await;
    let a_fence = fence(&st, &key, &c, &todo).await;
    for (token, reason) in [
        (other_token.as_str(), "wrong_session"),
        (altered.as_str(), "malformed"),
        (&*"A".repeat(300), "oversized"),
        (a_fence.as_str(), "malformed"),
        ("wco1_", "malformed"),
    ] {
        let r = observe(&st, &key, &c, Some(token), 5).await;
        assert_eq!(kind(&r), "invalid_observation_token", "{reason}: {r}");
        assert_eq!(r["error"]["reason"], reason, "{r}");
    }
    // A token from the future: the session is rolled back below it (as a restore would).
    let now = out(&observe(&st, &key, &c, None, 1).await)["token"]
        .as_str()
        .unwrap()
        .to_owned();
    sql(
        &db,
        &format!(
            "UPDATE workflow_sessions SET message_observation_revision = message_observation_revision - 1 WHERE id = '{c}'"
        ),
    )
    .await;
    let r = observe(&st, &key, &c, Some(&now), 5).await;
    assert_eq!(kind(&r), "invalid_observation_token");
    assert_eq!(r["error"]["reason"], "future_revision");
}

#[tokio::test]
async fn retention_removes_closed_messages_first_then_the_oldest_and_reports_lost_history() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let c = session(&st, &key, P).await;
    let open_todo = post(&st, &key, &c, "todo", "keep me").await;
    let early = out(&observe(&st, &key, &c, None, 1).await)["token"]
        .as_str()
        .unwrap()
        .to_owned();
    // A closed message, then fill the board to its bound (500) with open notes, directly
    // through the store for speed.
    let closed = post(&st, &key, &c, "note", "closed early").await;
    let r = call(
        &st,
        &key,
        "post_session_message",
        json!({"session_id": c, "kind": "note", "body": "ack me", "ack_required": true}),
    )
    .await;
    assert_eq!(r["success"], true);
    call(
        &st,
        &key,
        "resolve_session_message",
        json!({"session_id": c, "message_id": closed}),
    )
    .await;
    fill(&db, &c, 497).await;
    assert_eq!(footprint(&db, &c).await.1, 500);
    let late = out(&observe(&st, &key, &c, None, 1).await)["token"]
        .as_str()
        .unwrap()
        .to_owned();
    // One more: the closed message goes (not the older open todo).
    post(&st, &key, &c, "note", "one too many").await;
    assert_eq!(footprint(&db, &c).await.1, 500);
    let r = call(
        &st,
        &key,
        "resolve_session_message",
        json!({"session_id": c, "message_id": closed}),
    )
    .await;
    assert_eq!(
        kind(&r),
        "unknown_message",
        "the closed message was removed"
    );
    let r = call(
        &st,
        &key,
        "get_session_assignment",
        json!({"session_id": c, "message_id": open_todo}),
    )
    .await;
    assert_eq!(
        out(&r)["assignment"]["completable"],
        true,
        "open work is kept"
    );

    // A cursor from before the removed change has lost history; a later one has not.
    let r = observe(&st, &key, &c, Some(&early), 1).await;
    assert_eq!(out(&r)["history_lost"], true);
    let r = observe(&st, &key, &c, Some(&late), 10).await;
    assert_eq!(out(&r)["history_lost"], false);
    assert_eq!(out(&r)["messages"].as_array().unwrap().len(), 1);

    // Every retained message is open now: the next post removes the oldest open one, the
    // todo, which can no longer be assigned or completed.
    let later = out(&observe(&st, &key, &c, None, 1).await)["token"]
        .as_str()
        .unwrap()
        .to_owned();
    post(&st, &key, &c, "note", "pushes the oldest open message out").await;
    assert_eq!(footprint(&db, &c).await.1, 500);
    let r = call(
        &st,
        &key,
        "get_session_assignment",
        json!({"session_id": c, "message_id": open_todo}),
    )
    .await;
    assert_eq!(kind(&r), "unknown_message");
    // That removal was of a change older than `later`: nothing `later` could miss.
    let r = observe(&st, &key, &c, Some(&later), 10).await;
    assert_eq!(out(&r)["history_lost"], false);
    assert_eq!(out(&r)["messages"].as_array().unwrap().len(), 1);
    // Once more: the ACK-required note goes, and the counters follow.
    post(&st, &key, &c, "note", "and the next").await;
    assert_counters(&db, &c).await;
    let r = call(&st, &key, "list_session_messages", json!({"session_id": c})).await;
    assert_eq!(out(&r)["counts"]["open_ack_required"], 0);
}

#[tokio::test]
async fn a_waiting_observer_returns_on_a_post_and_times_out_unchanged() {
    for hints in [true, false] {
        let db = TestDatabase::new().await;
        register_project(&db, P).await;
        let config = ServerConfig {
            notify: hints,
            ..ServerConfig::default()
        };
        let mut st = state_with(&db, config);
        if hints {
            st = st.with_wakeups(wc_functions::wake::Wakeups::listening(
                wc_store::connect::Connector::new(&db.config()).unwrap(),
            ));
        }
        let key = full_key(&db).await;
        let c = session(&st, &key, P).await;
        let t = out(&observe(&st, &key, &c, None, 1).await)["token"]
            .as_str()
            .unwrap()
            .to_owned();
        // Timeout: a successful unchanged result.
        let r = call(
            &st,
            &key,
            "observe_session_messages",
            json!({"session_id": c, "token": t, "wait_ms": 300}),
        )
        .await;
        assert_eq!(out(&r)["messages"], json!([]));
        assert!(out(&r)["waited_ms"].as_u64().unwrap() >= 300);
        // A post from another instance, once the long poll waits, ends the wait.
        let observing = {
            let (st, key, c) = (st.clone(), key.clone(), c.clone());
            tokio::spawn(async move {
                call(
                    &st,
                    &key,
                    "observe_session_messages",
                    json!({"session_id": c, "token": t, "wait_ms": 20000}),
                )
                .await
            })
        };
        let session_id = wc_domain::SessionId::parse(&c).unwrap();
        eventually("the long poll waits on the board", async || {
            (st.deps.wake.board_waiters(&session_id) == 1).then_some(())
        })
        .await;
        let poster = second_instance(&db, ServerConfig::default());
        let id = post(&poster, &key, &c, "note", "wake up").await;
        let r = observing.await.unwrap();
        assert_eq!(
            out(&r)["messages"][0]["message_id"],
            json!(id),
            "hints {hints}"
        );
        assert!(
            out(&r)["waited_ms"].as_u64().unwrap() < 15000,
            "hints {hints}: the post ended the wait: {r}"
        );
    }
}

#[tokio::test]
async fn acks_are_recorded_once_and_attention_repeats_until_ack_or_resolve() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let w = session(&st, &key, P).await;
    let c = session(&st, &key, P).await;
    let r = call(
        &st,
        &key,
        "post_session_message",
        json!({"session_id": w, "kind": "question", "body": "please confirm the plan", "ack_required": true}),
    )
    .await;
    let m = out(&r)["message_id"].as_str().unwrap().to_owned();
    post(&st, &key, &w, "note", "no ack needed").await;

    // Unrecorded calls carry no attention; calls recorded in w do, on success and failure.
    let r = call(&st, &key, "list_projects", json!({})).await;
    assert!(r.get("session_attention").is_none());
    let r = call(
        &st,
        &key,
        "list_projects",
        json!({"recording_session_id": w}),
    )
    .await;
    assert_eq!(r["session_attention"]["session_id"], json!(w));
    assert_eq!(r["session_attention"]["total"], 1);
    assert_eq!(
        r["session_attention"]["messages"][0]["message_id"],
        json!(m)
    );
    let r = call(
        &st,
        &key,
        "get_session_assignment",
        json!({"session_id": c, "message_id": unknown_msg(), "recording_session_id": w}),
    )
    .await;
    assert_eq!(kind(&r), "unknown_message");
    assert_eq!(r["session_attention"]["total"], 1);

    // The first ACK is recorded once and advances the revision once; it suppresses the
    // message in that response only.
    let rev = || async { footprint(&db, &w).await.0 };
    let before = rev().await;
    let r = call(
        &st,
        &key,
        "list_projects",
        json!({"recording_session_id": w, "ack_session_message_ids": [m]}),
    )
    .await;
    assert!(
        r.get("session_attention").is_none() || r["session_attention"]["messages"] == json!([]),
        "{r}"
    );
    assert_eq!(rev().await, before + 1);
    let first_ack: Value = {
        let r = call(
            &st,
            &key,
            "list_session_messages",
            json!({"session_id": w, "kind": "question"}),
        )
        .await;
        out(&r)["messages"][0]["first_ack_observed_at"].clone()
    };
    assert!(first_ack.is_string());
    // An echo: no new revision, same timestamp; still open, so omitting it re-projects it.
    call(
        &st,
        &key,
        "list_projects",
        json!({"recording_session_id": w, "ack_session_message_ids": [m]}),
    )
    .await;
    assert_eq!(rev().await, before + 1);
    let r = call(
        &st,
        &key,
        "list_projects",
        json!({"recording_session_id": w}),
    )
    .await;
    assert_eq!(
        r["session_attention"]["messages"][0]["message_id"],
        json!(m)
    );
    // An ACK of a message of another session (or an unknown one) does nothing.
    let r = call(
        &st,
        &key,
        "list_projects",
        json!({"recording_session_id": c, "ack_session_message_ids": [m, unknown_msg()]}),
    )
    .await;
    assert!(r.get("session_attention").is_none(), "{r}");
    // Resolved: no more attention.
    call(
        &st,
        &key,
        "resolve_session_message",
        json!({"session_id": w, "message_id": m}),
    )
    .await;
    let r = call(
        &st,
        &key,
        "list_projects",
        json!({"recording_session_id": w}),
    )
    .await;
    assert!(r.get("session_attention").is_none(), "{r}");
    assert_counters(&db, &w).await;
}

#[tokio::test]
async fn the_handoff_brief_counts_open_collaboration() {
    let TestApp { db: _db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let c = session(&st, &key, P).await;
    post(&st, &key, &c, "question", "q?").await;
    post(&st, &key, &c, "todo", "t").await;
    let r = call(
        &st,
        &key,
        "post_session_message",
        json!({"session_id": c, "kind": "note", "body": "ack", "ack_required": true}),
    )
    .await;
    assert_eq!(r["success"], true);
    let r = call(
        &st,
        &key,
        "session_handoff_summary",
        json!({"session_id": c}),
    )
    .await;
    assert_eq!(
        out(&r)["handoff_brief"]["attention"]["collaboration"],
        json!({"open_questions": 1, "open_todos": 1, "unresolved_ack_required": 1})
    );
}

#[tokio::test]
async fn a_recorder_of_another_project_cannot_author_messages() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let c = session(&st, &key, P).await;
    let elsewhere = session(&st, &key, Q).await;
    let before = footprint(&db, &c).await;
    let r = call(
        &st,
        &key,
        "post_session_message",
        json!({"session_id": c, "kind": "note", "body": "x", "recording_session_id": elsewhere}),
    )
    .await;
    assert_eq!(kind(&r), "project_mismatch");
    assert_eq!(footprint(&db, &c).await, before);
}

#[tokio::test]
async fn retention_keeps_the_replies_of_open_todos_longest_among_closed_messages() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let c = session(&st, &key, P).await;
    let resolve = |id: String| {
        let (st, key, c) = (st.clone(), key.clone(), c.clone());
        async move {
            let r = call(
                &st,
                &key,
                "resolve_session_message",
                json!({"session_id": c, "message_id": id}),
            )
            .await;
            assert_eq!(out(&r)["state_changed"], true);
        }
    };
    let todo = post(&st, &key, &c, "todo", "open work").await;
    let hint = reply(&st, &key, &c, &todo, "a hint for it").await;
    resolve(hint.clone()).await;
    let note = post(&st, &key, &c, "note", "closed, unrelated").await;
    resolve(note.clone()).await;
    fill(&db, &c, 497).await;
    let exists = |id: String| {
        let db_pool = db.pool().clone();
        async move {
            let client = db_pool.get().await.unwrap();
            client
                .query_one(
                    "SELECT count(*) FROM session_messages WHERE id = $1",
                    &[&id],
                )
                .await
                .unwrap()
                .get::<_, i64>(0)
                == 1
        }
    };
    // The unrelated closed note goes first, though the closed hint is older.
    post(&st, &key, &c, "note", "one").await;
    assert!(!exists(note.clone()).await);
    assert!(exists(hint.clone()).await);
    assert_eq!(
        assignment(&st, &key, &c, &todo).await["assignment"]["completable"],
        true
    );
    // Then the hint: the todo can no longer prove its assignment.
    post(&st, &key, &c, "note", "two").await;
    assert!(!exists(hint).await);
    let a = assignment(&st, &key, &c, &todo).await;
    assert_eq!(a["assignment"]["completable"], false);
    assert_eq!(
        a["assignment"]["non_completable_reason"],
        "replies_lost_to_retention"
    );
    assert_eq!(a["assignment_fence"], Value::Null);
    // Then the oldest open message, the todo itself.
    post(&st, &key, &c, "note", "three").await;
    assert!(!exists(todo).await);
    assert_counters(&db, &c).await;
}
