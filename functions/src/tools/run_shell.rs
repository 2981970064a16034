//! `run_shell`: run raw shell text (≤ 16,000 UTF-8 bytes) with `sh` or `bash` on the
//! project's build host and wait for its result.

use schemars::JsonSchema;
use serde::Deserialize;
use wc_domain::WorkMode;

use crate::auth::Scope;
use crate::execution::{self, ExecOptions, ExecOutput, ProjectOrSession, ShellChoice, ShellText};
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, Effect, SessionUse, ToolMeta, ToolSpec};
use crate::kernel::task::TaskWhen;
use crate::result::ToolError;

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

/// The spec.
pub fn spec() -> ToolSpec {
    ToolSpec::new(
        ToolMeta {
            name: "run_shell",
            title: "Run shell",
            description: "Run shell text (sh or bash, ≤ 16,000 bytes) in a project on its build host. success is true only for exit 0 or an accepted_exit_codes code; otherwise error.kind says how it ended, and output always holds exit code, stdout and stderr. Waits about 20 s, then returns a running job_id.",
            category: Category::Execution,
            scopes: &[Scope::ProjectWrite],
            effect: Effect::Consequential,
            rest_operation: true,
        },
        run,
    )
    .with_session(SessionUse::Works)
    .with_task(TaskWhen::BackgroundOrLong, execution::finish_task)
}

async fn run(ctx: ToolContext, args: Args) -> Result<ExecOutput, ToolError> {
    let set = execution::setting(&ctx, &args.at).await?;
    let spec = execution::shell_spec(args.command, args.shell, &set.defaults)?;
    let req = args
        .exec
        .request(&ctx, WorkMode::Sync, spec, &set.defaults)?;
    execution::run_sync(&ctx, &set.target, set.session.as_ref(), req).await
}
