//! The tasks extension (`io.modelcontextprotocol/tasks`, 2026-07-28) over durable task rows.
//!
//! rmcp parses `tasks/get`, `tasks/update` and `tasks/cancel`, checks `Mcp-Name` against the
//! task id and refuses a request that did not declare the extension (`-32021`); this module
//! answers them from Postgres ([`wc_store::tasks`]), so any instance serves any task. A tool
//! call becomes a task in the kernel ([`crate::kernel::task`]) and ends in the transaction
//! that ends its work, with its result and its recording's `tool_call_finished` events, as
//! [`WorkEnds`] decides; polls only read. A task of another authority group, an expired task
//! and an unknown id get the same `-32602`.

use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResult, CreateTaskResult, DetailedTask, GetTaskResult, InputRequests, JsonObject, Task,
    TaskPayload, TaskStatus as Wire,
};
use serde_json::{Value, json};
use wc_domain::{TaskId, TaskStatus, WorkState};
use wc_store::ChangeOutcome;
use wc_store::sessions::NewEvent;
use wc_store::tasks::{self, Ending, Step, TaskRow};
use wc_store::work::{EndedWork, WorkEnding, WorkRow};

use crate::AppState;
use crate::auth::{Principal, ProjectGrants};
use crate::kernel::CallEnds;
use crate::kernel::future::PortFuture;
use crate::kernel::task::TaskOffer;
use crate::result::ToolResult;
use crate::workflow::authority;

/// The offer of a task for a call whose request declared the extension.
pub(super) fn offer(state: &AppState) -> Arc<TaskOffer> {
    let cfg = &state.deps.config;
    TaskOffer::new(cfg.task_ttl, cfg.task_poll_interval, cfg.task_threshold)
}

/// The owner key of `who`'s tasks: its authority group.
pub(super) fn owner(who: &Principal) -> String {
    authority::fingerprint(who)
}

fn unknown(raw: &str) -> McpError {
    McpError::invalid_params(
        format!(
            "Failed to retrieve task: no task {} (unknown, expired, or not yours)",
            crate::telemetry::loggable(raw)
        ),
        None,
    )
}

fn store_error(e: impl std::fmt::Display) -> McpError {
    tracing::warn!(error = %crate::telemetry::loggable(&e.to_string()), "task store failure");
    McpError::internal_error("the task store is unavailable; retry", None)
}

fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn wire_status(s: TaskStatus) -> Wire {
    match s {
        TaskStatus::Working => Wire::Working,
        TaskStatus::InputRequired => Wire::InputRequired,
        TaskStatus::Completed => Wire::Completed,
        TaskStatus::Failed => Wire::Failed,
        TaskStatus::Cancelled => Wire::Cancelled,
    }
}

fn base(row: &TaskRow) -> Task {
    let mut task = Task::new(
        row.id.as_str(),
        wire_status(row.status),
        iso(row.created_at),
        iso(row.updated_at),
    )
    .with_ttl_ms(row.ttl_ms.max(1) as u64)
    .with_poll_interval_ms(row.poll_interval_ms.max(1) as u64);
    task.status_message = row.status_message.clone();
    task
}

/// The `CreateTaskResult` of a task just committed.
pub(super) fn created(row: &TaskRow) -> CreateTaskResult {
    CreateTaskResult::new(base(row)).with_meta(super::handler::server_meta())
}

fn object(v: &Option<Value>) -> JsonObject {
    match v {
        Some(Value::Object(m)) => m.clone(),
        _ => JsonObject::new(),
    }
}

/// The task as `tasks/get` shows it.
pub(super) fn detailed(row: &TaskRow) -> Result<DetailedTask, McpError> {
    let payload = match row.status {
        TaskStatus::Working => TaskPayload::Working,
        TaskStatus::InputRequired => {
            let input_requests: InputRequests =
                serde_json::from_value(row.input_requests.clone().unwrap_or_else(|| json!({})))
                    .map_err(|e| {
                        McpError::internal_error(format!("stored input requests: {e}"), None)
                    })?;
            TaskPayload::InputRequired { input_requests }
        }
        TaskStatus::Completed => TaskPayload::Completed {
            result: object(&row.result),
        },
        TaskStatus::Failed => TaskPayload::Failed {
            error: object(&row.error),
        },
        TaskStatus::Cancelled => TaskPayload::Cancelled,
    };
    Ok(DetailedTask::new(base(row), payload))
}

fn parse_id(raw: &str) -> Result<TaskId, McpError> {
    TaskId::parse(raw).map_err(|_| unknown(raw))
}

