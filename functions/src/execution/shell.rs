//! Persistent shells: one runner-owned shell process per Workflow Session, addressed by its
//! [`ShellId`]. The functions keep no shell state: the `persistent_shells` row is the truth
//! every instance reads and changes under the session's lock ([`wc_store::shells::submit`]),
//! and each operation is a work item for the runner instance that owns the process, queued in
//! the same transaction, answered by that runner and applied to the row where the answer lands.
//!
//! An exec reaches the owning runner like any work: queued for the project's runner client,
//! claimed by its current instance, which answers only for shells it opened. When that instance
//! is gone (restarted, replaced), its registration's successor makes its shells `lost` and any
//! work still queued for them is answered `lost`; a runner that stops answering leaves the
//! call with `runner_unavailable` or a timeout and the lease reaper makes the shell `lost`.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};
use uuid::Uuid;
use wc_domain::{RelativePath, SessionId, ShellId, ShellState, WorkMode};
use wc_runner_protocol::{
    PROTOCOL_VERSION, ShellAnswer, ShellExecResult, ShellOp, ShellTarget, WorkItem, WorkKind,
    WorkLimits, WorkSpec,
};
use wc_store::sessions::SessionRow;
use wc_store::shells::{self, ShellRow, ShellStep, Submitted};
use wc_store::work::{Expectation, NewWork};

use super::{SYNC_OUTPUT_BYTES, Target};
use crate::kernel::context::ToolContext;
use crate::result::{ErrorKind, ToolError};
use crate::workflow::authority;

/// How long an open (or a release nobody waits for) has on its runner.
const CONTROL_TIMEOUT_MS: u64 = 10_000;
/// What the runner may add to a command's own limit: one bounded recovery attempt after a
/// timeout (interrupt, re-synchronize) and its answer.
const RECOVERY_ALLOWANCE: Duration = Duration::from_secs(4);

/// The shell as a caller sees it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ShellView {
    /// The shell.
    pub shell_id: ShellId,
    /// Its session.
    pub session_id: SessionId,
    /// `opening`, `ready`, `busy`, or terminal: `closed`, `exited`, `poisoned`, `lost`.
    pub state: ShellState,
    /// `sh` or `bash`.
    pub shell: String,
    /// The directory it was opened in, relative to the project root (`""` is the root); the
    /// shell's current directory is whatever its commands made it.
    pub cwd: String,
    /// Why it ended (`closed`, `session_ended`, `idle_expired`, `exited`, `poisoned`,
    /// `instance_replaced`, `runner_disconnected`, `lease_expired`, `open_failed`), once it has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_reason: Option<String>,
    /// Opened at (RFC 3339).
    pub created_at: String,
    /// Last opened, used or checked at (RFC 3339).
    pub last_used_at: String,
}

impl From<&ShellRow> for ShellView {
    fn from(row: &ShellRow) -> Self {
        ShellView {
            shell_id: row.id.clone(),
            session_id: row.session_id.clone(),
            state: row.state,
            shell: row.dialect.clone(),
            cwd: row.cwd.clone(),
            end_reason: row.end_reason.clone(),
            created_at: row.created_at.to_rfc3339(),
            last_used_at: row.last_used_at.to_rfc3339(),
        }
    }
}

/// One shell operation to submit: what the store decides and what the runner does.
pub struct Operation {
    /// The tool asking.
    pub tool: &'static str,
    /// The store's step.
    pub step: ShellStep,
    /// The runner's op.
    pub op: ShellOp,
    /// Where an open starts.
    pub cwd: Option<RelativePath>,
    /// A command's standard input.
    pub stdin: Option<String>,
    /// The runner's time limit (default: an open's).
    pub timeout_ms: Option<u64>,
}

/// What a submitted operation came to.
pub enum Answered {
    /// The runner answered: the shell as its answer left it, and the answer.
    Runner(ShellRow, ShellAnswer),
    /// Nothing was asked of the runner: the shell has ended (terminal row).
    Ended(ShellRow),
}

