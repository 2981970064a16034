//! `run_script`: run a script body with an interpreter on the project's build host and wait
//! for its result. Large program text belongs here rather than in run_shell.

use wc_domain::{ProgramName, Text, WorkMode};
use wc_macros::{tool, tool_args};
use wc_runner_protocol::WorkSpec;

use crate::execution::{self, ExecOptions, ExecOutput, ProjectOrSession, RunsWork};
use crate::kernel::context::ToolContext;
use crate::kernel::task::TaskWhen;
use crate::result::ToolError;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    at: ProjectOrSession,
    /// The script text (at most 65,536 characters).
    script: Text<1, 65536>,
    /// Interpreter program name, e.g. `sh`, `bash`, `python3` (default `sh`; no paths).
    interpreter: Option<ProgramName>,
    /// Arguments after the script path.
    #[schemars(length(max = 64))]
    args: Option<Vec<Text<0, 1024>>>,
    #[serde(flatten)]
    exec: ExecOptions,
}

/// Run a script body with an interpreter (sh, bash, python3, …) in a project: for programs too long
/// or quote-heavy for run_shell.
#[tool(consequential, Execution, "Run script", runs_work(TaskWhen::BackgroundOrLong))]
async fn run_script(ctx: ToolContext, args: Args) -> Result<ExecOutput, ToolError> {
    let script = WorkSpec::Script {
        interpreter: args.interpreter.map_or_else(|| "sh".into(), String::from),
        script: args.script.into_string(),
        args: args.args.into_iter().flatten().map(String::from).collect(),
    };
    execution::run_tool(&ctx, &args.at, args.exec, WorkMode::Sync, |_: &_| {
        Ok(script)
    })
    .await
}
