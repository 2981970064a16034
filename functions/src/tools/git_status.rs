//! `git_status`: the project's Git state — branch, upstream, changed, staged, untracked and
//! conflicted files — read by the project's runner.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wc_domain::{ProjectId, SessionId};
use wc_runner_protocol::{GitOp, GitStatusAnswer, GitStatusOp, WorkAnswer, WorkSpec};

use crate::auth::Scope;
use crate::execution::operation;
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, SessionUse, ToolMeta, ToolSpec};
use crate::result::ToolError;

/// Arguments of `git_status`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("anyOf" = [
    {"required": ["project"], "properties": {"project": {"type": "string"}}},
    {"required": ["session_id"], "properties": {"session_id": {"type": "string"}}}
]))]
pub struct Args {
    /// Project id (`agent:<runner>:<name>`); default: the session's.
    pub project: Option<ProjectId>,
    /// Workflow Session this look belongs to.
    pub session_id: Option<SessionId>,
}

/// What `git_status` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The project.
    pub project: ProjectId,
    /// Its Git state.
    #[serde(flatten)]
    pub status: GitStatusAnswer,
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
    let spec = WorkSpec::Git(GitOp::GitStatus(GitStatusOp {}));
    match operation::run(&ctx, &target, "git_status", spec).await? {
        WorkAnswer::GitStatus(status) => Ok(Output {
            project: target.project_id,
            status,
        }),
        other => Err(operation::mismatched(&other)),
    }
}
