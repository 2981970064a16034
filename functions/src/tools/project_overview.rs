//! `project_overview`: what a project is — languages, manifests, instruction files, the top
//! of its tree and its Git state — observed by the project's runner.

use wc_macros::{tool, tool_args};
use wc_runner_protocol::{OverviewAnswer, OverviewOp};

use crate::execution::ProjectOrSession;
use crate::execution::operation::{self, InProject};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
}

/// Look at a project: languages, build manifests, agent instruction files (AGENTS.md, …), its top
/// two tree levels and Git state. Start here, then list_project_files, search_project_texts,
/// read_files.
#[tool(reads, Files, "Project overview", session = Works)]
async fn project_overview(
    ctx: ToolContext,
    args: Args,
) -> Result<InProject<OverviewAnswer>, ToolError> {
    operation::in_project(&ctx, &args.at, OverviewOp {}).await
}
