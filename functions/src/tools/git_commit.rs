//! `git_commit`: a commit of the project's changes, made by the project's runner as its
//! configured author.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use wc_domain::{ProjectId, RelativePath, SessionId};
use wc_runner_protocol::{GitCommitAnswer, GitCommitOp, GitOp, WorkAnswer, WorkSpec};

use crate::auth::Scope;
use crate::execution::{invalid, operation};
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, SessionUse, ToolMeta, ToolSpec};
use crate::result::ToolError;

/// Arguments of `git_commit`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("anyOf" = [
    {"required": ["project"], "properties": {"project": {"type": "string"}}},
    {"required": ["session_id"], "properties": {"session_id": {"type": "string"}}}
]))]
pub struct Args {
    /// Project id (`agent:<runner>:<name>`); default: the session's.
    pub project: Option<ProjectId>,
    /// The commit message (first line: the subject).
    #[schemars(length(min = 1, max = 16384), regex(pattern = r"^[^\u0000]*$"))]
    pub message: String,
    /// Commit exactly these files or directories (new, changed and deleted alike; at most
    /// 100). Default: every change of the project, untracked files included.
    #[schemars(length(max = 100))]
    pub paths: Option<Vec<RelativePath>>,
    /// Workflow Session this commit belongs to (refused in a `read_only` session).
    pub session_id: Option<SessionId>,
}

/// What `git_commit` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The project.
    pub project: ProjectId,
    /// The commit.
    #[serde(flatten)]
    pub commit: GitCommitAnswer,
}

/// The spec.
pub fn spec() -> ToolSpec {
    ToolSpec::new(
        ToolMeta {
            name: "git_commit",
            title: "Git commit",
            description: "Commit the project's changes on the build host (every change, untracked files included, or exactly the named paths) on the current branch, as the runner's configured author; repository hooks run. Refused typed when there is nothing to commit (nothing_to_commit), while conflicts are unresolved (unmerged_paths), or when a hook refuses (hook_rejected).",
            category: Category::Files,
            scopes: &[Scope::ProjectWrite],
            read_only: false,
            consequential: true,
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
    if args.message.trim().is_empty() {
        return Err(invalid(
            "/message",
            "minLength",
            "the commit message is empty".to_owned(),
        ));
    }
    let op = GitCommitOp {
        message: args.message,
        paths: args.paths.unwrap_or_default(),
    };
    let spec = WorkSpec::Git(GitOp::GitCommit(op));
    match operation::run(&ctx, &target, "git_commit", spec).await? {
        WorkAnswer::GitCommit(commit) => Ok(Output {
            project: target.project_id,
            commit,
        }),
        other => Err(operation::mismatched(&other)),
    }
}

/// The evidence of a commit: its hash (the message and files stay in Git).
fn facts(output: &Value) -> Map<String, Value> {
    let mut facts = Map::new();
    if let Some(commit) = output["commit"]
        .as_str()
        .filter(|c| c.len() <= 64 && c.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        facts.insert("commit".into(), Value::from(commit));
    }
    facts
}
