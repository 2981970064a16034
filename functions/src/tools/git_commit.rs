//! `git_commit`: a commit of the project's changes, made by the project's runner as its
//! configured author.

use serde_json::{Map, Value};
use wc_domain::{RelativePath, Text};
use wc_macros::{tool, tool_args};
use wc_runner_protocol::{GitCommitAnswer, GitCommitOp};

use crate::execution::operation::{self, InProject};
use crate::execution::{ProjectOrSession, invalid};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
    /// The commit message (first line: the subject).
    pub message: Text<1, 16384>,
    /// Commit exactly these files or directories (new, changed and deleted alike; at most
    /// 100). Default: every change of the project, untracked files included.
    #[schemars(length(max = 100))]
    pub paths: Option<Vec<RelativePath>>,
}

/// Commit the project's changes (all, untracked included, or the named paths) on the current branch
/// as the runner's author; hooks run. Refused typed when nothing changed, conflicts remain or a
/// hook refuses.
#[tool(consequential, Files, "Git commit", session = Works, with_ledger_facts(facts))]
async fn git_commit(ctx: ToolContext, args: Args) -> Result<InProject<GitCommitAnswer>, ToolError> {
    let (_, target) = args.at.resolve(&ctx).await?;
    if args.message.trim().is_empty() {
        return Err(invalid(
            "/message",
            "minLength",
            "the commit message is empty".to_owned(),
        ));
    }
    let op = GitCommitOp {
        message: args.message.into_string(),
        paths: args.paths.unwrap_or_default(),
    };
    operation::answer(&ctx, target, op).await
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
