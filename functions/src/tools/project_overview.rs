//! `project_overview`: what a project is — languages, manifests, instruction files, the top
//! of its tree and its Git state — observed by the project's runner.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wc_domain::{ProjectId, SessionId};
use wc_runner_protocol::{ExploreOp, OverviewAnswer, OverviewOp, WorkAnswer, WorkSpec};

use crate::auth::Scope;
use crate::execution::operation;
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, SessionUse, ToolMeta, ToolSpec};
use crate::result::ToolError;

/// Arguments of `project_overview`.
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

/// What `project_overview` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The project.
    pub project: ProjectId,
    /// What it is.
    #[serde(flatten)]
    pub overview: OverviewAnswer,
}

/// The spec.
pub fn spec() -> ToolSpec {
    ToolSpec::new(
        ToolMeta {
            name: "project_overview",
            title: "Project overview",
            description: "Look at a project on its build host: root name, languages by file count, build manifests (Cargo.toml, package.json, pyproject.toml, go.mod, …), agent instruction files (AGENTS.md, CLAUDE.md, .github/copilot-instructions.md), the top two levels of its tree (.gitignore-aware) and its Git branch, HEAD and dirty state. Start here, then list_project_files, search_project_texts and read_files.",
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
    let spec = WorkSpec::Explore(ExploreOp::Overview(OverviewOp {}));
    match operation::run(&ctx, &target, "project_overview", spec).await? {
        WorkAnswer::Overview(overview) => Ok(Output {
            project: target.project_id,
            overview,
        }),
        other => Err(operation::mismatched(&other)),
    }
}
