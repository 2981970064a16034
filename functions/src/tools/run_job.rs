//! `run_job`: start shell text or a program as a background job and return its id at once.

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

/// Arguments of `run_job`: exactly one of `command` (shell text) and `argv`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend(
    "allOf" = [
        {"anyOf": [
            {"required": ["command"], "properties": {"command": {"type": "string"}}},
            {"required": ["argv"], "properties": {"argv": {"type": "array"}}}
        ]},
        {"anyOf": [
            {"required": ["project"], "properties": {"project": {"type": "string"}}},
            {"required": ["session_id"], "properties": {"session_id": {"type": "string"}}}
        ]}
    ],
    "not" = {
        "required": ["command", "argv"],
        "properties": {"command": {"type": "string"}, "argv": {"type": "array"}}
    }
))]
pub struct Args {
    /// Project id (`agent:<runner>:<name>`); default: the session's.
    pub project: Option<ProjectId>,
    /// Shell text, at most 16,000 UTF-8 bytes, not blank.
    #[schemars(
        length(min = 1, max = 16000),
        regex(pattern = r"^[^\u0000]*[^\u0000 \t\n\r\u000B\u000C][^\u0000]*$")
    )]
    pub command: Option<String>,
    /// Program and arguments (no shell).
    #[schemars(
        length(min = 1, max = 256),
        inner(length(max = 1024), regex(pattern = r"^[^\u0000]*$")),
        extend("prefixItems" = [{"type": "string", "minLength": 1}])
    )]
    pub argv: Option<Vec<String>>,
    /// Shell for `command`: `sh` or `bash` (default: the session's default_shell, else `sh`).
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
    /// Workflow Session whose execution defaults apply and whose ledger records the job.
    pub session_id: Option<SessionId>,
}

/// The spec.
pub fn spec() -> ToolSpec {
    ToolSpec::new(
        ToolMeta {
            name: "run_job",
            title: "Run job",
            description: "Start shell text (command) or a program (argv), exactly one of them, as a background job in a project on its build host; returns job_id at once. Follow it with job_status, job_log and stop_job.",
            category: Category::Execution,
            scopes: &[Scope::ProjectWrite],
            read_only: false,
            consequential: true,
            rest_operation: true,
        },
        run,
    )
    .with_session(SessionUse::Works)
    .with_task(TaskWhen::Background, execution::finish_task)
}

async fn run(ctx: ToolContext, args: Args) -> Result<ExecOutput, ToolError> {
    let execution::Setting {
        session,
        target,
        defaults,
    } = execution::setting(
        &ctx,
        "run_job",
        args.project.as_ref(),
        args.session_id.as_ref(),
        args.purpose.as_deref(),
    )
    .await?;
    let spec = match (args.command, args.argv) {
        (Some(command), None) => {
            execution::check_shell_text("/command", &command)?;
            let shell = args
                .shell
                .or(defaults.default_shell.map(ShellChoice::from_session))
                .unwrap_or_default();
            WorkSpec::Shell {
                shell: shell.protocol(),
                command,
            }
        }
        (None, Some(argv)) => {
            if let Some(i) = argv.iter().position(|a| a.contains('\0')) {
                return Err(execution::invalid(
                    &format!("/argv/{i}"),
                    "noNul",
                    format!("argv[{i}] contains a NUL byte"),
                ));
            }
            WorkSpec::Process { argv }
        }
        _ => {
            return Err(execution::invalid(
                "/command",
                "oneOf",
                "give exactly one of command (shell text) and argv".into(),
            ));
        }
    };
    let req = Request {
        tool: "run_job",
        mode: WorkMode::Job,
        spec,
        cwd: execution::cwd(args.cwd.as_ref(), &defaults)?,
        stdin: args.stdin,
        timeout_ms: execution::timeout(args.timeout_ms)?,
        expectation: args.result_expectation.unwrap_or_default(),
        accepted_exit_codes: args.accepted_exit_codes.unwrap_or_default(),
        purpose: args.purpose,
        min_tests: None,
    };
    let row = execution::submit(&ctx, &target, session.as_ref(), req).await?;
    execution::view(&ctx, &row, false).await
}
