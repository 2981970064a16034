//! `project_overview`: what a project is — languages, manifests, instruction files, the top
//! of its tree and its Git state — observed by the project's runner.

use schemars::JsonSchema;
use serde::Deserialize;
use wc_runner_protocol::{OverviewAnswer, OverviewOp};

use crate::execution::ProjectOrSession;
use crate::execution::operation::{self, InProject};
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, SessionUse, ToolMeta, ToolSpec};
use crate::result::ToolError;

/// The spec.
pub fn spec() -> ToolSpec {
    let meta = ToolMeta::reads(Category::Files, "project_overview", "Project overview")
        .about("Look at a project: languages, build manifests, agent instruction files (AGENTS.md, …), its top two tree levels and Git state. Start here, then list_project_files, search_project_texts, read_files.");
    ToolSpec::new(meta, run).with_session(SessionUse::Works)
}

/// Arguments of `project_overview`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
}

async fn run(ctx: ToolContext, args: Args) -> Result<InProject<OverviewAnswer>, ToolError> {
    operation::in_project(&ctx, &args.at, OverviewOp {}).await
}
