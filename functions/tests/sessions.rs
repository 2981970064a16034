//! Workflow Sessions end to end, against a real database through the real router (MCP on every
//! protocol revision, the REST actions and `/api/tools/call`): the work_on_project lifecycle
//! and its refusals, the uniform recorder, read-only mode denial, concurrency across two
//! instances, ledger retention, the handoff brief, execution defaults, the forbidden
//! inferences of the session model, and redaction through storage and logs.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use wc_domain::{EventRole, Lifecycle, Mode, SessionId};

use axum::http::StatusCode;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::*;
use serde_json::{Value, json};
use uuid::Uuid;
use wc_functions::AppState;
use wc_functions::auth::{Principal, PrincipalKind, ProjectGrants, Scope, ScopeSet};
use wc_functions::config::ServerConfig;
use wc_functions::kernel::context::ToolContext;
use wc_functions::kernel::result::ToolError;
use wc_functions::kernel::spec::{Category, SessionUse, ToolMeta, ToolSpec};
use wc_functions::kernel::wrapper::WrapperMeta;
use wc_functions::kernel::{KernelConfig, ToolCall, ToolRuntime};
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

/// The output of a successful result.
#[track_caller]
fn output(v: &Value) -> &Value {
    assert_eq!(v["success"], true, "expected success: {v}");
    &v["output"]
}

