//! `close_session_shell`: end the session's persistent shell — its process group and pipes —
//! at once; idempotent (a shell that has ended answers as it is).

use schemars::JsonSchema;
use serde::Serialize;
use wc_domain::{SessionId, ShellId};
use wc_macros::{tool, tool_args};
use wc_runner_protocol::ShellOp;
use wc_store::shells::ShellStep;

use crate::execution;
use crate::execution::shell::{self, Answered, Operation, ShellView};
use crate::kernel::context::ToolContext;
use crate::kernel::spec::BusinessPair;
use crate::result::{ErrorKind, ToolError};

/// How long a close waits for the runner to confirm the release (the shell has ended either
/// way).
const CLOSE_TIMEOUT_MS: u64 = 5_000;

#[tool_args]
pub struct Args {
    /// The session.
    pub session_id: SessionId,
    /// The shell.
    pub shell_id: ShellId,
}

/// What `close_session_shell` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The shell, ended.
    #[serde(flatten)]
    pub shell: ShellView,
    /// Its runner confirmed its processes are gone (`false`: already ended, or the runner did
    /// not answer; it releases them when it does).
    pub released: bool,
}

/// End a persistent shell and every process it started; idempotent. Its id never addresses another
/// shell.
// The session's own ledger keeps the shell's end, as it keeps its open and commands.
#[tool(changes, Execution, "Close session shell", session = Manages,
    with_business_pair(BusinessPair::Always), with_lifecycle_facts(shell::facts),
)]
async fn close_session_shell(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let session = ctx.business_session(&args.session_id)?;
    let row = shell::load(&ctx, &session, &args.shell_id).await?;
    if row.state.is_terminal() {
        return Ok(Output {
            shell: ShellView::from(&row),
            released: false,
        });
    }
    let target = match execution::resolve_target(&ctx, &row.project_id).await {
        Ok(target) => target,
        Err(e) if e.kind == ErrorKind::RunnerUnavailable => {
            // Nobody to ask now: it ends here, and its runner is told when it is back.
            let now = shell::close_unreachable(&ctx, &row).await?;
            return Ok(Output {
                shell: ShellView::from(&now),
                released: false,
            });
        }
        Err(e) => return Err(e),
    };
    let operation = Operation {
        tool: "close_session_shell",
        step: ShellStep::Close(row.id.clone()),
        op: ShellOp::ShellClose(shell::target_of(&row.id, row.instance_id)),
        cwd: None,
        stdin: None,
        timeout_ms: Some(CLOSE_TIMEOUT_MS),
    };
    match shell::run(&ctx, &session, &target, operation).await {
        Ok(Answered::Runner(row, _)) => Ok(Output {
            shell: ShellView::from(&row),
            released: true,
        }),
        Ok(Answered::Ended(row)) => Ok(Output {
            shell: ShellView::from(&row),
            released: false,
        }),
        // Ended in Postgres before the runner was asked; its answer is what is missing.
        Err(e) if e.kind == ErrorKind::TimedOut => {
            let client = ctx.deps.client().await?;
            let now = wc_store::shells::get(&client, &row.id)
                .await?
                .ok_or_else(|| ToolError::internal("the shell row vanished"))?;
            Ok(Output {
                shell: ShellView::from(&now),
                released: false,
            })
        }
        Err(e) => Err(e),
    }
}
