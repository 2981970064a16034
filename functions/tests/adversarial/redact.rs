//! Redaction as a person reads secrets, through real tool calls into the stored rows and the
//! logs; and MCP protocol errors that must come back as JSON-RPC errors.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::{Value, json};
use wc_store::testing::TestDatabase;

use crate::common::*;

/// The project the calls run in.
const P: &str = "agent:local:alpha";

/// (words holding a secret, the secret, a look-alike's words, the look-alike's text that must
/// survive): one word is text, more are an argv.
const SHAPES: &[(&[&str], &str, &[&str], &str)] = include!("../data/secret_shapes.rs");

/// Every session event payload, workflow session row and audit summary, as text.
async fn stored_text(db: &TestDatabase) -> (String, String, String) {
    let client = db.pool().get().await.unwrap();
    let mut out = Vec::new();
    for query in [
        "SELECT payload::text FROM session_events",
        "SELECT to_jsonb(t)::text FROM workflow_sessions t",
        "SELECT summary::text FROM action_events",
    ] {
        let mut text = String::new();
        for row in client.query(query, &[]).await.unwrap() {
            text.push_str(&row.get::<_, String>(0));
            text.push('\n');
        }
        out.push(text);
    }
    let audit = out.pop().unwrap();
    let sessions = out.pop().unwrap();
    (out.pop().unwrap(), sessions, audit)
}

/// `tool` with `args` through MCP (`version`) or, with `None`, the REST action; the result.
async fn call(
    st: &wc_functions::AppState,
    key: &str,
    version: Option<&str>,
    tool: &str,
    args: Value,
) -> Value {
    match version {
        Some(v) => {
            let r = tools_call(st, v, Some(key), tool, args).await;
            r.result()["structuredContent"].clone()
        }
        None => action(st, key, tool, args).await.body,
    }
}

/// The payloads of `session`'s events after `seq`, as text, and the highest seq.
async fn events_after(db: &TestDatabase, session: &str, seq: i64) -> (String, i64) {
    let rows = ledger(db, session).await;
    let last = rows.last().map_or(seq, |r| r.seq);
    let text = rows
        .iter()
        .filter(|r| r.seq > seq)
        .map(|r| r.payload.to_string())
        .collect::<Vec<_>>()
        .join("\n");
    (text, last)
}

#[tokio::test]
async fn no_secret_shape_reaches_the_ledger_or_logs_and_every_look_alike_is_kept() {
    assert!(SHAPES.len() >= 80, "{} shapes", SHAPES.len());
    let env = RunnerApp::start("alpha").await;
    let (db, st, key) = (&env.db, &env.st, &env.key);
    let (logs, _guard) = capture_logs();
    let r = call(
        st,
        key,
        None,
        "work_on_project",
        json!({ "project": P, "instruction": "shapes" }),
    )
    .await;
    let s = output(&r)["session_id"]
        .as_str()
        .expect("session")
        .to_owned();
    let surfaces = [Some(LEGACY[1]), Some(LEGACY[0]), Some(MODERN), None];
    let mut seq = events_after(db, &s, 0).await.1;
    let mut lost = Vec::new();
    for (i, (words, secret, look, keep)) in SHAPES.iter().enumerate() {
        let via = surfaces[i % surfaces.len()];
        for (w, is_secret) in [(*words, true), (*look, false)] {
            // The words as an argv the runner executes (echo prints them: only the runner's
            // work rows hold output), and as a line of shell text (`:` runs nothing).
            let mut argv = vec!["echo"];
            argv.extend_from_slice(w);
            let r = call(
                st,
                key,
                via,
                "run_process",
                json!({ "session_id": s, "argv": argv }),
            )
            .await;
            assert_eq!(r["success"], true, "{r}");
            let r = call(
                st,
                key,
                via,
                "run_shell",
                json!({ "session_id": s, "command": format!(": {}", w.join(" ")) }),
            )
            .await;
            // It ran (a shape's quotes may make `sh` exit non-zero); it was not refused.
            assert!(
                r["success"] == true || r["error"]["kind"] == "exit_nonzero",
                "{r}"
            );
            let (text, last) = events_after(db, &s, seq).await;
            seq = last;
            assert!(text.contains("echo"), "nothing recorded: {text}");
            if is_secret {
                assert!(text.contains("[REDACTED]"), "{secret:?} not marked: {text}");
            } else if text.matches(keep).count() < 2 {
                lost.push(format!("{keep:?} not kept by both calls: {text}"));
            }
        }
        // And as an instruction.
        let r = call(
            st,
            key,
            via,
            "work_on_project",
            json!({ "session_id": s, "instruction": format!("then {}", words.join(" ")) }),
        )
        .await;
        assert_eq!(r["success"], true, "{r}");
        seq = events_after(db, &s, seq).await.1;
    }
    assert!(lost.is_empty(), "look-alikes lost:\n{}", lost.join("\n"));

    let (events, sessions, audit) = stored_text(db).await;
    let log_text = logs.text();
    // The checks can see: the ledger holds the calls, the logs hold the requests.
    assert!(events.contains("run_process") && events.contains("run_shell"));
    assert!(log_text.contains("run_process") || log_text.contains("/api/actions"));
    let mut kept = Vec::new();
    for (_, secret, _, _) in SHAPES {
        for (place, text) in [
            ("session_events", &events),
            ("workflow_sessions", &sessions),
            ("action_events.summary", &audit),
            ("the logs", &log_text),
        ] {
            if text.contains(secret) {
                kept.push(format!("{place} keep {secret:?}"));
            }
        }
    }
    assert!(kept.is_empty(), "{}", kept.join("\n"));
    // The runner's work rows do hold the command as given (the runner must run it; they are
    // pruned with the work): the secrets went down the real path.
    let client = db.pool().get().await.unwrap();
    let items: String = client
        .query_one(
            "SELECT string_agg(item::text, E'\\n') FROM runner_work",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        SHAPES
            .iter()
            .all(|(_, secret, _, _)| items.contains(secret))
    );
}

