//! Execution on build hosts, shared by the execution tools: where work goes (the project's
//! runner), what it inherits from the session, how it is queued with its evidence, how a
//! synchronous call waits for it, and how its outcome is classified against the caller's
//! declared expectation.
//!
//! The classification is a pure function ([`classify`]): the real outcome, whether the
//! declared expectation matched, and whether anything needs attention are separate facts, and
//! the execution state and exit code are never rewritten by it.

pub mod classify;
pub mod instructions;
pub mod operation;
mod options;
pub mod shell;
mod target;
pub mod validation;
mod wait;
pub mod workspace;

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};
use uuid::Uuid;
use wc_domain::{
    EndReason, EventKind, EventRole, ProjectId, RelativePath, WorkId, WorkMode, WorkQueue,
};
use wc_runner_protocol::{
    PROTOCOL_VERSION, Termination, WorkItem, WorkLimits, WorkOutcome, WorkSpec,
};
use wc_store::sessions::{NewEvent, SessionRow};
use wc_store::tasks::NewTask;
use wc_store::work::{
    self, EndedWork, Enqueued, Evidence, Expectation, NewWork, QueueRoute, WorkRow,
};

pub use classify::{ExpectationView, ResultExpectation, classify};
pub use options::{
    AcceptedExitCodes, Argv, ExecOptions, FilePage, PathFilter, Purpose, ShellChoice, ShellText,
    Stdin, check_shell_text, cwd, shell_spec, timeout,
};
pub use target::{
    ProjectOrSession, Setting, Target, defaults, is_online, refuse_resource, request_project,
    resolve_target, setting,
};
use wait::wait_with;
pub use wait::{WorkProgress, progress_of, wait_terminal};

use crate::kernel::context::ToolContext;
use crate::kernel::spec::{SessionUse, ToolSpec};
use crate::kernel::task::TaskWhen;
use crate::result::{ErrorKind, ToolError};
use crate::workflow::authority;

/// Kept output per stream of a synchronous call (returned whole in its result).
pub const SYNC_OUTPUT_BYTES: u64 = 64 * 1024;
/// Kept output per stream of a job (read in ranges with `job_log`).
pub const JOB_OUTPUT_BYTES: u64 = 1024 * 1024;
/// Default wall-clock limit of one execution.
pub const DEFAULT_TIMEOUT_MS: u64 = 600_000;
/// Longest `purpose` text.
pub const MAX_PURPOSE_CHARS: usize = 200;
/// Most `accepted_exit_codes`.
pub const MAX_ACCEPTED_EXIT_CODES: usize = 32;

/// An `invalid_arguments` error at `pointer` breaking `rule`.
pub fn invalid(pointer: &str, rule: &str, message: String) -> ToolError {
    ToolError::new(ErrorKind::InvalidArguments, message)
        .with("pointer", pointer.to_owned())
        .with("rule", rule.to_owned())
}

/// What a tool asks to run.
#[derive(Debug, Clone)]
pub struct Request {
    /// Tool name.
    pub tool: &'static str,
    /// Synchronous or a job.
    pub mode: WorkMode,
    /// What to run.
    pub spec: WorkSpec,
    /// Project-relative cwd (explicit or inherited); `None` is the root.
    pub cwd: Option<RelativePath>,
    /// Standard input.
    pub stdin: Option<String>,
    /// Wall-clock limit.
    pub timeout_ms: u64,
    /// Declared expectation.
    pub expectation: ResultExpectation,
    /// Exit codes that count as success besides 0.
    pub accepted_exit_codes: AcceptedExitCodes,
    /// Caller's purpose (evidence metadata only).
    pub purpose: Option<String>,
    /// `cargo_test`'s count assertion: the fewest tests the run must prove ran. Stored with
    /// the work, evaluated when it ends; never part of the validation's identity.
    pub min_tests: Option<u64>,
}

/// Validates the request as the runner will, then queues it with its evidence in one
/// transaction (the session, when named, must still be active).
pub async fn submit(
    ctx: &ToolContext,
    target: &Target,
    session: Option<&Arc<SessionRow>>,
    req: Request,
) -> Result<WorkRow, ToolError> {
    submit_as(ctx, Uuid::now_v7(), target, session, req).await
}

