//! `list_project_tracked_files`: the files in Git's index under a directory, listed by the
//! project's runner, a page at a time.

use schemars::JsonSchema;
use serde::Deserialize;
use wc_domain::RelativePath;
use wc_runner_protocol::{TrackedFilesAnswer, TrackedFilesOp};

use crate::execution::operation::{self, InProject};
use crate::execution::{FilePage, ProjectOrSession};
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
    #[serde(flatten)]
    pub page: FilePage,
}

async fn run(ctx: ToolContext, args: Args) -> Result<InProject<TrackedFilesAnswer>, ToolError> {
    let op = TrackedFilesOp {
        path: args.path.filter(|p| !p.is_root()),
        limit: args.page.limit(),
        cursor: args.page.cursor(),
    };
    operation::in_project(&ctx, &args.at, op).await
}
