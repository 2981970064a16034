//! `git_restore_paths`: tracked project paths put back to HEAD or the index by the project's
//! runner.

use serde_json::{Map, Value};
use wc_domain::RelativePath;
use wc_macros::{tool, tool_args};
use wc_runner_protocol::{RestorePathsAnswer, RestorePathsOp, RestoreSource};

use crate::execution::ProjectOrSession;
use crate::execution::operation::{self, InProject};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;
use crate::workflow::evidence;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
    /// Tracked files or directories to restore (1-100), relative to the project root.
    #[schemars(length(min = 1, max = 100))]
    pub paths: Vec<RelativePath>,
    /// `head` (default): the work tree and the index back to the last commit, every change to
    /// the paths dropped. `index`: the work tree back to what is staged.
    pub source: Option<RestoreSource>,
}

/// Put tracked paths back to the last commit (source head: staged and unstaged changes
/// dropped) or to the index (source index: unstaged changes dropped). Untracked files stay.
#[tool(consequential, Files, "Git restore paths", session = Works, with_ledger_facts(facts))]
async fn git_restore_paths(
    ctx: ToolContext,
    args: Args,
) -> Result<InProject<RestorePathsAnswer>, ToolError> {
    let op = RestorePathsOp {
        paths: args.paths,
        source: args.source.unwrap_or(RestoreSource::Head),
    };
    operation::in_project(&ctx, &args.at, op).await
}

/// The change evidence of a restore: the files it put back.
fn facts(output: &Value) -> Map<String, Value> {
    let files = output["restored"].as_array().into_iter().flatten();
    evidence::path_facts("changed_paths", files)
}
