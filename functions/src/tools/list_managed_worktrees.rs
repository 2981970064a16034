//! `list_managed_worktrees`: the managed worktrees callers opened, by project id.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::Serialize;
use wc_domain::ProjectId;
use wc_macros::{tool, tool_args};

use crate::kernel::context::ToolContext;
use crate::result::ToolError;

#[tool_args]
pub struct Args {
    /// Most worktrees to return (default 100, at most 500).
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<u32>,
}

/// One managed worktree.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ManagedWorktree {
    /// Its project id: name it as `project`, or start a session on it.
    pub project: ProjectId,
    /// The runner whose host holds it.
    pub client_id: String,
    /// Its root on that host.
    pub root: Option<String>,
    /// The checkout it was made from.
    pub source: Option<String>,
    /// The exact commit it was made at.
    pub base_commit: Option<String>,
    /// When it was made.
    pub opened_at: Option<DateTime<Utc>>,
    /// The kind of caller who made it.
    pub opened_by_kind: Option<String>,
}

/// Output of `list_managed_worktrees`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The worktrees, by project id.
    pub worktrees: Vec<ManagedWorktree>,
    /// How many were returned.
    pub returned: usize,
    /// Whether more exist than were returned.
    pub truncated: bool,
}

/// List the managed worktrees opened with work_on_project mode=worktree and not removed: each
/// one's project id, runner, source checkout and base commit.
#[tool(reads, Discovery, "List managed worktrees")]
async fn list_managed_worktrees(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let limit = i64::from(args.limit.unwrap_or(100).clamp(1, 500));
    let only = ctx.principal.projects.ids();
    let client = ctx.deps.client().await?;
    let worktrees = Some(wc_domain::ProjectOrigin::Worktree);
    let mut rows =
        wc_store::projects::list_visible(&client, only.as_deref(), worktrees, limit + 1).await?;
    let truncated = rows.len() as i64 > limit;
    rows.truncate(limit as usize);
    let worktrees: Vec<ManagedWorktree> = rows
        .into_iter()
        .map(|p| ManagedWorktree {
            project: p.id,
            client_id: p.client_id,
            root: p.root,
            source: p.source_path,
            base_commit: p.base_commit,
            opened_at: p.opened_at,
            opened_by_kind: p.opened_by_kind,
        })
        .collect();
    Ok(Output {
        returned: worktrees.len(),
        worktrees,
        truncated,
    })
}
