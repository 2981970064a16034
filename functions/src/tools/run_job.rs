//! `run_job`: start shell text or a program as a background job and return its id at once.

use schemars::JsonSchema;
use serde::Deserialize;
use wc_domain::WorkMode;
use wc_macros::tool;
use wc_runner_protocol::WorkSpec;

use crate::execution::{
    self, Argv, ExecOptions, ExecOutput, ProjectOrSession, RunsWork, ShellChoice, ShellText,
};
use crate::kernel::context::ToolContext;
use crate::kernel::task::TaskWhen;
use crate::result::ToolError;

/// Arguments of `run_job`: exactly one of `command` (shell text) and `argv`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend(
    "allOf" = [{"anyOf": [
        {"required": ["command"], "properties": {"command": {"type": "string"}}},
        {"required": ["argv"], "properties": {"argv": {"type": "array"}}}
    ]}],
    "not" = {
        "required": ["command", "argv"],
        "properties": {"command": {"type": "string"}, "argv": {"type": "array"}}
    }
))]
pub struct Args {
    #[serde(flatten)]
    at: ProjectOrSession,
    /// Shell text, at most 16,000 UTF-8 bytes, not blank.
    command: Option<ShellText>,
    /// Program and arguments (no shell).
    argv: Option<Argv>,
    /// Shell for `command`: `sh` or `bash` (default: the session's default_shell, else `sh`).
    shell: Option<ShellChoice>,
    #[serde(flatten)]
    exec: ExecOptions,
}

/// Start shell text (command) or a program (argv) as a background job in a project; returns job_id
/// at once. Follow it with job_status, job_log and stop_job.
#[tool(consequential, Execution, "Run job", runs_work(TaskWhen::Background))]
async fn run_job(ctx: ToolContext, args: Args) -> Result<ExecOutput, ToolError> {
    let (command, argv, shell) = (args.command, args.argv, args.shell);
    let spec = |defaults: &_| match (command, argv) {
        (Some(command), None) => execution::shell_spec(command, shell, defaults),
        (None, Some(argv)) => Ok(WorkSpec::Process {
            argv: argv.into_inner(),
        }),
        _ => Err(execution::invalid(
            "/command",
            "oneOf",
            "give exactly one of command (shell text) and argv".into(),
        )),
    };
    execution::run_tool(&ctx, &args.at, args.exec, WorkMode::Job, spec).await
}
