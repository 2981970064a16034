//! `start_session`: create a fresh Workflow Session on a project, and nothing more. The plain
//! create of the compatibility surface: the same authority, project and mode rules as a
//! `work_on_project` start (one code path, [`work_on_project::create`]), without its startup
//! projection (no continuation feedback, workflow guidance or project instructions).

use schemars::JsonSchema;
use serde::Serialize;
use wc_domain::{Lifecycle, Mode, ProjectId, SessionId};
use wc_macros::{tool, tool_args};

use super::work_on_project;
use crate::auth::Scope;
use crate::kernel::context::ToolContext;
use crate::result::ToolError;
use crate::workflow::exec_context::ExecutionContext;

#[tool_args]
pub struct Args {
    /// Project id (`agent:<client>:<name>`).
    pub project: ProjectId,
    /// The task, in plain words (at most 16,000 characters).
    #[schemars(length(min = 1, max = 16000))]
    pub instruction: String,
    /// `normal` (default) or `read_only`.
    pub mode: Option<Mode>,
}

/// Output of `start_session`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The new session's id.
    pub session_id: SessionId,
    /// The project.
    pub project: ProjectId,
    /// Mode.
    pub mode: Mode,
    /// Lifecycle (`active`).
    pub lifecycle: Lifecycle,
    /// Execution defaults of the session.
    pub execution_context: ExecutionContext,
    /// Events ever appended to the session (its instruction).
    pub events_observed: i64,
}

/// Create a fresh Workflow Session on a project with a task instruction; returns the id to pass as
/// recording_session_id. Like work_on_project without its guidance and feedback; use
/// work_on_project to resume.
#[tool(changes, Session, "Start session", session = Creates,
    scopes(&[Scope::ProjectRead, Scope::ProjectWrite]),
)]
async fn start_session(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let (payload, event) =
        work_on_project::instruction_event(&ctx, "start_session", &args.instruction);
    let row = work_on_project::create(&ctx, args.project, args.mode, payload, event).await?;
    let execution_context: ExecutionContext =
        serde_json::from_value(row.execution_context.clone()).unwrap_or_default();
    Ok(Output {
        session_id: row.id,
        project: row.project,
        mode: row.mode,
        lifecycle: row.lifecycle,
        execution_context,
        events_observed: row.events_observed,
    })
}
