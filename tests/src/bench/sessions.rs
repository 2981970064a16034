//! Workflow Session scenarios: recorded calls over stateless MCP, the same SQL sent straight
//! through the store (the floor), one hot session under many writers, and a recorded call with
//! 100,000 sessions already stored.

use std::sync::Arc;
use std::time::Duration;
use wc_domain::{EventKind, EventRole, SessionId};

use serde_json::{Value, json};
use wc_store::ChangeOutcome;
use wc_store::Pool;
use wc_store::audit::{self, Affinity, NewActionEvent};
use wc_store::sessions::{self, Decision, NewEvent, SessionChange};
use wc_store::testing::TestDatabase;

use super::mcp::{call_tool_ok, mcp_request};
use super::{OpFuture, drive, drive_paired, report, round};
use crate::client::Client;

/// Starts one Workflow Session per worker through REST `work_on_project`.
pub async fn start_sessions(
    base: &str,
    token: &str,
    project: &str,
    n: usize,
) -> anyhow::Result<Vec<String>> {
    let client = Client::new();
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let r = client
            .post_json(
                &format!("{base}/api/actions/work_on_project"),
                Some(token),
                &json!({ "project": project, "instruction": format!("benchmark worker {i}") }),
            )
            .await?;
        anyhow::ensure!(
            r.status == 200,
            "work_on_project answered {}: {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        );
        let v = r.json();
        anyhow::ensure!(v["success"] == json!(true), "work_on_project failed: {v}");
        ids.push(
            v["output"]["session_id"]
                .as_str()
                .ok_or_else(|| anyhow::anyhow!("work_on_project gave no session_id: {v}"))?
                .to_owned(),
        );
    }
    Ok(ids)
}

