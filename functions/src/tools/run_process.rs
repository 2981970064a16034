//! `run_process`: run a program with arguments (no shell) on the project's build host and
//! wait for its result.

use wc_domain::WorkMode;
use wc_macros::{tool, tool_args};
use wc_runner_protocol::WorkSpec;

use crate::execution::{self, Argv, ExecOptions, ExecOutput, ProjectOrSession, RunsWork};
use crate::kernel::context::ToolContext;
use crate::kernel::task::TaskWhen;
use crate::result::ToolError;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    at: ProjectOrSession,
    /// Program and arguments; `argv[0]` is looked up on PATH unless it contains `/`.
    argv: Argv,
    #[serde(flatten)]
    exec: ExecOptions,
}

/// Run a program with arguments (no shell) in a project. After about 20 s it returns a running
/// job_id.
#[tool(consequential, Execution, "Run process", runs_work(TaskWhen::BackgroundOrLong))]
async fn run_process(ctx: ToolContext, args: Args) -> Result<ExecOutput, ToolError> {
    let argv = args.argv.into_inner();
    let spec = |_: &_| Ok(WorkSpec::Process { argv });
    execution::run_tool(&ctx, &args.at, args.exec, WorkMode::Sync, spec).await
}
