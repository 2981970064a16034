//! `restore_checkpoint`: the project's working tree put back to a checkpoint, over the state
//! the caller expects, keeping the state it replaces as a checkpoint.

use serde_json::{Map, Value};
use wc_domain::{CheckpointId, TreeState};
use wc_macros::{tool, tool_args};
use wc_runner_protocol::{RestoreCheckpointAnswer, RestoreCheckpointOp};

use crate::execution::ProjectOrSession;
use crate::execution::operation::{self, InProject};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;
use crate::workflow::evidence;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
    /// The checkpoint to restore (`ck-…`).
    pub checkpoint: CheckpointId,
    /// The working tree's state now, as list_checkpoints reports it (`current_state`): if the
    /// files changed since, nothing is restored and the refusal names what changed.
    pub expected_state: TreeState,
}

/// Put the project's files back to a checkpoint: files it holds are rewritten, files it lacks
/// removed (ignored files stay). The replaced state is kept as a before_restore checkpoint.
#[tool(consequential, Files, "Restore checkpoint", session = Works, with_ledger_facts(facts))]
async fn restore_checkpoint(
    ctx: ToolContext,
    args: Args,
) -> Result<InProject<RestoreCheckpointAnswer>, ToolError> {
    let op = RestoreCheckpointOp {
        checkpoint: args.checkpoint.into_string(),
        expected_state: args.expected_state.into_string(),
        session_id: args.at.session_id.as_ref().map(|s| s.as_str().to_owned()),
    };
    operation::in_project(&ctx, &args.at, op).await
}

/// The change evidence of a restore: the files it rewrote or removed.
fn facts(output: &Value) -> Map<String, Value> {
    let files = output["files"].as_array().into_iter().flatten();
    evidence::path_facts("changed_paths", files.map(|f| &f["path"]))
}
