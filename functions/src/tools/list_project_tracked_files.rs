//! `list_project_tracked_files`: the files in Git's index under a directory, listed by the
//! project's runner, a page at a time.

use wc_domain::RelativePath;
use wc_macros::{tool, tool_args};
use wc_runner_protocol::{TrackedFilesAnswer, TrackedFilesOp};

use crate::execution::operation::{self, InProject};
use crate::execution::{FilePage, ProjectOrSession};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
    /// Directory (or file) to list, relative to the project root (default: the root).
    pub path: Option<RelativePath>,
    #[serde(flatten)]
    pub page: FilePage,
}

/// List the files Git tracks (its index) under a project directory, in Git's order, a page at a
/// time.
#[tool(reads, Files, "List tracked files", session = Works)]
async fn list_project_tracked_files(
    ctx: ToolContext,
    args: Args,
) -> Result<InProject<TrackedFilesAnswer>, ToolError> {
    let op = TrackedFilesOp {
        path: args.path.filter(|p| !p.is_root()),
        limit: args.page.limit(),
        cursor: args.page.cursor(),
    };
    operation::in_project(&ctx, &args.at, op).await
}
