//! `move_project_file`: one project file moved to a new path by the project's runner.

use serde_json::{Map, Value};
use wc_domain::RelativePath;
use wc_macros::{tool, tool_args};
use wc_runner_protocol::{MoveFileAnswer, MoveFileOp};

use crate::execution::operation::{self, InProject};
use crate::execution::{ProjectOrSession, invalid};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;
use crate::workflow::evidence;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
    /// The file to move, relative to the project root.
    pub from: RelativePath,
    /// Its new path, relative to the project root; missing directories are made. Nothing may
    /// be there yet.
    pub to: RelativePath,
}

/// Move (rename) one project file to a new path where nothing is, making its directories.
/// Directories and symlinks are refused; an existing target is refused already_exists.
#[tool(consequential, Files, "Move project file", session = Works, with_ledger_facts(facts))]
async fn move_project_file(
    ctx: ToolContext,
    args: Args,
) -> Result<InProject<MoveFileAnswer>, ToolError> {
    if args.from == args.to {
        return Err(invalid(
            "/to",
            "not",
            "to is from: a move needs a new path".to_owned(),
        ));
    }
    let op = MoveFileOp {
        from: args.from,
        to: args.to,
    };
    operation::in_project(&ctx, &args.at, op).await
}

/// The change evidence of a move: both paths.
fn facts(output: &Value) -> Map<String, Value> {
    evidence::path_facts(
        "changed_paths",
        [&output["from"], &output["to"]].into_iter(),
    )
}
