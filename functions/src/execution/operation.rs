//! Operations the runner executes itself (explore, edit and Git work): queued like every work
//! item (the project's runner, the owner's open-work limits, the same queue and leases),
//! waited for synchronously, and answered with the runner's typed answer or a typed refusal.
//!
//! An operation leaves no `execution_queued`/`execution_finished` events: the call's recorder
//! pair is its evidence, with the facts its tool declares ([`crate::kernel::spec::LedgerFacts`]).
//! One that has not ended when the wait is over is stopped, never left running unseen.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;
use wc_domain::{ProjectId, WorkMode};
use wc_runner_protocol::{
    CheckpointKind, CreateCheckpointOp, EditConflict, GitStatusOp, OpErrorKind, Operation,
    WorkAnswer, WorkOutcome, WorkSpec,
};
use wc_store::work::{self, WorkRow};

use super::{ExecState, ProjectOrSession, Request, ResultExpectation, Target, execution_state};
use crate::kernel::context::ToolContext;
use crate::result::{ErrorKind, ToolError};
use crate::workflow::handoff::WorkspaceEvidence;

/// What a project operation's tool returns: the project, and the runner's answer beside it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct InProject<A> {
    /// The project.
    pub project: ProjectId,
    /// The runner's answer.
    #[serde(flatten)]
    pub answer: A,
}

/// Runs `op` for the calling tool where `at` says, and answers with its project.
pub async fn in_project<O: Operation>(
    ctx: &ToolContext,
    at: &ProjectOrSession,
    op: O,
) -> Result<InProject<O::Answer>, ToolError> {
    let (_, target) = at.resolve(ctx).await?;
    answer(ctx, target, op).await
}

/// Runs `op` for the calling tool on `target`'s runner, and answers with its project. A change
/// to the files (an edit, a restore of paths, a discard) made in a Workflow Session on its
/// project first makes sure the session has its automatic checkpoint
/// ([`first_change_checkpoint`]).
pub async fn answer<O: Operation>(
    ctx: &ToolContext,
    target: Target,
    op: O,
) -> Result<InProject<O::Answer>, ToolError> {
    let spec: WorkSpec = op.into();
    let changes_files = match &spec {
        WorkSpec::Edit(_) => true,
        WorkSpec::Git(op) => op.changes_files(),
        _ => false,
    };
    if let (true, Some(session)) = (changes_files, &ctx.business)
        && session.project == target.project_id
    {
        first_change_checkpoint(ctx, &target, session.id.as_str()).await;
    }
    let answer = typed::<O>(run_spec(ctx, &target, ctx.tool, spec).await?)?;
    Ok(InProject {
        project: target.project_id,
        answer,
    })
}

/// Takes the session's automatic checkpoint of the project before its first change: the
/// runner keeps one per session (`once_per_session`), so every later edit finds it and takes
/// none, and "undo everything this session did" is one `restore_checkpoint`. A project that
/// cannot keep one (no Git work tree, metadata jobs cannot write) is still edited: the
/// checkpoint is a safety net, not a precondition.
async fn first_change_checkpoint(ctx: &ToolContext, target: &Target, session: &str) {
    let op = CreateCheckpointOp {
        label: "before the session's first change".to_owned(),
        checkpoint_kind: CheckpointKind::Automatic,
        session_id: Some(session.to_owned()),
        once_per_session: true,
    };
    if let Err(e) = run(ctx, target, ctx.tool, op).await {
        tracing::info!(
            kind = e.kind.as_str(),
            "no automatic checkpoint before an edit: {}",
            e.message
        );
    }
}

/// Runs `op` on the target's runner and returns its answer. The runner's limit is the
/// synchronous wait (`exec_wait`); the call waits a little longer for the report, within the
/// dispatch deadline, and stops the work if it has still not ended.
pub async fn run<O: Operation>(
    ctx: &ToolContext,
    target: &Target,
    tool: &'static str,
    op: O,
) -> Result<O::Answer, ToolError> {
    let answer = run_spec(ctx, target, tool, op.into()).await?;
    typed::<O>(answer)
}

/// `answer` as the answer of `O`: [`answered`] checked its tag, so another answer names a
/// broken invariant.
pub(super) fn typed<O: Operation>(answer: WorkAnswer) -> Result<O::Answer, ToolError> {
    O::answer(answer).map_err(|other| ToolError::internal(format!("unexpected {other} answer")))
}

