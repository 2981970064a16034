//! `run_process`: run a program with arguments (no shell) on the project's build host and
//! wait for its result.

use schemars::JsonSchema;
use serde::Deserialize;
use wc_domain::WorkMode;
use wc_runner_protocol::WorkSpec;

use crate::execution::{self, Argv, ExecOptions, ExecOutput, ProjectOrSession};
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, SessionUse, ToolMeta, ToolSpec};
use crate::kernel::task::TaskWhen;
use crate::result::ToolError;

/// The spec.
pub fn spec() -> ToolSpec {
    let meta = ToolMeta::consequential(Category::Execution, "run_process", "Run process")
        .about("Run a program with arguments (no shell) in a project. After about 20 s it returns a running job_id.");
    ToolSpec::new(meta, run)
        .with_session(SessionUse::Works)
        .with_task(TaskWhen::BackgroundOrLong, execution::finish_task)
}

/// Arguments of `run_process`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(flatten)]
    at: ProjectOrSession,
    /// Program and arguments; `argv[0]` is looked up on PATH unless it contains `/`.
    argv: Argv,
    #[serde(flatten)]
    exec: ExecOptions,
}

async fn run(ctx: ToolContext, args: Args) -> Result<ExecOutput, ToolError> {
    let argv = args.argv.into_inner();
    let spec = |_: &_| Ok(WorkSpec::Process { argv });
    execution::run_tool(&ctx, &args.at, args.exec, WorkMode::Sync, spec).await
}
