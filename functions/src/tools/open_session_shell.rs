//! `open_session_shell`: start the Workflow Session's persistent shell on its project's
//! runner. At most one is open per session: a second open is refused `shell_already_open`,
//! naming the open one.

use wc_domain::{RelativePath, SessionId, ShellId, ShellState};
use wc_macros::{tool, tool_args};
use wc_runner_protocol::{ShellOp, ShellOpenOp};
use wc_store::shells::{NewShell, ShellStep};

use crate::execution::shell::{self, Answered, Operation, ShellView};
use crate::execution::{self, ProjectOrSession, ShellChoice};
use crate::kernel::context::ToolContext;
use crate::result::{ErrorKind, ToolError};

#[tool_args]
pub struct Args {
    /// The session.
    pub session_id: SessionId,
    /// Start directory (default: the session's default_cwd, else the root).
    pub cwd: Option<RelativePath>,
    /// `sh` or `bash` (default: the session's default_shell, else `sh`).
    pub shell: Option<ShellChoice>,
}

/// Start the session's persistent shell (one per session): later session_shell_exec commands keep
/// its cwd, exports, functions and variables.
#[tool(consequential, Execution, "Open session shell", session = Works,
    with_lifecycle_facts(shell::facts),
)]
async fn open_session_shell(ctx: ToolContext, args: Args) -> Result<ShellView, ToolError> {
    let execution::Setting {
        session,
        target,
        defaults,
    } = execution::setting(&ctx, &ProjectOrSession::of_session(&args.session_id)).await?;
    let session =
        session.ok_or_else(|| ToolError::internal("a session tool without its session"))?;
    let dialect = args
        .shell
        .or(defaults.default_shell.map(ShellChoice::from_session))
        .unwrap_or_default()
        .protocol();
    let cwd = execution::cwd(args.cwd.as_ref(), &defaults)?;
    let id = ShellId::generate();
    let new = NewShell {
        id: id.clone(),
        instance_id: target.instance_id,
        dialect: dialect.program().to_owned(),
        cwd: cwd
            .as_ref()
            .map(|c| c.as_str().to_owned())
            .unwrap_or_default(),
    };
    let operation = Operation {
        tool: "open_session_shell",
        step: ShellStep::Open(new),
        op: ShellOp::ShellOpen(ShellOpenOp {
            target: shell::target_of(&id, target.instance_id),
            shell: dialect,
        }),
        cwd,
        stdin: None,
        timeout_ms: None,
    };
    match shell::run(&ctx, &session, &target, operation).await? {
        Answered::Runner(row, _) if row.state == ShellState::Ready => Ok(ShellView::from(&row)),
        Answered::Runner(row, answer) => Err(ToolError::new(
            ErrorKind::ExecutionRejected,
            format!(
                "the shell did not start: {}",
                answer
                    .detail
                    .unwrap_or_else(|| format!("it is {}", row.state))
            ),
        )
        .with("shell_id", row.id.as_str())
        .with("state", row.state.as_str())),
        Answered::Ended(row) => Err(shell::unusable(&row)),
    }
}
