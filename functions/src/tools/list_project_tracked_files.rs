//! `list_project_tracked_files`: the files in Git's index under a directory, listed by the
//! project's runner, a page at a time.

use schemars::JsonSchema;
use serde::Deserialize;
use wc_domain::{Cursor, RelativePath};
use wc_runner_protocol::{DEFAULT_LIST_FILES, TrackedFilesAnswer, TrackedFilesOp};

use crate::execution::ProjectOrSession;
use crate::execution::operation::{self, InProject};
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, SessionUse, ToolMeta, ToolSpec};
use crate::result::ToolError;

/// The spec.
pub fn spec() -> ToolSpec {
    let meta = ToolMeta::reads(Category::Files, "list_project_tracked_files", "List tracked files")
        .about("List the files Git tracks (its index) under a project directory, in Git's order, a page at a time.");
    ToolSpec::new(meta, run).with_session(SessionUse::Works)
}

/// Arguments of `list_project_tracked_files`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
    /// Directory (or file) to list, relative to the project root (default: the root).
    pub path: Option<RelativePath>,
    /// Files per page (1-2000, default 200).
    #[schemars(range(min = 1, max = 2000))]
    pub limit: Option<u32>,
    /// The previous page's next_cursor (same other arguments).
    pub cursor: Option<Cursor>,
}

async fn run(ctx: ToolContext, args: Args) -> Result<InProject<TrackedFilesAnswer>, ToolError> {
    let op = TrackedFilesOp {
        path: args.path.filter(|p| !p.is_root()),
        limit: args.limit.unwrap_or(DEFAULT_LIST_FILES),
        cursor: args.cursor.map(String::from),
    };
    operation::in_project(&ctx, &args.at, op).await
}
