//! `run_process`: run a program with arguments (no shell) on the project's build host and
//! wait for its result.

use schemars::JsonSchema;
use serde::Deserialize;
use wc_domain::{ProjectId, RelativePath, SessionId, WorkMode};
use wc_runner_protocol::WorkSpec;

use crate::auth::Scope;
use crate::execution::{self, AcceptedExitCodes, ExecOutput, Request, ResultExpectation};
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, SessionUse, ToolMeta, ToolSpec};
use crate::kernel::task::TaskWhen;
use crate::result::ToolError;

/// Arguments of `run_process`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("anyOf" = [
    {"required": ["project"], "properties": {"project": {"type": "string"}}},
    {"required": ["session_id"], "properties": {"session_id": {"type": "string"}}}
]))]
pub struct Args {
    /// Project id (`agent:<runner>:<name>`); default: the session's.
    pub project: Option<ProjectId>,
    /// Program and arguments; `argv[0]` is looked up on PATH unless it contains `/`.
    #[schemars(
        length(min = 1, max = 256),
        inner(length(max = 1024), regex(pattern = r"^[^\u0000]*$")),
        extend("prefixItems" = [{"type": "string", "minLength": 1}])
    )]
    pub argv: Vec<String>,
    /// Working directory relative to the project root (default: the session's default_cwd,
    /// else the root).
    pub cwd: Option<RelativePath>,
    /// Text written to the process's standard input.
    #[schemars(length(max = 65536), regex(pattern = r"^[^\u0000]*$"))]
    pub stdin: Option<String>,
    /// Wall-clock limit in milliseconds (default 600000, at most 3600000).
    #[schemars(range(min = 1, max = 3600000))]
    pub timeout_ms: Option<u64>,
    /// Exit codes that also count as success besides 0 (e.g. 1 for a boolean predicate such
    /// as `git diff --quiet`); at most 32, each 0-255.
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
            name: "run_process",
            title: "Run process",
            description: "Run a program with arguments (no shell) in a project on its build host. success is true only for exit 0 or an accepted_exit_codes code; otherwise error.kind says how it ended, and output always holds exit code, stdout and stderr. Waits about 20 s, then returns a running job_id.",
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
        "run_process",
        args.project.as_ref(),
        args.session_id.as_ref(),
        args.purpose.as_deref(),
    )
    .await?;
    if let Some(i) = args.argv.iter().position(|a| a.contains('\0')) {
        return Err(execution::invalid(
            &format!("/argv/{i}"),
            "noNul",
            format!("argv[{i}] contains a NUL byte"),
        ));
    }
    let req = Request {
        tool: "run_process",
        mode: WorkMode::Sync,
        spec: WorkSpec::Process { argv: args.argv },
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
