//! `git_status`: the project's Git state — branch, upstream, changed, staged, untracked and
//! conflicted files — read by the project's runner.

use schemars::JsonSchema;
use serde::Deserialize;
use wc_runner_protocol::{GitStatusAnswer, GitStatusOp};

use crate::auth::Scope;
use crate::execution::ProjectOrSession;
use crate::execution::operation::{self, InProject};
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, Effect, SessionUse, ToolMeta, ToolSpec};
use crate::result::ToolError;

/// Arguments of `git_status`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
}

/// The spec.
pub fn spec() -> ToolSpec {
    ToolSpec::new(
        ToolMeta {
            name: "git_status",
            title: "Git status",
            description: "The project's Git state on the build host: branch, HEAD, upstream with ahead/behind, and each changed file with its staged (index) and unstaged (worktree) change, untracked and conflicted files, with counts. Paths are relative to the project root (also when the project is a directory inside a larger repository).",
            category: Category::Files,
            scopes: &[Scope::ProjectRead],
            effect: Effect::Reads,
            rest_operation: true,
        },
        run,
    )
    .with_session(SessionUse::Works)
}

async fn run(ctx: ToolContext, args: Args) -> Result<InProject<GitStatusAnswer>, ToolError> {
    operation::in_project(&ctx, &args.at, GitStatusOp {}).await
}
