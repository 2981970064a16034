//! Durable MCP tasks: one tool call whose result is collected later, by any instance.
//!
//! A task row is written with the work it waits for (in the transaction that queues the
//! work, [`crate::work::enqueue`]) or alone for a task the server answers by itself
//! ([`insert`]); it is never returned before it is committed. A task that waits for work ends
//! in the transaction that ends its work ([`crate::work::ending`]); every other change is a
//! read–decide–write under the task row's lock ([`change`]). An end appends the call's
//! `tool_call_finished` events to its sessions and writes the terminal status in one
//! transaction, so it lands exactly once, and readers only read. Locks are taken task row
//! first, then session rows; no path holds a session row's lock while it waits for a task
//! row's.

use std::sync::{Arc, LazyLock};

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio_postgres::Row;
use uuid::Uuid;
use wc_domain::{SessionId, TaskId, TaskStatus};

use crate::change::{self, ChangeOutcome, RETRY, StepFuture};
use crate::sessions::{self, NewEvent};
use crate::{GenericClient, Pool, StoreError};

/// A task as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRow {
    /// Id.
    pub id: TaskId,
    /// Fingerprint of the creator's authority group.
    pub owner_authority_fingerprint: String,
    /// The tool called.
    pub tool: String,
    /// Status.
    pub status: TaskStatus,
    /// What the status means now, for the client.
    pub status_message: Option<String>,
    /// The runner work it waits for.
    pub work_id: Option<Uuid>,
    /// The Workflow Session the call works in.
    pub session_id: Option<SessionId>,
    /// The call's suspended recording.
    pub recording: Value,
    /// What its driver keeps between polls.
    pub plan: Value,
    /// Outstanding input requests by key, while `input_required`.
    pub input_requests: Option<Value>,
    /// Answers received so far, by key.
    pub input_responses: Value,
    /// The call's result, once completed.
    pub result: Option<Value>,
    /// The protocol error that ended it, once failed.
    pub error: Option<Value>,
    /// When its cancellation was asked for.
    pub cancel_requested_at: Option<DateTime<Utc>>,
    /// Created at.
    pub created_at: DateTime<Utc>,
    /// Last changed at.
    pub updated_at: DateTime<Utc>,
    /// Time to live from creation, in milliseconds.
    pub ttl_ms: i64,
    /// Suggested polling interval, in milliseconds.
    pub poll_interval_ms: i32,
}

const COLUMNS: &str = "id, owner_authority_fingerprint, tool, status, status_message, work_id, \
     session_id, recording, plan, input_requests, input_responses, result, error, \
     cancel_requested_at, created_at, updated_at, ttl_ms, poll_interval_ms";

fn from_row(r: &Row) -> TaskRow {
    TaskRow {
        id: r.get("id"),
        owner_authority_fingerprint: r.get("owner_authority_fingerprint"),
        tool: r.get("tool"),
        status: r.get("status"),
        status_message: r.get("status_message"),
        work_id: r.get("work_id"),
        session_id: r.get("session_id"),
        recording: r.get("recording"),
        plan: r.get("plan"),
        input_requests: r.get("input_requests"),
        input_responses: r.get("input_responses"),
        result: r.get("result"),
        error: r.get("error"),
        cancel_requested_at: r.get("cancel_requested_at"),
        created_at: r.get("created_at"),
        updated_at: r.get("updated_at"),
        ttl_ms: r.get("ttl_ms"),
        poll_interval_ms: r.get("poll_interval_ms"),
    }
}

/// A task to create.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTask {
    /// Fresh id.
    pub id: TaskId,
    /// Fingerprint of the creator's authority group.
    pub owner_authority_fingerprint: String,
    /// The tool called.
    pub tool: String,
    /// The runner work it waits for (set by the enqueue that carries it).
    pub work_id: Option<Uuid>,
    /// The Workflow Session the call works in.
    pub session_id: Option<SessionId>,
    /// The call's suspended recording.
    pub recording: Value,
    /// Its driver's initial plan.
    pub plan: Value,
    /// Outstanding input requests, when it starts out waiting for input.
    pub input_requests: Option<Value>,
    /// Status message to start with.
    pub status_message: Option<String>,
    /// Time to live from creation, in milliseconds.
    pub ttl_ms: i64,
    /// Suggested polling interval, in milliseconds.
    pub poll_interval_ms: i32,
}

