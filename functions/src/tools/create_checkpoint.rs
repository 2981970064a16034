//! `create_checkpoint`: the project's working tree kept as a checkpoint by its runner, moving
//! no branch, HEAD or index.

use wc_domain::Line;
use wc_macros::{tool, tool_args};
use wc_runner_protocol::{CheckpointKind, CreateCheckpointAnswer, CreateCheckpointOp};

use crate::execution::ProjectOrSession;
use crate::execution::operation::{self, InProject};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
    /// What the checkpoint is for, one line (at most 200 bytes).
    pub label: Option<Line<1, 200>>,
}

/// Keep the project's working tree (tracked files and untracked ones Git does not ignore) as a
/// checkpoint to diff against or restore later. HEAD, the index and branches do not move.
#[tool(changes, Files, "Create checkpoint", session = Works)]
async fn create_checkpoint(
    ctx: ToolContext,
    args: Args,
) -> Result<InProject<CreateCheckpointAnswer>, ToolError> {
    let op = CreateCheckpointOp {
        label: args.label.map(Line::into_string).unwrap_or_default(),
        checkpoint_kind: CheckpointKind::Manual,
        session_id: args.at.session_id.as_ref().map(|s| s.as_str().to_owned()),
        once_per_session: false,
    };
    operation::in_project(&ctx, &args.at, op).await
}