/// Loads `raw` for `who`: the row, or `-32602` for anything that is not theirs — another
/// authority group's, or (as `job_status` sees jobs) one whose work is in a project `who`'s
/// credential does not reach.
async fn load(state: &AppState, who: &Principal, raw: &str) -> Result<TaskRow, McpError> {
    let id = parse_id(raw)?;
    let client = state.deps.client().await.map_err(store_error)?;
    let row = tasks::get(&client, &id, &owner(who))
        .await
        .map_err(store_error)?
        .ok_or_else(|| unknown(raw))?;
    if let (Some(work_id), ProjectGrants::Only(_)) = (row.work_id, &who.projects) {
        let work = wc_store::work::get(&client, work_id)
            .await
            .map_err(store_error)?;
        if !work.is_some_and(|w| who.projects.allows(&w.project_id)) {
            return Err(unknown(raw));
        }
    }
    Ok(row)
}

/// `raw` if it is `who`'s live task; `None` for any id `tasks/get` would refuse.
pub(super) async fn owned(
    state: &AppState,
    who: &Principal,
    raw: &str,
) -> Result<Option<TaskRow>, McpError> {
    match load(state, who, raw).await {
        Ok(row) => Ok(Some(row)),
        Err(e) if e.code == rmcp::model::ErrorCode::INVALID_PARAMS => Ok(None),
        Err(e) => Err(e),
    }
}

/// `who`'s task `raw` as `tasks/get` shows it: an open task says how its work is doing now
/// (read, not stored).
pub(super) async fn observe(
    state: &AppState,
    who: &Principal,
    raw: &str,
) -> Result<TaskRow, McpError> {
    let mut row = load(state, who, raw).await?;
    if let (false, Some(work_id)) = (row.status.is_terminal(), row.work_id) {
        let client = state.deps.client().await.map_err(store_error)?;
        if let Some(work) = wc_store::work::get(&client, work_id)
            .await
            .map_err(store_error)?
        {
            row.status_message = Some(crate::execution::progress_of(&work, Utc::now()).message);
        }
    }
    Ok(row)
}

/// Applies `step` to the task under its lock; the row as it then is.
pub(super) async fn change<F>(
    state: &AppState,
    row: &TaskRow,
    decide: F,
) -> Result<TaskRow, McpError>
where
    F: Fn(&TaskRow) -> Option<Step> + Send + Sync + 'static,
{
    // Nothing secret is stored: what a step keeps (a result, an error, a client's answers)
    // goes through the redaction every durable copy of a result takes.
    let decide = move |row: &TaskRow| decide(row).map(redacted);
    match tasks::change(
        &state.deps.pool,
        &row.id,
        &row.owner_authority_fingerprint,
        decide,
    )
    .await
    .map_err(store_error)?
    {
        ChangeOutcome::Applied {
            value: Some(row), ..
        } => Ok(row),
        ChangeOutcome::Applied { value: None, .. } => Err(unknown(row.id.as_str())),
        ChangeOutcome::Conflict { .. } => {
            Err(McpError::internal_error("the task is busy; retry", None))
        }
    }
}

/// `step` as it may be stored: its result, error and answers redacted ([`redacted_end`]).
fn redacted(step: Step) -> Step {
    match step {
        Step::End(end) => Step::End(redacted_end(end)),
        Step::Answer(mut answers) => {
            crate::redaction::redact_json(&mut answers);
            Step::Answer(answers)
        }
        other => other,
    }
}

/// `end` as it may be stored: its result, error and message redacted, as every durable copy
/// of a result is. A text block of the result that is its structured content as JSON is
/// written again from the redacted content, so the two still agree and the text stays JSON.
fn redacted_end(mut end: Ending) -> Ending {
    use crate::redaction::{redact, redact_json};
    if let Some(result) = end.result.as_mut() {
        let structured = result.get("structuredContent").cloned();
        let mirrors: Vec<bool> = result
            .get("content")
            .and_then(Value::as_array)
            .map(|blocks| {
                blocks
                    .iter()
                    .map(|b| {
                        let text = b.get("text").and_then(Value::as_str);
                        let parsed = text.and_then(|t| serde_json::from_str(t).ok());
                        structured.is_some() && parsed == structured
                    })
                    .collect()
            })
            .unwrap_or_default();
        redact_json(result);
        let text = result.get("structuredContent").map(Value::to_string);
        if let (Some(text), Some(blocks)) = (
            text,
            result.get_mut("content").and_then(Value::as_array_mut),
        ) {
            for (block, mirror) in blocks.iter_mut().zip(mirrors) {
                if mirror {
                    block["text"] = Value::String(text.clone());
                }
            }
        }
    }
    if let Some(error) = end.error.as_mut() {
        redact_json(error);
    }
    end.status_message = end.status_message.map(|m| redact(&m).into_owned());
    end
}

/// How a surface reads a client's task for `tasks/get` and `subscriptions/listen`.
pub(crate) type Read =
    for<'a> fn(&'a AppState, &'a Principal, &'a str) -> PortFuture<'a, Result<TaskRow, McpError>>;