/// Inserts `task`, in whatever transaction `client` is in. Its status is `input_required`
/// when it starts with input requests, else `working`.
pub async fn insert(client: &impl GenericClient, task: &NewTask) -> Result<TaskRow, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "INSERT INTO mcp_tasks (id, owner_authority_fingerprint, tool, status, status_message, \
               work_id, session_id, recording, plan, input_requests, ttl_ms, expires_at, \
               poll_interval_ms) \
             VALUES ($1::text, $2::text, $3::text, \
               CASE WHEN $9::jsonb IS NULL THEN 'working' ELSE 'input_required' END, $4::text, \
               $5, $6::text, $7::jsonb, $8::jsonb, $9::jsonb, $10, \
               now() + make_interval(secs => $10::bigint / 1000.0), $11) \
             RETURNING {COLUMNS}"
        ))
        .await?;
    let row = client
        .query_one(
            &stmt,
            &[
                &task.id.as_str(),
                &task.owner_authority_fingerprint,
                &task.tool,
                &task.status_message,
                &task.work_id,
                &task.session_id.as_ref().map(|s| s.as_str()),
                &task.recording,
                &task.plan,
                &task.input_requests,
                &task.ttl_ms,
                &task.poll_interval_ms,
            ],
        )
        .await?;
    Ok(from_row(&row))
}

/// Task `id` as its owner sees it: `None` when it does not exist, has expired, or belongs to
/// another authority group (the same answer for all three).
pub async fn get(
    client: &impl GenericClient,
    id: &TaskId,
    owner: &str,
) -> Result<Option<TaskRow>, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM mcp_tasks WHERE id = $1::text \
               AND owner_authority_fingerprint = $2::text AND expires_at > now()"
        ))
        .await?;
    Ok(client
        .query_opt(&stmt, &[&id.as_str(), &owner])
        .await?
        .as_ref()
        .map(from_row))
}

/// How a task ends.
#[derive(Debug, Clone, PartialEq)]
pub struct Ending {
    /// The terminal status.
    pub status: TaskStatus,
    /// The result, for `completed`.
    pub result: Option<Value>,
    /// The protocol error, for `failed`.
    pub error: Option<Value>,
    /// What to tell the client.
    pub status_message: Option<String>,
    /// The call's `tool_call_finished` events, per session, appended with the end.
    pub events: Vec<(SessionId, Vec<NewEvent>)>,
}

/// What a change of an open task decides, given its locked row.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// End it (its events land in the same transaction).
    End(Ending),
    /// Record answers to outstanding input requests: each key of the object that is
    /// outstanding is kept, any other is ignored; the status follows what is still open.
    Answer(Value),
    /// Note that its cancellation was asked for (the first time only).
    RequestCancel,
}

static LOCK: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {COLUMNS} FROM mcp_tasks WHERE id = $1::text \
           AND owner_authority_fingerprint = $2::text AND expires_at > now() FOR UPDATE"
    )
});

/// Applies `decide`'s step to task `id` of `owner` under its row lock. `decide` sees the
/// locked row and returns `None` to leave it as it is (a terminal task is never changed:
/// `decide` is not asked). Returns the row as it then is; `None` when the owner has no such
/// task. `decide` may run once per attempt and must decide from the row alone.
pub async fn change<F>(
    pool: &Pool,
    id: &TaskId,
    owner: &str,
    decide: F,
) -> Result<ChangeOutcome<Option<TaskRow>>, StoreError>
where
    F: Fn(&TaskRow) -> Option<Step> + Send + Sync + 'static,
{
    let decide = Arc::new(decide);
    let ran = change::locked(
        pool,
        &RETRY,
        &LOCK,
        &[&id.as_str(), &owner],
        |tx, locked| -> StepFuture<'_, Option<TaskRow>> {
            let decide = decide.clone();
            Box::pin(async move {
                let Some(row) = locked.as_ref().map(from_row) else {
                    return Ok(None);
                };
                if row.status.is_terminal() {
                    return Ok(Some(row));
                }
                let Some(step) = decide(&row) else {
                    return Ok(Some(row));
                };
                Ok(Some(apply(&**tx, &row, step).await?))
            })
        },
    )
    .await;
    ChangeOutcome::of(ran, &RETRY)
}

