//! `git_diff_summary`: the project's changed files against a base commit, with status, line
//! counts, renames and binary flags, paged; made by the project's runner.

use wc_domain::Revision;
use wc_macros::{tool, tool_args};
use wc_runner_protocol::{DiffSummaryAnswer, DiffSummaryOp};

use crate::execution::operation::{self, InProject};
use crate::execution::{PathFilter, ProjectOrSession};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
    #[serde(flatten)]
    pub paths: PathFilter,
    /// The commit to compare against: a branch, tag or commit id (default HEAD).
    pub base: Option<Revision>,
    /// The staged changes only (the index against the base). Default false: the work tree.
    pub staged: Option<bool>,
    /// List untracked files too (status untracked, no line counts). Default true.
    pub include_untracked: Option<bool>,
    /// Start of the page: a previous page's next_offset (default 0).
    pub offset: Option<u32>,
    /// Files per page (1-1000, default 200).
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<u32>,
}

/// Every changed file against a base commit (default HEAD): status, +/- line counts, rename
/// origin, binary flag, untracked files too; paged by offset, with totals. For the text: git_diff.
#[tool(reads, Files, "Git diff summary", session = Works)]
async fn git_diff_summary(
    ctx: ToolContext,
    args: Args,
) -> Result<InProject<DiffSummaryAnswer>, ToolError> {
    let op = DiffSummaryOp {
        paths: args.paths.paths(),
        base: args.base.map(Revision::into_string),
        staged: args.staged.unwrap_or(false),
        include_untracked: args.include_untracked.unwrap_or(true),
        offset: args.offset.unwrap_or(0),
        limit: args.limit.unwrap_or(200),
    };
    operation::in_project(&ctx, &args.at, op).await
}
