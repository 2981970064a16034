//! `list_project_tracked_files`: the files in Git's index under a directory, listed by the
//! project's runner, a page at a time.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wc_domain::{ProjectId, RelativePath, SessionId};
use wc_runner_protocol::{
    DEFAULT_LIST_FILES, ExploreOp, TrackedFilesAnswer, TrackedFilesOp, WorkAnswer, WorkSpec,
};

use crate::auth::Scope;
use crate::execution::operation;
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, SessionUse, ToolMeta, ToolSpec};
use crate::result::ToolError;

/// Arguments of `list_project_tracked_files`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("anyOf" = [
    {"required": ["project"], "properties": {"project": {"type": "string"}}},
    {"required": ["session_id"], "properties": {"session_id": {"type": "string"}}}
]))]
pub struct Args {
    /// Project id (`agent:<runner>:<name>`); default: the session's.
    pub project: Option<ProjectId>,
    /// Directory (or file) to list, relative to the project root (default: the root).
    pub path: Option<RelativePath>,
    /// Files per page (1-2000, default 200).
    #[schemars(range(min = 1, max = 2000))]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page, with otherwise identical arguments.
    #[schemars(length(min = 1, max = 8192), regex(pattern = r"^[A-Za-z0-9_-]+$"))]
    pub cursor: Option<String>,
    /// Workflow Session this listing belongs to.
    pub session_id: Option<SessionId>,
}

/// What `list_project_tracked_files` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The project listed.
    pub project: ProjectId,
    /// The page.
    #[serde(flatten)]
    pub page: TrackedFilesAnswer,
}

/// The spec.
pub fn spec() -> ToolSpec {
    ToolSpec::new(
        ToolMeta {
            name: "list_project_tracked_files",
            title: "List tracked files",
            description: "List the files Git tracks (its index) under a project directory on the build host, in Git's order, a page at a time (next_cursor). not_a_repository when the project is not in a Git work tree.",
            category: Category::Files,
            scopes: &[Scope::ProjectRead],
            read_only: true,
            consequential: false,
            rest_operation: false,
        },
        run,
    )
    .with_session(SessionUse::Works)
}

async fn run(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let (_, target) =
        operation::target(&ctx, args.project.as_ref(), args.session_id.as_ref()).await?;
    let op = TrackedFilesOp {
        path: args.path.filter(|p| !p.is_root()),
        limit: args.limit.unwrap_or(DEFAULT_LIST_FILES),
        cursor: args.cursor,
    };
    let spec = WorkSpec::Explore(ExploreOp::TrackedFiles(op));
    match operation::run(&ctx, &target, "list_project_tracked_files", spec).await? {
        WorkAnswer::TrackedFiles(page) => Ok(Output {
            project: target.project_id,
            page,
        }),
        other => Err(operation::mismatched(&other)),
    }
}
