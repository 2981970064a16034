//! `git_diff`: the project's uncommitted changes as a bounded unified diff with per-file line
//! counts, made by the project's runner.

use wc_macros::{tool, tool_args};
use wc_runner_protocol::{
    DEFAULT_DIFF_BYTES, DEFAULT_DIFF_CONTEXT_LINES, GitDiffAnswer, GitDiffOp,
};

use crate::execution::operation::{self, InProject};
use crate::execution::{PathFilter, ProjectOrSession};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
    #[serde(flatten)]
    pub paths: PathFilter,
    /// The staged changes (index against HEAD: what a commit records) instead of the unstaged
    /// ones (work tree against the index). Default false.
    pub staged: Option<bool>,
    /// Lines of context around each change (0-20, default 3).
    #[schemars(range(min = 0, max = 20))]
    pub context_lines: Option<u32>,
    /// Most bytes of diff text to return (1-1048576, default 65536); a longer diff is cut at
    /// a line end and flagged `truncated`, while `files` still lists every changed file.
    #[schemars(range(min = 1, max = 1048576))]
    pub limit_bytes: Option<u32>,
}

/// The project's uncommitted changes as a unified diff with per-file line counts: unstaged, or
/// staged with staged: true. Untracked files are not in it (see git_status); the text is cut at
/// limit_bytes.
#[tool(reads, Files, "Git diff", session = Works)]
async fn git_diff(ctx: ToolContext, args: Args) -> Result<InProject<GitDiffAnswer>, ToolError> {
    let op = GitDiffOp {
        paths: args.paths.paths(),
        staged: args.staged.unwrap_or(false),
        context_lines: args.context_lines.unwrap_or(DEFAULT_DIFF_CONTEXT_LINES),
        limit_bytes: args.limit_bytes.unwrap_or(DEFAULT_DIFF_BYTES),
    };
    operation::in_project(&ctx, &args.at, op).await
}
