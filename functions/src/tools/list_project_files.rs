//! `list_project_files`: the project's files under a directory, listed by the project's runner
//! with ripgrep's ignore-aware walker, a page at a time.

use schemars::JsonSchema;
use serde::Deserialize;
use wc_domain::{Cursor, Glob, RelativePath};
use wc_runner_protocol::{DEFAULT_LIST_FILES, FileListAnswer, ListFilesOp};

use crate::auth::Scope;
use crate::execution::ProjectOrSession;
use crate::execution::operation::{self, InProject};
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, Effect, SessionUse, ToolMeta, ToolSpec};
use crate::result::ToolError;

/// Arguments of `list_project_files`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
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
    /// Files per page (1-2000, default 200).
    #[schemars(range(min = 1, max = 2000))]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page, with otherwise identical arguments.
    pub cursor: Option<Cursor>,
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
            effect: Effect::Reads,
            rest_operation: true,
        },
        run,
    )
    .with_session(SessionUse::Works)
}

async fn run(ctx: ToolContext, args: Args) -> Result<InProject<FileListAnswer>, ToolError> {
    let op = ListFilesOp {
        path: args.path.filter(|p| !p.is_root()),
        glob: args.glob.map(String::from),
        hidden: args.hidden.unwrap_or(false),
        limit: args.limit.unwrap_or(DEFAULT_LIST_FILES),
        cursor: args.cursor.map(String::from),
    };
    operation::in_project(&ctx, &args.at, op).await
}
