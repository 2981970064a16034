//! `list_checkpoints`: the project's checkpoints, newest first, and the state of its working
//! tree now.

use wc_macros::{tool, tool_args};
use wc_runner_protocol::{ListCheckpointsAnswer, ListCheckpointsOp, MAX_CHECKPOINTS};

use crate::execution::ProjectOrSession;
use crate::execution::operation::{self, InProject};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
    /// Most checkpoints to list (1-100, default 20).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
}

/// The project's checkpoints (manual, automatic: a session's first change, before_restore),
/// newest first, and current_state: the working tree's state that restore_checkpoint expects.
#[tool(reads, Files, "List checkpoints", session = Works)]
async fn list_checkpoints(
    ctx: ToolContext,
    args: Args,
) -> Result<InProject<ListCheckpointsAnswer>, ToolError> {
    let limit = args.limit.unwrap_or(20).min(MAX_CHECKPOINTS as u32);
    operation::in_project(&ctx, &args.at, ListCheckpointsOp { limit }).await
}