/// A task's result is a durable copy of a tool's output: every secret a command printed is
/// gone from the stored row (and from what `tasks/get` answers, which is that row), while the
/// look-alikes it printed beside them are kept, and the text block is still the structured
/// content as JSON.
#[tokio::test]
async fn no_secret_shape_reaches_a_stored_task_result() {
    let env = RunnerApp::start("alpha").await;
    let (db, st, key) = (&env.db, &env.st, &env.key);
    let mut lost = Vec::new();
    for (words, secret, look, keep) in SHAPES {
        // `sh` prints the secret's words as one line, then the look-alike's.
        let (words, look) = (words.join(" "), look.join(" "));
        let argv = [
            "sh",
            "-c",
            "printf '%s\\n' \"$1\" \"$2\"",
            "sh",
            &words,
            &look,
        ];
        let made = call_as_task(
            st,
            key,
            "run_process",
            json!({ "project": P, "argv": argv }),
        )
        .await;
        let id = made["taskId"].as_str().expect("a task").to_owned();
        let done = task_until_terminal(st, key, &id).await;
        assert_eq!(done["status"], "completed", "{done}");
        let result = &done["result"];
        let stdout = output(&result["structuredContent"])["stdout"]
            .as_str()
            .unwrap_or_default();
        assert!(
            stdout.contains("[REDACTED]"),
            "{secret:?} not marked: {result}"
        );
        assert!(
            !result.to_string().contains(secret),
            "{secret:?} answered: {result}"
        );
        if !stdout.contains(keep) {
            lost.push(format!("{keep:?} not kept: {stdout}"));
        }
        let text = result["content"][0]["text"].as_str().expect("a text block");
        let parsed: Value = serde_json::from_str(text).expect("the text block is JSON");
        assert_eq!(parsed, result["structuredContent"], "the two forms agree");
    }
    assert!(lost.is_empty(), "look-alikes lost:\n{}", lost.join("\n"));
    let client = db.pool().get().await.unwrap();
    let stored: String = client
        .query_one(
            "SELECT string_agg(concat(result::text, error::text, status_message), E'\\n') \
             FROM mcp_tasks",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(stored.contains("run_process") || stored.contains("stdout"));
    let kept: Vec<&str> = SHAPES
        .iter()
        .map(|(_, secret, _, _)| *secret)
        .filter(|secret| stored.contains(secret))
        .collect();
    assert!(kept.is_empty(), "mcp_tasks keeps {kept:?}");
}

// ---------------------------------------------------------------------------------------------
// MCP protocol errors

/// A `POST /mcp` of raw `body` as a `version` client sends it.
fn raw(version: &str, key: &str, body: &str, method: Option<&str>) -> Request<Body> {
    let mut b = Request::post("/mcp")
        .header(header::HOST, "localhost")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header("mcp-protocol-version", version)
        .header(header::AUTHORIZATION, format!("Bearer {key}"));
    if version == MODERN
        && let Some(m) = method
    {
        b = b.header("mcp-method", m);
    }
    b.body(Body::from(body.to_owned())).unwrap()
}

/// The `_meta` a modern request carries, as JSON text.
fn meta() -> String {
    modern_meta().to_string()
}

#[tokio::test]
async fn malformed_messages_get_json_rpc_errors_with_their_code_and_id() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    let nest = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
    for version in VERSIONS {
        // A modern request carries `_meta` in its params; an older one does not.
        let m = if version == MODERN {
            format!(r#""_meta":{},"#, meta())
        } else {
            String::new()
        };
        // (body, method header, code, id, status)
        let cases: Vec<(String, &str, i64, Value, StatusCode)> = vec![
            (
                format!(
                    r#"{{"jsonrpc":"2.0","id":11,"method":"tools/list","params":{{{m}"deep":{}}}}}"#,
                    nest(200)
                ),
                "tools/list",
                -32602,
                json!(11),
                StatusCode::OK,
            ),
            (
                format!(
                    r#"{{"jsonrpc":"2.0","id":12,"method":"tools/list","params":{{{m}"cursor":"\ud800"}}}}"#
                ),
                "tools/list",
                -32602,
                json!(12),
                StatusCode::OK,
            ),
            (
                r#"{"jsonrpc":"2.0","id":13,"method":"tools/list","params":[]}"#.to_owned(),
                "tools/list",
                -32602,
                json!(13),
                StatusCode::OK,
            ),
            (
                format!(
                    r#"{{"jsonrpc":"2.0","id":1.5,"method":"tools/list","params":{{{m}"x":0}}}}"#
                ),
                "tools/list",
                -32600,
                Value::Null,
                StatusCode::BAD_REQUEST,
            ),
            (
                format!(
                    r#"{{"jsonrpc":"2.0","id":18446744073709551616,"method":"tools/list","params":{{{m}"x":0}}}}"#
                ),
                "tools/list",
                -32600,
                Value::Null,
                StatusCode::BAD_REQUEST,
            ),
            (
                format!(
                    r#"{{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{{{m}"arguments":{{}}}}}}"#
                ),
                "tools/call",
                -32602,
                json!(14),
                StatusCode::OK,
            ),
            (
                format!(
                    r#"{{"jsonrpc":"2.0","id":"fifteen","method":"tools/call","params":{{{m}"name":15,"arguments":{{}}}}}}"#
                ),
                "tools/call",
                -32602,
                json!("fifteen"),
                StatusCode::OK,
            ),
            (
                format!(
                    r#"{{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{{{m}"name":"runtime_status","arguments":"{{}}"}}}}"#
                ),
                "tools/call",
                -32602,
                json!(16),
                StatusCode::OK,
            ),
            (
                format!(
                    r#"{{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{{{m}"name":"runtime_status","arguments":[]}}}}"#
                ),
                "tools/call",
                -32602,
                json!(17),
                StatusCode::OK,
            ),
            (
                r#"{"jsonrpc":"2.0","id":18,"method":"tools/list","params":{"x":1"#.to_owned(),
                "tools/list",
                -32700,
                Value::Null,
                StatusCode::BAD_REQUEST,
            ),
        ];
        for (body, method, code, id, status) in cases {
            let r = send(&st, raw(version, &key, &body, Some(method))).await;
            let what = format!(
                "{version} {}: HTTP {} {}",
                &body[..body.len().min(120)],
                r.status,
                r.text()
            );
            assert_eq!(
                r.headers
                    .get(header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok()),
                Some("application/json"),
                "{what}"
            );
            assert_eq!(r.body["jsonrpc"], "2.0", "{what}");
            assert_eq!(r.rpc_code(), Some(code), "{what}");
            assert_eq!(r.body["id"], id, "{what}");
            assert!(r.body["error"]["message"].is_string(), "{what}");
            assert_eq!(r.status, status, "{what}");
        }
        // The limits are the parser's: one level less passes and is served.
        let ok = format!(
            r#"{{"jsonrpc":"2.0","id":19,"method":"tools/list","params":{{{m}"deep":{}}}}}"#,
            nest(120)
        );
        let r = send(&st, raw(version, &key, &ok, Some("tools/list"))).await;
        assert!(r.result()["tools"].is_array(), "{version}: {}", r.text());
    }
}

#[tokio::test]
async fn a_well_formed_tool_call_still_reaches_the_tool() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    for version in VERSIONS {
        // `arguments` may be left out, as the protocol allows.
        let mut body = rpc(
            version,
            21,
            "tools/call",
            json!({ "name": "runtime_status" }),
        );
        body["params"].as_object_mut().unwrap().remove("arguments");
        let r = send(&st, mcp_request(version, Some(&key), &body)).await;
        assert_eq!(r.status, StatusCode::OK, "{version}: {}", r.text());
        assert_eq!(r.body["id"], 21);
        assert_eq!(
            r.result()["structuredContent"]["success"],
            true,
            "{}",
            r.text()
        );
    }
}
