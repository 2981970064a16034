//! `run_shell`: run raw shell text (≤ 16,000 UTF-8 bytes) with `sh` or `bash` on the
//! project's build host and wait for its result.

use schemars::JsonSchema;
use serde::Deserialize;
use wc_domain::{ProjectId, RelativePath, SessionId, WorkMode};
use wc_runner_protocol::WorkSpec;

use crate::auth::Scope;
use crate::execution::{
    self, AcceptedExitCodes, ExecOutput, Request, ResultExpectation, ShellChoice,
};
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, SessionUse, ToolMeta, ToolSpec};
use crate::kernel::task::TaskWhen;
use crate::result::ToolError;

/// Arguments of `run_shell`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("anyOf" = [
    {"required": ["project"], "properties": {"project": {"type": "string"}}},
    {"required": ["session_id"], "properties": {"session_id": {"type": "string"}}}
]))]
pub struct Args {
    /// Project id (`agent:<runner>:<name>`); default: the session's.
    pub project: Option<ProjectId>,
    /// Shell text, at most 16,000 UTF-8 bytes, not blank (longer programs belong in
    /// run_script).
    #[schemars(
        length(min = 1, max = 16000),
        regex(pattern = r"^[^\u0000]*[^\u0000 \t\n\r\u000B\u000C][^\u0000]*$")
    )]
    pub command: String,
    /// `sh` or `bash` (default: the session's default_shell, else `sh`).
    pub shell: Option<ShellChoice>,
    /// Working directory relative to the project root (default: the session's default_cwd,
    /// else the root).
    pub cwd: Option<RelativePath>,
    /// Text written to standard input.
    #[schemars(length(max = 65536), regex(pattern = r"^[^\u0000]*$"))]
    pub stdin: Option<String>,
    /// Wall-clock limit in milliseconds (default 600000, at most 3600000).
    #[schemars(range(min = 1, max = 3600000))]
    pub timeout_ms: Option<u64>,
    /// Exit codes that also count as success besides 0 (e.g. 1 for `grep` finding nothing);
    /// at most 32, each 0-255.
    pub accepted_exit_codes: Option<AcceptedExitCodes>,
    /// What result you expect: `success` (default), `failure` or `observe`.
    pub result_expectation: Option<ResultExpectation>,
    /// Why you run it (evidence only).
    #[schemars(length(max = 200), regex(pattern = r"^[^\x00-\x1F\x7F-\x9F]*$"))]
    pub purpose: Option<String>,
    /// Workflow Session whose execution defaults apply and whose ledger records the run.
    pub session_id: Option<SessionId>,
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
            read_only: false,
            consequential: true,
            rest_operation: true,
        },
        run,
    )
    .with_session(SessionUse::Works)
    .with_task(TaskWhen::BackgroundOrLong, execution::finish_task)
}

async fn run(ctx: ToolContext, args: Args) -> Result<ExecOutput, ToolError> {
    let execution::Setting {
        session,
        target,
        defaults,
    } = execution::setting(
        &ctx,
        "run_shell",
        args.project.as_ref(),
        args.session_id.as_ref(),
        args.purpose.as_deref(),
    )
    .await?;
    execution::check_shell_text("/command", &args.command)?;
    let shell = args
        .shell
        .or(defaults.default_shell.map(ShellChoice::from_session))
        .unwrap_or_default();
    let req = Request {
        tool: "run_shell",
        mode: WorkMode::Sync,
        spec: WorkSpec::Shell {
            shell: shell.protocol(),
            command: args.command,
        },
        cwd: execution::cwd(args.cwd.as_ref(), &defaults)?,
        stdin: args.stdin,
        timeout_ms: execution::timeout(args.timeout_ms)?,
        expectation: args.result_expectation.unwrap_or_default(),
        accepted_exit_codes: args.accepted_exit_codes.unwrap_or_default(),
        purpose: args.purpose,
        min_tests: None,
    };
    execution::run_sync(&ctx, &target, session.as_ref(), req).await
}