/// The [`Read`] of wc's tasks: [`observe`].
pub(crate) fn read<'a>(
    state: &'a AppState,
    who: &'a Principal,
    raw: &'a str,
) -> PortFuture<'a, Result<TaskRow, McpError>> {
    Box::pin(observe(state, who, raw))
}

/// The `tasks/get` answer showing `row`.
pub(crate) fn shown(row: &TaskRow) -> Result<GetTaskResult, McpError> {
    let mut result = GetTaskResult::new(detailed(row)?);
    result.meta = Some(super::handler::server_meta());
    Ok(result)
}

/// `tasks/cancel`: notes the request and stops the task's work (as `stop_job` does); the task
/// ends `cancelled` once the work has stopped, or with its result if it ended first. A
/// terminal task is left as it is.
pub(super) async fn cancel(state: &AppState, who: &Principal, raw: &str) -> Result<(), McpError> {
    let row = load(state, who, raw).await?;
    if row.status.is_terminal() {
        return Ok(());
    }
    let row = change(state, &row, |_| Some(Step::RequestCancel)).await?;
    if let Some(work_id) = row.work_id {
        // Queued work ends at once, and the task with it.
        let mut client = state.deps.client().await.map_err(store_error)?;
        wc_store::work::request_cancel(&mut client, work_id, &*state.deps.work_ends)
            .await
            .map_err(store_error)?;
    }
    Ok(())
}

/// `tasks/update`: records the answers to outstanding input requests (others are ignored).
pub(super) async fn update(
    state: &AppState,
    who: &Principal,
    raw: &str,
    responses: &rmcp::model::InputResponses,
) -> Result<(), McpError> {
    let row = load(state, who, raw).await?;
    let answers = serde_json::to_value(responses)
        .map_err(|e| McpError::invalid_params(format!("inputResponses: {e}"), None))?;
    if row.status == TaskStatus::InputRequired {
        change(state, &row, move |r| {
            (r.status == TaskStatus::InputRequired).then(|| Step::Answer(answers.clone()))
        })
        .await?;
    }
    Ok(())
}

/// How work ends beside it, for every surface and path that ends work: its
/// `execution_finished` evidence ([`crate::execution::terminal_evidence`]) and the end of the
/// MCP task waiting for it, as the kernel finishes the call ([`CallEnds`]).
#[derive(Debug)]
pub struct WorkEnds {
    calls: CallEnds,
}

impl WorkEnds {
    /// The ending of work whose tasks `calls` finishes.
    pub fn new(calls: CallEnds) -> WorkEnds {
        WorkEnds { calls }
    }
}

impl WorkEnding for WorkEnds {
    fn evidence(&self, row: &WorkRow, answer: Option<&Value>) -> Option<NewEvent> {
        crate::execution::terminal_evidence(row, answer)
    }

    fn head_bytes(&self) -> i64 {
        crate::execution::SYNC_OUTPUT_BYTES as i64
    }

    fn task_end(&self, task: &TaskRow, work: &EndedWork<'_>) -> Ending {
        redacted_end(match self.calls.end(task, work) {
            Ok(end) => ending(task, end, work.row.state == WorkState::Cancelled),
            // This build cannot finish the call: the task fails rather than wait forever.
            Err(e) => Ending {
                status: TaskStatus::Failed,
                result: None,
                error: Some(json!({"code": -32603, "message": e.message})),
                status_message: Some(format!("{} could not be finished", task.tool)),
                events: Vec::new(),
            },
        })
    }
}

/// How a kernel task ends: `cancelled` when its cancellation stopped the work, otherwise
/// `completed` with the call's result (a tool error is a completed task whose result says
/// `isError`).
fn ending(row: &TaskRow, end: crate::kernel::TaskEnd, work_cancelled: bool) -> Ending {
    let success = end.result.success;
    if row.cancel_requested_at.is_some() && work_cancelled {
        return Ending {
            status: TaskStatus::Cancelled,
            result: None,
            error: None,
            status_message: Some("cancelled on request: its work was stopped".into()),
            events: end.events,
        };
    }
    let json = serde_json::to_string(&end.result).expect("tool results serialize");
    let result = call_tool_result(end.result, json, true);
    Ending {
        status: TaskStatus::Completed,
        result: serde_json::to_value(result).ok(),
        error: None,
        status_message: Some(if success {
            format!("{} finished", row.tool)
        } else {
            format!("{} finished with an error", row.tool)
        }),
        events: end.events,
    }
}

/// The MCP result of `result`, whose one serialization `json` is the text block and whose
/// value is `structuredContent`.
pub(super) fn call_tool_result(result: ToolResult, json: String, modern: bool) -> CallToolResult {
    let success = result.success;
    let mut out = CallToolResult::success(vec![rmcp::model::ContentBlock::text(json)]);
    out.structured_content = Some(result.into_value());
    out.is_error = Some(!success);
    if modern {
        out.meta = Some(super::handler::server_meta());
    }
    out
}
