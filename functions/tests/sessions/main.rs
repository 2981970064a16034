//! Workflow Sessions end to end, against a real database through the real router (MCP on every
//! protocol revision, the REST actions and `/api/tools/call`): the work_on_project lifecycle
//! and its refusals, the uniform recorder, read-only mode denial, concurrency across two
//! instances, ledger retention, the handoff brief, execution defaults, the forbidden
//! inferences of the session model, and redaction through storage and logs.

#[path = "../common/mod.rs"]
mod common;

mod concurrency;
mod context;
mod handoff;
mod inference;
mod lifecycle;
mod read_only;
mod recording;
mod redaction;
mod retention;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::http::StatusCode;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::*;
use serde_json::{Value, json};
use uuid::Uuid;
use wc_domain::{EventKind, EventRole, Lifecycle, Mode, SessionId};
use wc_functions::AppState;
use wc_functions::auth::{Principal, PrincipalKind, ProjectGrants, ScopeSet};
use wc_functions::config::ServerConfig;
use wc_functions::kernel::ToolCall;
use wc_functions::kernel::context::ToolContext;
use wc_functions::kernel::spec::{Category, SessionUse, ToolMeta, ToolSpec};
use wc_functions::kernel::wrapper::WrapperMeta;
use wc_functions::result::ToolError;
use wc_store::credentials::CredentialKind;
use wc_store::sessions::{self, Decision, NewEvent, SessionChange};
use wc_store::testing::TestDatabase;

/// The project most sessions work on.
const P: &str = "agent:local:alpha";
/// A second project.
const Q: &str = "agent:local:beta";

/// Scopes a project credential needs for the session tools.
const PROJECT_SCOPES: [&str; 2] = ["project:read", "project:write"];

