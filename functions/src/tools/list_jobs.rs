//! `list_jobs`: the caller's newest jobs and runs, optionally for one project or session.

use schemars::JsonSchema;
use serde::Serialize;
use wc_domain::{ProjectId, SessionId, WorkMode};
use wc_macros::{tool, tool_args};

use crate::execution::{self, ExecOutput};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;
use crate::workflow::authority;

/// Default number of jobs listed.
pub const DEFAULT_LIMIT: u32 = 20;
/// Most jobs listed.
pub const MAX_LIMIT: u32 = 100;

#[tool_args]
pub struct Args {
    /// Only this project.
    pub project: Option<ProjectId>,
    /// Only work recorded in this Workflow Session.
    pub session_id: Option<SessionId>,
    /// Only background jobs (true) or only synchronous runs (false).
    pub jobs_only: Option<bool>,
    /// How many (default 20, at most 100), newest first.
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
}

/// Output of `list_jobs`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// Newest first, without output bodies.
    pub jobs: Vec<ExecOutput>,
    /// How many were returned.
    pub returned: usize,
    /// Whether more matched than were returned.
    pub truncated: bool,
}

/// List your newest jobs and runs (state, exit code, expectation match), optionally for one project
/// or Workflow Session.
#[tool(reads, Execution, "List jobs", session = Reads)]
async fn list_jobs(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let filter = wc_store::work::ListFilter {
        owner_authority_fingerprint: authority::fingerprint(&ctx.principal),
        projects: ctx.principal.projects.ids(),
        project_id: args.project,
        session_id: args.session_id,
        mode: args
            .jobs_only
            .map(|j| if j { WorkMode::Job } else { WorkMode::Sync }),
    };
    let rows = {
        let client = ctx.deps.client().await?;
        wc_store::work::list(&client, &filter, i64::from(limit) + 1).await?
    };
    let truncated = rows.len() > limit as usize;
    let mut jobs = Vec::with_capacity(rows.len().min(limit as usize));
    for row in rows.iter().take(limit as usize) {
        jobs.push(execution::view(&ctx, row, false).await?);
    }
    Ok(Output {
        returned: jobs.len(),
        jobs,
        truncated,
    })
}