/// [`submit`] under a chosen work id (a waiter registered for it first misses no hint).
async fn submit_as(
    ctx: &ToolContext,
    work_id: Uuid,
    target: &Target,
    session: Option<&Arc<SessionRow>>,
    req: Request,
) -> Result<WorkRow, ToolError> {
    let item = WorkItem {
        protocol_version: PROTOCOL_VERSION,
        work_id,
        project: target.local.clone(),
        cwd: req.cwd.clone(),
        spec: req.spec.clone(),
        stdin: req.stdin.clone(),
        env: Default::default(),
        limits: WorkLimits {
            timeout_ms: req.timeout_ms,
            output_bytes_per_stream: if req.mode == WorkMode::Job {
                JOB_OUTPUT_BYTES
            } else {
                SYNC_OUTPUT_BYTES
            },
        },
    };
    if !target.work_kinds.contains(&req.spec.kind()) {
        return Err(ToolError::new(
            ErrorKind::Unsupported,
            format!(
                "the runner serving this project does not execute {} work (it is older than this server, or cannot confine it on its host); nothing was queued",
                req.spec.kind().as_str()
            ),
        )
        .with("project", target.project_id.as_str())
        .with("work_kind", req.spec.kind().as_str()));
    }
    item.validate().map_err(|e| {
        ToolError::new(ErrorKind::InvalidArguments, e.to_string()).with("rule", "runner_protocol")
    })?;
    // The queuing invocation travels with the work: its end, recorded later by whoever ends
    // it, is evidence of the same call.
    let expectation = Expectation {
        result_expectation: req.expectation,
        accepted_exit_codes: req.accepted_exit_codes.as_slice().to_vec(),
        purpose: req
            .purpose
            .as_deref()
            .map(|p| crate::redaction::redact(p).into_owned()),
        invocation_id: Some(ctx.invocation_id),
        min_tests: req.min_tests,
    };
    let queue = route(&ctx.deps.config, &target.client_id);
    let new = NewWork {
        id: item.work_id,
        client_id: target.client_id.clone(),
        project_id: target.project_id.clone(),
        owner_authority_fingerprint: authority::fingerprint(&ctx.principal),
        session_id: session.map(|s| s.id.clone()),
        tool: req.tool.to_owned(),
        mode: req.mode,
        item: item.clone(),
        expectation: expectation.clone(),
        queue,
    };
    let evidence = session.map(|s| Evidence {
        session_id: s.id.clone(),
        event: NewEvent {
            kind: EventKind::ExecutionQueued,
            call_id: Uuid::now_v7(),
            invocation_id: ctx.invocation_id,
            role: EventRole::Business,
            tool_name: Some(req.tool.to_owned()),
            payload: json!({
                "job_id": item.work_id,
                "tool": req.tool,
                "mode": req.mode,
                "kind": spec_kind(&req.spec),
                // The argument summary is redacted; so is this copy of the cwd.
                "cwd": req.cwd.as_ref().map(|c| crate::redaction::redact(c.as_str())),
                "timeout_ms": req.timeout_ms,
                "expectation": expectation,
            }),
        },
    });
    let limits = open_limits(ctx);
    let offer = ctx.task_offer(req.mode == WorkMode::Job, req.timeout_ms);
    let task = offer.map(|offer| NewTask {
        id: offer.id.clone(),
        owner_authority_fingerprint: new.owner_authority_fingerprint.clone(),
        tool: req.tool.to_owned(),
        work_id: Some(item.work_id),
        session_id: new.session_id.clone(),
        recording: offer.recording(),
        plan: Value::Null,
        input_requests: None,
        status_message: Some(format!("{} is queued for its runner", req.tool)),
        ttl_ms: offer.ttl.as_millis() as i64,
        poll_interval_ms: offer.poll_interval.as_millis() as i32,
    });
    match work::enqueue_with(
        &ctx.deps.pool,
        &new,
        evidence.as_ref(),
        task.as_ref(),
        limits,
    )
    .await?
    {
        wc_store::ChangeOutcome::Applied { value, .. } => match value {
            Enqueued::Queued(row, task) => {
                if let (Some(offer), Some(task)) = (offer, task) {
                    offer.take(*task);
                }
                publish_committed(ctx, &row).await;
                Ok(*row)
            }
            Enqueued::SessionNotFound => Err(session_gone()),
            Enqueued::SessionInactive(lifecycle) => Err(session_inactive(lifecycle)),
            Enqueued::OverLimit(over) => Err(over_limit(over, limits, &target.project_id)),
        },
        wc_store::ChangeOutcome::Conflict { .. } => Err(ToolError::new(
            ErrorKind::Conflict,
            "the session is busy; retry",
        )),
    }
}