async fn run_spec(
    ctx: &ToolContext,
    target: &Target,
    tool: &'static str,
    spec: WorkSpec,
) -> Result<WorkAnswer, ToolError> {
    let limit = ctx.deps.config.exec_wait;
    let wait = (limit + Duration::from_secs(2))
        .min(ctx.dispatch_deadline.saturating_sub(Duration::from_secs(1)));
    let op = op_name(&spec);
    let writes = match &spec {
        WorkSpec::Edit(_) => true,
        WorkSpec::Git(op) => op.writes(),
        WorkSpec::Workspace(_) => true,
        _ => false,
    };
    let req = Request {
        tool,
        mode: WorkMode::Sync,
        spec,
        cwd: None,
        stdin: None,
        timeout_ms: u64::try_from(limit.as_millis()).unwrap_or(u64::MAX).max(1),
        expectation: ResultExpectation::default(),
        accepted_exit_codes: Default::default(),
        purpose: None,
        min_tests: None,
    };
    let id = Uuid::now_v7();
    let waiter = ctx.deps.wake.on_done(id);
    super::submit_as(ctx, id, target, None, req).await?;
    let (row, answer) = super::wait_with(ctx, id, waiter, wait, true).await?;
    if !row.is_terminal() {
        let mut client = ctx.deps.client().await?;
        work::request_cancel(&mut client, id, &*ctx.deps.work_ends).await?;
        let message = if writes {
            format!(
                "the build host did not answer within {} s; the operation was asked to stop, but whether it changed the project is unknown: look (read_files, git_status) before retrying",
                wait.as_secs()
            )
        } else {
            format!(
                "the build host did not answer within {} s (its runner may be busy); the operation was stopped: retry, or narrow it",
                wait.as_secs()
            )
        };
        return Err(ToolError::new(ErrorKind::TimedOut, message).with("job_id", id.to_string()));
    }
    answered(&row, answer, op)
}

/// The Git state of `project` as handoff evidence, asked of its runner now (the caller asked
/// for it: it is never an implicit query). What cannot be observed is `unavailable` with a
/// reason code, never an error of the calling tool.
pub async fn workspace(ctx: &ToolContext, project: &ProjectId) -> WorkspaceEvidence {
    let observed = match super::resolve_target(ctx, project).await {
        Ok(target) => run(ctx, &target, "git_status", GitStatusOp {}).await,
        Err(e) => Err(e),
    };
    match observed {
        Ok(status) => WorkspaceEvidence::Available {
            changed_paths: status
                .entries
                .iter()
                .map(|e| e.path.as_str().to_owned())
                .collect(),
            conflict: status.conflicts > 0,
            dirty: status.dirty,
        },
        Err(e) => WorkspaceEvidence::Unavailable {
            reason: match e.kind {
                ErrorKind::RunnerUnavailable | ErrorKind::UnknownProject => "runner_unavailable",
                ErrorKind::Unsupported => "unsupported",
                ErrorKind::NotARepository => "not_a_repository",
                ErrorKind::GitUnavailable => "git_unavailable",
                ErrorKind::TimedOut => "timed_out",
                _ => "failed",
            },
        },
    }
}

/// The name of the operation `spec` asks for (the `op` its answer is tagged with).
fn op_name(spec: &WorkSpec) -> Option<&'static str> {
    match spec {
        WorkSpec::Explore(op) => Some(op.name()),
        WorkSpec::Edit(op) => Some(op.name()),
        WorkSpec::Git(op) => Some(op.name()),
        WorkSpec::Validate(op) => Some(op.name()),
        WorkSpec::PersistentShell(_) => Some("shell"),
        WorkSpec::Workspace(op) => Some(op.name()),
        WorkSpec::Process { .. } | WorkSpec::Shell { .. } | WorkSpec::Script { .. } => None,
    }
}

/// The answer of ended work, or the typed failure its outcome says.
pub(super) fn answered(
    row: &WorkRow,
    answer: Option<Value>,
    op: Option<&str>,
) -> Result<WorkAnswer, ToolError> {
    match execution_state(row, row.outcome.as_ref()) {
        ExecState::Succeeded => {
            let answer: WorkAnswer = answer
                .ok_or_else(|| ToolError::internal("the runner reported success without an answer"))
                .and_then(|a| serde_json::from_value(a).map_err(ToolError::internal))?;
            if Some(answer.op()) != op {
                return Err(ToolError::internal(format!(
                    "the runner answered {} to {op:?}",
                    answer.op()
                )));
            }
            Ok(answer)
        }
        state => Err(refusal(state, row.outcome.as_ref()).with("job_id", row.id.to_string())),
    }
}

