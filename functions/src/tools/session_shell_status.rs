//! `session_shell_status`: the state of the session's persistent shell, checked with its
//! runner while it is open (a shell that exited or whose runner is gone says so).

use wc_domain::{SessionId, ShellId};
use wc_macros::{tool, tool_args};
use wc_runner_protocol::ShellOp;
use wc_store::shells::ShellStep;

use crate::execution;
use crate::execution::shell::{self, Answered, Operation, ShellView};
use crate::kernel::context::ToolContext;
use crate::result::{ErrorKind, ToolError};

/// How long a status check waits for the runner's look at the process.
const STATUS_TIMEOUT_MS: u64 = 2_000;

#[tool_args]
pub struct Args {
    /// The session.
    pub session_id: SessionId,
    /// The shell.
    pub shell_id: ShellId,
}

/// State of a persistent shell: opening, ready, busy, or closed, exited, poisoned, lost (with
/// end_reason). An open one is checked with its runner.
#[tool(reads, Execution, "Session shell status", session = Reads,
    with_lifecycle_facts(shell::facts),
)]
async fn session_shell_status(ctx: ToolContext, args: Args) -> Result<ShellView, ToolError> {
    let session = ctx.business_session(&args.session_id)?;
    let row = shell::load(&ctx, &session, &args.shell_id).await?;
    if row.state.is_terminal() || !session.is_active() {
        return Ok(ShellView::from(&row));
    }
    let target = match execution::resolve_target(&ctx, &row.project_id).await {
        Ok(target) => target,
        // Nobody to ask: the row says what is known.
        Err(e) if e.kind == ErrorKind::RunnerUnavailable => return Ok(ShellView::from(&row)),
        Err(e) => return Err(e),
    };
    let operation = Operation {
        tool: "session_shell_status",
        step: ShellStep::Status(row.id.clone()),
        op: ShellOp::ShellStatus(shell::target_of(&row.id, row.instance_id)),
        cwd: None,
        stdin: None,
        timeout_ms: Some(STATUS_TIMEOUT_MS),
    };
    match shell::run(&ctx, &session, &target, operation).await {
        Ok(Answered::Runner(row, _) | Answered::Ended(row)) => Ok(ShellView::from(&row)),
        // The runner did not answer in time (it may just have gone): what is stored is what
        // is known; upkeep ends the shell once its runner has been gone for a lease.
        Err(e) if e.kind == ErrorKind::TimedOut => Ok(ShellView::from(&row)),
        Err(e) => Err(e),
    }
}