/// The queue that carries work to `client_id`'s runner.
fn route(config: &crate::config::ServerConfig, client_id: &str) -> QueueRoute {
    match config.runner_sqs_queues.get(client_id) {
        Some(url) => QueueRoute::Sqs {
            queue_url: url.clone(),
        },
        None => QueueRoute::Postgres,
    }
}

/// The open-work limits a caller's new work is queued under.
fn open_limits(ctx: &ToolContext) -> work::OpenLimits {
    let quotas = &ctx.deps.config.work;
    work::OpenLimits {
        per_owner: i64::from(quotas.max_open_per_caller),
        per_project: i64::from(quotas.max_open_per_project),
        shells_per_owner: i64::from(quotas.max_shells_per_caller),
    }
}

/// The refusal of work for a session deleted meanwhile.
fn session_gone() -> ToolError {
    ToolError::new(ErrorKind::UnknownSessionId, "the session no longer exists")
}

/// The refusal of work for a session that is no longer active.
fn session_inactive(lifecycle: wc_domain::Lifecycle) -> ToolError {
    ToolError::new(
        ErrorKind::SessionClosed,
        format!("the session is {lifecycle}"),
    )
    .with("lifecycle", lifecycle.as_str())
}

/// How long a caller refused for open work is told to wait: about the time a short command
/// takes to run and free its place.
pub const RETRY_AFTER_MS: u64 = 5_000;

/// The refusal of work over an open-work limit: `rate_limited` when the caller's own open
/// work is at its limit, `queue_full` when the project's is; both say when to retry.
fn over_limit(over: work::OverLimit, limits: work::OpenLimits, project: &ProjectId) -> ToolError {
    let (kind, message, open, limit) = match over {
        work::OverLimit::Owner(open) => (
            ErrorKind::RateLimited,
            format!(
                "this caller already has {open} queued or running work items, its limit is {}; nothing was queued, retry once some have ended",
                limits.per_owner
            ),
            open,
            limits.per_owner,
        ),
        work::OverLimit::Project(open) => (
            ErrorKind::QueueFull,
            format!(
                "the project already has {open} queued or running work items from all callers, its limit is {}; nothing was queued, retry once some have ended",
                limits.per_project
            ),
            open,
            limits.per_project,
        ),
    };
    ToolError::new(kind, message)
        .with("retry_after_ms", RETRY_AFTER_MS)
        .with("open_work", open)
        .with("limit", limit)
        .with("project", project.as_str())
}

/// Sends the SQS message of just-committed work (never inside the enqueuing transaction). A
/// failure is logged and the outbox row stays for the periodic drain.
async fn publish_committed(ctx: &ToolContext, row: &WorkRow) {
    publish(&ctx.deps, row).await;
}

/// [`publish_committed`] for a caller without a tool context.
async fn publish(deps: &crate::deps::Deps, row: &WorkRow) {
    if row.queue != WorkQueue::Sqs {
        return;
    }
    let Some(publisher) = &deps.publisher else {
        tracing::error!(job_id = %row.id, "work routed to SQS but no publisher is configured; it stays in the outbox");
        return;
    };
    match wc_store::outbox::drain_one(&deps.pool, publisher.as_ref(), row.id).await {
        Ok(stats) if stats.failed > 0 => {
            tracing::warn!(job_id = %row.id, "the work message was not sent; the periodic drain retries it")
        }
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(job_id = %row.id, error = %e, "could not drain the work message; the periodic drain retries it")
        }
    }
}

fn spec_kind(spec: &WorkSpec) -> &'static str {
    spec.kind().as_str()
}

