//! `delete_project_files`: project files removed by the project's runner, all of them or none.

use serde_json::{Map, Value};
use wc_domain::RelativePath;
use wc_macros::{tool, tool_args};
use wc_runner_protocol::{DeleteFilesAnswer, DeleteFilesOp};

use crate::execution::ProjectOrSession;
use crate::execution::operation::{self, InProject};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;
use crate::workflow::evidence;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
    /// The files to delete (1-64, distinct), relative to the project root. Directories and
    /// symbolic links are refused, never followed.
    #[schemars(length(min = 1, max = 64))]
    pub paths: Vec<RelativePath>,
}

/// Delete project files, all or none: every file must exist (a regular file, text or binary)
/// before any is removed. Directories and symlinks are refused. Git keeps what was committed.
#[tool(consequential, Files, "Delete project files", session = Works, with_ledger_facts(facts))]
async fn delete_project_files(
    ctx: ToolContext,
    args: Args,
) -> Result<InProject<DeleteFilesAnswer>, ToolError> {
    // The same file named twice is deleted once.
    let mut paths = args.paths;
    let mut seen = std::collections::BTreeSet::new();
    paths.retain(|p| seen.insert(p.clone()));
    let op = DeleteFilesOp { paths };
    operation::in_project(&ctx, &args.at, op).await
}

/// The change evidence of a deletion: the files removed.
fn facts(output: &Value) -> Map<String, Value> {
    let files = output["deleted"].as_array().into_iter().flatten();
    evidence::path_facts("changed_paths", files.map(|f| &f["path"]))
}
