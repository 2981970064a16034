//! `session_shell_exec`: run one command in the session's persistent shell, serialized
//! (`shell_busy` while another runs), its result the command's own exit status.

use wc_domain::{SessionId, ShellId};
use wc_macros::{tool, tool_args};
use wc_runner_protocol::{ShellExecOp, ShellOp, Termination, WorkOutcome};
use wc_store::shells::ShellStep;

use crate::execution::shell::{self, Answered, ExecView, Operation};
use crate::execution::{self, ExecState, ResultExpectation, ShellText, Stdin};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;

/// Longest command time limit: a command's answer must fit one synchronous call (longer work
/// belongs in run_job).
pub const MAX_EXEC_TIMEOUT_MS: u64 = 20_000;
const DEFAULT_EXEC_TIMEOUT_MS: u64 = 10_000;

#[tool_args]
pub struct Args {
    /// The session.
    pub session_id: SessionId,
    /// The shell (open_session_shell's `shell_id`).
    pub shell_id: ShellId,
    /// Shell text, at most 16,000 UTF-8 bytes, not blank.
    pub command: ShellText,
    /// Time limit in ms (default 10000, at most 20000); then it is interrupted.
    #[schemars(range(min = 1, max = 20000))]
    pub timeout_ms: Option<u64>,
    /// Standard input of this command (default: empty).
    pub stdin: Option<Stdin>,
    /// Expected result (default success).
    pub result_expectation: Option<ResultExpectation>,
}

/// Run a command in the session's persistent shell; cd, exports and functions stay. success: exit
/// 0; a timeout interrupts it (timed_out). One command at a time (shell_busy).
#[tool(consequential, Execution, "Session shell exec", session = Works,
    with_lifecycle_facts(shell::facts), with_private_arguments(&["command", "stdin"]),
)]
async fn session_shell_exec(ctx: ToolContext, args: Args) -> Result<ExecView, ToolError> {
    let session = ctx.business_session(&args.session_id)?;
    let command = args.command.check("/command")?;
    let timeout_ms = args.timeout_ms.unwrap_or(DEFAULT_EXEC_TIMEOUT_MS);
    if timeout_ms == 0 || timeout_ms > MAX_EXEC_TIMEOUT_MS {
        return Err(execution::invalid(
            "/timeout_ms",
            "range",
            format!("timeout_ms must be 1-{MAX_EXEC_TIMEOUT_MS} (longer work belongs in run_job)"),
        ));
    }
    let row = shell::load(&ctx, &session, &args.shell_id).await?;
    if row.state.is_terminal() {
        return Err(shell::unusable(&row));
    }
    let target = execution::resolve_target(&ctx, &row.project_id).await?;
    let operation = Operation {
        tool: "session_shell_exec",
        step: ShellStep::Exec(row.id.clone()),
        op: ShellOp::ShellExec(ShellExecOp {
            target: shell::target_of(&row.id, row.instance_id),
            command,
        }),
        cwd: None,
        stdin: args.stdin.map(String::from),
        timeout_ms: Some(timeout_ms),
    };
    let (row, answer) = match shell::run(&ctx, &session, &target, operation).await? {
        Answered::Runner(row, answer) => (row, answer),
        Answered::Ended(row) => return Err(shell::unusable(&row)),
    };
    let Some(result) = answer.exec else {
        // The runner no longer holds the shell (restarted, replaced): nothing ran.
        return Err(shell::unusable(&row));
    };
    let expectation = execution::classify(
        args.result_expectation.unwrap_or_default(),
        &[],
        if result.exit_code.is_some() {
            ExecState::Succeeded
        } else {
            ExecState::TimedOut
        },
        Some(&as_outcome(result.exit_code)),
    );
    let view = ExecView {
        shell_id: row.id.clone(),
        state: answer.state,
        result,
        expectation,
        detail: answer.detail,
    };
    match view.failure() {
        None => Ok(view),
        Some(error) => {
            Err(error.with_output(serde_json::to_value(&view).map_err(ToolError::internal)?))
        }
    }
}

/// The command's end as the expectation rule reads a process's: it completed with its exit
/// status, or it did not complete.
fn as_outcome(exit_code: Option<i32>) -> WorkOutcome {
    let termination = if exit_code.is_some() {
        Termination::Exited
    } else {
        Termination::TimedOut
    };
    WorkOutcome {
        exit_code,
        ..WorkOutcome::ended(termination)
    }
}