/// The typed failure of an operation that did not succeed.
fn refusal(state: ExecState, outcome: Option<&WorkOutcome>) -> ToolError {
    let words = outcome
        .and_then(|o| o.error.clone())
        .unwrap_or_else(|| "no reason was reported".to_owned());
    match (state, outcome.and_then(|o| o.error_kind)) {
        (ExecState::Rejected, Some(kind)) => {
            let conflict = outcome.and_then(|o| o.conflict.as_ref());
            with_conflict(refused(kind, words), conflict)
        }
        (ExecState::Rejected, None) => ToolError::new(
            ErrorKind::ExecutionRejected,
            format!("the runner refused the operation: {words}"),
        ),
        (ExecState::TimedOut, _) => ToolError::new(
            ErrorKind::TimedOut,
            "the operation ran past its time limit on the build host and was stopped; narrow it (a path, a glob, a smaller limit)",
        ),
        (ExecState::Cancelled, _) => ToolError::new(
            ErrorKind::Cancelled,
            "the operation was stopped before it ended",
        ),
        (ExecState::Lost, _) => ToolError::new(
            ErrorKind::Lost,
            "the runner stopped reporting while it held the operation; its outcome is unknown",
        ),
        (ExecState::SpawnFailed, _) => ToolError::new(
            ErrorKind::SpawnFailed,
            format!("the runner could not run the operation: {words}"),
        ),
        (state, _) => ToolError::internal(format!(
            "an operation ended as {} ({words})",
            state.as_str()
        )),
    }
}

/// A runner's typed refusal as the tool error of the same meaning, with the runner's words
/// (which name the path or pattern).
fn refused(kind: OpErrorKind, words: String) -> ToolError {
    let invalid = |pointer: &str, rule: &str| {
        ToolError::new(ErrorKind::InvalidArguments, words.clone())
            .with("pointer", pointer.to_owned())
            .with("rule", rule.to_owned())
    };
    let kind = match kind {
        OpErrorKind::InvalidRequest => return invalid("", "runner_protocol"),
        OpErrorKind::InvalidRegex => return invalid("/pattern", "regex"),
        OpErrorKind::InvalidGlob => return invalid("/glob", "glob"),
        OpErrorKind::InvalidPatch => return invalid("/patch", "unified_diff"),
        OpErrorKind::ProjectUnavailable => ErrorKind::RunnerUnavailable,
        OpErrorKind::PathOutsideRoot => ErrorKind::PathOutsideRoot,
        OpErrorKind::NotFound => ErrorKind::PathNotFound,
        OpErrorKind::NotAFile => ErrorKind::NotAFile,
        OpErrorKind::NotADirectory => ErrorKind::NotADirectory,
        OpErrorKind::SpecialFile => ErrorKind::SpecialFile,
        OpErrorKind::FileTooLarge => ErrorKind::FileTooLarge,
        OpErrorKind::Unreadable => ErrorKind::Unreadable,
        OpErrorKind::InvalidCursor => ErrorKind::InvalidCursor,
        OpErrorKind::NotARepository => ErrorKind::NotARepository,
        OpErrorKind::GitUnavailable => ErrorKind::GitUnavailable,
        OpErrorKind::MultipleMatches => ErrorKind::MultipleMatches,
        OpErrorKind::MatchNotFound => ErrorKind::MatchNotFound,
        OpErrorKind::OccurrenceOutOfRange => ErrorKind::OccurrenceOutOfRange,
        OpErrorKind::OverlappingEdits => ErrorKind::OverlappingEdits,
        OpErrorKind::Sha256Mismatch => ErrorKind::Sha256Mismatch,
        OpErrorKind::PatchDoesNotApply => ErrorKind::PatchDoesNotApply,
        OpErrorKind::AlreadyExists => ErrorKind::AlreadyExists,
        OpErrorKind::NotText => ErrorKind::NotText,
        OpErrorKind::Symlink => ErrorKind::PathIsSymlink,
        OpErrorKind::Unwritable => ErrorKind::Unwritable,
        OpErrorKind::NothingToCommit => ErrorKind::NothingToCommit,
        OpErrorKind::UnmergedPaths => ErrorKind::UnmergedPaths,
        OpErrorKind::MergeInProgress => ErrorKind::MergeInProgress,
        OpErrorKind::HookRejected => ErrorKind::HookRejected,
        OpErrorKind::ShellBusy => ErrorKind::ShellBusy,
        OpErrorKind::PathHidden => ErrorKind::PathHidden,
        OpErrorKind::GitMetadataOutsideProject => ErrorKind::GitMetadataOutsideProject,
        OpErrorKind::ResourceLimit => ErrorKind::ResourceLimit,
        OpErrorKind::CheckpointNotFound => ErrorKind::CheckpointNotFound,
        OpErrorKind::StateChanged => ErrorKind::StateChanged,
        OpErrorKind::LimitReached => ErrorKind::LimitExceeded,
        OpErrorKind::RevisionNotFound => ErrorKind::RevisionNotFound,
        OpErrorKind::PathNotAllowed => ErrorKind::PathNotAllowed,
    };
    ToolError::new(kind, words)
}