/// The work item of shell `op` for runner-local project `project`.
fn item(
    project: String,
    op: ShellOp,
    cwd: Option<RelativePath>,
    stdin: Option<String>,
    timeout_ms: u64,
) -> WorkItem {
    WorkItem {
        protocol_version: PROTOCOL_VERSION,
        work_id: Uuid::now_v7(),
        project,
        cwd,
        spec: WorkSpec::PersistentShell(op),
        stdin,
        env: Default::default(),
        limits: WorkLimits {
            timeout_ms,
            output_bytes_per_stream: SYNC_OUTPUT_BYTES,
        },
    }
}

/// The runner target of shell `op`, for the session's shell row (which names its instance).
pub fn target_of(shell_id: &ShellId, instance_id: Uuid) -> ShellTarget {
    ShellTarget {
        shell_id: shell_id.clone(),
        instance_id,
    }
}

/// The shell `id` of `session`, as this caller may see it: the same answer for an unknown id,
/// another session's shell and another principal's.
pub async fn load(
    ctx: &ToolContext,
    session: &SessionRow,
    id: &ShellId,
) -> Result<ShellRow, ToolError> {
    let client = ctx.deps.client().await?;
    shells::get(&client, id)
        .await?
        .filter(|s| {
            s.session_id == session.id
                && s.owner_authority_fingerprint == authority::fingerprint(&ctx.principal)
        })
        .ok_or_else(|| unknown_shell(id))
}

fn unknown_shell(id: &ShellId) -> ToolError {
    ToolError::new(
        ErrorKind::UnknownShell,
        "no persistent shell with this id belongs to this session and caller",
    )
    .with("shell_id", id.as_str())
}

/// Submits `operation` for `session`'s shell on `target`'s runner and waits for the answer.
pub async fn run(
    ctx: &ToolContext,
    session: &Arc<SessionRow>,
    target: &Target,
    operation: Operation,
) -> Result<Answered, ToolError> {
    if !target.work_kinds.contains(&WorkKind::PersistentShell) {
        return Err(ToolError::new(
            ErrorKind::Unsupported,
            "the runner serving this project does not run persistent shells (it is older than this server); nothing was started",
        )
        .with("project", target.project_id.as_str())
        .with("work_kind", WorkKind::PersistentShell.as_str()));
    }
    let timeout_ms = operation.timeout_ms.unwrap_or(CONTROL_TIMEOUT_MS);
    let item = item(
        target.local.clone(),
        operation.op.clone(),
        operation.cwd.clone(),
        operation.stdin.clone(),
        timeout_ms,
    );
    item.validate().map_err(|e| {
        ToolError::new(ErrorKind::InvalidArguments, e.to_string()).with("rule", "runner_protocol")
    })?;
    let queue = super::route(&ctx.deps.config, &target.client_id);
    let new = NewWork {
        id: item.work_id,
        client_id: target.client_id.clone(),
        project_id: target.project_id.clone(),
        owner_authority_fingerprint: authority::fingerprint(&ctx.principal),
        // The shell row carries the session; the call's recorder pair is the evidence.
        session_id: None,
        tool: operation.tool.to_owned(),
        mode: WorkMode::Sync,
        item: item.clone(),
        expectation: Expectation {
            invocation_id: Some(ctx.invocation_id),
            ..Expectation::default()
        },
        queue,
    };
    let limits = super::open_limits(ctx);
    let waiter = ctx.deps.wake.on_done(item.work_id);
    let submitted =
        shells::submit(&ctx.deps.pool, &session.id, &operation.step, &new, limits).await?;
    let submitted = match submitted {
        wc_store::ChangeOutcome::Applied { value, .. } => value,
        wc_store::ChangeOutcome::Conflict { .. } => {
            return Err(ToolError::new(
                ErrorKind::Conflict,
                "the session is busy; retry",
            ));
        }
    };
    let (shell, row) = match submitted {
        Submitted::Queued(shell, row) => (shell, row),
        Submitted::Ended(shell) => return Ok(Answered::Ended(*shell)),
        Submitted::Busy(shell) => {
            return Err(ToolError::new(
                ErrorKind::ShellBusy,
                "the shell is running another command; wait for it (session_shell_status) and retry",
            )
            .with("shell_id", shell.id.as_str())
            .with("state", shell.state.as_str()));
        }
        Submitted::AlreadyOpen(shell) => {
            return Err(ToolError::new(
                ErrorKind::ShellAlreadyOpen,
                "this session already has an open persistent shell: use it, or close it (close_session_shell) and open another",
            )
            .with("shell_id", shell.id.as_str())
            .with("state", shell.state.as_str()));
        }
        Submitted::UnknownShell => return Err(unknown_shell(operation.step.shell_id())),
        Submitted::SessionNotFound => return Err(super::session_gone()),
        Submitted::SessionInactive(lifecycle) => return Err(super::session_inactive(lifecycle)),
        Submitted::OverLimit(over) => {
            return Err(super::over_limit(over, limits, &target.project_id));
        }
        Submitted::TooManyShells(open) => {
            return Err(ToolError::new(
                ErrorKind::LimitExceeded,
                format!(
                    "this caller already has {open} open persistent shells, its limit is {}; close one (close_session_shell) and retry",
                    limits.shells_per_owner
                ),
            )
            .with("open_shells", open)
            .with("limit", limits.shells_per_owner));
        }
    };
    super::publish(&ctx.deps, &row).await;
    let wait = (Duration::from_millis(timeout_ms) + RECOVERY_ALLOWANCE)
        .min(ctx.dispatch_deadline.saturating_sub(Duration::from_secs(1)));
    let (row, answer) = super::wait_with(ctx, row.id, waiter, wait, true).await?;
    if !row.is_terminal() {
        return Err(unanswered(&shell, wait));
    }
    let answer = super::operation::answered(&row, answer, Some("shell"))?;
    let answer = super::operation::typed::<ShellOp>(answer)?;
    let client = ctx.deps.client().await?;
    let now = shells::get(&client, &shell.id)
        .await?
        .ok_or_else(|| ToolError::internal("the shell row vanished"))?;
    Ok(Answered::Runner(now, answer))
}

