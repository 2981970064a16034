//! `git_log`: the latest commits of the project's branch, read by the project's runner.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wc_domain::{ProjectId, RelativePath, SessionId};
use wc_runner_protocol::{
    DEFAULT_LOG_COMMITS, GitLogAnswer, GitLogOp, GitOp, WorkAnswer, WorkSpec,
};

use crate::auth::Scope;
use crate::execution::operation;
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, SessionUse, ToolMeta, ToolSpec};
use crate::result::ToolError;

/// Arguments of `git_log`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("anyOf" = [
    {"required": ["project"], "properties": {"project": {"type": "string"}}},
    {"required": ["session_id"], "properties": {"session_id": {"type": "string"}}}
]))]
pub struct Args {
    /// Project id (`agent:<runner>:<name>`); default: the session's.
    pub project: Option<ProjectId>,
    /// Commits to return (1-200, default 20).
    #[schemars(range(min = 1, max = 200))]
    pub limit: Option<u32>,
    /// Only commits that change this file or directory (default: the whole project).
    pub path: Option<RelativePath>,
    /// Workflow Session this look belongs to.
    pub session_id: Option<SessionId>,
}

/// What `git_log` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The project.
    pub project: ProjectId,
    /// The commits.
    #[serde(flatten)]
    pub log: GitLogAnswer,
}

/// The spec.
pub fn spec() -> ToolSpec {
    ToolSpec::new(
        ToolMeta {
            name: "git_log",
            title: "Git log",
            description: "The latest commits reachable from HEAD in the project on the build host, newest first: hash, parents, author, time (RFC 3339) and subject; optionally only those touching a path.",
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
    let op = GitLogOp {
        limit: args.limit.unwrap_or(DEFAULT_LOG_COMMITS),
        path: args.path.filter(|p| !p.is_root()),
    };
    let spec = WorkSpec::Git(GitOp::GitLog(op));
    match operation::run(&ctx, &target, "git_log", spec).await? {
        WorkAnswer::GitLog(log) => Ok(Output {
            project: target.project_id,
            log,
        }),
        other => Err(operation::mismatched(&other)),
    }
}