/// A job visible to the caller: its owner is the caller's authority group and its project is
/// still visible. Anything else is `unknown_job`, revealing nothing.
pub async fn load_job(ctx: &ToolContext, job_id: WorkId) -> Result<WorkRow, ToolError> {
    let unknown = || {
        ToolError::new(
            ErrorKind::UnknownJob,
            "no such job is visible to this caller",
        )
        .with("job_id", job_id.to_string())
    };
    let id = job_id.uuid();
    let client = ctx.deps.client().await?;
    let row = work::get(&client, id).await?.ok_or_else(unknown)?;
    if row.owner_authority_fingerprint != authority::fingerprint(&ctx.principal)
        || !ctx.principal.projects.allows(&row.project_id)
    {
        return Err(unknown());
    }
    Ok(row)
}

/// The caller-facing state of work: the queue state refined by how it ended. It states what
/// happened to the process and is never rewritten by a declared expectation or by
/// `accepted_exit_codes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecState {
    /// Waiting for a runner.
    Queued,
    /// A runner runs it.
    Running,
    /// Exited with code 0.
    Succeeded,
    /// Exited with another code, or was killed by a signal.
    Failed,
    /// Ran past its timeout and was stopped.
    TimedOut,
    /// Stopped on request.
    Cancelled,
    /// Refused by the runner before start.
    Rejected,
    /// Could not be started.
    SpawnFailed,
    /// The runner vanished; the outcome is unknown and it is never re-run.
    Lost,
}

impl ExecState {
    /// Every state, in lifecycle order.
    pub const ALL: [ExecState; 9] = [
        ExecState::Queued,
        ExecState::Running,
        ExecState::Succeeded,
        ExecState::Failed,
        ExecState::TimedOut,
        ExecState::Cancelled,
        ExecState::Rejected,
        ExecState::SpawnFailed,
        ExecState::Lost,
    ];

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            ExecState::Queued => "queued",
            ExecState::Running => "running",
            ExecState::Succeeded => "succeeded",
            ExecState::Failed => "failed",
            ExecState::TimedOut => "timed_out",
            ExecState::Cancelled => "cancelled",
            ExecState::Rejected => "rejected",
            ExecState::SpawnFailed => "spawn_failed",
            ExecState::Lost => "lost",
        }
    }

    /// Whether the work has not ended yet.
    pub fn is_pending(self) -> bool {
        matches!(self, ExecState::Queued | ExecState::Running)
    }
}

/// A plain string enum: the field that holds a state describes the values once, so every
/// listing of every execution tool does not repeat a description per value.
impl JsonSchema for ExecState {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ExecState".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let values: Vec<&str> = ExecState::ALL.iter().map(|s| s.as_str()).collect();
        schemars::json_schema!({ "type": "string", "enum": values })
    }
}

/// The caller-facing state of `row`, given its reported outcome.
pub fn execution_state(row: &WorkRow, outcome: Option<&WorkOutcome>) -> ExecState {
    match (row.state.as_str(), outcome.map(|o| o.termination)) {
        ("queued", _) => ExecState::Queued,
        ("leased", _) => ExecState::Running,
        ("lost", _) => ExecState::Lost,
        ("cancelled", _) => ExecState::Cancelled,
        (_, Some(Termination::TimedOut)) => ExecState::TimedOut,
        (_, Some(Termination::Rejected)) => ExecState::Rejected,
        (_, Some(Termination::SpawnFailed)) => ExecState::SpawnFailed,
        (_, Some(Termination::Cancelled)) => ExecState::Cancelled,
        ("succeeded", _) => ExecState::Succeeded,
        _ => ExecState::Failed,
    }
}

/// The declared expectation stored with the work.
pub fn stored_expectation(row: &WorkRow) -> (ResultExpectation, Vec<i32>, Option<String>) {
    let e = &row.expectation;
    (
        e.result_expectation,
        e.accepted_exit_codes.clone(),
        e.purpose.clone(),
    )
}

