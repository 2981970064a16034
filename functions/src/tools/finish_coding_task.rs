//! `finish_coding_task`: close out the task of a Workflow Session: the session becomes
//! `finished` (no further changes) and the caller gets the handoff brief and continuation
//! feedback of the finished work.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};
use wc_domain::{EventKind, EventRole, Lifecycle, ProjectId, SessionId};
use wc_macros::{tool, tool_args};
use wc_store::sessions::{Decision, NewEvent, SessionChange};

use crate::auth::Scope;
use crate::kernel::context::ToolContext;
use crate::result::ToolError;
use crate::workflow::evidence::Evidence;
use crate::workflow::excerpt::{excerpt, shrink_to_bytes};
use crate::workflow::feedback::ExplorationLimit;
use crate::workflow::mutation;

/// Longest closing summary accepted, in characters.
pub const MAX_SUMMARY_CHARS: usize = 4000;
/// Bytes of UTF-8 the stored summary may take (ledger rows hold at most 8 KiB of JSON; 4,000
/// characters of a non-Latin script do not fit).
pub const STORED_SUMMARY_BYTES: usize = 6000;

#[tool_args]
pub struct Args {
    /// The session.
    pub session_id: SessionId,
    /// What was done, in plain words (at most 4,000 characters; stored redacted).
    #[schemars(length(max = 4000))]
    pub summary: Option<String>,
}

/// Output of `finish_coding_task`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The session.
    pub session_id: SessionId,
    /// Its project.
    pub project: ProjectId,
    /// Now `finished`.
    pub lifecycle: Lifecycle,
    /// The handoff brief of the finished session.
    #[schemars(with = "serde_json::Map<String, Value>")]
    pub handoff_brief: Value,
    /// Feedback about the finished attempt.
    #[schemars(with = "serde_json::Map<String, Value>")]
    pub continuation_feedback: Value,
}

/// Finish a Workflow Session's task: the session becomes finished and refuses further changes.
/// Returns its handoff brief, continuation feedback and the project's Git state.
#[tool(consequential, Session, "Finish coding task", session = Changes,
    scopes(&[Scope::ProjectRead, Scope::ProjectWrite]),
)]
async fn finish_coding_task(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let session = ctx.business_session(&args.session_id)?;
    // The workspace as it is handed over, observed before the session ends.
    let workspace = crate::execution::operation::workspace(&ctx, &session.project).await;
    let summary = args.summary.as_deref().map(|s| {
        let mut e = excerpt(s, MAX_SUMMARY_CHARS);
        shrink_to_bytes(&mut e, STORED_SUMMARY_BYTES);
        json!({ "excerpt": e.text, "truncated": e.truncated })
    });
    let event = NewEvent {
        kind: EventKind::SessionFinished,
        call_id: uuid::Uuid::now_v7(),
        invocation_id: ctx.invocation_id,
        role: EventRole::Business,
        tool_name: Some("finish_coding_task".into()),
        payload: json!({ "summary": summary }),
    };
    mutation::mutate(&ctx.deps.pool, &session.id, move |row| {
        if !row.is_active() {
            return Decision::Leave(Err(mutation::closed(row)));
        }
        Decision::Write(
            SessionChange {
                lifecycle: Some(Lifecycle::Finished),
                ..Default::default()
            },
            vec![event.clone()],
            Ok(()),
        )
    })
    .await?;
    crate::execution::shell::release_for_session(&ctx, &session.id).await;
    let evidence = Evidence::load(&ctx.deps.pool, &session.id).await?;
    let validation = evidence.validation(true);
    Ok(Output {
        session_id: session.id.clone(),
        project: session.project.clone(),
        lifecycle: evidence.session.lifecycle,
        handoff_brief: evidence.brief(&workspace, &validation, false).to_json(),
        continuation_feedback: evidence
            .feedback(
                Some(ctx.invocation_id),
                &workspace,
                &validation,
                ExplorationLimit::Full,
            )
            .to_json(),
    })
}
