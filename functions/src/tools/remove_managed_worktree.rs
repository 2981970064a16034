//! `remove_managed_worktree`: a managed worktree removed from its runner's host, and its
//! project with it; refused while it holds work nothing else keeps, unless forced.

use schemars::JsonSchema;
use serde::Serialize;
use wc_domain::{ProjectId, ProjectOrigin};
use wc_macros::{tool, tool_args};
use wc_runner_protocol::{RemoveWorktreeOp, UnsavedWork};

use crate::execution::ProjectOrSession;
use crate::execution::operation;
use crate::kernel::context::ToolContext;
use crate::result::{ErrorKind, ToolError};

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
    /// Remove it even though it holds uncommitted files or commits no branch, tag or remote
    /// keeps: they are lost (default false: refused, listing them).
    pub force: Option<bool>,
}

/// Output of `remove_managed_worktree`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The removed worktree's project: no longer served or listed.
    pub project: ProjectId,
    /// Its root on the runner's host, now gone.
    pub root: String,
    /// What it held that was thrown away (only with `force`).
    pub discarded: UnsavedWork,
}

/// Remove a managed worktree (from work_on_project mode=worktree): its directory, Git's record
/// of it and its project. Refused with unsaved_work, listing them, while it holds uncommitted
/// files or commits nothing else keeps, unless force. Checkouts are never removed.
#[tool(consequential, Files, "Remove managed worktree", session = Works)]
async fn remove_managed_worktree(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let (_, target) = args.at.resolve(&ctx).await?;
    if target.origin != ProjectOrigin::Worktree {
        return Err(ToolError::new(
            ErrorKind::InvalidArguments,
            "this project is not a managed worktree (list_managed_worktrees lists them); configured projects and opened checkouts are never removed",
        )
        .with("pointer", "/project")
        .with("project", target.project_id.as_str()));
    }
    let force = args.force.unwrap_or(false);
    let answer = operation::run(&ctx, &target, ctx.tool, RemoveWorktreeOp { force }).await?;
    if !answer.removed {
        let unsaved = serde_json::to_value(&answer.unsaved).map_err(ToolError::internal)?;
        return Err(ToolError::new(
            ErrorKind::UnsavedWork,
            format!(
                "the worktree holds {} uncommitted file(s) and {} commit(s) no branch, tag or remote keeps; nothing was removed: commit or push them, or pass force to lose them",
                answer.unsaved.uncommitted_count, answer.unsaved.unsaved_commit_count
            ),
        )
        .with("project", target.project_id.as_str())
        .with("unsaved", unsaved));
    }
    let client = ctx.deps.client().await?;
    wc_store::projects::mark_removed(&client, &target.project_id).await?;
    Ok(Output {
        project: target.project_id,
        root: answer.root,
        discarded: answer.unsaved,
    })
}
