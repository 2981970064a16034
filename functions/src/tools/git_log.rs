//! `git_log`: the latest commits of the project's branch, read by the project's runner.

use wc_domain::RelativePath;
use wc_macros::{tool, tool_args};
use wc_runner_protocol::{DEFAULT_LOG_COMMITS, GitLogAnswer, GitLogOp};

use crate::execution::ProjectOrSession;
use crate::execution::operation::{self, InProject};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
    /// Commits to return (1-200, default 20).
    #[schemars(range(min = 1, max = 200))]
    pub limit: Option<u32>,
    /// Only commits that change this file or directory (default: the whole project).
    pub path: Option<RelativePath>,
}

/// The latest commits reachable from HEAD, newest first: hash, parents, author, time and subject;
/// optionally only those touching a path.
#[tool(reads, Files, "Git log", session = Works)]
async fn git_log(ctx: ToolContext, args: Args) -> Result<InProject<GitLogAnswer>, ToolError> {
    let op = GitLogOp {
        limit: args.limit.unwrap_or(DEFAULT_LOG_COMMITS),
        path: args.path.filter(|p| !p.is_root()),
    };
    operation::in_project(&ctx, &args.at, op).await
}
