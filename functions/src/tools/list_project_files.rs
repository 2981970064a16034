//! `list_project_files`: the project's files under a directory, listed by the project's runner
//! with ripgrep's ignore-aware walker, a page at a time.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wc_domain::{ProjectId, RelativePath, SessionId};
use wc_runner_protocol::{
    DEFAULT_LIST_FILES, ExploreOp, FileListAnswer, ListFilesOp, WorkAnswer, WorkSpec,
};

use crate::auth::Scope;
use crate::execution::operation;
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, SessionUse, ToolMeta, ToolSpec};
use crate::result::ToolError;

/// Arguments of `list_project_files`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("anyOf" = [
    {"required": ["project"], "properties": {"project": {"type": "string"}}},
    {"required": ["session_id"], "properties": {"session_id": {"type": "string"}}}
]))]
pub struct Args {
    /// Project id (`agent:<runner>:<name>`); default: the session's.
    pub project: Option<ProjectId>,
    /// Directory to list recursively, relative to the project root (default: the root).
    pub path: Option<RelativePath>,
    /// Only files matching this glob (gitignore syntax relative to the root, e.g. `*.rs`; a
    /// leading `!` excludes).
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^[^\x00-\x1F\x7F]*$"))]
    pub glob: Option<String>,
    /// List hidden files and directories too (default false). `.gitignore`d files are never
    /// listed.
    pub hidden: Option<bool>,
    /// Files per page (1-2000, default 200).
    #[schemars(range(min = 1, max = 2000))]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page, with otherwise identical arguments.
    #[schemars(length(min = 1, max = 8192), regex(pattern = r"^[A-Za-z0-9_-]+$"))]
    pub cursor: Option<String>,
    /// Workflow Session this listing belongs to.
    pub session_id: Option<SessionId>,
}

/// What `list_project_files` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The project listed.
    pub project: ProjectId,
    /// The page.
    #[serde(flatten)]
    pub page: FileListAnswer,
}

/// The spec.
pub fn spec() -> ToolSpec {
    ToolSpec::new(
        ToolMeta {
            name: "list_project_files",
            title: "List project files",
            description: "List the project's files under a directory (recursively) on the build host, in path order, a page at a time (next_cursor). .gitignore'd files are left out, hidden ones unless hidden: true; symlinks are listed, never followed. Sizes are in bytes.",
            category: Category::Files,
            scopes: &[Scope::ProjectRead],
            read_only: true,
            consequential: false,
            rest_operation: true,
        },
        run,
    )
    .with_session(SessionUse::Works)
}

async fn run(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let (_, target) =
        operation::target(&ctx, args.project.as_ref(), args.session_id.as_ref()).await?;
    let op = ListFilesOp {
        path: args.path.filter(|p| !p.is_root()),
        glob: args.glob,
        hidden: args.hidden.unwrap_or(false),
        limit: args.limit.unwrap_or(DEFAULT_LIST_FILES),
        cursor: args.cursor,
    };
    let spec = WorkSpec::Explore(ExploreOp::ListFiles(op));
    match operation::run(&ctx, &target, "list_project_files", spec).await? {
        WorkAnswer::ListFiles(page) => Ok(Output {
            project: target.project_id,
            page,
        }),
        other => Err(operation::mismatched(&other)),
    }
}
