//! `git_status`: the project's Git state — branch, upstream, changed, staged, untracked and
//! conflicted files — read by the project's runner.

use wc_macros::{tool, tool_args};
use wc_runner_protocol::{GitStatusAnswer, GitStatusOp};

use crate::execution::ProjectOrSession;
use crate::execution::operation::{self, InProject};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
}

/// The project's Git state: branch, HEAD, upstream with ahead/behind, each changed file's staged
/// and unstaged change, untracked and conflicted files. Paths are relative to the project root.
#[tool(reads, Files, "Git status", session = Works)]
async fn git_status(ctx: ToolContext, args: Args) -> Result<InProject<GitStatusAnswer>, ToolError> {
    operation::in_project(&ctx, &args.at, GitStatusOp {}).await
}
