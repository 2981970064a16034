//! `session_summary`: a bounded view of a Workflow Session and its newest events.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use wc_domain::{EventKind, EventRole, Lifecycle, Mode, ProjectId, SessionId};
use wc_macros::{tool, tool_args};
use wc_store::sessions;

use crate::kernel::context::ToolContext;
use crate::result::ToolError;
use crate::workflow::exec_context::ExecutionContext;

/// Default and largest number of events in one summary.
pub const DEFAULT_LIMIT: u32 = 50;
/// Largest number of events in one summary.
pub const MAX_LIMIT: u32 = 200;

#[tool_args]
pub struct Args {
    /// The session.
    pub session_id: SessionId,
    /// Newest events to include (default 50, at most 200).
    #[schemars(range(min = 1, max = 200))]
    pub limit: Option<u32>,
}

/// One event as summarized.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SummaryEvent {
    /// Position in the ledger.
    pub seq: i64,
    /// Kind.
    pub kind: EventKind,
    /// When.
    pub occurred_at: DateTime<Utc>,
    /// `recorder` or `business`.
    pub role: EventRole,
    /// Tool, for call events.
    pub tool_name: Option<String>,
    /// Call pair id.
    pub call_id: String,
    /// Invocation id shared by the pairs of one call.
    pub invocation_id: String,
    /// Bounded, redacted payload.
    #[schemars(with = "serde_json::Map<String, Value>")]
    pub payload: Value,
}

/// Output of `session_summary`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The session.
    pub session_id: SessionId,
    /// Its project.
    pub project: ProjectId,
    /// Lifecycle.
    pub lifecycle: Lifecycle,
    /// Mode.
    pub mode: Mode,
    /// Execution defaults.
    pub execution_context: ExecutionContext,
    /// Events ever appended (cumulative, including those removed by retention).
    pub events_observed: i64,
    /// Whether retention removed older events; `counts` then describe the retained ledger,
    /// not the whole history (`events_observed` stays cumulative).
    pub retention_truncated: bool,
    /// Lowest retained seq.
    pub retained_from_seq: i64,
    /// Retained events by kind: the counts of the retained ledger (of every event ever
    /// appended while `retention_truncated` is false). Kept on the session row: each append
    /// adds its events' kinds and subtracts the kinds of the events retention removes in the
    /// same write, so a summary reads them without scanning the ledger.
    pub counts: BTreeMap<String, i64>,
    /// Message observation revision.
    pub message_observation_revision: i64,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// Newest events first.
    pub events: Vec<SummaryEvent>,
    /// How many events were returned.
    pub returned: usize,
}

/// Show a Workflow Session: lifecycle, mode, execution defaults, event counts and its newest events
/// (50 by default, at most 200).
#[tool(reads, Session, "Session summary", session = Reads)]
async fn session_summary(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let session = ctx.business_session(&args.session_id)?;
    let limit = i64::from(args.limit.unwrap_or(DEFAULT_LIMIT).min(MAX_LIMIT));
    let client = ctx.deps.client().await?;
    let events = sessions::recent_events(&client, &session.id, limit).await?;
    // Retained counts by kind, kept on the session row by every append.
    let counts = serde_json::from_value(session.kind_counts.clone()).unwrap_or_default();
    let events: Vec<SummaryEvent> = events
        .into_iter()
        .map(|e| SummaryEvent {
            seq: e.seq,
            kind: e.kind,
            occurred_at: e.occurred_at,
            role: e.role,
            tool_name: e.tool_name,
            call_id: e.call_id.to_string(),
            invocation_id: e.invocation_id.to_string(),
            payload: e.payload,
        })
        .collect();
    Ok(Output {
        session_id: session.id.clone(),
        project: session.project.clone(),
        lifecycle: session.lifecycle,
        mode: session.mode,
        execution_context: serde_json::from_value(session.execution_context.clone())
            .unwrap_or_default(),
        events_observed: session.events_observed,
        retention_truncated: session.retention_truncated(),
        retained_from_seq: session.retained_from_seq,
        counts,
        message_observation_revision: session.message_observation_revision,
        created_at: session.created_at,
        updated_at: session.updated_at,
        returned: events.len(),
        events,
    })
}
