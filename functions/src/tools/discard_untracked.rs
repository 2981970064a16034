//! `discard_untracked`: the project's untracked files (not ignored ones) listed, or removed
//! when asked, by the project's runner.

use serde_json::{Map, Value};

use wc_macros::{tool, tool_args};
use wc_runner_protocol::{DiscardUntrackedAnswer, DiscardUntrackedOp};

use crate::execution::operation::{self, InProject};
use crate::execution::{PathFilter, ProjectOrSession};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;
use crate::workflow::evidence;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
    #[serde(flatten)]
    pub paths: PathFilter,
    /// List what would be removed and remove nothing (default true); false removes them.
    pub dry_run: Option<bool>,
}

/// List the untracked files Git does not ignore (dry run, the default), or remove them with
/// dry_run: false, then the directories they leave empty. Ignored files stay.
#[tool(consequential, Files, "Discard untracked files", session = Works, with_ledger_facts(facts))]
async fn discard_untracked(
    ctx: ToolContext,
    args: Args,
) -> Result<InProject<DiscardUntrackedAnswer>, ToolError> {
    let op = DiscardUntrackedOp {
        paths: args.paths.paths(),
        dry_run: args.dry_run.unwrap_or(true),
    };
    operation::in_project(&ctx, &args.at, op).await
}

/// The change evidence of a discard: the files removed (none in a dry run).
fn facts(output: &Value) -> Map<String, Value> {
    let removed = output["dry_run"] == false;
    let files = output["files"].as_array().into_iter().flatten();
    evidence::path_facts("changed_paths", files.filter(|_| removed))
}
