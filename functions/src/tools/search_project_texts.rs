//! `search_project_texts`: lines matching a pattern across the project, searched by the
//! project's runner with ripgrep's libraries (ignore-aware walk, stable order, paging).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use wc_domain::{ProjectId, RelativePath, SessionId};
use wc_runner_protocol::{
    DEFAULT_SEARCH_MATCHES, ExploreOp, SearchAnswer, SearchOp, WorkAnswer, WorkSpec,
};

use crate::auth::Scope;
use crate::execution::operation;
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, SessionUse, ToolMeta, ToolSpec};
use crate::result::ToolError;
use crate::workflow::evidence;

/// Arguments of `search_project_texts`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("anyOf" = [
    {"required": ["project"], "properties": {"project": {"type": "string"}}},
    {"required": ["session_id"], "properties": {"session_id": {"type": "string"}}}
]))]
pub struct Args {
    /// Project id (`agent:<runner>:<name>`); default: the session's.
    pub project: Option<ProjectId>,
    /// A regular expression (Rust regex syntax), or literal text with `literal: true`.
    #[schemars(length(min = 1, max = 1024), regex(pattern = r"^[^\u0000]*$"))]
    pub pattern: String,
    /// Match `pattern` as literal text (default false).
    pub literal: Option<bool>,
    /// Match case exactly (default true).
    pub case_sensitive: Option<bool>,
    /// Only files matching this glob (gitignore syntax relative to the root, e.g. `*.rs` or
    /// `src/**/*.ts`; a leading `!` excludes).
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^[^\x00-\x1F\x7F]*$"))]
    pub glob: Option<String>,
    /// Directory or file to search, relative to the project root (default: the root).
    pub path: Option<RelativePath>,
    /// Search hidden files and directories too (default false). `.gitignore`d files are
    /// never searched.
    pub hidden: Option<bool>,
    /// Lines of context before and after each match (0-10, default 0).
    #[schemars(range(min = 0, max = 10))]
    pub context_lines: Option<u32>,
    /// Matches per page (1-500, default 50).
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page, with otherwise identical arguments.
    #[schemars(length(min = 1, max = 8192), regex(pattern = r"^[A-Za-z0-9_-]+$"))]
    pub cursor: Option<String>,
    /// Workflow Session this search belongs to: its ledger records the matching paths (never
    /// the pattern or the lines).
    pub session_id: Option<SessionId>,
}

/// What `search_project_texts` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The project searched.
    pub project: ProjectId,
    /// The page.
    #[serde(flatten)]
    pub page: SearchAnswer,
}

/// The spec.
pub fn spec() -> ToolSpec {
    ToolSpec::new(
        ToolMeta {
            name: "search_project_texts",
            title: "Search project texts",
            description: "Search the project's text files on the build host for a regex (or literal text), like ripgrep: .gitignore'd, hidden (unless hidden: true) and binary files are skipped. Matches come in path then line order with optional context lines, a page at a time (next_cursor). An invalid regex or glob is invalid_arguments naming the problem.",
            category: Category::Files,
            scopes: &[Scope::ProjectRead],
            read_only: true,
            consequential: false,
            rest_operation: true,
        },
        run,
    )
    .with_session(SessionUse::Works)
    .with_ledger_facts(facts)
}

async fn run(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let (_, target) =
        operation::target(&ctx, args.project.as_ref(), args.session_id.as_ref()).await?;
    let op = SearchOp {
        pattern: args.pattern,
        literal: args.literal.unwrap_or(false),
        case_sensitive: args.case_sensitive.unwrap_or(true),
        glob: args.glob,
        path: args.path.filter(|p| !p.is_root()),
        hidden: args.hidden.unwrap_or(false),
        context_lines: args.context_lines.unwrap_or(0),
        limit: args.limit.unwrap_or(DEFAULT_SEARCH_MATCHES),
        cursor: args.cursor,
    };
    let spec = WorkSpec::Explore(ExploreOp::Search(op));
    match operation::run(&ctx, &target, "search_project_texts", spec).await? {
        WorkAnswer::Search(page) => Ok(Output {
            project: target.project_id,
            page,
        }),
        other => Err(operation::mismatched(&other)),
    }
}

/// The exploration evidence of a search: the files with matches, in match order.
fn facts(output: &Value) -> Map<String, Value> {
    let matches = output["matches"].as_array().into_iter().flatten();
    evidence::exploration_facts(matches.map(|m| &m["path"]))
}