/// Everything the execution tools say about one unit of work.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ExecOutput {
    /// Job handle (use with job_status, job_log, stop_job).
    pub job_id: WorkId,
    /// Canonical project id.
    pub project: ProjectId,
    /// Tool that started it.
    pub tool: String,
    /// `queued`, `running`, `succeeded` (exit 0), `failed` (another exit code, or a signal),
    /// `timed_out`, `cancelled`, `rejected` (refused by the runner before start),
    /// `spawn_failed` or `lost` (the runner vanished; the outcome is unknown and it is never
    /// re-run). The process's fact: an accepted exit code makes the result a success but
    /// still reads `failed` here.
    pub execution_state: ExecState,
    /// Exit code, when the process exited.
    pub exit_code: Option<i32>,
    /// Signal number, when a signal ended it.
    pub signal: Option<i32>,
    /// Kept standard output (UTF-8, invalid bytes replaced); absent from status views.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
    /// Kept standard error; absent from status views.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    /// More stdout was written than kept.
    pub stdout_truncated: bool,
    /// More stderr was written than kept.
    pub stderr_truncated: bool,
    /// Bytes written to stdout in all.
    pub stdout_bytes: u64,
    /// Bytes written to stderr in all.
    pub stderr_bytes: u64,
    /// Wall-clock run time, once ended.
    pub duration_ms: Option<u64>,
    /// Why the runner refused or could not start it, or why it ended without a report.
    pub error: Option<String>,
    /// The declared expectation and how the outcome compares with it.
    pub expectation: ExpectationView,
    /// Purpose given by the caller.
    pub purpose: Option<String>,
    /// What the build host kept out of the run's reach, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notices: Vec<NoticeView>,
}

/// One thing the build host kept out of a run's reach.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct NoticeView {
    /// An error kind.
    pub kind: String,
    /// Why.
    pub message: String,
}

/// The output view of `row`; with `with_output`, the kept stdout/stderr too.
pub async fn view(
    ctx: &ToolContext,
    row: &WorkRow,
    with_output: bool,
) -> Result<ExecOutput, ToolError> {
    view_in(&ctx.deps, row, with_output).await
}

/// [`view`] with only the dependencies.
async fn view_in(
    deps: &crate::deps::Deps,
    row: &WorkRow,
    with_output: bool,
) -> Result<ExecOutput, ToolError> {
    let out = status_view(row);
    if !with_output {
        return Ok(out);
    }
    let client = deps.client().await?;
    let (stdout, stderr) = work::read_heads(&client, row.id, SYNC_OUTPUT_BYTES as i64).await?;
    Ok(with_heads(out, &stdout, &stderr))
}