/// A surface a tool call can come through.
#[derive(Debug, Clone, Copy)]
enum Via {
    /// `POST /mcp` `tools/call` on this protocol revision.
    Mcp(&'static str),
    /// `POST /api/actions/{tool}`.
    Action,
    /// `POST /api/tools/call`.
    ToolsCall,
}

/// Every surface: MCP on each revision, and both REST routes.
const SURFACES: [Via; 5] = [
    Via::Mcp("2025-06-18"),
    Via::Mcp("2025-11-25"),
    Via::Mcp(MODERN),
    Via::Action,
    Via::ToolsCall,
];

/// Calls `tool` through `via` with `recording` as the recording session; returns the
/// `{success, output, error}` result, after checking the transport agrees with it.
async fn call_via(
    st: &AppState,
    via: Via,
    key: &str,
    tool: &str,
    args: Value,
    recording: Option<&str>,
) -> Value {
    call_with_headers(st, via, key, tool, args, recording, &[])
        .await
        .0
}

/// [`call_via`] with extra request headers; also returns the reply (for its request id).
async fn call_with_headers(
    st: &AppState,
    via: Via,
    key: &str,
    tool: &str,
    mut args: Value,
    recording: Option<&str>,
    headers: &[(&str, &str)],
) -> (Value, Reply) {
    // A tool without a named action is called on REST through callRuntimeTool.
    let via = match via {
        Via::Action if !named_action(tool) => Via::ToolsCall,
        other => other,
    };
    let mut req = match via {
        Via::Mcp(version) => {
            if let Some(w) = recording {
                args["recording_session_id"] = json!(w);
            }
            let body = rpc(
                version,
                1,
                "tools/call",
                json!({ "name": tool, "arguments": args }),
            );
            mcp_request(version, Some(key), &body)
        }
        Via::Action => {
            if let Some(w) = recording {
                args["recording_session_id"] = json!(w);
            }
            rest_request(&format!("/api/actions/{tool}"), Some(key), &args)
        }
        Via::ToolsCall => {
            let mut envelope = json!({ "tool": tool, "arguments": args });
            if let Some(w) = recording {
                envelope["recording_session_id"] = json!(w);
            }
            rest_request("/api/tools/call", Some(key), &envelope)
        }
    };
    for (name, value) in headers {
        set_header(&mut req, name, value);
    }
    let r = send(st, req).await;
    let result = match via {
        Via::Mcp(_) => {
            assert_eq!(r.status, StatusCode::OK, "{via:?} {tool}: {}", r.text());
            let result = r.result();
            let sc = result["structuredContent"].clone();
            assert_eq!(
                result["isError"],
                json!(sc["success"] != true),
                "{via:?} {tool}: {result}"
            );
            sc
        }
        Via::Action | Via::ToolsCall => {
            check_rest_status(&r, tool);
            r.body.clone()
        }
    };
    (result, r)
}

fn check_rest_status(r: &Reply, tool: &str) {
    if r.body["success"] == true {
        assert_eq!(r.status, StatusCode::OK, "{tool}: {}", r.text());
    } else {
        assert!(
            r.status.is_client_error(),
            "{tool}: a refusal answered HTTP {}: {}",
            r.status,
            r.text()
        );
    }
}

/// A modern MCP call without a recorder.
async fn call(st: &AppState, key: &str, tool: &str, args: Value) -> Value {
    call_via(st, Via::Mcp(MODERN), key, tool, args, None).await
}

/// A modern MCP call recorded in `w`.
async fn rec(st: &AppState, key: &str, tool: &str, args: Value, w: &str) -> Value {
    call_via(st, Via::Mcp(MODERN), key, tool, args, Some(w)).await
}

/// Starts a fresh session on `project` (unrecorded) and returns its id.
async fn start(st: &AppState, key: &str, project: &str, instruction: &str) -> String {
    start_mode(st, key, project, instruction, "normal").await
}

async fn start_mode(
    st: &AppState,
    key: &str,
    project: &str,
    instruction: &str,
    mode: &str,
) -> String {
    let r = call(
        st,
        key,
        "work_on_project",
        json!({ "project": project, "instruction": instruction, "mode": mode }),
    )
    .await;
    output(&r)["session_id"]
        .as_str()
        .expect("session_id")
        .to_owned()
}

/// Events of `id` with a seq above `after`.
async fn ledger_after(db: &TestDatabase, id: &str, after: i64) -> Vec<LedgerRow> {
    ledger(db, id)
        .await
        .into_iter()
        .filter(|e| e.seq > after)
        .collect()
}

/// The newest seq of `id` (0 when empty).
async fn last_seq(db: &TestDatabase, id: &str) -> i64 {
    session_row(db, id).await.events_observed
}

/// The retained events of `id` counted by kind, by a scan of the ledger.
async fn retained_counts(db: &TestDatabase, id: &str) -> Value {
    let mut counts = BTreeMap::<String, i64>::new();
    for e in ledger(db, id).await {
        *counts.entry(e.kind).or_default() += 1;
    }
    json!(counts)
}

/// (kind, role) of each row: the shape of a slice of ledger.
fn shape(rows: &[LedgerRow]) -> Vec<(&str, &str)> {
    rows.iter()
        .map(|e| (e.kind.as_str(), e.role.as_str()))
        .collect()
}

/// Asserts `rows` are exactly one recorder pair of `tool` (started, finished, one call id),
/// and returns (call id, invocation id).
#[track_caller]
fn one_recorder_pair(rows: &[LedgerRow], tool: &str) -> (Uuid, Uuid) {
    assert_eq!(
        shape(rows),
        [
            ("tool_call_started", "recorder"),
            ("tool_call_finished", "recorder")
        ],
        "{tool}: {rows:#?}"
    );
    assert!(
        rows.iter().all(|e| e.tool_name.as_deref() == Some(tool)),
        "{tool}: {rows:#?}"
    );
    assert_eq!(
        rows[0].call_id, rows[1].call_id,
        "{tool}: one call id per pair"
    );
    assert_eq!(rows[0].invocation_id, rows[1].invocation_id, "{tool}");
    assert_eq!(
        rows[1].payload["success"], true,
        "{tool}: {}",
        rows[1].payload
    );
    (rows[0].call_id, rows[0].invocation_id)
}

/// An id that is well-formed and names nothing.
fn nobody() -> String {
    format!("wc_sess_{}", "Q".repeat(22))
}

/// The handoff brief of a successful result, checked to be within its 8 KiB bound.
fn brief_of(result: &Value) -> Value {
    let brief = output(result)["handoff_brief"].clone();
    let bytes = serde_json::to_vec(&brief).unwrap().len();
    assert!(bytes <= 8192, "the brief is {bytes} bytes");
    brief
}

/// Every session event payload as text.
async fn session_events_text(db: &TestDatabase) -> String {
    let client = db.pool().get().await.unwrap();
    let mut out = String::new();
    for row in client
        .query("SELECT payload::text FROM session_events", &[])
        .await
        .unwrap()
    {
        out.push_str(&row.get::<_, String>(0));
        out.push('\n');
    }
    out
}
