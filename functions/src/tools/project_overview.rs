//! `project_overview`: what a project is — languages, manifests, instruction files, the top
//! of its tree and its Git state — observed by the project's runner.

use schemars::JsonSchema;
use serde::Deserialize;
use wc_runner_protocol::{OverviewAnswer, OverviewOp};

use crate::auth::Scope;
use crate::execution::ProjectOrSession;
use crate::execution::operation::{self, InProject};
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, Effect, SessionUse, ToolMeta, ToolSpec};
use crate::result::ToolError;

/// Arguments of `project_overview`.
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
            name: "project_overview",
            title: "Project overview",
            description: "Look at a project on its build host: root name, languages by file count, build manifests (Cargo.toml, package.json, pyproject.toml, go.mod, …), agent instruction files (AGENTS.md, CLAUDE.md, .github/copilot-instructions.md), the top two levels of its tree (.gitignore-aware) and its Git branch, HEAD and dirty state. Start here, then list_project_files, search_project_texts and read_files.",
            category: Category::Files,
            scopes: &[Scope::ProjectRead],
            effect: Effect::Reads,
            rest_operation: true,
        },
        run,
    )
    .with_session(SessionUse::Works)
}

async fn run(ctx: ToolContext, args: Args) -> Result<InProject<OverviewAnswer>, ToolError> {
    operation::in_project(&ctx, &args.at, OverviewOp {}).await
}
