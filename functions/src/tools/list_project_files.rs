//! `list_project_files`: the project's files under a directory, listed by the project's runner
//! with ripgrep's ignore-aware walker, a page at a time.

use wc_domain::{Glob, RelativePath};
use wc_macros::{tool, tool_args};
use wc_runner_protocol::{FileListAnswer, ListFilesOp};

use crate::execution::operation::{self, InProject};
use crate::execution::{FilePage, ProjectOrSession};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
    /// Directory to list recursively, relative to the project root (default: the root).
    pub path: Option<RelativePath>,
    /// Only files matching this glob (gitignore syntax relative to the root, e.g. `*.rs`; a
    /// leading `!` excludes).
    pub glob: Option<Glob>,
    /// List hidden files and directories too (default false). `.gitignore`d files are never
    /// listed.
    pub hidden: Option<bool>,
    #[serde(flatten)]
    pub page: FilePage,
}

/// List the project's files under a directory, recursively, in path order, a page at a time.
/// .gitignore'd files are left out, hidden ones unless hidden: true; symlinks are not followed.
#[tool(reads, Files, "List project files", session = Works)]
async fn list_project_files(
    ctx: ToolContext,
    args: Args,
) -> Result<InProject<FileListAnswer>, ToolError> {
    let op = ListFilesOp {
        path: args.path.filter(|p| !p.is_root()),
        glob: args.glob.map(String::from),
        hidden: args.hidden.unwrap_or(false),
        limit: args.page.limit(),
        cursor: args.page.cursor(),
    };
    operation::in_project(&ctx, &args.at, op).await
}