/// The view of `row` without its output: everything the row itself says.
pub fn status_view(row: &WorkRow) -> ExecOutput {
    let outcome = row.outcome.as_ref();
    let state = execution_state(row, outcome);
    let (declared, accepted, purpose) = stored_expectation(row);
    let expectation = classify(declared, &accepted, state, outcome);
    let error = outcome
        .as_ref()
        .and_then(|o| o.error.clone())
        .or_else(|| match row.end_reason {
            Some(EndReason::LeaseExpired) => Some(
                "the runner stopped reporting (its lease expired); the outcome is unknown"
                    .to_owned(),
            ),
            Some(EndReason::InstanceReplaced) => {
                Some("the runner restarted while this ran; the outcome is unknown".to_owned())
            }
            Some(EndReason::StoppedWhileQueued) => {
                Some("stopped before any runner took it".to_owned())
            }
            None => None,
        });
    ExecOutput {
        job_id: WorkId::from(row.id),
        project: row.project_id.clone(),
        tool: row.tool.clone(),
        execution_state: state,
        exit_code: outcome.as_ref().and_then(|o| o.exit_code),
        signal: outcome.as_ref().and_then(|o| o.signal),
        stdout: None,
        stderr: None,
        stdout_truncated: outcome.as_ref().is_some_and(|o| o.stdout_truncated),
        stderr_truncated: outcome.as_ref().is_some_and(|o| o.stderr_truncated),
        stdout_bytes: outcome.as_ref().map_or(0, |o| o.stdout_bytes),
        stderr_bytes: outcome.as_ref().map_or(0, |o| o.stderr_bytes),
        duration_ms: outcome.as_ref().map(|o| o.duration_ms),
        error,
        expectation,
        purpose,
        notices: outcome
            .map(|o| {
                o.notices
                    .iter()
                    .map(|n| NoticeView {
                        kind: n.kind.as_str().to_owned(),
                        message: n.message.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// The answer of a tool that reports one execution: the view itself while the work is pending
/// or when it completed with an exit status that counts as success (0 or one of
/// `accepted_exit_codes`); otherwise the typed failure naming how it ended, carrying the same
/// view as its `output`. This is the one place an execution's outcome becomes `success`;
/// `result_expectation` plays no part in it (it classifies, it does not excuse).
pub fn settle(out: ExecOutput) -> Result<ExecOutput, ToolError> {
    let Some(error) = failure(&out) else {
        return Ok(out);
    };
    let output = serde_json::to_value(&out).map_err(ToolError::internal)?;
    Err(error
        .with("job_id", out.job_id.to_string())
        .with_output(output))
}

/// How `out` failed, when it did.
pub fn failure(out: &ExecOutput) -> Option<ToolError> {
    let reason = || {
        out.error
            .clone()
            .unwrap_or_else(|| "no reason was reported".into())
    };
    let error = match out.execution_state {
        ExecState::Queued | ExecState::Running | ExecState::Succeeded => return None,
        ExecState::Failed => match (out.exit_code, out.signal) {
            (Some(code), _)
                if classify::exit_counts_as_success(code, &out.expectation.accepted_exit_codes) =>
            {
                return None;
            }
            (Some(code), _) => {
                let accepted = &out.expectation.accepted_exit_codes;
                let counted = if accepted.is_empty() {
                    "only 0 counts as success".to_owned()
                } else {
                    format!("0 and accepted_exit_codes {accepted:?} count as success")
                };
                ToolError::new(
                    ErrorKind::ExitNonzero,
                    format!("the process exited with code {code} ({counted}); output holds what it wrote"),
                )
                .with("exit_code", code)
            }
            (None, Some(signal)) => ToolError::new(
                ErrorKind::KilledBySignal,
                format!("the process was killed by signal {signal}; output holds what it wrote"),
            )
            .with("signal", signal),
            (None, None) => ToolError::new(
                ErrorKind::ExitNonzero,
                "the process ended without an exit status",
            ),
        },
        ExecState::TimedOut => ToolError::new(
            ErrorKind::TimedOut,
            "the process ran past its timeout_ms and was stopped with everything it started; output holds what it wrote before (raise timeout_ms, or use run_job for long work)",
        ),
        ExecState::Cancelled => ToolError::new(
            ErrorKind::Cancelled,
            "the execution was stopped on request before it ended",
        ),
        ExecState::Rejected => ToolError::new(
            ErrorKind::ExecutionRejected,
            format!("the runner refused to start it: {}; nothing ran", reason()),
        ),
        ExecState::SpawnFailed => ToolError::new(
            ErrorKind::SpawnFailed,
            format!("the runner could not start it: {}; nothing ran", reason()),
        ),
        ExecState::Lost => ToolError::new(
            ErrorKind::Lost,
            format!(
                "{}; it is never run again by itself, so check the project before running it again",
                reason()
            ),
        ),
    };
    Some(error.with("execution_state", out.execution_state.as_str()))
}

/// The `execution_finished` event of `row`, which has just ended: what the store appends to
/// its session in the transaction that ends it (the runner's result, the reaper's `lost`, a
/// replaced instance's `lost`, a stop of queued work), so the evidence lands once, with the
/// fact. Bounded metadata only, never stdout/stderr bodies; redacted here, before the store
/// sees it. Validate work adds what its run proved (`validation`, from the runner's
/// `answer`). `None` for work outside a session or not yet ended.
pub fn terminal_evidence(row: &WorkRow, answer: Option<&Value>) -> Option<NewEvent> {
    if row.session_id.is_none() || !row.is_terminal() {
        return None;
    }
    let out = status_view(row);
    let mut payload = json!({
        "job_id": row.id,
        "tool": row.tool,
        "mode": row.mode,
        "execution_state": out.execution_state,
        "exit_code": out.exit_code,
        "signal": out.signal,
        "duration_ms": out.duration_ms,
        "stdout_bytes": out.stdout_bytes,
        "stderr_bytes": out.stderr_bytes,
        "stdout_truncated": out.stdout_truncated,
        "stderr_truncated": out.stderr_truncated,
        "expectation": out.expectation,
        "purpose": out.purpose,
    });
    if let Some(facts) = validation::facts(row, answer) {
        payload["validation"] = validation::ledger_value(facts);
    }
    crate::redaction::redact_json(&mut payload);
    // The runner, the reaper or a stop ends work, not a tool call: the event belongs to the
    // invocation that queued it (work queued before that was stored is its own invocation).
    let call_id = Uuid::now_v7();
    let invocation_id = row.expectation.invocation_id.unwrap_or(call_id);
    Some(NewEvent {
        kind: EventKind::ExecutionFinished,
        call_id,
        invocation_id,
        role: EventRole::Business,
        tool_name: Some(row.tool.clone()),
        payload,
    })
}

/// Runs what an execution tool asks for: the call's [`Setting`] (`at`), the spec `spec` builds
/// over the session's defaults, the request `exec` makes of it in `mode`. A synchronous run
/// waits ([`run_sync`]); a job answers its handle at once.
pub async fn run_tool(
    ctx: &ToolContext,
    at: &ProjectOrSession,
    exec: ExecOptions,
    mode: WorkMode,
    spec: impl FnOnce(&crate::workflow::exec_context::ExecutionContext) -> Result<WorkSpec, ToolError>,
) -> Result<ExecOutput, ToolError> {
    let set = setting(ctx, at).await?;
    let spec = spec(&set.defaults)?;
    let req = exec.request(ctx, mode, spec, &set.defaults)?;
    match mode {
        WorkMode::Sync => run_sync(ctx, &set.target, set.session.as_ref(), req).await,
        WorkMode::Job => {
            let row = submit(ctx, &set.target, set.session.as_ref(), req).await?;
            view(ctx, &row, false).await
        }
    }
}

/// Queues `req` and waits for its end up to the configured wait; past it the result is the
/// job handle with `execution_state = running` (follow it with job_status / job_log). An
/// ended execution answers as [`settle`] says.
pub async fn run_sync(
    ctx: &ToolContext,
    target: &Target,
    session: Option<&Arc<SessionRow>>,
    req: Request,
) -> Result<ExecOutput, ToolError> {
    let (row, _) = run_waited(ctx, target, session, req).await?;
    settle(view(ctx, &row, row.is_terminal()).await?)
}

/// Queues `req` and waits for its end up to the configured wait: the row as it then is, and
/// the runner's answer once it has ended with one.
pub async fn run_waited(
    ctx: &ToolContext,
    target: &Target,
    session: Option<&Arc<SessionRow>>,
    req: Request,
) -> Result<(WorkRow, Option<Value>), ToolError> {
    let id = Uuid::now_v7();
    // Registered before the work exists: its end cannot be announced before we listen.
    let waiter = ctx.deps.wake.on_done(id);
    let row = submit_as(ctx, id, target, session, req).await?;
    if ctx.task.as_ref().is_some_and(|(offer, _)| offer.is_taken()) {
        // The call is a task: its result is collected from the task, not waited for here.
        return Ok((row, None));
    }
    wait_with(ctx, id, waiter, ctx.deps.config.exec_wait, true).await
}

/// The declaration of a tool that runs work: it works in its session, and its call becomes a
/// task as `when` says, finished as [`run_sync`] answers ([`finish_task`]).
pub trait RunsWork {
    /// This spec, running work.
    fn runs_work(self, when: TaskWhen) -> ToolSpec;
}

impl RunsWork for ToolSpec {
    fn runs_work(self, when: TaskWhen) -> ToolSpec {
        self.with_session(SessionUse::Works)
            .with_task(when, finish_task)
    }
}

/// The final output of an execution tool's task: what [`run_sync`] answers for ended work.
pub fn finish_task(work: &EndedWork<'_>) -> Result<Value, ToolError> {
    let out = settle(ended_view_of(work))?;
    serde_json::to_value(out).map_err(ToolError::internal)
}

/// The view of ended work with its kept output.
pub async fn ended_view(deps: &crate::deps::Deps, row: &WorkRow) -> Result<ExecOutput, ToolError> {
    view_in(deps, row, true).await
}

/// The view of work as its ending read it, output heads included.
pub fn ended_view_of(work: &EndedWork<'_>) -> ExecOutput {
    with_heads(status_view(work.row), &work.stdout, &work.stderr)
}

fn with_heads(mut out: ExecOutput, stdout: &[u8], stderr: &[u8]) -> ExecOutput {
    out.stdout = Some(String::from_utf8_lossy(stdout).into_owned());
    out.stderr = Some(String::from_utf8_lossy(stderr).into_owned());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(state: ExecState, exit_code: Option<i32>, signal: Option<i32>) -> ExecOutput {
        ExecOutput {
            job_id: WorkId::parse("0190b6a0-0000-7000-8000-000000000000").unwrap(),
            project: wc_domain::ProjectId::parse("agent:local:alpha").unwrap(),
            tool: "run_shell".into(),
            execution_state: state,
            exit_code,
            signal,
            stdout: Some("out".into()),
            stderr: Some(String::new()),
            stdout_truncated: true,
            stderr_truncated: false,
            stdout_bytes: 70_000,
            stderr_bytes: 0,
            duration_ms: Some(12),
            error: None,
            // A declared failure: whatever it classifies, only the exit status decides.
            expectation: classify(ResultExpectation::Failure, &[3], state, None),
            purpose: None,
            notices: Vec::new(),
        }
    }

    #[test]
    fn only_pending_runs_and_accepted_exits_are_successes_and_every_failure_keeps_the_view() {
        use ExecState::*;
        let cases = [
            (Queued, None, None, None),
            (Running, None, None, None),
            (Succeeded, Some(0), None, None),
            (Failed, Some(3), None, None),
            (Failed, Some(7), None, Some(ErrorKind::ExitNonzero)),
            (Failed, None, Some(9), Some(ErrorKind::KilledBySignal)),
            (TimedOut, None, Some(9), Some(ErrorKind::TimedOut)),
            (Cancelled, None, Some(2), Some(ErrorKind::Cancelled)),
            (Rejected, None, None, Some(ErrorKind::ExecutionRejected)),
            (SpawnFailed, None, None, Some(ErrorKind::SpawnFailed)),
            (Lost, None, None, Some(ErrorKind::Lost)),
        ];
        for (state, code, signal, want) in cases {
            let out = ended(state, code, signal);
            match (settle(out.clone()), want) {
                (Ok(back), None) => assert_eq!(back.job_id, out.job_id),
                (Err(e), Some(kind)) => {
                    assert_eq!(e.kind, kind, "{state:?}");
                    assert!(kind.is_execution_outcome());
                    assert_eq!(e.details["job_id"], out.job_id.to_string());
                    assert_eq!(e.details["execution_state"], state.as_str());
                    let carried = e.output.expect("a failed execution carries its view");
                    assert_eq!(carried, serde_json::to_value(&out).unwrap(), "{state:?}");
                    assert!(!e.message.is_empty() && !e.message.ends_with('.'));
                }
                (got, want) => panic!("{state:?} {code:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn state_strings_are_the_wire_strings_and_the_schema_lists_them_all() {
        let schema = crate::kernel::spec::schema_for::<ExecState>();
        let listed = schema["enum"].as_array().unwrap();
        assert_eq!(listed.len(), ExecState::ALL.len());
        for s in ExecState::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), json!(s.as_str()));
            assert!(listed.contains(&json!(s.as_str())), "{s:?}");
        }
    }

    #[test]
    fn accepted_exit_codes_parse_within_their_bounds_only() {
        let parse = |v: Value| serde_json::from_value::<AcceptedExitCodes>(v);
        assert_eq!(parse(json!([0, 1, 255])).unwrap().as_slice(), &[0, 1, 255]);
        assert!(parse(json!([256])).is_err());
        assert!(parse(json!([-1])).is_err());
        assert!(parse(json!((0..33).collect::<Vec<i32>>())).is_err());
        assert!(parse(json!((0..32).collect::<Vec<i32>>())).is_ok());
        // The schema says the same as the parser.
        let schema = crate::kernel::spec::schema_for::<AcceptedExitCodes>();
        assert_eq!(schema["maxItems"], MAX_ACCEPTED_EXIT_CODES);
        assert_eq!(schema["items"]["maximum"], 255);
        assert_eq!(schema["items"]["minimum"], 0);
    }
}