/// The failure of an operation its runner did not answer in time. The work stays with the
/// runner (a command is never interrupted by the server); the shell stays `busy` until its
/// answer lands, or `lost` when the lease runs out.
fn unanswered(shell: &ShellRow, wait: Duration) -> ToolError {
    ToolError::new(
        ErrorKind::TimedOut,
        format!(
            "the build host did not answer within {} s; the shell's state will say how it ended (session_shell_status)",
            wait.as_secs()
        ),
    )
    .with("shell_id", shell.id.as_str())
}

/// The typed failure of a shell that cannot take a command in `state`.
pub fn unusable(shell: &ShellRow) -> ToolError {
    let (kind, message) = match shell.state {
        ShellState::Poisoned | ShellState::Lost => (
            ErrorKind::ShellResetRequired,
            "the shell was reset or its runner is gone: close it and open a new one",
        ),
        _ => (
            ErrorKind::ShellClosed,
            "the shell has ended: open a new one",
        ),
    };
    ToolError::new(kind, message)
        .with("shell_id", shell.id.as_str())
        .with("state", shell.state.as_str())
}

/// What one command did, as `session_shell_exec` returns it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ExecView {
    /// The shell.
    pub shell_id: ShellId,
    /// The shell's state after the command.
    pub state: ShellState,
    /// The command's exit status, output and flags.
    #[serde(flatten)]
    pub result: ShellExecResult,
    /// How the outcome compares with `result_expectation`.
    pub expectation: super::ExpectationView,
    /// Why the shell ended, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl ExecView {
    /// How the command failed, when it did: `success` is the command's own exit 0.
    pub fn failure(&self) -> Option<ToolError> {
        let error = match (self.state, self.result.exit_code, self.result.timed_out) {
            (ShellState::Poisoned, ..) => ToolError::new(
                ErrorKind::ShellResetRequired,
                "the command ran past its time limit and the shell could not be brought back in step: its processes were killed; close it and open a new one",
            ),
            (_, _, true) => ToolError::new(
                ErrorKind::TimedOut,
                "the command ran past its time limit; it was interrupted and the shell is ready again",
            ),
            (ShellState::Exited, ..) => ToolError::new(
                ErrorKind::ShellClosed,
                "the shell process ended during the command (exit, exec or a signal): open a new one",
            ),
            (ShellState::Closed | ShellState::Lost, None, _) => ToolError::new(
                ErrorKind::ShellResetRequired,
                "the shell ended before the command completed (closed, or its runner is gone)",
            ),
            (ShellState::Ready, None, false) if self.result.recovered => ToolError::new(
                ErrorKind::Cancelled,
                "the command was stopped before it ended; the shell is ready again",
            ),
            (_, Some(code), _) if !self.result.status_proven => ToolError::new(
                ErrorKind::StatusUnproven,
                format!(
                    "the shell reported exit code {code}, but it cannot be proven to be the command's: the shell's own code may have reported it (output holds what the command wrote)"
                ),
            )
            .with("exit_code", code),
            (_, Some(0), _) => return None,
            (_, Some(code), _) => ToolError::new(
                ErrorKind::ExitNonzero,
                format!("the command exited with code {code}"),
            )
            .with("exit_code", code),
            (_, None, _) => ToolError::new(
                ErrorKind::ShellResetRequired,
                "the command did not complete and the shell is not in step",
            ),
        };
        Some(error.with("shell_id", self.shell_id.as_str()))
    }
}

