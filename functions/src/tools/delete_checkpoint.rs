//! `delete_checkpoint`: checkpoints of the project removed, all of them or none.

use wc_domain::CheckpointId;
use wc_macros::{tool, tool_args};
use wc_runner_protocol::{DeleteCheckpointsAnswer, DeleteCheckpointsOp};

use crate::execution::ProjectOrSession;
use crate::execution::operation::{self, InProject};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
    /// The checkpoints to delete (1-100, `ck-…`).
    #[schemars(length(min = 1, max = 100))]
    pub checkpoints: Vec<CheckpointId>,
}

/// Delete checkpoints, all or none: each must exist. The project's files do not change.
#[tool(consequential, Files, "Delete checkpoint", session = Works)]
async fn delete_checkpoint(
    ctx: ToolContext,
    args: Args,
) -> Result<InProject<DeleteCheckpointsAnswer>, ToolError> {
    // The same checkpoint named twice is deleted once.
    let mut checkpoints: Vec<String> = Vec::with_capacity(args.checkpoints.len());
    for id in args.checkpoints {
        let id = id.into_string();
        if !checkpoints.contains(&id) {
            checkpoints.push(id);
        }
    }
    operation::in_project(&ctx, &args.at, DeleteCheckpointsOp { checkpoints }).await
}