async fn apply(
    client: &impl GenericClient,
    row: &TaskRow,
    step: Step,
) -> Result<TaskRow, StoreError> {
    let id = row.id.as_str();
    let written = match step {
        Step::End(ending) => {
            if !ending.status.is_terminal() {
                return Err(StoreError::CorruptRow {
                    table: "mcp_tasks",
                    detail: format!("an end with the open status {}", ending.status),
                });
            }
            // Evidence first: a session that went away takes nothing, the end still lands.
            for (session, events) in &ending.events {
                if !events.is_empty() {
                    sessions::append(client, session, events, false).await?;
                }
            }
            let stmt = client
                .prepare_cached(&format!(
                    "UPDATE mcp_tasks SET status = $2::text, result = $3::jsonb, error = $4::jsonb, \
                       status_message = $5::text, input_requests = NULL, updated_at = now(), \
                       ended_at = now() \
                     WHERE id = $1::text RETURNING {COLUMNS}"
                ))
                .await?;
            client
                .query_one(
                    &stmt,
                    &[
                        &id,
                        &ending.status.as_str(),
                        &ending.result,
                        &ending.error,
                        &ending.status_message,
                    ],
                )
                .await?
        }
        Step::Answer(answers) => {
            // Only outstanding keys are kept; the request is then no longer outstanding.
            let stmt = client
                .prepare_cached(&format!(
                    "WITH a AS ( \
                       SELECT coalesce(jsonb_object_agg(k, v), '{{}}'::jsonb) AS kept \
                       FROM jsonb_each($2::jsonb) AS e(k, v) \
                       WHERE (SELECT input_requests FROM mcp_tasks WHERE id = $1::text) ? k), \
                     n AS ( \
                       SELECT t.input_responses || a.kept AS responses, \
                         (SELECT nullif(coalesce(jsonb_object_agg(k, v), '{{}}'::jsonb), '{{}}'::jsonb) \
                          FROM jsonb_each(t.input_requests) AS r(k, v) WHERE NOT a.kept ? k) AS open \
                       FROM mcp_tasks t, a WHERE t.id = $1::text) \
                     UPDATE mcp_tasks SET input_responses = n.responses, input_requests = n.open, \
                       status = CASE WHEN n.open IS NULL THEN 'working' ELSE 'input_required' END, \
                       updated_at = now() \
                     FROM n WHERE id = $1::text RETURNING {COLUMNS}"
                ))
                .await?;
            client.query_one(&stmt, &[&id, &answers]).await?
        }
        Step::RequestCancel => {
            let stmt = client
                .prepare_cached(&format!(
                    "UPDATE mcp_tasks SET cancel_requested_at = coalesce(cancel_requested_at, now()), \
                       updated_at = now() \
                     WHERE id = $1::text RETURNING {COLUMNS}"
                ))
                .await?;
            client.query_one(&stmt, &[&id]).await?
        }
    };
    Ok(from_row(&written))
}

/// Locks the open tasks that wait for any of `work`, in id order: the tasks a work ending
/// ends in its transaction ([`crate::work::ending`]).
pub(crate) async fn lock_open_on(
    tx: &impl GenericClient,
    work: &[Uuid],
) -> Result<Vec<TaskRow>, StoreError> {
    let stmt = tx
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM mcp_tasks \
             WHERE work_id = ANY($1) AND status IN ('working', 'input_required') \
             ORDER BY id FOR UPDATE"
        ))
        .await?;
    Ok(tx
        .query(&stmt, &[&work])
        .await?
        .iter()
        .map(from_row)
        .collect())
}

/// Ends `task`, whose row `tx` holds locked and open, as `ending` says.
pub(crate) async fn end(
    tx: &impl GenericClient,
    task: &TaskRow,
    ending: Ending,
) -> Result<TaskRow, StoreError> {
    apply(tx, task, Step::End(ending)).await
}

/// Deletes up to `limit` tasks whose TTL has passed; returns how many.
pub async fn prune_expired(client: &impl GenericClient, limit: i64) -> Result<u64, StoreError> {
    let stmt = client
        .prepare_cached(
            "DELETE FROM mcp_tasks WHERE id IN ( \
               SELECT id FROM mcp_tasks WHERE expires_at <= now() ORDER BY expires_at LIMIT $1 \
               FOR UPDATE SKIP LOCKED)",
        )
        .await?;
    Ok(client.execute(&stmt, &[&limit]).await?)
}