/// Ledger facts of a shell call: lifecycle only — id, action, state, completion flags, never
/// command text, output or environment.
pub fn facts(output: &Value) -> Map<String, Value> {
    let mut facts = Map::new();
    for key in ["shell_id", "state"] {
        if let Some(v) = output[key].as_str().filter(|v| v.len() <= 64) {
            facts.insert(key.into(), Value::from(v));
        }
    }
    for key in [
        "timed_out",
        "recovered",
        "status_proven",
        "stdout_truncated",
        "stderr_truncated",
    ] {
        if let Some(v) = output[key].as_bool() {
            facts.insert(key.into(), Value::from(v));
        }
    }
    if let Some(code) = output["exit_code"].as_i64() {
        facts.insert("exit_code".into(), Value::from(code));
    }
    facts
}

/// Closes `session`'s open shell after the session finished or closed: the row ends at once,
/// its runner is told to release the process. Failures are logged, never the caller's.
pub async fn release_for_session(ctx: &ToolContext, session: &SessionId) {
    let ended = match ctx.deps.client().await {
        Ok(client) => shells::end_for_session(&client, session).await,
        Err(e) => Err(e),
    };
    match ended {
        Ok(ended) => {
            for shell in &ended {
                release(&ctx.deps, shell).await;
            }
        }
        Err(e) => tracing::warn!(error = %e, "the shell of an ended session was not released"),
    }
}

/// Tells the runner of `shell` (already ended in Postgres) to release its process: a close
/// queued for its instance that nobody waits for. A runner that is gone has nothing to release.
/// Failures are logged.
pub async fn release(deps: &crate::deps::Deps, shell: &ShellRow) {
    let queued = async {
        let client = deps.client().await?;
        let Some(project) = wc_store::projects::get(&client, &shell.project_id).await? else {
            return Ok::<_, ToolError>(None);
        };
        let close = ShellOp::ShellClose(target_of(&shell.id, shell.instance_id));
        let item = item(project.name, close, None, None, CONTROL_TIMEOUT_MS);
        let new = NewWork {
            id: item.work_id,
            client_id: shell.client_id.clone(),
            project_id: shell.project_id.clone(),
            owner_authority_fingerprint: shell.owner_authority_fingerprint.clone(),
            session_id: None,
            tool: "close_session_shell".into(),
            mode: WorkMode::Sync,
            item: item.clone(),
            expectation: Expectation::default(),
            queue: super::route(&deps.config, &shell.client_id),
        };
        Ok(shells::queue_release(&deps.pool, &new).await?)
    };
    match queued.await {
        Ok(Some(row)) => super::publish(deps, &row).await,
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(shell_id = %shell.id, error = %e.message, "a shell's release was not queued")
        }
    }
}

/// Closes `shell` while its runner is not connected: the row ends now (`closed`), and the close
/// waits in the runner's queue for when it is back. Answers the shell as it then is.
pub async fn close_unreachable(ctx: &ToolContext, shell: &ShellRow) -> Result<ShellRow, ToolError> {
    let client = ctx.deps.client().await?;
    let ended = shells::close(&client, &shell.id).await?;
    if let Some(ended) = &ended {
        release(&ctx.deps, ended).await;
    }
    match ended {
        Some(row) => Ok(row),
        None => shells::get(&client, &shell.id)
            .await?
            .ok_or_else(|| ToolError::internal("the shell row vanished")),
    }
}
