//! `git_status`: the project's Git state — branch, upstream, changed, staged, untracked and
//! conflicted files — read by the project's runner.

use schemars::JsonSchema;
use serde::Deserialize;
use wc_runner_protocol::{GitStatusAnswer, GitStatusOp};

use crate::execution::ProjectOrSession;
use crate::execution::operation::{self, InProject};
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, SessionUse, ToolMeta, ToolSpec};
use crate::result::ToolError;

/// The spec.
pub fn spec() -> ToolSpec {
    let meta = ToolMeta::reads(Category::Files, "git_status", "Git status")
        .about("The project's Git state: branch, HEAD, upstream with ahead/behind, each changed file's staged and unstaged change, untracked and conflicted files. Paths are relative to the project root.");
    ToolSpec::new(meta, run).with_session(SessionUse::Works)
}

/// Arguments of `git_status`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
}

async fn run(ctx: ToolContext, args: Args) -> Result<InProject<GitStatusAnswer>, ToolError> {
    operation::in_project(&ctx, &args.at, GitStatusOp {}).await
}