/// `error` with the facts of an edit conflict as details: which edit, how many matches, the
/// file's current SHA-256 (to re-read it), and for a patch the file, hunk and line.
fn with_conflict(error: ToolError, conflict: Option<&EditConflict>) -> ToolError {
    let Some(c) = conflict else { return error };
    let mut error = error;
    if let Some(i) = c.edit_index {
        error = error.with("edit_index", i);
    }
    if let Some(n) = c.matches {
        error = error.with("matches", n);
    }
    if let Some(sha) = &c.current_sha256 {
        error = error.with("current_sha256", sha.clone());
    }
    if let Some(path) = &c.path {
        error = error.with("path", path.as_str());
    }
    if let Some(hunk) = c.hunk {
        error = error.with("hunk", hunk);
    }
    if let Some(line) = c.patch_line {
        error = error.with("patch_line", line);
    }
    if let Some(state) = &c.current_state {
        error = error.with("current_state", state.clone());
    }
    if let Some(paths) = &c.changed_paths {
        let paths: Vec<&str> = paths.iter().map(|p| p.as_str()).collect();
        error = error.with("changed_paths", paths);
    }
    error
}

#[cfg(test)]
mod tests {
    use super::*;
    use wc_runner_protocol::Termination;

    #[test]
    fn every_runner_refusal_has_a_typed_tool_error_naming_it() {
        let kinds = [
            OpErrorKind::InvalidRequest,
            OpErrorKind::ProjectUnavailable,
            OpErrorKind::PathOutsideRoot,
            OpErrorKind::NotFound,
            OpErrorKind::NotAFile,
            OpErrorKind::NotADirectory,
            OpErrorKind::SpecialFile,
            OpErrorKind::FileTooLarge,
            OpErrorKind::Unreadable,
            OpErrorKind::InvalidRegex,
            OpErrorKind::InvalidGlob,
            OpErrorKind::InvalidCursor,
            OpErrorKind::NotARepository,
            OpErrorKind::GitUnavailable,
            OpErrorKind::MultipleMatches,
            OpErrorKind::MatchNotFound,
            OpErrorKind::OccurrenceOutOfRange,
            OpErrorKind::OverlappingEdits,
            OpErrorKind::Sha256Mismatch,
            OpErrorKind::PatchDoesNotApply,
            OpErrorKind::InvalidPatch,
            OpErrorKind::AlreadyExists,
            OpErrorKind::NotText,
            OpErrorKind::Symlink,
            OpErrorKind::Unwritable,
            OpErrorKind::NothingToCommit,
            OpErrorKind::UnmergedPaths,
            OpErrorKind::MergeInProgress,
            OpErrorKind::HookRejected,
            OpErrorKind::ShellBusy,
            OpErrorKind::PathHidden,
            OpErrorKind::GitMetadataOutsideProject,
            OpErrorKind::ResourceLimit,
            OpErrorKind::CheckpointNotFound,
            OpErrorKind::StateChanged,
            OpErrorKind::LimitReached,
            OpErrorKind::RevisionNotFound,
            OpErrorKind::PathNotAllowed,
        ];
        for kind in kinds {
            let e = refused(kind, format!("words about {}", kind.as_str()));
            assert_ne!(e.kind, ErrorKind::Internal, "{kind:?}");
            assert_eq!(e.message, format!("words about {}", kind.as_str()));
        }
        let e = refused(OpErrorKind::InvalidRegex, "unclosed group".into());
        assert_eq!(e.kind, ErrorKind::InvalidArguments);
        assert_eq!(e.details["pointer"], "/pattern");
        let e = refused(OpErrorKind::PathOutsideRoot, "src/out leads outside".into());
        assert_eq!(e.kind.as_str(), "path_outside_root");
    }

    #[test]
    fn an_outcome_that_is_not_success_is_never_an_answer() {
        let outcome = WorkOutcome {
            error: Some("src/missing.rs: no such file".into()),
            duration_ms: 1,
            error_kind: Some(OpErrorKind::NotFound),
            ..WorkOutcome::ended(Termination::Rejected)
        };
        let e = refusal(ExecState::Rejected, Some(&outcome));
        assert_eq!(e.kind, ErrorKind::PathNotFound);
        assert!(e.message.contains("src/missing.rs"));
        let e = refusal(ExecState::TimedOut, Some(&outcome));
        assert_eq!(e.kind, ErrorKind::TimedOut);
    }
}
