//! `run_shell`: run raw shell text (≤ 16,000 UTF-8 bytes) with `sh` or `bash` on the
//! project's build host and wait for its result.

use wc_domain::WorkMode;
use wc_macros::{tool, tool_args};

use crate::execution::{
    self, ExecOptions, ExecOutput, ProjectOrSession, RunsWork, ShellChoice, ShellText,
};
use crate::kernel::context::ToolContext;
use crate::kernel::task::TaskWhen;
use crate::result::ToolError;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    at: ProjectOrSession,
    /// Shell text, at most 16,000 UTF-8 bytes, not blank (longer programs belong in
    /// run_script).
    command: ShellText,
    /// `sh` or `bash` (default: the session's default_shell, else `sh`).
    shell: Option<ShellChoice>,
    #[serde(flatten)]
    exec: ExecOptions,
}

/// Run shell text (sh or bash) in a project. After about 20 s it returns a running job_id.
#[tool(consequential, Execution, "Run shell", runs_work(TaskWhen::BackgroundOrLong))]
async fn run_shell(ctx: ToolContext, args: Args) -> Result<ExecOutput, ToolError> {
    let (command, shell) = (args.command, args.shell);
    let spec = |defaults: &_| execution::shell_spec(command, shell, defaults);
    execution::run_tool(&ctx, &args.at, args.exec, WorkMode::Sync, spec).await
}
