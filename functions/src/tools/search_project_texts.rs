//! `search_project_texts`: lines matching a pattern across the project, searched by the
//! project's runner with ripgrep's libraries (ignore-aware walk, stable order, paging).

use serde_json::{Map, Value};
use wc_domain::{Cursor, Glob, RelativePath, Text};
use wc_macros::{tool, tool_args};
use wc_runner_protocol::{DEFAULT_SEARCH_MATCHES, SearchAnswer, SearchOp};

use crate::execution::ProjectOrSession;
use crate::execution::operation::{self, InProject};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;
use crate::workflow::evidence;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
    /// A regular expression (Rust regex syntax), or literal text with `literal: true`.
    pub pattern: Text<1, 1024>,
    /// Match `pattern` as literal text (default false).
    pub literal: Option<bool>,
    /// Match case exactly (default true).
    pub case_sensitive: Option<bool>,
    /// Only files matching this glob (gitignore syntax relative to the root, e.g. `*.rs` or
    /// `src/**/*.ts`; a leading `!` excludes).
    pub glob: Option<Glob>,
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
    /// The previous page's next_cursor (same other arguments).
    pub cursor: Option<Cursor>,
}

/// Search the project's text files for a regex or literal text, like ripgrep (.gitignore'd, hidden
/// and binary files skipped), in path and line order with optional context, a page at a time.
#[tool(reads, Files, "Search project texts", session = Works,
    with_ledger_facts(facts), with_private_arguments(&["pattern"]),
)]
async fn search_project_texts(
    ctx: ToolContext,
    args: Args,
) -> Result<InProject<SearchAnswer>, ToolError> {
    let op = SearchOp {
        pattern: args.pattern.into_string(),
        literal: args.literal.unwrap_or(false),
        case_sensitive: args.case_sensitive.unwrap_or(true),
        glob: args.glob.map(String::from),
        path: args.path.filter(|p| !p.is_root()),
        hidden: args.hidden.unwrap_or(false),
        context_lines: args.context_lines.unwrap_or(0),
        limit: args.limit.unwrap_or(DEFAULT_SEARCH_MATCHES),
        cursor: args.cursor.map(String::from),
    };
    operation::in_project(&ctx, &args.at, op).await
}

/// The exploration evidence of a search: the files with matches, in match order.
fn facts(output: &Value) -> Map<String, Value> {
    let matches = output["matches"].as_array().into_iter().flatten();
    evidence::exploration_facts(matches.map(|m| &m["path"]))
}
