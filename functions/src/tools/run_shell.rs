//! `run_shell`: run raw shell text (≤ 16,000 UTF-8 bytes) with `sh` or `bash` on the
//! project's build host and wait for its result.

use schemars::JsonSchema;
use serde::Deserialize;
use wc_domain::WorkMode;

use crate::execution::{self, ExecOptions, ExecOutput, ProjectOrSession, ShellChoice, ShellText};
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, SessionUse, ToolMeta, ToolSpec};
use crate::kernel::task::TaskWhen;
use crate::result::ToolError;

/// The spec.
pub fn spec() -> ToolSpec {
    let meta = ToolMeta::consequential(Category::Execution, "run_shell", "Run shell").about(
        "Run shell text (sh or bash) in a project. After about 20 s it returns a running job_id.",
    );
    ToolSpec::new(meta, run)
        .with_session(SessionUse::Works)
        .with_task(TaskWhen::BackgroundOrLong, execution::finish_task)
}

/// Arguments of `run_shell`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
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

async fn run(ctx: ToolContext, args: Args) -> Result<ExecOutput, ToolError> {
    let (command, shell) = (args.command, args.shell);
    let spec = |defaults: &_| execution::shell_spec(command, shell, defaults);
    execution::run_tool(&ctx, &args.at, args.exec, WorkMode::Sync, spec).await
}