/// The error kind of a failed result.
#[track_caller]
fn kind(v: &Value) -> &str {
    assert_eq!(v["success"], false, "expected a failure: {v}");
    v["error"]["kind"].as_str().expect("error.kind")
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

/// A database with projects P and Q registered, its state, and a shared key.
async fn setup() -> (TestDatabase, AppState, String) {
    let db = TestDatabase::new().await;
    register_project(&db, P).await;
    register_project(&db, Q).await;
    let st = state(&db);
    let key = full_key(&db).await;
    (db, st, key)
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

// ---------------------------------------------------------------------------------------------
// 1. Lifecycle

#[tokio::test]
async fn work_on_project_without_session_id_creates_a_fresh_unguessable_session() {
    let (db, st, key) = setup().await;
    let mut ids = BTreeSet::new();
    for round in 0..4 {
        for via in SURFACES {
            let r = call_via(
                &st,
                via,
                &key,
                "work_on_project",
                json!({ "project": P, "instruction": "add a cache to the resolver" }),
                None,
            )
            .await;
            let out = output(&r);
            let id = out["session_id"].as_str().unwrap().to_owned();
            let random = id
                .strip_prefix("wc_sess_")
                .unwrap_or_else(|| panic!("{via:?}: {id} lacks the prefix"));
            assert!(random.len() >= 22, "{via:?}: {id} is too short");
            let bytes = URL_SAFE_NO_PAD
                .decode(random)
                .unwrap_or_else(|e| panic!("{via:?}: {id} is not base64url: {e}"));
            assert!(bytes.len() >= 16, "{via:?}: {id} carries under 128 bits");
            assert!(
                ids.insert(id.clone()),
                "round {round} {via:?}: {id} repeated"
            );
            assert_eq!(out["started"], "created", "{via:?}: {out}");
            assert_eq!(out["project"], P);
            assert_eq!(out["lifecycle"], "active");
            assert_eq!(out["mode"], "normal");
            assert_eq!(out["events_observed"], 1, "{via:?}: {out}");
            assert_eq!(
                out["continuation_feedback"],
                json!({ "status": "not_applicable", "reason_code": "fresh_session" }),
                "{via:?}"
            );
            let rows = ledger(&db, &id).await;
            assert_eq!(shape(&rows), [("task_instruction", "business")], "{via:?}");
            assert_eq!(rows[0].payload["excerpt"], "add a cache to the resolver");
            let row = session_row(&db, &id).await;
            assert_eq!(
                row.root_instruction.as_ref().unwrap()["excerpt"],
                "add a cache to the resolver"
            );
        }
    }
    // Twenty ids with no shared 8-character prefix of their random part: not a counter.
    let prefixes: BTreeSet<&str> = ids.iter().map(|i| &i[8..16]).collect();
    assert_eq!(prefixes.len(), ids.len(), "{ids:?}");
    assert_eq!(workflow_totals(&db).await.0, ids.len() as i64);
}

#[tokio::test]
async fn work_on_project_with_session_id_resumes_exactly_that_session() {
    let (db, st, key) = setup().await;
    let id = start(&st, &key, P, "first: fix the parser").await;
    let _decoy = start(&st, &key, P, "a decoy session on the same project").await;
    // Some work in the first attempt.
    output(&rec(&st, &key, "runtime_status", json!({}), &id).await);
    let before = last_seq(&db, &id).await;
    assert_eq!(before, 3);

    let r = call(
        &st,
        &key,
        "work_on_project",
        json!({ "session_id": id, "instruction": "second: add tests" }),
    )
    .await;
    let out = output(&r);
    assert_eq!(out["session_id"], id.as_str());
    assert_eq!(out["started"], "resumed");
    assert_eq!(out["project"], P);
    // Its own business `started`, then the instruction.
    assert_eq!(out["events_observed"], before + 2, "{out}");
    let fb = &out["continuation_feedback"];
    assert_eq!(fb["status"], "available", "{fb}");
    let attempt = &fb["attempt"];
    assert_eq!(
        attempt["instruction"]["text"], "first: fix the parser",
        "{fb}"
    );
    assert_eq!(attempt["instruction"]["truncated"], false);
    assert_eq!(
        attempt["boundary"],
        json!({ "source": "task_instruction", "seq": 1 })
    );
    // The previous attempt: its instruction and the recorded runtime_status, not this call.
    assert_eq!(
        attempt["activity"]["tool_calls"],
        json!({ "started": 1, "finished": 1, "failed": 0, "by_tool": { "runtime_status": 1 } }),
        "{fb}"
    );
    assert_eq!(attempt["event_range"]["to_seq"], before, "{fb}");

    let rows = ledger_after(&db, &id, before).await;
    assert_eq!(
        shape(&rows),
        [
            ("tool_call_started", "business"),
            ("task_instruction", "business"),
            ("tool_call_finished", "business"),
        ]
    );
    assert_eq!(rows[1].payload["excerpt"], "second: add tests");
    assert!(
        rows.iter()
            .all(|e| e.invocation_id == rows[0].invocation_id)
    );

    // A resume over REST describes the attempt just opened.
    let r = call_via(
        &st,
        Via::Action,
        &key,
        "work_on_project",
        json!({ "session_id": id, "instruction": "third: ship it" }),
        None,
    )
    .await;
    let out = output(&r);
    assert_eq!(out["session_id"], id.as_str());
    assert_eq!(
        out["continuation_feedback"]["attempt"]["instruction"]["text"],
        "second: add tests"
    );
    let instructions: Vec<String> = ledger(&db, &id)
        .await
        .into_iter()
        .filter(|e| e.kind == "task_instruction")
        .map(|e| e.payload["excerpt"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        instructions,
        [
            "first: fix the parser",
            "second: add tests",
            "third: ship it"
        ]
    );
    // The root instruction is still the first one.
    assert_eq!(
        session_row(&db, &id).await.root_instruction.unwrap()["excerpt"],
        "first: fix the parser"
    );
    // The decoy was never touched.
    assert_eq!(last_seq(&db, &_decoy).await, 1);
}

#[tokio::test]
async fn work_on_project_refusals_change_nothing() {
    let (db, st, _) = setup().await;
    let all = &ALL_SCOPES;
    let owner =
        credential_in_group(&db, CredentialKind::SharedKey, all, &[], Some("group-a")).await;
    let same_group =
        credential_in_group(&db, CredentialKind::SharedKey, all, &[], Some("group-a")).await;
    let other_group =
        credential_in_group(&db, CredentialKind::SharedKey, all, &[], Some("group-b")).await;
    let pc_granted = credential_in_group(
        &db,
        CredentialKind::Project,
        &PROJECT_SCOPES,
        &[P],
        Some("group-a"),
    )
    .await;
    let pc_ungranted = credential_in_group(
        &db,
        CredentialKind::Project,
        &PROJECT_SCOPES,
        &[Q],
        Some("group-a"),
    )
    .await;
    let pc_other_group = credential_in_group(
        &db,
        CredentialKind::Project,
        &PROJECT_SCOPES,
        &[P],
        Some("group-b"),
    )
    .await;

    let s = start(&st, &owner, P, "the task").await;
    let finished = start(&st, &owner, P, "to be finished").await;
    output(
        &call(
            &st,
            &owner,
            "finish_coding_task",
            json!({ "session_id": finished }),
        )
        .await,
    );
    let closed = start(&st, &owner, P, "to be closed").await;
    output(
        &call(
            &st,
            &owner,
            "close_session",
            json!({ "session_id": closed }),
        )
        .await,
    );

    let resume = |id: &str| json!({ "session_id": id, "instruction": "continue" });
    let cases: Vec<(&str, &String, Value, &str)> = vec![
        (
            "unknown id",
            &owner,
            resume(&nobody()),
            "unknown_session_id",
        ),
        (
            "another authority group",
            &other_group,
            resume(&s),
            "unknown_session_id",
        ),
        (
            "another group's project credential",
            &pc_other_group,
            resume(&s),
            "unknown_session_id",
        ),
        (
            "same group, no grant for the session's project",
            &pc_ungranted,
            resume(&s),
            "unknown_session_id",
        ),
        ("finished", &owner, resume(&finished), "session_closed"),
        ("closed", &owner, resume(&closed), "session_closed"),
        (
            "explicit other project",
            &owner,
            json!({ "session_id": s, "project": Q, "instruction": "continue" }),
            "project_mismatch",
        ),
        (
            "no project, no session",
            &owner,
            json!({ "instruction": "start something" }),
            "invalid_arguments",
        ),
        (
            "unknown project",
            &owner,
            json!({ "project": "agent:local:nope", "instruction": "x" }),
            "unknown_project",
        ),
        (
            "project outside the grant",
            &pc_granted,
            json!({ "project": Q, "instruction": "x" }),
            "unknown_project",
        ),
    ];
    for via in SURFACES {
        for (what, auth, args, want) in &cases {
            let before = workflow_state(&db).await;
            let totals = workflow_totals(&db).await;
            let r = call_via(&st, via, auth, "work_on_project", args.clone(), None).await;
            assert_eq!(kind(&r), *want, "{via:?} {what}: {r}");
            match *want {
                "unknown_session_id" | "session_closed" | "project_mismatch" => {
                    assert_eq!(r["error"]["field"], "session_id", "{via:?} {what}: {r}")
                }
                "invalid_arguments" => {
                    assert_eq!(r["error"]["pointer"], "/project", "{via:?} {what}: {r}")
                }
                _ => {}
            }
            assert_eq!(
                workflow_state(&db).await,
                before,
                "{via:?} {what}: state changed"
            );
            assert_eq!(
                workflow_totals(&db).await,
                totals,
                "{via:?} {what}: rows written"
            );
        }
    }
    // The same refusals hold for reading the session.
    for auth in [&other_group, &pc_other_group, &pc_ungranted] {
        let r = call(&st, auth, "session_summary", json!({ "session_id": s })).await;
        assert_eq!(kind(&r), "unknown_session_id", "{r}");
    }

    // What is allowed: the same authority group, by shared key and by a granted project
    // credential, resumes exactly that session.
    for auth in [&same_group, &pc_granted] {
        let r = call(&st, auth, "work_on_project", resume(&s)).await;
        let out = output(&r);
        assert_eq!(
            (out["session_id"].as_str(), out["started"].as_str()),
            (Some(s.as_str()), Some("resumed"))
        );
        let r = call(&st, auth, "session_summary", json!({ "session_id": s })).await;
        assert_eq!(output(&r)["session_id"], s.as_str());
    }
    // A project credential of the group that may see the project starts sessions there.
    let r = call(
        &st,
        &pc_granted,
        "work_on_project",
        json!({ "project": P, "instruction": "x" }),
    )
    .await;
    assert_eq!(output(&r)["started"], "created");
}

#[tokio::test]
async fn start_session_creates_a_plain_session_owned_by_the_callers_authority() {
    let (db, st, _) = setup().await;
    let owner = credential_in_group(
        &db,
        CredentialKind::SharedKey,
        &ALL_SCOPES,
        &[],
        Some("group-a"),
    )
    .await;
    let same_group = credential_in_group(
        &db,
        CredentialKind::Project,
        &PROJECT_SCOPES,
        &[P],
        Some("group-a"),
    )
    .await;
    let other_group = credential_in_group(
        &db,
        CredentialKind::SharedKey,
        &ALL_SCOPES,
        &[],
        Some("group-b"),
    )
    .await;
    let mut ids = BTreeSet::new();
    for via in SURFACES {
        for mode in ["normal", "read_only"] {
            let r = call_via(
                &st,
                via,
                &owner,
                "start_session",
                json!({ "project": P, "instruction": "add a cache", "mode": mode }),
                None,
            )
            .await;
            let out = output(&r);
            let id = out["session_id"].as_str().unwrap().to_owned();
            assert!(id.starts_with("wc_sess_"), "{via:?}: {id}");
            assert!(ids.insert(id.clone()), "{via:?}: {id} repeated");
            assert_eq!(out["project"], P);
            assert_eq!(out["mode"], mode, "{via:?}: {out}");
            assert_eq!(out["lifecycle"], "active");
            assert_eq!(out["events_observed"], 1, "{via:?}: {out}");
            // A plain create: no startup projection.
            for projected in [
                "started",
                "continuation_feedback",
                "workflow_guidance",
                "project_instructions",
            ] {
                assert!(
                    out.get(projected).is_none(),
                    "{via:?}: {projected} in {out}"
                );
            }
            let rows = ledger(&db, &id).await;
            assert_eq!(shape(&rows), [("task_instruction", "business")], "{via:?}");
            assert_eq!(rows[0].tool_name.as_deref(), Some("start_session"));
            assert_eq!(rows[0].payload["excerpt"], "add a cache");
            let row = session_row(&db, &id).await;
            assert_eq!(row.mode.as_str(), mode);
            assert_eq!(
                row.root_instruction.as_ref().unwrap()["excerpt"],
                "add a cache"
            );
        }
    }
    // The session belongs to the caller's authority group, exactly as a work_on_project
    // start: the group resumes and reads it, another group cannot see it.
    let id = ids.iter().next().unwrap().clone();
    let r = call(
        &st,
        &same_group,
        "work_on_project",
        json!({ "session_id": id, "instruction": "continue" }),
    )
    .await;
    assert_eq!(output(&r)["started"], "resumed");
    let r = call(
        &st,
        &other_group,
        "session_summary",
        json!({ "session_id": id }),
    )
    .await;
    assert_eq!(kind(&r), "unknown_session_id", "{r}");
    let r = call(
        &st,
        &other_group,
        "work_on_project",
        json!({ "session_id": id, "instruction": "steal" }),
    )
    .await;
    assert_eq!(kind(&r), "unknown_session_id", "{r}");
}

#[tokio::test]
async fn start_session_refuses_what_work_on_project_refuses_and_changes_nothing() {
    let (db, st, _) = setup().await;
    let owner = credential_in_group(
        &db,
        CredentialKind::SharedKey,
        &ALL_SCOPES,
        &[],
        Some("group-a"),
    )
    .await;
    let pc_granted = credential_in_group(
        &db,
        CredentialKind::Project,
        &PROJECT_SCOPES,
        &[P],
        Some("group-a"),
    )
    .await;
    let read_only_key = credential_in_group(
        &db,
        CredentialKind::SharedKey,
        &["project:read"],
        &[],
        Some("group-a"),
    )
    .await;
    let cases: Vec<(&str, &String, Value, &str)> = vec![
        (
            "unknown project",
            &owner,
            json!({ "project": "agent:local:nope", "instruction": "x" }),
            "unknown_project",
        ),
        (
            "project outside the grant",
            &pc_granted,
            json!({ "project": Q, "instruction": "x" }),
            "unknown_project",
        ),
        (
            "no project",
            &owner,
            json!({ "instruction": "x" }),
            "invalid_arguments",
        ),
        (
            "no instruction",
            &owner,
            json!({ "project": P }),
            "invalid_arguments",
        ),
        (
            "an unknown mode",
            &owner,
            json!({ "project": P, "instruction": "x", "mode": "inspect" }),
            "invalid_arguments",
        ),
        (
            "a session to resume",
            &owner,
            json!({ "project": P, "instruction": "x", "session_id": nobody() }),
            "invalid_arguments",
        ),
        (
            "without project:write",
            &read_only_key,
            json!({ "project": P, "instruction": "x" }),
            "insufficient_scope",
        ),
    ];
    for via in SURFACES {
        for (what, auth, args, want) in &cases {
            // work_on_project refuses the same start the same way (a resume is its own).
            if *what != "a session to resume" {
                let before = workflow_totals(&db).await;
                let w = call_via(&st, via, auth, "work_on_project", args.clone(), None).await;
                assert_eq!(kind(&w), *want, "{via:?} work_on_project {what}: {w}");
                assert_eq!(workflow_totals(&db).await, before, "{via:?} {what}");
            }
            let before = workflow_state(&db).await;
            let totals = workflow_totals(&db).await;
            let r = call_via(&st, via, auth, "start_session", args.clone(), None).await;
            assert_eq!(kind(&r), *want, "{via:?} {what}: {r}");
            if *want == "unknown_project" {
                assert_eq!(
                    r["error"]["project"], args["project"],
                    "{via:?} {what}: {r}"
                );
            }
            assert_eq!(
                workflow_state(&db).await,
                before,
                "{via:?} {what}: state changed"
            );
            assert_eq!(
                workflow_totals(&db).await,
                totals,
                "{via:?} {what}: rows written"
            );
        }
    }
}

#[tokio::test]
async fn start_session_may_be_recorded_in_a_read_only_session() {
    let (db, st, key) = setup().await;
    let ro = start_mode(&st, &key, P, "watch", "read_only").await;
    let before = last_seq(&db, &ro).await;
    // Creating a session changes no project: a read-only recorder takes it, as it takes a
    // work_on_project start.
    for tool in ["start_session", "work_on_project"] {
        let r = rec(
            &st,
            &key,
            tool,
            json!({ "project": P, "instruction": "a sibling", "mode": "read_only" }),
            &ro,
        )
        .await;
        let out = output(&r);
        assert_eq!(out["mode"], "read_only", "{tool}: {out}");
        assert_ne!(out["session_id"], json!(ro));
    }
    let rows = ledger_after(&db, &ro, before).await;
    one_recorder_pair(&rows[..2], "start_session");
    one_recorder_pair(&rows[2..], "work_on_project");
}

// ---------------------------------------------------------------------------------------------
// 2. The recorder

/// Arguments that make `tool` succeed, creating (unrecorded) whatever session it targets, and
/// that business session.
async fn working_args(st: &AppState, key: &str, tool: &str) -> (Value, Option<String>) {
    let fresh = |i: &'static str| start(st, key, P, i);
    match tool {
        "list_tools" | "runtime_status" | "list_projects" => (json!({}), None),
        "work_on_project" | "start_session" => (
            json!({ "project": P, "instruction": "recorded start" }),
            None,
        ),
        "session_summary" | "session_handoff_summary" => {
            let c = fresh("read me").await;
            (json!({ "session_id": c }), Some(c))
        }
        "update_session_context" => {
            let c = fresh("configure me").await;
            (json!({ "session_id": c, "default_shell": "bash" }), Some(c))
        }
        "finish_coding_task" => {
            let c = fresh("finish me").await;
            (json!({ "session_id": c, "summary": "done" }), Some(c))
        }
        "close_session" => {
            let c = fresh("close me").await;
            (json!({ "session_id": c }), Some(c))
        }
        "run_process" => (json!({ "project": P, "argv": ["true"] }), None),
        "run_shell" => {
            let c = fresh("run in me").await;
            (json!({ "session_id": c, "command": "true" }), Some(c))
        }
        "run_script" => (json!({ "project": P, "script": "exit 0" }), None),
        "run_job" => (json!({ "project": P, "argv": ["true"] }), None),
        "job_status" | "job_log" | "stop_job" => {
            let job = call(
                st,
                key,
                "run_job",
                json!({ "project": P, "argv": ["true"] }),
            )
            .await;
            (json!({ "job_id": output(&job)["job_id"] }), None)
        }
        "list_jobs" | "list_runners" => (json!({}), None),
        "post_session_message" => {
            let c = fresh("board").await;
            (
                json!({ "session_id": c, "kind": "note", "body": "recorded post" }),
                Some(c),
            )
        }
        "list_session_messages" | "observe_session_messages" => {
            let c = fresh("board").await;
            (json!({ "session_id": c }), Some(c))
        }
        "resolve_session_message" | "get_session_assignment" | "complete_session_message" => {
            let c = fresh("board").await;
            let todo = call(
                st,
                key,
                "post_session_message",
                json!({ "session_id": c, "kind": "todo", "body": "work" }),
            )
            .await;
            let todo = output(&todo)["message_id"].clone();
            let mut args = json!({ "session_id": c, "message_id": todo });
            if tool == "complete_session_message" {
                let a = call(st, key, "get_session_assignment", args.clone()).await;
                args["expected_assignment_fence"] = output(&a)["assignment_fence"].clone();
                args["completion_key"] = json!("recorded");
                args["answer"] = json!("done");
            }
            (args, Some(c))
        }
        other => panic!(
            "{other} is model-visible but this test has no arguments for it: add them, so its recording is checked"
        ),
    }
}

/// The tool names a surface lists.
async fn listed(st: &AppState, via: Via, key: &str) -> Vec<String> {
    match via {
        Via::Mcp(version) => tool_names(tools_list(st, version, Some(key)).await.result()),
        Via::Action | Via::ToolsCall => {
            let r = rest(st, "/api/tools/list", Some(key), json!({})).await;
            output(&r.body)["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect()
        }
    }
}

/// The tools whose calls land in the session their `session_id` names (they act on the
/// project in it); for every other tool `session_id` is a target.
const WORK_IN_THEIR_SESSION: [&str; 5] = [
    "run_shell",
    "run_process",
    "run_script",
    "run_job",
    "work_on_project",
];

#[test]
fn each_tool_declares_whether_its_calls_land_in_its_business_session() {
    use wc_functions::kernel::spec::BusinessPair;
    for spec in wc_functions::tools::all() {
        let name = spec.meta.name;
        let want = if WORK_IN_THEIR_SESSION.contains(&name) {
            BusinessPair::Always
        } else if name == "session_handoff_summary" {
            BusinessPair::UnlessRecorded
        } else {
            BusinessPair::Never
        };
        assert_eq!(spec.business_pair, want, "{name}");
    }
}

#[tokio::test]
async fn every_listed_tool_records_exactly_one_recorder_pair_on_every_surface() {
    let (db, st, key) = setup().await;
    let root = tempfile::tempdir().unwrap();
    let _runner = TestRunner::start(&db, &st, "local", &[("alpha", root.path())]).await;
    for via in SURFACES {
        let w = start(&st, &key, P, "the recording session").await;
        let names = listed(&st, via, &key).await;
        for required in [
            "session_handoff_summary",
            "work_on_project",
            "start_session",
            "runtime_status",
        ] {
            assert!(names.iter().any(|n| n == required), "{via:?}: {names:?}");
        }
        for tool in &names {
            let (args, business) = working_args(&st, &key, tool).await;
            let w_before = last_seq(&db, &w).await;
            let b_before = match &business {
                Some(c) => last_seq(&db, c).await,
                None => 0,
            };
            let sessions_before = workflow_totals(&db).await.0;
            let r = call_via(&st, via, &key, tool, args, Some(&w)).await;
            let out = output(&r).clone();

            // W: exactly one recorder pair, nothing else.
            assert_eq!(last_seq(&db, &w).await, w_before + 2, "{via:?} {tool}");
            let w_rows = ledger_after(&db, &w, w_before).await;
            let (w_call, invocation) = one_recorder_pair(&w_rows, tool);

            // The business session: a tool that works in it (execution) keeps exactly one
            // business pair of the same invocation; for every other tool session_id is a
            // target, which holds the tool's own effect (if any) and no pair.
            if let Some(c) = &business {
                let c_rows = ledger_after(&db, c, b_before).await;
                assert!(
                    c_rows
                        .iter()
                        .all(|e| e.invocation_id == invocation && e.role == "business"),
                    "{via:?} {tool}: {c_rows:#?}"
                );
                let pair: Vec<&LedgerRow> = c_rows
                    .iter()
                    .filter(|e| e.kind.starts_with("tool_call_"))
                    .collect();
                if WORK_IN_THEIR_SESSION.contains(&tool.as_str()) {
                    assert_eq!(pair.len(), 2, "{via:?} {tool}: {c_rows:#?}");
                    assert_eq!(pair[0].kind, "tool_call_started");
                    assert_eq!(pair[1].kind, "tool_call_finished");
                    assert_eq!(pair[0].call_id, pair[1].call_id);
                    assert_ne!(
                        pair[0].call_id, w_call,
                        "{via:?} {tool}: pairs share a call id"
                    );
                } else {
                    assert!(pair.is_empty(), "{via:?} {tool}: {c_rows:#?}");
                }
            }
            // work_on_project and start_session made a new session whose only event is its
            // instruction.
            if tool == "work_on_project" || tool == "start_session" {
                let n = out["session_id"].as_str().unwrap();
                let rows = ledger(&db, n).await;
                assert_eq!(shape(&rows), [("task_instruction", "business")], "{via:?}");
                assert_eq!(rows[0].invocation_id, invocation);
                assert_eq!(workflow_totals(&db).await.0, sessions_before + 1);
            }
        }
    }
}

#[tokio::test]
async fn a_recorder_and_a_business_session_keep_their_own_pairs_of_one_invocation() {
    let (db, st, key) = setup().await;
    let root = tempfile::tempdir().unwrap();
    let _runner = TestRunner::start(&db, &st, "local", &[("alpha", root.path())]).await;
    let w = start(&st, &key, P, "recorder").await;
    for (tool, extra, own) in [
        ("run_shell", json!({ "command": "true" }), None),
        (
            "work_on_project",
            json!({ "instruction": "go on" }),
            Some("task_instruction"),
        ),
    ] {
        let c = start(&st, &key, P, "business").await;
        let mut args = extra.clone();
        args["session_id"] = json!(c);
        let (w0, c0) = (last_seq(&db, &w).await, last_seq(&db, &c).await);
        output(&rec(&st, &key, tool, args, &w).await);
        let w_rows = ledger_after(&db, &w, w0).await;
        let c_rows = ledger_after(&db, &c, c0).await;
        let (w_call, invocation) = one_recorder_pair(&w_rows, tool);
        let c_pair: Vec<&LedgerRow> = c_rows
            .iter()
            .filter(|e| e.kind.starts_with("tool_call_"))
            .collect();
        assert_eq!(
            c_pair
                .iter()
                .map(|e| (e.kind.as_str(), e.role.as_str()))
                .collect::<Vec<_>>(),
            [
                ("tool_call_started", "business"),
                ("tool_call_finished", "business")
            ],
            "{tool}: {c_rows:#?}"
        );
        assert_eq!(c_pair[0].call_id, c_pair[1].call_id, "{tool}");
        assert_ne!(c_pair[0].call_id, w_call, "{tool}");
        if let Some(own) = own {
            assert!(c_rows.iter().any(|e| e.kind == own), "{tool}: {c_rows:#?}");
        }
        // Four call events, two call ids, one invocation.
        let all: Vec<&LedgerRow> = w_rows.iter().chain(c_pair.iter().copied()).collect();
        assert_eq!(all.len(), 4);
        assert_eq!(
            all.iter().map(|e| e.call_id).collect::<BTreeSet<_>>().len(),
            2
        );
        assert!(all.iter().all(|e| e.invocation_id == invocation), "{tool}");
        assert!(
            c_rows.iter().all(|e| e.role == "business"),
            "{tool}: {c_rows:#?}"
        );
    }
}

#[tokio::test]
async fn a_session_tool_is_recorded_only_in_its_recorder_and_its_target_keeps_only_the_effect() {
    let (db, st, key) = setup().await;
    let w = start(&st, &key, P, "recorder").await;
    for (tool, extra, own) in [
        ("session_summary", json!({}), None),
        (
            "session_handoff_summary",
            json!({ "diagnostic": true }),
            None,
        ),
        ("list_session_messages", json!({}), None),
        ("observe_session_messages", json!({}), None),
        (
            "update_session_context",
            json!({ "default_cwd": "src" }),
            Some("session_context_updated"),
        ),
        (
            "post_session_message",
            json!({ "kind": "note", "body": "hello" }),
            Some("message_posted"),
        ),
        (
            "finish_coding_task",
            json!({ "summary": "done" }),
            Some("session_finished"),
        ),
        ("close_session", json!({}), Some("session_closed")),
    ] {
        for recorded in [true, false] {
            let c = start(&st, &key, P, "target").await;
            let mut args = extra.clone();
            args["session_id"] = json!(c);
            let (w0, c0) = (last_seq(&db, &w).await, last_seq(&db, &c).await);
            let r = if recorded {
                rec(&st, &key, tool, args, &w).await
            } else {
                call(&st, &key, tool, args).await
            };
            output(&r);
            let w_rows = ledger_after(&db, &w, w0).await;
            let c_rows = ledger_after(&db, &c, c0).await;
            // The target holds the tool's effect and nothing else; a handoff named no
            // recorder, so it is recorded in its session instead (its compatibility fallback).
            let want: Vec<(&str, &str)> = if !recorded && tool == "session_handoff_summary" {
                vec![
                    ("tool_call_started", "business"),
                    ("tool_call_finished", "business"),
                ]
            } else {
                own.map(|k| (k, "business")).into_iter().collect()
            };
            assert_eq!(
                shape(&c_rows),
                want,
                "{tool} recorded {recorded}: {c_rows:#?}"
            );
            if recorded {
                let (_, invocation) = one_recorder_pair(&w_rows, tool);
                assert!(
                    c_rows.iter().all(|e| e.invocation_id == invocation),
                    "{tool}: {c_rows:#?}"
                );
            } else {
                assert!(w_rows.is_empty(), "{tool}: {w_rows:#?}");
            }
        }
    }
}

#[tokio::test]
async fn a_recorder_that_is_the_business_session_nests_the_business_pair() {
    let (db, st, key) = setup().await;
    let s = |kind: &'static str, role: &'static str| (kind, role);
    let opened = [
        s("tool_call_started", "recorder"),
        s("tool_call_started", "business"),
    ];
    let closed = [
        s("tool_call_finished", "business"),
        s("tool_call_finished", "recorder"),
    ];
    // (tool, extra arguments, its own effect, whether it works in its session)
    let cases: Vec<(&str, Value, Option<&str>, bool)> = vec![
        ("session_summary", json!({}), None, false),
        ("session_handoff_summary", json!({}), None, false),
        (
            "update_session_context",
            json!({ "default_shell": "sh" }),
            Some("session_context_updated"),
            false,
        ),
        (
            "work_on_project",
            json!({ "instruction": "go on" }),
            Some("task_instruction"),
            true,
        ),
        (
            "finish_coding_task",
            json!({ "summary": "ok" }),
            Some("session_finished"),
            false,
        ),
        ("close_session", json!({}), Some("session_closed"), false),
    ];
    for (tool, extra, own, works_in_it) in cases {
        let c = start(&st, &key, P, "self-recorded").await;
        let mut args = extra;
        args["session_id"] = json!(c);
        let before = last_seq(&db, &c).await;
        output(&rec(&st, &key, tool, args, &c).await);
        let rows = ledger_after(&db, &c, before).await;
        // A session tool's target is recorded as the recorder only: its pair wraps the
        // effect. A tool that works in the session nests its business pair in the recorder's.
        let (opened, closed) = if works_in_it {
            (opened.to_vec(), closed.to_vec())
        } else {
            (opened[..1].to_vec(), closed[1..].to_vec())
        };
        let mut want: Vec<(&str, &str)> = opened;
        if let Some(own) = own {
            want.push((own, "business"));
        }
        want.extend(closed);
        assert_eq!(shape(&rows), want, "{tool}: {rows:#?}");
        let invocation = rows[0].invocation_id;
        assert!(rows.iter().all(|e| e.invocation_id == invocation), "{tool}");
        let rec_ids: BTreeSet<Uuid> = rows
            .iter()
            .filter(|e| e.role == "recorder" && e.kind.starts_with("tool_call_"))
            .map(|e| e.call_id)
            .collect();
        let bus_ids: BTreeSet<Uuid> = rows
            .iter()
            .filter(|e| e.role == "business" && e.kind.starts_with("tool_call_"))
            .map(|e| e.call_id)
            .collect();
        assert_eq!(
            (rec_ids.len(), bus_ids.len()),
            (1, usize::from(works_in_it)),
            "{tool}"
        );
        assert!(rec_ids.is_disjoint(&bus_ids), "{tool}");
        assert!(
            rows.iter().all(|e| e.tool_name.as_deref() == Some(tool)),
            "{tool}: {rows:#?}"
        );
    }
}

#[tokio::test]
async fn recorder_refusals_write_nothing_anywhere() {
    let (db, st, key) = setup().await;
    let other = credential_in_group(
        &db,
        CredentialKind::SharedKey,
        &ALL_SCOPES,
        &[],
        Some("elsewhere"),
    )
    .await;
    let w_p = start(&st, &key, P, "recorder on P").await;
    let w_q = start(&st, &key, Q, "recorder on Q").await;
    let c_p = start(&st, &key, P, "business on P").await;
    let theirs = start(&st, &other, P, "someone else's").await;
    let finished = start(&st, &key, P, "finished").await;
    output(
        &call(
            &st,
            &key,
            "finish_coding_task",
            json!({ "session_id": finished }),
        )
        .await,
    );
    let closed = start(&st, &key, P, "closed").await;
    output(&call(&st, &key, "close_session", json!({ "session_id": closed })).await);

    let cases: Vec<(&str, &str, Value, String, &str)> = vec![
        (
            "unknown",
            "runtime_status",
            json!({}),
            nobody(),
            "unknown_session_id",
        ),
        (
            "another group's",
            "list_projects",
            json!({}),
            theirs.clone(),
            "unknown_session_id",
        ),
        (
            "finished",
            "runtime_status",
            json!({}),
            finished.clone(),
            "session_closed",
        ),
        (
            "closed",
            "session_summary",
            json!({ "session_id": c_p }),
            closed.clone(),
            "session_closed",
        ),
        (
            "other project than work_on_project's",
            "work_on_project",
            json!({ "project": P, "instruction": "x" }),
            w_q.clone(),
            "project_mismatch",
        ),
        (
            "other project than the business session's",
            "update_session_context",
            json!({ "session_id": c_p, "default_cwd": "src" }),
            w_q.clone(),
            "project_mismatch",
        ),
        (
            "other project than the resumed session's",
            "work_on_project",
            json!({ "session_id": c_p, "instruction": "x" }),
            w_q.clone(),
            "project_mismatch",
        ),
        (
            "other project than the read session's",
            "session_summary",
            json!({ "session_id": c_p }),
            w_q.clone(),
            "project_mismatch",
        ),
    ];
    for via in SURFACES {
        for (what, tool, args, w, want) in &cases {
            let before = workflow_state(&db).await;
            let totals = workflow_totals(&db).await;
            let r = call_via(&st, via, &key, tool, args.clone(), Some(w)).await;
            assert_eq!(kind(&r), *want, "{via:?} {what} recorder on {tool}: {r}");
            assert_eq!(
                r["error"]["field"], "recording_session_id",
                "{via:?} {what}: {r}"
            );
            assert_eq!(
                workflow_state(&db).await,
                before,
                "{via:?} {what}: state changed"
            );
            assert_eq!(
                workflow_totals(&db).await,
                totals,
                "{via:?} {what}: rows written"
            );
        }
    }
    // The matching recorder works for the same calls.
    output(
        &rec(
            &st,
            &key,
            "work_on_project",
            json!({ "project": P, "instruction": "x" }),
            &w_p,
        )
        .await,
    );
    output(
        &rec(
            &st,
            &key,
            "update_session_context",
            json!({ "session_id": c_p, "default_cwd": "src" }),
            &w_p,
        )
        .await,
    );
}

// ---------------------------------------------------------------------------------------------
// 3. Read-only sessions

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct TouchArgs {
    /// The project.
    #[allow(dead_code)]
    project: Option<String>,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct TouchSessionArgs {
    /// The session.
    #[allow(dead_code)]
    session_id: String,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Touched {
    touched: bool,
}

fn touch_meta(name: &'static str) -> ToolMeta {
    ToolMeta {
        name,
        title: "Touch the project",
        description: "Test-only tool that changes the project.",
        category: Category::Discovery,
        scopes: &[Scope::ProjectWrite],
        read_only: false,
        consequential: true,
        rest_operation: false,
    }
}

/// The real tools plus two project-changing test tools that count their runs.
fn runtime_with_touch(runs: Arc<AtomicUsize>) -> ToolRuntime {
    let mut specs = wc_functions::tools::all();
    let r = runs.clone();
    specs.push(ToolSpec::new(
        touch_meta("touch_project"),
        move |_ctx: ToolContext, _args: TouchArgs| {
            let r = r.clone();
            async move {
                r.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ToolError>(Touched { touched: true })
            }
        },
    ));
    let r = runs;
    specs.push(
        ToolSpec::new(
            touch_meta("touch_session_project"),
            move |_ctx: ToolContext, _args: TouchSessionArgs| {
                let r = r.clone();
                async move {
                    r.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, ToolError>(Touched { touched: true })
                }
            },
        )
        .with_session(SessionUse::Works),
    );
    ToolRuntime::new(specs, KernelConfig::default())
}

#[tokio::test]
async fn a_read_only_session_refuses_project_changing_tools_but_manages_itself() {
    let db = TestDatabase::new().await;
    register_project(&db, P).await;
    let key = credential_in_group(
        &db,
        CredentialKind::SharedKey,
        &ALL_SCOPES,
        &[],
        Some("mode-group"),
    )
    .await;
    let runs = Arc::new(AtomicUsize::new(0));
    let mut st = state(&db);
    st.runtime = Arc::new(runtime_with_touch(runs.clone()));
    let principal = Arc::new(Principal {
        kind: PrincipalKind::SharedKey,
        credential_id: Uuid::nil(),
        authority_group: "mode-group".into(),
        scopes: ScopeSet::all(),
        projects: ProjectGrants::All,
        oauth: None,
    });
    let invoke = |name: &str, arguments: Value, recording: Option<&str>| {
        let st = st.clone();
        let call = ToolCall {
            name: name.to_owned(),
            arguments,
            wrapper: WrapperMeta {
                recording_session_id: recording.map(|r| SessionId::parse(r).unwrap()),
                ..Default::default()
            },
            principal: principal.clone(),
            window: None,
        };
        async move {
            st.runtime
                .invoke(&st, call)
                .await
                .unwrap()
                .result
                .to_value()
        }
    };

    let ro = start_mode(&st, &key, P, "look, don't touch", "read_only").await;
    let normal = start(&st, &key, P, "touch away").await;
    assert_eq!(session_row(&db, &ro).await.mode, Mode::ReadOnly);

    // The kernel refuses, naming the field, before the tool runs and before any write.
    let totals = workflow_totals(&db).await;
    let r = invoke("touch_project", json!({ "project": P }), Some(&ro)).await;
    assert_eq!(kind(&r), "mode_denied", "{r}");
    assert_eq!(r["error"]["field"], "recording_session_id");
    let r = invoke("touch_session_project", json!({ "session_id": ro }), None).await;
    assert_eq!(kind(&r), "mode_denied", "{r}");
    assert_eq!(r["error"]["field"], "session_id");
    // Through the router too (the runtime is the state's).
    let r = call_via(
        &st,
        Via::Mcp(MODERN),
        &key,
        "touch_project",
        json!({}),
        Some(&ro),
    )
    .await;
    assert_eq!(kind(&r), "mode_denied", "{r}");
    let r = call_via(
        &st,
        Via::ToolsCall,
        &key,
        "touch_project",
        json!({}),
        Some(&ro),
    )
    .await;
    assert_eq!(kind(&r), "mode_denied", "{r}");
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the tool ran");
    assert_eq!(workflow_totals(&db).await, totals, "a denied call wrote");

    // The same calls in a normal session run and are recorded.
    let before = last_seq(&db, &normal).await;
    output(&invoke("touch_project", json!({ "project": P }), Some(&normal)).await);
    output(
        &invoke(
            "touch_session_project",
            json!({ "session_id": normal }),
            None,
        )
        .await,
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let rows = ledger_after(&db, &normal, before).await;
    assert_eq!(
        shape(&rows),
        [
            ("tool_call_started", "recorder"),
            ("tool_call_finished", "recorder"),
            ("tool_call_started", "business"),
            ("tool_call_finished", "business"),
        ]
    );
    // With no session at all, it runs unrecorded.
    output(&invoke("touch_project", json!({}), None).await);
    assert_eq!(runs.load(Ordering::SeqCst), 3);

    // Read-only tools and session management still work in the read-only session.
    output(&invoke("runtime_status", json!({}), Some(&ro)).await);
    let r = invoke(
        "update_session_context",
        json!({ "session_id": ro, "default_cwd": "src" }),
        Some(&ro),
    )
    .await;
    assert_eq!(output(&r)["execution_context"]["default_cwd"], "src");
    output(
        &invoke(
            "session_handoff_summary",
            json!({ "session_id": ro }),
            Some(&ro),
        )
        .await,
    );
    let r = invoke(
        "finish_coding_task",
        json!({ "session_id": ro, "summary": "looked" }),
        None,
    )
    .await;
    assert_eq!(output(&r)["lifecycle"], "finished");
    let ro2 = start_mode(&st, &key, P, "another look", "read_only").await;
    let r = invoke("close_session", json!({ "session_id": ro2 }), Some(&ro2)).await;
    assert_eq!(output(&r)["lifecycle"], "closed");
    assert_eq!(runs.load(Ordering::SeqCst), 3);

    // An explicit resume to normal mode lifts the refusal.
    let ro3 = start_mode(&st, &key, P, "upgrade me", "read_only").await;
    assert_eq!(
        kind(&invoke("touch_project", json!({}), Some(&ro3)).await),
        "mode_denied"
    );
    let r = call(
        &st,
        &key,
        "work_on_project",
        json!({ "session_id": ro3, "instruction": "now change it", "mode": "normal" }),
    )
    .await;
    assert_eq!(output(&r)["mode"], "normal");
    output(&invoke("touch_project", json!({}), Some(&ro3)).await);
    assert_eq!(runs.load(Ordering::SeqCst), 4);
}

// ---------------------------------------------------------------------------------------------
// 4. Concurrency across instances

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_two_concurrent_recorded_calls_on_two_instances_land_exactly_once() {
    let (db, st, key) = setup().await;
    let a = serve(state(&db)).await;
    let b = serve(second_instance(&db, ServerConfig::default())).await;
    let w = start(&st, &key, P, "concurrent recorder").await;
    let c = start(&st, &key, P, "read by summaries").await;
    let (w0, c0) = (last_seq(&db, &w).await, last_seq(&db, &c).await);
    let client = wc_e2e::client::Client::new();
    let mut tasks = tokio::task::JoinSet::new();
    let mut summaries = 0;
    for i in 0..32usize {
        let base = if i % 2 == 0 { a.clone() } else { b.clone() };
        let tool = ["runtime_status", "list_tools", "session_summary"][i % 3];
        if tool == "session_summary" {
            summaries += 1;
        }
        let (client, key, w, c) = (client.clone(), key.clone(), w.clone(), c.clone());
        tasks.spawn(async move {
            let mut args = match tool {
                "session_summary" => json!({ "session_id": c }),
                _ => json!({}),
            };
            let auth = format!("Bearer {key}");
            let (reply, mcp) = if i % 4 == 3 {
                let body = json!({ "tool": tool, "arguments": args, "recording_session_id": w });
                let r = client
                    .send(
                        axum::http::Method::POST,
                        &format!("{base}/api/tools/call"),
                        &[
                            ("content-type", "application/json"),
                            ("authorization", auth.as_str()),
                        ],
                        serde_json::to_vec(&body).unwrap(),
                    )
                    .await
                    .unwrap();
                (r, false)
            } else {
                let version = VERSIONS[i % 3];
                args["recording_session_id"] = json!(w);
                let body = rpc(
                    version,
                    i as i64,
                    "tools/call",
                    json!({ "name": tool, "arguments": args }),
                );
                let mut headers = vec![
                    ("content-type", "application/json"),
                    ("accept", "application/json, text/event-stream"),
                    ("mcp-protocol-version", version),
                    ("authorization", auth.as_str()),
                ];
                if version == MODERN {
                    headers.push(("mcp-method", "tools/call"));
                    headers.push(("mcp-name", tool));
                }
                let r = client
                    .send(
                        axum::http::Method::POST,
                        &format!("{base}/mcp"),
                        &headers,
                        serde_json::to_vec(&body).unwrap(),
                    )
                    .await
                    .unwrap();
                (r, true)
            };
            assert_eq!(
                reply.status,
                200,
                "call {i}: {}",
                String::from_utf8_lossy(&reply.body)
            );
            let body = reply.json();
            let result = if mcp {
                body["result"]["structuredContent"].clone()
            } else {
                body
            };
            assert_eq!(result["success"], true, "call {i} ({tool}): {result}");
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    let row = session_row(&db, &w).await;
    assert_eq!(row.events_observed, w0 + 64);
    let rows = ledger(&db, &w).await;
    assert_eq!(
        rows.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=w0 + 64).collect::<Vec<_>>(),
        "seqs are not gap-free"
    );
    let mut by_call: BTreeMap<Uuid, Vec<&LedgerRow>> = BTreeMap::new();
    for e in rows.iter().filter(|e| e.seq > w0) {
        by_call.entry(e.call_id).or_default().push(e);
    }
    assert_eq!(by_call.len(), 32);
    for (call_id, pair) in &by_call {
        let kinds: Vec<(&str, &str)> = pair
            .iter()
            .map(|e| (e.kind.as_str(), e.role.as_str()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("tool_call_started", "recorder"),
                ("tool_call_finished", "recorder")
            ],
            "{call_id}"
        );
        assert_eq!(pair[0].invocation_id, pair[1].invocation_id);
    }
    let invocations: BTreeSet<Uuid> = by_call.values().map(|p| p[0].invocation_id).collect();
    assert_eq!(invocations.len(), 32);
    let mut tools: BTreeMap<&str, usize> = BTreeMap::new();
    for pair in by_call.values() {
        *tools
            .entry(pair[0].tool_name.as_deref().unwrap())
            .or_default() += 1;
    }
    assert_eq!(tools.get("session_summary"), Some(&summaries));
    // The read session was each summary's target, not its recorder: it took nothing.
    assert!(summaries > 0);
    let c_rows = ledger_after(&db, &c, c0).await;
    assert!(c_rows.is_empty(), "{c_rows:#?}");
}

// ---------------------------------------------------------------------------------------------
// 5. Retention

#[tokio::test]
async fn the_ledger_keeps_the_newest_two_thousand_events_and_counts_the_retained_ones() {
    let (db, st, key) = setup().await;
    let id = start(&st, &key, P, "a very long task").await;
    let mut left = 2099usize;
    let mut n = 0;
    while left > 0 {
        let batch = left.min(100);
        let events: Vec<NewEvent> = (0..batch)
            .map(|i| NewEvent {
                kind: "filler".into(),
                call_id: Uuid::now_v7(),
                invocation_id: Uuid::now_v7(),
                role: EventRole::Business,
                tool_name: None,
                payload: json!({ "n": n + i }),
            })
            .collect();
        let outcome = sessions::mutate(db.pool(), &SessionId::parse(&id).unwrap(), move |_| {
            Decision::Write(SessionChange::default(), events.clone(), ())
        })
        .await
        .unwrap();
        assert!(matches!(outcome, wc_store::cas::CasOutcome::Applied { .. }));
        left -= batch;
        n += batch;
    }
    let stored = ledger(&db, &id).await;
    assert_eq!(stored.len(), 2000);
    assert_eq!((stored[0].seq, stored[1999].seq), (101, 2100));

    let r = call(&st, &key, "session_summary", json!({ "session_id": id })).await;
    let out = output(&r);
    assert_eq!(out["events_observed"], 2100, "{}", out["events_observed"]);
    assert_eq!(out["retention_truncated"], true);
    assert_eq!(out["retained_from_seq"], 101);
    // Counts by kind describe the retained ledger (the opening instruction and the oldest
    // fillers are gone), while events_observed stays cumulative.
    assert_eq!(
        out["counts"],
        json!({ "filler": 2000 }),
        "{}",
        out["counts"]
    );
    assert_eq!(out["counts"], retained_counts(&db, &id).await);
    assert_eq!(out["returned"], 50);
    let seqs: Vec<i64> = out["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(
        seqs,
        (2051..=2100).rev().collect::<Vec<_>>(),
        "newest first"
    );

    // An unrecorded summary appended nothing; one recorded in the session itself appends its
    // recorder pair after the read (2101, 2102), pushing two fillers out of the window.
    let r = rec(
        &st,
        &key,
        "session_summary",
        json!({ "session_id": id, "limit": 200 }),
        &id,
    )
    .await;
    let out = output(&r);
    assert_eq!(out["events_observed"], 2100);
    assert_eq!(out["returned"], 200);
    let seqs: Vec<i64> = out["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, (1901..=2100).rev().collect::<Vec<_>>());
    let out =
        output(&call(&st, &key, "session_summary", json!({ "session_id": id })).await).clone();
    assert_eq!(out["events_observed"], 2102);
    assert_eq!(out["retained_from_seq"], 103);
    assert_eq!(
        out["counts"],
        json!({ "filler": 1998, "tool_call_started": 1, "tool_call_finished": 1 })
    );
    assert_eq!(out["counts"], retained_counts(&db, &id).await);
    assert_eq!(ledger(&db, &id).await.len(), 2000);

    // Out-of-range limits are refused by the schema, before anything is recorded.
    let observed = last_seq(&db, &id).await;
    assert_eq!(observed, 2102);
    for limit in [201, 0] {
        for via in SURFACES {
            let r = call_via(
                &st,
                via,
                &key,
                "session_summary",
                json!({ "session_id": id, "limit": limit }),
                None,
            )
            .await;
            assert_eq!(kind(&r), "invalid_arguments", "{via:?} limit {limit}: {r}");
            assert_eq!(r["error"]["pointer"], "/limit", "{r}");
        }
    }
    assert_eq!(last_seq(&db, &id).await, observed);

    // The handoff still has the root instruction (kept on the session row), but the attempt's
    // opening instruction was evicted, and the brief says so.
    let r = call(
        &st,
        &key,
        "session_handoff_summary",
        json!({ "session_id": id }),
    )
    .await;
    let brief = &output(&r)["handoff_brief"];
    assert_eq!(brief["instruction"]["root"]["text"], "a very long task");
    assert_eq!(brief["instruction"]["latest"], Value::Null);
    let codes = brief["basis"]["reason_codes"].as_array().unwrap();
    assert!(
        codes.contains(&json!("attempt_boundary_evicted")),
        "{brief}"
    );
    assert_eq!(brief["basis"]["complete"], false);
}

// ---------------------------------------------------------------------------------------------
// 6. The handoff brief

fn brief_of(result: &Value) -> Value {
    let brief = output(result)["handoff_brief"].clone();
    let bytes = serde_json::to_vec(&brief).unwrap().len();
    assert!(bytes <= 8192, "the brief is {bytes} bytes");
    brief
}

#[track_caller]
fn sorted_codes(brief: &Value) -> Vec<String> {
    let codes: Vec<String> = brief["basis"]["reason_codes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect();
    let mut sorted = codes.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(codes, sorted, "reason codes are not sorted and distinct");
    assert_eq!(brief["basis"]["complete"], json!(codes.is_empty()));
    codes
}

#[tokio::test]
async fn the_handoff_brief_is_bounded_redacted_and_honest() {
    let (db, st, key) = setup().await;

    // A clean, short instruction comes back whole.
    let clean = start(&st, &key, P, "add a cache to the resolver").await;
    let brief = brief_of(
        &call(
            &st,
            &key,
            "session_handoff_summary",
            json!({ "session_id": clean }),
        )
        .await,
    );
    assert_eq!(
        brief["instruction"]["root"],
        json!({ "text": "add a cache to the resolver", "truncated": false })
    );
    assert_eq!(brief["instruction"]["latest"], brief["instruction"]["root"]);
    assert_eq!(brief["instruction"]["latest_is_root"], true);
    assert_eq!(brief["lifecycle"], "active");
    assert_eq!(brief["workspace"], json!({ "status": "unavailable" }));
    assert_eq!(brief["validation"], json!({ "status": "unavailable" }));
    assert_eq!(
        sorted_codes(&brief),
        ["validation_unavailable", "workspace_unavailable"]
    );
    assert_eq!(brief["basis"]["complete"], false);
    assert_eq!(brief["progress"]["state"], "insufficient_evidence");

    // Workspace not requested: reported as such, never as unavailable or queried.
    let brief = brief_of(
        &call(
            &st,
            &key,
            "session_handoff_summary",
            json!({ "session_id": clean, "include_workspace": false }),
        )
        .await,
    );
    assert_eq!(brief["workspace"], json!({ "status": "not_requested" }));
    assert_eq!(
        sorted_codes(&brief),
        ["validation_unavailable", "workspace_not_requested"]
    );
    let brief = brief_of(
        &call(
            &st,
            &key,
            "session_handoff_summary",
            json!({ "session_id": clean, "include_workspace": false, "include_validation": false }),
        )
        .await,
    );
    assert_eq!(brief["validation"], json!({ "status": "not_requested" }));
    assert_eq!(
        sorted_codes(&brief),
        ["validation_not_requested", "workspace_not_requested"]
    );
    // Not requested is the caller's choice, not missing evidence.
    assert_eq!(brief["progress"]["state"], "ready_to_continue");

    // A secret in the instruction does not survive, and the excerpt says it was changed.
    let long = format!(
        "{} password=hunter2hunter2 {}",
        "x".repeat(300),
        "y".repeat(700)
    );
    let s = start(&st, &key, P, &long).await;
    let brief = brief_of(
        &call(
            &st,
            &key,
            "session_handoff_summary",
            json!({ "session_id": s }),
        )
        .await,
    );
    let root = &brief["instruction"]["root"];
    let text = root["text"].as_str().unwrap();
    assert!(
        text.chars().count() <= 600,
        "{} chars",
        text.chars().count()
    );
    assert!(!text.contains("hunter2hunter2"), "{text}");
    assert!(text.contains("password=[REDACTED]"), "{text}");
    assert_eq!(root["truncated"], true);
    // A secret alone (short text) still marks the excerpt changed.
    let s2 = start(&st, &key, P, "deploy with password=hunter2hunter2").await;
    let brief = brief_of(
        &call(
            &st,
            &key,
            "session_handoff_summary",
            json!({ "session_id": s2 }),
        )
        .await,
    );
    assert_eq!(
        brief["instruction"]["root"]["text"],
        "deploy with password=[REDACTED]"
    );
    assert_eq!(brief["instruction"]["root"]["truncated"], true);

    // Worst case: escape-heavy root and latest instructions, many recorded calls with huge
    // secret-bearing arguments. Still at most 8 KiB, and every cut is flagged.
    let heavy = |c: char| {
        format!(
            "{}password=hunter2hunter2{}",
            c.to_string().repeat(8000),
            "\"".repeat(7000)
        )
    };
    let big = start(&st, &key, P, &heavy('\u{1}')).await;
    output(
        &call(
            &st,
            &key,
            "work_on_project",
            json!({ "session_id": big, "instruction": heavy('\u{2}') }),
        )
        .await,
    );
    for i in 0..40 {
        let r = rec(
            &st,
            &key,
            "work_on_project",
            json!({ "project": P, "instruction": format!("{i} {} token=7f3c9a1b2d4e5f60718293a4b5c6d7e8", "\\".repeat(15000)) }),
            &big,
        )
        .await;
        output(&r);
    }
    // Exploration evidence as a focused-read tool records it (no such tool is registered yet,
    // so its finished events go straight to the store): long, escape-heavy paths.
    for i in 0..20 {
        let paths: Vec<String> = (0..5)
            .map(|j| format!("src/{}/{i}-{j}.rs", "\u{1}".repeat(300)))
            .collect();
        let event = NewEvent {
            kind: "tool_call_finished".into(),
            call_id: Uuid::now_v7(),
            invocation_id: Uuid::now_v7(),
            role: EventRole::Recorder,
            tool_name: Some("read_files".into()),
            payload: json!({ "tool": "read_files", "success": true, "exploration_paths": paths }),
        };
        sessions::mutate(db.pool(), &SessionId::parse(&big).unwrap(), move |_| {
            Decision::Write(SessionChange::default(), vec![event.clone()], ())
        })
        .await
        .unwrap();
    }
    for via in SURFACES {
        let r = call_via(
            &st,
            via,
            &key,
            "session_handoff_summary",
            json!({ "session_id": big, "diagnostic": true }),
            None,
        )
        .await;
        let brief = brief_of(&r);
        // Over budget before reduction; recent files go first, keeping their real total.
        let recent = &brief["recent_files"];
        assert_eq!(recent["total"], 100, "{via:?}: {recent}");
        assert_eq!(recent["truncated"], true);
        let kept = recent["returned"].as_u64().unwrap();
        assert!(
            kept < 8,
            "{via:?}: no reduction happened ({kept} recent files kept)"
        );
        assert_eq!(recent["items"].as_array().unwrap().len() as u64, kept);
        let instr = &brief["instruction"];
        assert_eq!(instr["latest_is_root"], false);
        for which in ["root", "latest"] {
            let e = &instr[which];
            let t = e["text"].as_str().unwrap();
            assert!(t.chars().count() <= 600, "{via:?} {which}");
            assert_eq!(e["truncated"], true, "{via:?} {which}");
            assert!(!t.contains("hunter2"), "{via:?} {which}");
        }
        let text = serde_json::to_string(&output(&r)).unwrap();
        assert!(
            !text.contains("hunter2hunter2") && !text.contains("7f3c9a1b2d4e5f60718293a4b5c6d7e8"),
            "{via:?}"
        );
    }
    let all_text = session_events_text(&db).await;
    assert!(
        !all_text.contains("hunter2hunter2")
            && !all_text.contains("7f3c9a1b2d4e5f60718293a4b5c6d7e8")
    );
}

#[tokio::test]
async fn finishing_closes_the_brief_and_every_later_mutation_is_session_closed() {
    let (db, st, key) = setup().await;
    let s = start(&st, &key, P, "finish me").await;
    let w = start(&st, &key, P, "recorder").await;
    output(&rec(&st, &key, "runtime_status", json!({}), &s).await);

    // Default: no diagnostic part.
    let r = call(
        &st,
        &key,
        "session_handoff_summary",
        json!({ "session_id": s }),
    )
    .await;
    assert!(output(&r).get("diagnostic").is_none(), "{r}");
    let r = call(
        &st,
        &key,
        "session_handoff_summary",
        json!({ "session_id": s, "diagnostic": true, "limit": 2 }),
    )
    .await;
    let diag = &output(&r)["diagnostic"];
    assert_eq!(
        diag["continuation_feedback"]["status"], "available",
        "{diag}"
    );
    assert_eq!(
        diag["continuation_feedback"]["attempt"]["instruction"]["text"],
        "finish me"
    );
    let events = diag["events"].as_array().unwrap();
    assert_eq!(events.len(), 2, "{diag}");
    assert!(
        events[0]["seq"].as_i64() > events[1]["seq"].as_i64(),
        "newest first: {diag}"
    );

    let r = rec(
        &st,
        &key,
        "finish_coding_task",
        json!({ "session_id": s, "summary": "all done" }),
        &w,
    )
    .await;
    let out = output(&r);
    assert_eq!(out["lifecycle"], "finished");
    let brief = &out["handoff_brief"];
    assert!(serde_json::to_vec(brief).unwrap().len() <= 8192);
    assert_eq!(brief["lifecycle"], "finished");
    assert_eq!(
        brief["progress"],
        json!({ "state": "closed", "blockers": [] })
    );
    assert_eq!(
        brief["next_actions"]["items"],
        json!([{ "action": "start_new_session" }])
    );
    assert_eq!(out["continuation_feedback"]["status"], "available");
    let row = session_row(&db, &s).await;
    assert_eq!(row.lifecycle, Lifecycle::Finished);
    assert!(row.finished_at.is_some());
    let finished_events: Vec<LedgerRow> = ledger(&db, &s)
        .await
        .into_iter()
        .filter(|e| e.kind == "session_finished")
        .collect();
    assert_eq!(finished_events.len(), 1);
    assert_eq!(finished_events[0].payload["summary"]["excerpt"], "all done");

    // Reading still works; the brief stays closed.
    let brief = brief_of(
        &call(
            &st,
            &key,
            "session_handoff_summary",
            json!({ "session_id": s }),
        )
        .await,
    );
    assert_eq!(brief["progress"]["state"], "closed");
    assert_eq!(
        output(&call(&st, &key, "session_summary", json!({ "session_id": s })).await)["lifecycle"],
        "finished"
    );

    // Every mutation is refused without writing.
    let mutations: Vec<(&str, Value, Option<&str>)> = vec![
        (
            "work_on_project",
            json!({ "session_id": s, "instruction": "more" }),
            None,
        ),
        (
            "update_session_context",
            json!({ "session_id": s, "default_shell": "sh" }),
            None,
        ),
        ("finish_coding_task", json!({ "session_id": s }), None),
        ("runtime_status", json!({}), Some(s.as_str())),
        (
            "work_on_project",
            json!({ "project": P, "instruction": "x" }),
            Some(s.as_str()),
        ),
    ];
    for via in SURFACES {
        for (tool, args, recording) in &mutations {
            let before = workflow_state(&db).await;
            let totals = workflow_totals(&db).await;
            let r = call_via(&st, via, &key, tool, args.clone(), *recording).await;
            assert_eq!(kind(&r), "session_closed", "{via:?} {tool}: {r}");
            assert_eq!(workflow_state(&db).await, before, "{via:?} {tool}");
            assert_eq!(workflow_totals(&db).await, totals, "{via:?} {tool}");
        }
    }
    // Closing a finished session is the one lifecycle step left; then it is closed for good.
    let r = call(&st, &key, "close_session", json!({ "session_id": s })).await;
    assert_eq!(output(&r)["changed"], true);
    assert_eq!(session_row(&db, &s).await.lifecycle, Lifecycle::Closed);
    let r = call(&st, &key, "close_session", json!({ "session_id": s })).await;
    assert_eq!(output(&r)["changed"], false);
    let r = call(
        &st,
        &key,
        "work_on_project",
        json!({ "session_id": s, "instruction": "more" }),
    )
    .await;
    assert_eq!(kind(&r), "session_closed");
}

#[tokio::test]
async fn a_finished_or_closed_session_takes_no_events_from_any_read() {
    let (db, st, key) = setup().await;
    let w = start(&st, &key, P, "an active recorder").await;
    for end in ["finish_coding_task", "close_session"] {
        let s = start(&st, &key, P, "ends").await;
        output(
            &call(
                &st,
                &key,
                "post_session_message",
                json!({ "session_id": s, "kind": "todo", "body": "t" }),
            )
            .await,
        );
        output(&call(&st, &key, end, json!({ "session_id": s })).await);
        let reads = [
            ("session_summary", json!({ "session_id": s })),
            (
                "session_handoff_summary",
                json!({ "session_id": s, "diagnostic": true }),
            ),
            ("list_session_messages", json!({ "session_id": s })),
            ("observe_session_messages", json!({ "session_id": s })),
            ("list_jobs", json!({ "session_id": s })),
        ];
        for via in SURFACES {
            for (tool, args) in &reads {
                let before = ledger(&db, &s).await;
                let row = session_row(&db, &s).await;
                // Unrecorded, and recorded in an active session: the read answers, the ended
                // session is left as it was, and only the recorder records the call.
                let r = call_via(&st, via, &key, tool, args.clone(), None).await;
                output(&r);
                let w0 = last_seq(&db, &w).await;
                output(&call_via(&st, via, &key, tool, args.clone(), Some(&w)).await);
                one_recorder_pair(&ledger_after(&db, &w, w0).await, tool);
                // Naming the ended session as the recorder is refused: it takes no new calls.
                let r = call_via(&st, via, &key, tool, args.clone(), Some(&s)).await;
                assert_eq!(kind(&r), "session_closed", "{via:?} {end} {tool}: {r}");
                assert_eq!(r["error"]["field"], "recording_session_id", "{r}");
                assert_eq!(ledger(&db, &s).await, before, "{via:?} {end} {tool}");
                let after = session_row(&db, &s).await;
                assert_eq!(
                    (after.events_observed, after.version, after.updated_at),
                    (row.events_observed, row.version, row.updated_at),
                    "{via:?} {end} {tool}"
                );
            }
        }
    }
}

#[tokio::test]
async fn continuation_feedback_counts_a_call_recorded_in_its_own_session_once() {
    let (db, st, key) = setup().await;
    let root = tempfile::tempdir().unwrap();
    let _runner = TestRunner::start(&db, &st, "local", &[("alpha", root.path())]).await;
    let c = start(&st, &key, P, "work and record in one session").await;
    // Recorded in the session it works in: both pairs land there, nested.
    output(
        &rec(
            &st,
            &key,
            "run_shell",
            json!({ "session_id": c, "command": "true" }),
            &c,
        )
        .await,
    );
    let r = rec(
        &st,
        &key,
        "run_shell",
        json!({ "session_id": c, "command": "exit 3" }),
        &c,
    )
    .await;
    assert_eq!(kind(&r), "exit_nonzero", "{r}");
    let calls: Vec<(String, String)> = ledger(&db, &c)
        .await
        .into_iter()
        .filter(|e| e.kind.starts_with("tool_call_"))
        .map(|e| (e.kind, e.role))
        .collect();
    assert_eq!(calls.len(), 8, "{calls:?}");
    let r = call(
        &st,
        &key,
        "session_handoff_summary",
        json!({ "session_id": c, "diagnostic": true }),
    )
    .await;
    let feedback = &output(&r)["diagnostic"]["continuation_feedback"];
    assert_eq!(
        feedback["attempt"]["activity"]["tool_calls"],
        json!({ "started": 2, "finished": 2, "failed": 1, "by_tool": { "run_shell": 2 } }),
        "{feedback}"
    );
    assert_eq!(
        feedback["attempt"]["activity"]["events_by_kind"]["tool_call_started"], 2,
        "{feedback}"
    );
    // finish_coding_task's feedback reads the same way; the unrecorded handoff left its one
    // (fallback) pair in the session, and counts once as well.
    let r = call(&st, &key, "finish_coding_task", json!({ "session_id": c })).await;
    assert_eq!(
        output(&r)["continuation_feedback"]["attempt"]["activity"]["tool_calls"]["by_tool"],
        json!({ "run_shell": 2, "session_handoff_summary": 1 })
    );
}

// ---------------------------------------------------------------------------------------------
// 7. Execution defaults

async fn exec_ctx(db: &TestDatabase, s: &str) -> Value {
    session_row(db, s).await.execution_context
}

#[tokio::test]
async fn update_session_context_validates_normalizes_and_clears() {
    let (db, st, key) = setup().await;
    let s = start(&st, &key, P, "configure").await;

    let before = last_seq(&db, &s).await;
    let r = call(
        &st,
        &key,
        "update_session_context",
        json!({ "session_id": s, "default_cwd": "./src//x/" }),
    )
    .await;
    let out = output(&r);
    assert_eq!(out["execution_context"], json!({ "default_cwd": "src/x" }));
    assert_eq!(out["changed"], true);
    assert_eq!(exec_ctx(&db, &s).await, json!({ "default_cwd": "src/x" }));
    // The session is the tool's target: it keeps the change's evidence, and no call pair.
    let rows = ledger_after(&db, &s, before).await;
    assert_eq!(shape(&rows), [("session_context_updated", "business")]);
    assert_eq!(rows[0].payload["changed"], json!(["default_cwd"]));
    let summary = call(&st, &key, "session_summary", json!({ "session_id": s })).await;
    assert_eq!(
        output(&summary)["execution_context"],
        json!({ "default_cwd": "src/x" })
    );

    // Refused paths change nothing and write nothing.
    for bad in [
        "/etc",
        "C:\\Windows",
        "\\\\server\\share",
        "~/x",
        "file:///etc",
        "https://x/y",
        "../x",
        "a/../../b",
        "a\nb",
        "a\u{0007}b",
        "a\u{0}b",
        "/srv/password=hunter2hunter2",
    ] {
        for via in SURFACES {
            let before = last_seq(&db, &s).await;
            let r = call_via(
                &st,
                via,
                &key,
                "update_session_context",
                json!({ "session_id": s, "default_cwd": bad }),
                None,
            )
            .await;
            assert_eq!(kind(&r), "invalid_arguments", "{via:?} {bad:?}: {r}");
            assert_eq!(
                r["error"]["pointer"], "/default_cwd",
                "{via:?} {bad:?}: {r}"
            );
            assert_eq!(
                exec_ctx(&db, &s).await,
                json!({ "default_cwd": "src/x" }),
                "{via:?} {bad:?}"
            );
            assert_eq!(last_seq(&db, &s).await, before, "{via:?} {bad:?}");
        }
    }

    // Shells: sh and bash; anything else fails the schema before anything is recorded.
    for shell in ["sh", "bash"] {
        let r = call(
            &st,
            &key,
            "update_session_context",
            json!({ "session_id": s, "default_shell": shell }),
        )
        .await;
        assert_eq!(output(&r)["execution_context"]["default_shell"], shell);
    }
    let before = last_seq(&db, &s).await;
    for shell in ["zsh", "powershell", ""] {
        let r = call(
            &st,
            &key,
            "update_session_context",
            json!({ "session_id": s, "default_shell": shell }),
        )
        .await;
        assert_eq!(kind(&r), "invalid_arguments", "{shell}: {r}");
        assert_eq!(r["error"]["pointer"], "/default_shell", "{r}");
    }
    assert_eq!(last_seq(&db, &s).await, before);
    assert_eq!(
        exec_ctx(&db, &s).await,
        json!({ "default_cwd": "src/x", "default_shell": "bash" })
    );

    // No change, no context event.
    let before = last_seq(&db, &s).await;
    let r = call(
        &st,
        &key,
        "update_session_context",
        json!({ "session_id": s, "default_shell": "bash" }),
    )
    .await;
    assert_eq!(output(&r)["changed"], false);
    assert_eq!(last_seq(&db, &s).await, before);

    // With a named resource the cwd is a remote path.
    let r = call(
        &st,
        &key,
        "update_session_context",
        json!({ "session_id": s, "resource": "build-box_1", "default_cwd": "/home/dev/x" }),
    )
    .await;
    assert_eq!(
        output(&r)["execution_context"],
        json!({ "default_cwd": "/home/dev/x", "default_shell": "bash", "resource": "build-box_1" })
    );
    // Dropping the resource would leave an absolute local cwd: refused, nothing changes.
    let r = call(
        &st,
        &key,
        "update_session_context",
        json!({ "session_id": s, "resource": null }),
    )
    .await;
    assert_eq!(kind(&r), "invalid_arguments", "{r}");
    assert_eq!(r["error"]["pointer"], "/default_cwd");
    assert_eq!(exec_ctx(&db, &s).await["resource"], "build-box_1");
    // A bad resource name.
    let r = call(
        &st,
        &key,
        "update_session_context",
        json!({ "session_id": s, "resource": "a b" }),
    )
    .await;
    assert_eq!(kind(&r), "invalid_arguments", "{r}");
    assert_eq!(r["error"]["pointer"], "/resource");

    // null clears a field; absent keeps it.
    let r = call(
        &st,
        &key,
        "update_session_context",
        json!({ "session_id": s, "default_shell": null }),
    )
    .await;
    assert_eq!(
        output(&r)["execution_context"],
        json!({ "default_cwd": "/home/dev/x", "resource": "build-box_1" })
    );
    let r = call(
        &st,
        &key,
        "update_session_context",
        json!({ "session_id": s, "resource": null, "default_cwd": null }),
    )
    .await;
    assert_eq!(output(&r)["execution_context"], json!({}));
    assert_eq!(exec_ctx(&db, &s).await, json!({}));
}

// ---------------------------------------------------------------------------------------------
// 8. Forbidden inference (session model §6: one test per row, then the ambient identities)

/// The audit session id the audit middleware gave `reply`'s request.
async fn audit_session_of(db: &TestDatabase, reply: &Reply) -> String {
    event_of(db, reply).await.session_id
}

/// An audit session with a Workflow-Session-shaped id (the audit namespace accepts any plain
/// id), holding `events` events of this caller.
async fn lookalike_audit_session(
    st: &AppState,
    db: &TestDatabase,
    key: &str,
    events: usize,
) -> String {
    let id = format!("wc_sess_{}", "Audit".repeat(5));
    for _ in 0..events {
        let mut req = rest_request("/api/actions/runtime_status", Some(key), &json!({}));
        set_header(&mut req, "x-action-session-id", &id);
        let r = send(st, req).await;
        assert_eq!(audit_session_of(db, &r).await, id);
    }
    id
}

/// Row 1: "Infer wc_sess_* from current HTTP Action Audit Session".
#[tokio::test]
async fn forbidden_1_the_current_audit_session_never_yields_a_workflow_session() {
    let (db, st, key) = setup().await;
    // The caller's implicit audit session (idle reuse), then an explicitly named one.
    let implicit = tools_call(&st, MODERN, Some(&key), "runtime_status", json!({})).await;
    let implicit = audit_session_of(&db, &implicit).await;
    assert!(Uuid::parse_str(&implicit).is_ok(), "{implicit}");
    let lookalike = lookalike_audit_session(&st, &db, &key, 1).await;
    for audit_id in [lookalike.as_str(), implicit.as_str()] {
        let header = [("x-action-session-id", audit_id)];
        for via in SURFACES {
            // Calls made in that audit session, with no Workflow Session named, record nothing.
            let totals = workflow_totals(&db).await;
            for tool in ["runtime_status", "list_projects", "list_tools"] {
                let (r, reply) =
                    call_with_headers(&st, via, &key, tool, json!({}), None, &header).await;
                output(&r);
                assert_eq!(audit_session_of(&db, &reply).await, audit_id, "{via:?}");
            }
            assert_eq!(workflow_totals(&db).await, totals, "{via:?} {audit_id}");
            // work_on_project in it starts a fresh Workflow Session; the audit id is not taken up.
            let (r, _) = call_with_headers(
                &st,
                via,
                &key,
                "work_on_project",
                json!({ "project": P, "instruction": "x" }),
                None,
                &header,
            )
            .await;
            let out = output(&r);
            assert_eq!(out["started"], "created", "{via:?}");
            assert_ne!(out["session_id"], audit_id, "{via:?}");
            assert_eq!(out["events_observed"], 1, "{via:?}");
        }
    }
    let ids: Vec<String> = workflow_state(&db).await.into_iter().map(|s| s.0).collect();
    assert!(
        !ids.contains(&lookalike) && !ids.contains(&implicit),
        "{ids:?}"
    );
}

/// Row 2: "Fall back to Action Audit Session when Workflow Session is missing".
#[tokio::test]
async fn forbidden_2_a_missing_workflow_session_never_falls_back_to_the_audit_session() {
    let (db, st, key) = setup().await;
    let lookalike = lookalike_audit_session(&st, &db, &key, 2).await;
    let (s0, e0) = workflow_totals(&db).await;
    for missing in [nobody(), lookalike.clone()] {
        // The request is audited in the lookalike session, and names a missing Workflow Session.
        let header = [("x-action-session-id", lookalike.as_str())];
        for via in SURFACES {
            for (tool, args) in [
                ("session_summary", json!({ "session_id": missing })),
                ("session_handoff_summary", json!({ "session_id": missing })),
                (
                    "update_session_context",
                    json!({ "session_id": missing, "default_shell": "sh" }),
                ),
                ("finish_coding_task", json!({ "session_id": missing })),
                ("close_session", json!({ "session_id": missing })),
                (
                    "work_on_project",
                    json!({ "session_id": missing, "instruction": "x" }),
                ),
            ] {
                let (r, reply) = call_with_headers(&st, via, &key, tool, args, None, &header).await;
                assert_eq!(
                    kind(&r),
                    "unknown_session_id",
                    "{via:?} {tool} {missing}: {r}"
                );
                assert_eq!(r["error"]["field"], "session_id");
                assert_eq!(audit_session_of(&db, &reply).await, lookalike);
            }
            let (r, _) = call_with_headers(
                &st,
                via,
                &key,
                "runtime_status",
                json!({}),
                Some(&missing),
                &header,
            )
            .await;
            assert_eq!(
                kind(&r),
                "unknown_session_id",
                "{via:?} recorder {missing}: {r}"
            );
            assert_eq!(r["error"]["field"], "recording_session_id");
        }
    }
    assert_eq!(workflow_totals(&db).await, (s0, e0), "a refusal wrote");
    // The audit session kept its own evidence model: one row per request, nothing else.
    let audit = rest(
        &st,
        "/api/audit/session",
        Some(&key),
        json!({ "session_id": lookalike, "limit": 500 }),
    )
    .await;
    assert_eq!(audit.status, StatusCode::OK, "{}", audit.text());
    assert_eq!(audit.body["session"]["event_count"], 2 + 2 * 5 * 7);
}

/// Row 3: "Treat /api/audit/session payload as coding-task summary".
#[tokio::test]
async fn forbidden_3_an_audit_session_payload_is_not_a_coding_task_summary() {
    let (db, st, key) = setup().await;
    let real = start(&st, &key, P, "real").await;
    let lookalike = lookalike_audit_session(&st, &db, &key, 2).await;
    let audit = rest(
        &st,
        "/api/audit/session",
        Some(&key),
        json!({ "session_id": lookalike }),
    )
    .await;
    assert_eq!(audit.status, StatusCode::OK, "{}", audit.text());
    let payload = audit.body.clone();
    assert!(
        payload["session"].is_object() && payload["events"].is_array(),
        "{payload}"
    );
    let totals = workflow_totals(&db).await;

    // Handed to the session tools as their input, an audit payload is refused by the schema.
    for via in SURFACES {
        let mut as_args = payload.clone();
        as_args["session_id"] = json!(real);
        for tool in [
            "session_summary",
            "session_handoff_summary",
            "finish_coding_task",
        ] {
            let r = call_via(&st, via, &key, tool, as_args.clone(), None).await;
            assert_eq!(kind(&r), "invalid_arguments", "{via:?} {tool}: {r}");
        }
        let r = call_via(
            &st,
            via,
            &key,
            "session_handoff_summary",
            json!({ "session_id": real, "session": payload["session"] }),
            None,
        )
        .await;
        assert_eq!(kind(&r), "invalid_arguments", "{via:?}: {r}");
        assert_eq!(r["error"]["pointer"], "/session", "{via:?}: {r}");
        // Its session id, Workflow-shaped as it is, names no Workflow Session.
        let r = call_via(
            &st,
            via,
            &key,
            "session_summary",
            json!({ "session_id": payload["session"]["session_id"] }),
            None,
        )
        .await;
        assert_eq!(kind(&r), "unknown_session_id", "{via:?}: {r}");
    }
    assert_eq!(workflow_totals(&db).await, totals);
    // And the other way round: the audit routes know no Workflow Session.
    let r = rest(
        &st,
        "/api/audit/session",
        Some(&key),
        json!({ "session_id": real }),
    )
    .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text());
    let listed = rest(&st, "/api/audit/sessions", Some(&key), json!({})).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.text());
    assert!(!listed.text().contains(&real), "{}", listed.text());
    // The two summaries do not even share a shape.
    let summary = call(&st, &key, "session_summary", json!({ "session_id": real })).await;
    let out = output(&summary);
    for audit_field in ["event_count", "error_count", "status"] {
        assert!(out.get(audit_field).is_none(), "{audit_field} in {out}");
    }
}

/// Row 4: "Pass audit UUID as tool session_id expecting ledger semantics".
#[tokio::test]
async fn forbidden_4_an_audit_uuid_as_session_id_is_refused_naming_the_field() {
    let (db, st, key) = setup().await;
    start(&st, &key, P, "a real workflow session").await;
    let first = tools_call(&st, MODERN, Some(&key), "runtime_status", json!({})).await;
    let audit_id = audit_session_of(&db, &first).await;
    assert!(Uuid::parse_str(&audit_id).is_ok(), "{audit_id}");
    let state_before = workflow_state(&db).await;
    let totals = workflow_totals(&db).await;

    // As a business session_id: refused by the schema (`wc_sess_` pattern) as
    // invalid_arguments naming the field, before any lookup; never resolved to anything.
    for via in SURFACES {
        for tool in [
            "session_summary",
            "session_handoff_summary",
            "finish_coding_task",
            "close_session",
            "update_session_context",
        ] {
            let r = call_via(
                &st,
                via,
                &key,
                tool,
                json!({ "session_id": audit_id }),
                None,
            )
            .await;
            assert_eq!(kind(&r), "invalid_arguments", "{via:?} {tool}: {r}");
            assert_eq!(r["error"]["pointer"], "/session_id", "{via:?} {tool}: {r}");
        }
        let r = call_via(
            &st,
            via,
            &key,
            "work_on_project",
            json!({ "session_id": audit_id, "instruction": "x" }),
            None,
        )
        .await;
        assert_eq!(kind(&r), "invalid_arguments", "{via:?}: {r}");
        assert_eq!(r["error"]["pointer"], "/session_id", "{via:?}: {r}");
    }
    // As the recorder: MCP refuses the wrapper metadata (JSON-RPC invalid params naming the
    // field), REST answers invalid_arguments naming it.
    for version in VERSIONS {
        let r = tools_call(
            &st,
            version,
            Some(&key),
            "runtime_status",
            json!({ "recording_session_id": audit_id }),
        )
        .await;
        assert_eq!(r.rpc_code(), Some(-32602), "{version}: {}", r.text());
        let message = r.body["error"]["message"].as_str().unwrap();
        assert!(message.contains("recording_session_id"), "{}", r.text());
    }
    for via in [Via::Action, Via::ToolsCall] {
        let r = call_via(&st, via, &key, "runtime_status", json!({}), Some(&audit_id)).await;
        assert_eq!(kind(&r), "invalid_arguments", "{via:?}: {r}");
        let message = r["error"]["message"].as_str().unwrap();
        assert!(message.contains("recording_session_id"), "{r}");
    }
    assert_eq!(workflow_state(&db).await, state_before);
    assert_eq!(workflow_totals(&db).await, totals);
    assert!(!session_events_text(&db).await.contains(&audit_id));
}

/// Beyond the table: a caller-supplied Mcp-Session-Id, the same credential, the same window
/// (`_meta["openai/session"]`), the same project or an earlier call never selects a session.
#[tokio::test]
async fn nothing_but_an_explicit_id_selects_a_session() {
    let (db, st, key) = setup().await;
    let window = json!("window-7f3a");
    // Start a session with every ambient identity a server could be tempted to remember.
    let mut body = rpc(
        MODERN,
        1,
        "tools/call",
        json!({ "name": "work_on_project", "arguments": { "project": P, "instruction": "the task" } }),
    );
    body["params"]["_meta"]["openai/session"] = window.clone();
    let r = send(&st, mcp_request(MODERN, Some(&key), &body)).await;
    let s = output(&r.result()["structuredContent"])["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let before_state = workflow_state(&db).await;
    let totals = workflow_totals(&db).await;

    // Same credential, same window, the session id as Mcp-Session-Id and as the audit
    // session, on the same project, right after: nothing is recorded anywhere.
    for version in VERSIONS {
        for (tool, args) in [
            ("runtime_status", json!({})),
            ("list_projects", json!({})),
            ("list_tools", json!({})),
        ] {
            let mut body = rpc(
                version,
                2,
                "tools/call",
                json!({ "name": tool, "arguments": args }),
            );
            body["params"]["_meta"]["openai/session"] = window.clone();
            let mut req = mcp_request(version, Some(&key), &body);
            set_header(&mut req, "mcp-session-id", &s);
            set_header(&mut req, "x-action-session-id", &s);
            let r = send(&st, req).await;
            output(&r.result()["structuredContent"]);
        }
    }
    for via in [Via::Action, Via::ToolsCall] {
        for tool in ["runtime_status", "list_projects"] {
            output(&call_via(&st, via, &key, tool, json!({}), None).await);
        }
    }
    assert_eq!(
        workflow_state(&db).await,
        before_state,
        "a call without an explicit id was recorded"
    );
    assert_eq!(workflow_totals(&db).await, totals);
    // Only the exact id selects it.
    output(&rec(&st, &key, "runtime_status", json!({}), &s).await);
    assert_eq!(workflow_totals(&db).await.1, totals.1 + 2);
}

// ---------------------------------------------------------------------------------------------
// 9. Redaction through storage and logs

/// (input, the secret in it): the credential shapes of the redaction rules (copied from the
/// corpus of `wc_functions::redaction`'s unit tests).
const CORPUS: &[(&str, &str)] = include!("data/secret_corpus.rs");

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

#[tokio::test]
async fn no_secret_of_the_corpus_reaches_storage_or_logs() {
    assert!(CORPUS.len() >= 30);
    let (db, st, key) = setup().await;
    let (logs, _guard) = capture_logs();
    let w = start(&st, &key, P, "the recorder").await;
    let mut request_ids = Vec::new();
    for (i, (input, _)) in CORPUS.iter().enumerate() {
        let via = SURFACES[i % SURFACES.len()];
        // Start and resume with the secret in the instruction, recorded.
        let r = call_via(
            &st,
            via,
            &key,
            "work_on_project",
            json!({ "project": P, "instruction": format!("task {i}: {input} then run the tests") }),
            Some(&w),
        )
        .await;
        let s = output(&r)["session_id"].as_str().unwrap().to_owned();
        let r = call_via(
            &st,
            via,
            &key,
            "work_on_project",
            json!({ "session_id": s, "instruction": format!("{input}") }),
            Some(&w),
        )
        .await;
        output(&r);
        // A refused update with it (the call is still recorded; no resource yet, so the cwd must be
        // project-relative).
        let r = call_via(
            &st,
            via,
            &key,
            "update_session_context",
            json!({ "session_id": s, "default_cwd": format!("../{input}") }),
            Some(&w),
        )
        .await;
        assert_eq!(kind(&r), "invalid_arguments");
        // A string argument of a recorded read tool.
        if input.chars().count() <= 64 {
            output(
                &call_via(
                    &st,
                    via,
                    &key,
                    "list_tools",
                    json!({ "category": input }),
                    Some(&w),
                )
                .await,
            );
        }
        // An execution default is no place for a credential: a remote cwd carrying one is
        // refused (recorded, stored nowhere), a clean one is kept.
        let r = call_via(
            &st,
            via,
            &key,
            "update_session_context",
            json!({ "session_id": s, "resource": "box", "default_cwd": format!("/srv/{input}") }),
            Some(&w),
        )
        .await;
        assert_eq!(kind(&r), "invalid_arguments", "{via:?} {input:?}: {r}");
        assert_eq!(r["error"]["pointer"], "/default_cwd", "{r}");
        let r = call_via(
            &st,
            via,
            &key,
            "update_session_context",
            json!({ "session_id": s, "resource": "box", "default_cwd": format!("/srv/task-{i}") }),
            Some(&w),
        )
        .await;
        output(&r);
        // Finish with it in the summary.
        let r = call_via(
            &st,
            via,
            &key,
            "finish_coding_task",
            json!({ "session_id": s, "summary": format!("done: {input}") }),
            Some(&w),
        )
        .await;
        output(&r);
        // And read everything back through the tools.
        for tool in ["session_summary", "session_handoff_summary"] {
            let args = if tool == "session_handoff_summary" {
                json!({ "session_id": s, "diagnostic": true })
            } else {
                json!({ "session_id": s })
            };
            let r = call_via(&st, via, &key, tool, args, None).await;
            let text = serde_json::to_string(output(&r)).unwrap();
            let secret = CORPUS[i].1;
            assert!(!text.contains(secret), "{tool} served {secret:?} ({via:?})");
        }
        let r = tools_call(
            &st,
            MODERN,
            Some(&key),
            "session_summary",
            json!({ "session_id": w, "limit": 200 }),
        )
        .await;
        request_ids.push(r.headers["x-request-id"].to_str().unwrap().to_owned());
    }

    let events = session_events_text(&db).await;
    let client = db.pool().get().await.unwrap();
    let mut roots = String::new();
    for row in client
        .query("SELECT to_jsonb(t)::text FROM workflow_sessions t", &[])
        .await
        .unwrap()
    {
        roots.push_str(&row.get::<_, String>(0));
        roots.push('\n');
    }
    let mut summaries = String::new();
    for row in client
        .query("SELECT summary::text FROM action_events", &[])
        .await
        .unwrap()
    {
        summaries.push_str(&row.get::<_, String>(0));
        summaries.push('\n');
    }
    let log_text = logs.text();
    // The checks can see: the rows and logs are there and carry the surrounding text.
    assert!(events.contains("then run the tests") && events.contains("[REDACTED]"));
    assert!(roots.contains("then run the tests") && roots.contains("/srv/task-"));
    assert!(!summaries.is_empty());
    for id in &request_ids {
        assert!(log_text.contains(id.as_str()), "request {id} not logged");
    }
    for (input, secret) in CORPUS {
        assert!(
            !events.contains(secret),
            "session_events keep {secret:?} (from {input:?})"
        );
        assert!(!roots.contains(secret), "workflow_sessions keep {secret:?}");
        assert!(
            !summaries.contains(secret),
            "action_events.summary keeps {secret:?}"
        );
        if let Some(at) = log_text.find(secret) {
            let from = log_text[..at].rfind('\n').map_or(0, |i| i + 1);
            let to = log_text[at..].find('\n').map_or(log_text.len(), |i| at + i);
            panic!("the logs keep {secret:?}: {}", &log_text[from..to]);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Text at the edges of the bounds

#[tokio::test]
async fn wide_and_unusual_text_is_stored_bounded_never_an_internal_error() {
    let (db, st, key) = setup().await;
    let w = start(&st, &key, P, "recorder").await;
    let mut failures = Vec::new();
    let mut check = |what: String, r: &Value| {
        if r["success"] != true {
            failures.push(format!("{what}: {r}"));
            false
        } else {
            true
        }
    };
    // Four-byte characters at every length bound, NUL and other control characters.
    for (label, text) in [
        ("crabs", "🦀".repeat(16000)),
        ("han", "漢".repeat(16000)),
        ("nul", format!("before\u{0}after {}", "\u{0}".repeat(100))),
        ("controls", "\u{1}\u{7f}\u{1b}[31m".repeat(2000)),
    ] {
        let r = rec(
            &st,
            &key,
            "work_on_project",
            json!({ "project": P, "instruction": text }),
            &w,
        )
        .await;
        if !check(format!("{label}: create"), &r) {
            continue;
        }
        let s = r["output"]["session_id"].as_str().unwrap().to_owned();
        let r = rec(
            &st,
            &key,
            "work_on_project",
            json!({ "session_id": s, "instruction": text }),
            &w,
        )
        .await;
        check(format!("{label}: resume"), &r);
        let r = rec(
            &st,
            &key,
            "list_tools",
            json!({ "category": text.chars().take(64).collect::<String>() }),
            &w,
        )
        .await;
        check(format!("{label}: recorded list_tools"), &r);
        let summary: String = text.chars().take(4000).collect();
        let r = rec(
            &st,
            &key,
            "finish_coding_task",
            json!({ "session_id": s, "summary": summary }),
            &w,
        )
        .await;
        if check(format!("{label}: finish"), &r) {
            assert_eq!(r["output"]["lifecycle"], "finished", "{label}");
            let rows = ledger(&db, &s).await;
            assert!(rows.iter().any(|e| e.kind == "session_finished"), "{label}");
        }
        let r = call(
            &st,
            &key,
            "session_handoff_summary",
            json!({ "session_id": s, "diagnostic": true }),
        )
        .await;
        if check(format!("{label}: handoff"), &r) {
            brief_of(&r);
        }
    }
    // Every recorded call left its pair, whatever the tool answered.
    let rows = ledger(&db, &w).await;
    let started = rows
        .iter()
        .filter(|e| e.kind == "tool_call_started")
        .count();
    let finished = rows
        .iter()
        .filter(|e| e.kind == "tool_call_finished")
        .count();
    assert_eq!(started, finished);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
