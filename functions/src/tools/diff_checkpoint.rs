//! `diff_checkpoint`: what changed in the project's files from a checkpoint to now.

use wc_domain::CheckpointId;
use wc_macros::{tool, tool_args};
use wc_runner_protocol::{
    DEFAULT_DIFF_BYTES, DEFAULT_DIFF_CONTEXT_LINES, DiffCheckpointOp, GitDiffAnswer,
};

use crate::execution::operation::{self, InProject};
use crate::execution::{PathFilter, ProjectOrSession};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
    /// The checkpoint (`ck-…`).
    pub checkpoint: CheckpointId,
    #[serde(flatten)]
    pub paths: PathFilter,
    /// Lines of context around each change (0-20, default 3).
    #[schemars(range(min = 0, max = 20))]
    pub context_lines: Option<u32>,
    /// Most bytes of diff text (1-1048576, default 65536); `files` still lists every file.
    #[schemars(range(min = 1, max = 1048576))]
    pub limit_bytes: Option<u32>,
}

/// What changed from a checkpoint to the working tree now (untracked files included), as a
/// unified diff with per-file line counts, like git_diff.
#[tool(reads, Files, "Diff checkpoint", session = Works)]
async fn diff_checkpoint(
    ctx: ToolContext,
    args: Args,
) -> Result<InProject<GitDiffAnswer>, ToolError> {
    let op = DiffCheckpointOp {
        checkpoint: args.checkpoint.into_string(),
        paths: args.paths.paths(),
        context_lines: args.context_lines.unwrap_or(DEFAULT_DIFF_CONTEXT_LINES),
        limit_bytes: args.limit_bytes.unwrap_or(DEFAULT_DIFF_BYTES),
    };
    operation::in_project(&ctx, &args.at, op).await
}
