//! `session_handoff_summary`: the bounded handoff brief of a Workflow Session, for a new
//! window, agent or person taking the work over.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};
use wc_domain::{ProjectId, SessionId};
use wc_macros::{tool, tool_args};
use wc_store::sessions;

use crate::kernel::context::ToolContext;
use crate::kernel::spec::BusinessPair;
use crate::result::ToolError;
use crate::workflow::evidence::Evidence;
use crate::workflow::feedback::ExplorationLimit;
use crate::workflow::handoff::WorkspaceEvidence;

#[tool_args]
pub struct Args {
    /// The session.
    pub session_id: SessionId,
    /// Observe the workspace (default true).
    pub include_workspace: Option<bool>,
    /// Observe validation (default true).
    pub include_validation: Option<bool>,
    /// Add detailed evidence: continuation feedback and the newest events (default false).
    pub diagnostic: Option<bool>,
    /// Events in the diagnostic view (default 50, at most 200).
    #[schemars(range(min = 1, max = 200))]
    pub limit: Option<u32>,
}

/// Output of `session_handoff_summary`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The session.
    pub session_id: SessionId,
    /// Its project.
    pub project: ProjectId,
    /// The version-1 handoff brief (at most 8,192 bytes serialized).
    #[schemars(with = "serde_json::Map<String, Value>")]
    pub handoff_brief: Value,
    /// Detailed evidence, with `diagnostic: true`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Map<String, Value>>")]
    pub diagnostic: Option<Value>,
}

/// Recover a Workflow Session's context: a bounded handoff brief with its instructions, progress,
/// workspace and validation status, attention counts and next actions.
#[tool(reads, Session, "Session handoff summary", session = Reads,
    with_business_pair(BusinessPair::UnlessRecorded),
)]
async fn session_handoff_summary(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let session = ctx.business_session(&args.session_id)?;
    // Snapshot fence: the two mutation dimensions as the kernel saw them before assembly.
    let fence = (
        session.events_observed,
        session.message_observation_revision,
    );
    let evidence = Evidence::load(&ctx.deps.pool, &session.id).await?;
    let validation = evidence.validation(args.include_validation.unwrap_or(true));
    let workspace = if args.include_workspace.unwrap_or(true) {
        crate::execution::operation::workspace(&ctx, &session.project).await
    } else {
        WorkspaceEvidence::NotRequested
    };
    let after = {
        let client = ctx.deps.client().await?;
        sessions::get(&client, &session.id).await?
    };
    let changed = match &after {
        Some(row) => {
            (row.events_observed, row.message_observation_revision) != fence
                || (
                    evidence.session.events_observed,
                    evidence.session.message_observation_revision,
                ) != fence
        }
        None => true,
    };
    let brief = evidence.brief(&workspace, &validation, changed);
    let diagnostic = args.diagnostic.unwrap_or(false).then(|| {
        let limit = args.limit.unwrap_or(50).min(200) as usize;
        let events: Vec<&wc_store::sessions::EventRow> =
            evidence.events.iter().rev().take(limit).collect();
        json!({
            "continuation_feedback": evidence
                .feedback(Some(ctx.invocation_id), &workspace, &validation, ExplorationLimit::Full)
                .to_json(),
            "events": events,
            "events_observed": evidence.session.events_observed,
            "retention_truncated": evidence.session.retention_truncated(),
        })
    });
    Ok(Output {
        session_id: session.id.clone(),
        project: session.project.clone(),
        handoff_brief: brief.to_json(),
        diagnostic,
    })
}
