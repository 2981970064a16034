//! `run_process`: run a program with arguments (no shell) on the project's build host and
//! wait for its result.

use schemars::JsonSchema;
use serde::Deserialize;
use wc_domain::WorkMode;
use wc_runner_protocol::WorkSpec;

use crate::auth::Scope;
use crate::execution::{self, Argv, ExecOptions, ExecOutput, ProjectOrSession};
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, Effect, SessionUse, ToolMeta, ToolSpec};
use crate::kernel::task::TaskWhen;
use crate::result::ToolError;

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

/// The spec.
pub fn spec() -> ToolSpec {
    ToolSpec::new(
        ToolMeta {
            name: "run_process",
            title: "Run process",
            description: "Run a program with arguments (no shell) in a project on its build host. success is true only for exit 0 or an accepted_exit_codes code; otherwise error.kind says how it ended, and output always holds exit code, stdout and stderr. Waits about 20 s, then returns a running job_id.",
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
    let spec = WorkSpec::Process {
        argv: args.argv.into_inner(),
    };
    let req = args
        .exec
        .request(&ctx, WorkMode::Sync, spec, &set.defaults)?;
    execution::run_sync(&ctx, &set.target, set.session.as_ref(), req).await
}