/// `session_summary` of the worker's own session, recorded in it, over stateless MCP.
pub async fn recorded_call(
    scenario: &'static str,
    base: &str,
    token: &str,
    sessions: Arc<Vec<String>>,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<Value> {
    let op = recorded_call_op(base, token, sessions);
    let (samples, _) = drive(concurrency, duration, op).await;
    Ok(report(scenario, concurrency, samples))
}

/// `mcp_recorded_call` measured against `sql_floor_recorded_call` in alternating slices
/// ([`drive_paired`]): the floor's report line, and the call's with `ratio_to_floor` and
/// `ratio_to_floor_by_round`.
pub async fn recorded_call_against_floor(
    inputs: FloorInputs,
    base: &str,
    token: &str,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<(Value, Value)> {
    let sessions = inputs.sessions.clone();
    let paired = drive_paired(
        concurrency,
        duration,
        floor_op(inputs),
        recorded_call_op(base, token, sessions),
    )
    .await;
    Ok(paired.reports(
        "sql_floor_recorded_call",
        "mcp_recorded_call",
        concurrency,
        "ratio_to_floor",
    ))
}

/// One `mcp_recorded_call` operation: `session_summary` of the worker's session, recorded in
/// it, on the server at `base`.
pub fn recorded_call_op(
    base: &str,
    token: &str,
    sessions: Arc<Vec<String>>,
) -> impl Fn(usize) -> OpFuture + Send + Sync + 'static {
    let client = Client::new();
    let url = Arc::new(format!("{base}/mcp"));
    let token = Arc::new(format!("Bearer {token}"));
    move |worker| {
        let client = client.clone();
        let url = url.clone();
        let token = token.clone();
        let session = sessions[worker % sessions.len()].clone();
        Box::pin(async move {
            let params = json!({
                "name": "session_summary",
                "arguments": { "session_id": session, "recording_session_id": session },
            });
            let (mut headers, body) = mcp_request("tools/call", Some("session_summary"), params);
            headers.push(("authorization".into(), (*token).clone()));
            call_tool_ok(&client, &url, &headers, body.into()).await?;
            Ok(vec![])
        })
    }
}

/// What the floor needs to replay a recorded `session_summary` call's SQL.
#[derive(Clone)]
pub struct FloorInputs {
    /// Pool on the server's database.
    pub pool: Pool,
    /// SHA-256 of the bearer token.
    pub token_digest: [u8; 32],
    /// Per-worker sessions.
    pub sessions: Arc<Vec<String>>,
    /// The caller's audit fingerprint (any fixed value: one audit session, like one caller).
    pub audit_caller: String,
}

fn pair(role: EventRole, invocation: uuid::Uuid) -> [NewEvent; 2] {
    let call = uuid::Uuid::now_v7();
    let ev = |kind: EventKind, payload: Value| NewEvent {
        kind,
        call_id: call,
        invocation_id: invocation,
        role,
        tool_name: Some("session_summary".into()),
        payload,
    };
    [
        ev(
            EventKind::ToolCallStarted,
            json!({ "tool": "session_summary", "started_at": chrono_now(), "arguments": {} }),
        ),
        ev(
            EventKind::ToolCallFinished,
            json!({ "tool": "session_summary", "success": true, "execution_state": "completed", "duration_ms": 1 }),
        ),
    ]
}

fn chrono_now() -> String {
    format!("{:?}", std::time::SystemTime::now())
}

/// The statements one recorded `session_summary` call issues, sent straight through the store
/// with no HTTP, JSON-RPC, auth parsing or serialization: authenticate (credential lookup), load
/// and authorize the session (one load: the recorder is the business session; it carries the
/// counts), read the newest 50 events, append the recorder and business pairs in one statement,
/// and write the audit event. Keep in step with `ToolRuntime::invoke` and the audit middleware.
pub async fn sql_floor(
    inputs: FloorInputs,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<Value> {
    let (samples, _) = drive(concurrency, duration, floor_op(inputs)).await;
    Ok(report("sql_floor_recorded_call", concurrency, samples))
}

fn floor_op(inputs: FloorInputs) -> impl Fn(usize) -> OpFuture + Send + Sync + 'static {
    move |worker| {
        let inputs = inputs.clone();
        Box::pin(async move {
            let session = &SessionId::parse(&inputs.sessions[worker % inputs.sessions.len()])?;
            {
                let client = inputs.pool.get().await?;
                wc_store::credentials::find_active_by_digest(&client, &inputs.token_digest)
                    .await?
                    .ok_or_else(|| anyhow::anyhow!("token not found"))?;
                sessions::get(&client, session)
                    .await?
                    .ok_or_else(|| anyhow::anyhow!("no session"))?;
                sessions::recent_events(&client, session, 50).await?;
            }
            let invocation = uuid::Uuid::now_v7();
            let [rs, rf] = pair(EventRole::Recorder, invocation);
            let [bs, bf] = pair(EventRole::Business, invocation);
            let events = vec![rs, bs, bf, rf];
            let out = {
                let client = inputs.pool.get().await?;
                sessions::append(&client, session, &events, false).await?
            };
            anyhow::ensure!(
                matches!(out, sessions::Appended::Done(_)),
                "append did not apply"
            );
            let event = NewActionEvent {
                endpoint: "/mcp".into(),
                http_method: "POST".into(),
                action_name: "session_summary".into(),
                operation: "mcp_tools_call".into(),
                status_code: 200,
                success: true,
                duration_ms: 1,
                request_id: Some(uuid::Uuid::now_v7().to_string()),
                summary: json!({ "transport": "mcp" }),
                principal_kind: Some("shared_key".into()),
                principal_user_id: None,
                oauth_client_id: None,
            };
            audit::record(
                &inputs.pool,
                &inputs.audit_caller,
                &Affinity::Reuse {
                    idle: Duration::from_secs(1800),
                },
                event,
            )
            .await?;
            Ok(vec![])
        })
    }
}

/// Writers appending a recorder pair to one session at once, as the recorder does (one guarded
/// statement per append, no read first, nothing to retry), or, with `locked`,
/// through the read–decide–write path tools use (`sessions::mutate`: the row loaded
/// `FOR UPDATE`, a decision, a write), which reports its retries per call.
pub async fn hot_session(
    db: &TestDatabase,
    session: &str,
    concurrency: usize,
    duration: Duration,
    locked: bool,
) -> anyhow::Result<Value> {
    let mut cfg = db.config();
    cfg.max_connections = concurrency;
    let pool = wc_store::pool::build_pool(&cfg)?;
    let session = Arc::new(SessionId::parse(session)?);
    let (mut samples, sums) = drive(concurrency, duration, move |_| {
        let pool = pool.clone();
        let session = session.clone();
        async move {
            let events = pair(EventRole::Recorder, uuid::Uuid::now_v7()).to_vec();
            if !locked {
                let client = pool.get().await?;
                let out = sessions::append(&client, &session, &events, true).await?;
                anyhow::ensure!(
                    matches!(out, sessions::Appended::Done(_)),
                    "append did not apply"
                );
                return Ok(vec![]);
            }
            let out = sessions::mutate(&pool, &session, move |_| {
                Decision::Write(SessionChange::default(), events.clone(), ())
            })
            .await?;
            Ok(match out {
                ChangeOutcome::Applied { attempts, .. } => vec![u64::from(attempts - 1), 0],
                ChangeOutcome::Conflict { attempts } => vec![u64::from(attempts), 1],
            })
        }
    })
    .await;
    // An append has no retry loop to count; the locked path reports its retries.
    if locked {
        let ops = samples.latencies.len().max(1) as f64;
        samples.extra.insert(
            "retries_per_call".into(),
            json!(round(sums.first().copied().unwrap_or(0) as f64 / ops)),
        );
        samples
            .extra
            .insert("conflicts".into(), json!(sums.get(1).copied().unwrap_or(0)));
    }
    samples.extra.insert(
        "path".into(),
        json!(if locked { "mutate" } else { "append" }),
    );
    Ok(report(
        if locked {
            "hot_session_locked"
        } else {
            "hot_session"
        },
        concurrency,
        samples,
    ))
}
