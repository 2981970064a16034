//! The one result shape of every tool on every surface: `{success, output, error}`.

use serde::Serialize;
use serde_json::{Map, Value};

/// Stable machine-readable failure kinds. Their strings are part of the public contract
/// (docs/ERRORS.md); add new ones, never rename.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Arguments do not match the tool's input schema.
    InvalidArguments,
    /// No tool has this name.
    UnknownTool,
    /// The caller lacks a scope the tool needs.
    InsufficientScope,
    /// The named project does not exist or is not visible to the caller.
    UnknownProject,
    /// No Workflow Session with this id is visible to the caller.
    UnknownSessionId,
    /// The Workflow Session is finished or closed and accepts no more changes.
    SessionClosed,
    /// A session belongs to another project than the request.
    ProjectMismatch,
    /// A read-only Workflow Session does not allow this (mutating) tool.
    ModeDenied,
    /// A concurrent change won repeatedly; retrying is safe.
    Conflict,
    /// A dependency (the database) is unavailable; retrying later is safe.
    Unavailable,
    /// An unexpected server fault; details are in the server log.
    Internal,
    /// The tool did not finish within the dispatch deadline; its effect is unknown.
    DispatchTimeout,
    /// No runner serving the project is connected; nothing was queued. Retry later.
    RunnerUnavailable,
    /// No job with this id is visible to the caller.
    UnknownJob,
    /// The request asks for something this deployment does not support (e.g. a named
    /// remote resource); nothing was started.
    Unsupported,
    /// No message with this id is on the session's board.
    UnknownMessage,
    /// The message is not a todo, so it has no assignment or completion.
    NotATodo,
    /// The completion key was already used for a different completion.
    CompletionKeyConflict,
    /// The connection failed while the completion was committing: it may or may not have
    /// been recorded. Retry with the same completion key; a replay is safe.
    CompletionPersistenceUncertain,
    /// The observation token is malformed, altered, oversized, for another session or from
    /// the future.
    InvalidObservationToken,
    /// The assignment fence is malformed, altered, or for another todo or session.
    InvalidAssignmentFence,
    /// The caller's credential stopped admitting it (revoked) while the call waited; the next
    /// request with it is refused the same way.
    InvalidToken,
    /// The runner refused the execution before starting it (its cwd resolves outside the
    /// project root, the project is not served there, …); nothing ran.
    ExecutionRejected,
    /// The runner could not start the program (not found, not executable, …); nothing ran.
    SpawnFailed,
    /// The process ran and exited with a code that is neither 0 nor one of
    /// `accepted_exit_codes`.
    ExitNonzero,
    /// The process was ended by a signal it did not choose to exit on.
    KilledBySignal,
    /// The process ran past its `timeout_ms` and was stopped with everything it started.
    TimedOut,
    /// The execution was stopped on request (`stop_job`) before it ended.
    Cancelled,
    /// The runner stopped reporting while the execution was in its hands; the outcome is
    /// unknown and it is never run again by itself.
    Lost,
    /// A `cargo_test` with `require_tests`/`min_tests` exited successfully, but its output
    /// does not prove that many tests ran (`observed_tests`, `min_tests`): an evidence gap,
    /// not a test failure.
    TestCountNotProven,
    /// The path leads outside the project root (through a symlink, or an absolute
    /// symlink); nothing outside the root is ever read or written.
    PathOutsideRoot,
    /// Nothing exists at the project path named in `path`.
    PathNotFound,
    /// The path is a directory (or symlink) where a regular file was expected.
    NotAFile,
    /// The path, or one of its parents, is not a directory where one was expected.
    NotADirectory,
    /// The path is a device, FIFO or socket: never opened.
    SpecialFile,
    /// The file is larger than the tool reads or edits (the limit is in the message).
    FileTooLarge,
    /// The file or directory cannot be read on the build host (permissions, a loop of
    /// symlinks, an I/O error).
    Unreadable,
    /// The cursor is not a `next_cursor` this tool handed out for these arguments.
    InvalidCursor,
    /// The project root is not inside a Git work tree.
    NotARepository,
    /// Git could not be run on the build host, or failed (its words are in the message).
    GitUnavailable,
    /// An edit's `old_text` matches more than once and names no `occurrence`; nothing
    /// was written (`edit_index`, `matches`, `current_sha256` say which and where).
    MultipleMatches,
    /// An edit's `old_text` is not in the file; nothing was written. Re-read the file
    /// (`current_sha256`) and retry with its current text.
    MatchNotFound,
    /// An edit's `occurrence` is past the number of matches (`matches`); nothing was written.
    OccurrenceOutOfRange,
    /// Two edits' matched texts overlap; nothing was written.
    OverlappingEdits,
    /// The file is no longer the content `expected_sha256` names (it changed since it was
    /// read); nothing was written. Re-read it (`current_sha256`) and retry.
    Sha256Mismatch,
    /// A hunk of the patch does not match the file (`path`, `hunk`); no file was written.
    PatchDoesNotApply,
    /// The file to create exists; nothing was written.
    AlreadyExists,
    /// The file is binary or not UTF-8 text; edits change text files only.
    NotText,
    /// The path names a symbolic link; an edit never writes through one (edit its target).
    PathIsSymlink,
    /// The file or its directory cannot be written on the build host (permissions, a
    /// read-only or full file system); nothing was written.
    Unwritable,
    /// There is no change to commit (in the named paths); no commit was made.
    NothingToCommit,
    /// Conflicted files must be resolved before a commit; the message names them.
    UnmergedPaths,
    /// A merge is in progress: only a commit of every change (no `paths`) concludes it.
    MergeInProgress,
    /// A hook of the repository refused the commit; the message carries what it printed.
    /// The changes stay staged.
    HookRejected,
    /// The caller (its authority group) already has as much queued and running work as it
    /// may; nothing was queued. Retry after `retry_after_ms`, once some of it has ended.
    RateLimited,
    /// The project already has as much queued and running work as it may hold, from all
    /// callers; nothing was queued. Retry after `retry_after_ms`.
    QueueFull,
    /// No persistent shell with this id belongs to this session and caller.
    UnknownShell,
    /// The persistent shell is running another command (or still opening); nothing was sent.
    ShellBusy,
    /// The persistent shell was reset (`poisoned`) or its runner is gone (`lost`): close it
    /// and open a new one.
    ShellResetRequired,
    /// The persistent shell has ended (`closed`, `exited`): open a new one.
    ShellClosed,
    /// The session already has an open persistent shell (`shell_id` names it); use it, or
    /// close it first.
    ShellAlreadyOpen,
    /// The path is hidden from the project's jobs and tools by the build host's configuration
    /// (a credential of the runner's user, the runner's or wc's own files, another project):
    /// it is never read, written, listed, searched, staged or shown.
    PathHidden,
    /// The project's `.git` leads to Git metadata outside the project root that was not
    /// registered with the project; Git tools refuse, and jobs run without write access to it.
    /// Restore `.git`, or have the operator register the worktree.
    GitMetadataOutsideProject,
    /// The caller holds as many of something (open persistent shells) as it may; nothing was
    /// made. Release one (the message says what) and retry.
    LimitExceeded,
    /// A job reached one of its resource bounds on the build host (its processes or its
    /// memory); the message says which. Reported beside how the job ended.
    ResourceLimit,
    /// No checkpoint of the project has the id; list_checkpoints lists them.
    CheckpointNotFound,
    /// The project's files are not in the state `expected_state` names: they changed since.
    /// Nothing was restored; `current_state` and `changed_paths` say what is there now.
    StateChanged,
    /// The revision (`base`) names no commit of the project's repository; git_log lists them.
    RevisionNotFound,
    /// A persistent shell reported an exit status that cannot be proven to be the command's
    /// (the shell's own code, such as a DEBUG trap under `extdebug`, may have reported it):
    /// the outcome is unknown. `output` keeps what the command wrote.
    StatusUnproven,
    /// The path is outside every directory the runner's operator lets callers open (its
    /// `[workspaces] open` setting); nothing was opened.
    PathNotAllowed,
    /// The managed worktree holds uncommitted files or commits no branch, tag or remote keeps:
    /// nothing was removed. `unsaved` lists them; commit or push them, or pass `force`.
    UnsavedWork,
    /// `base_ref` names another commit than the managed worktree was made at
    /// (`base_commit` in the details).
    BaseMismatch,
    /// No runner has this client id; list_runners names them. Nothing was started.
    UnknownRunner,
}

impl ErrorKind {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidArguments => "invalid_arguments",
            ErrorKind::UnknownTool => "unknown_tool",
            ErrorKind::InsufficientScope => "insufficient_scope",
            ErrorKind::UnknownProject => "unknown_project",
            ErrorKind::UnknownSessionId => "unknown_session_id",
            ErrorKind::SessionClosed => "session_closed",
            ErrorKind::ProjectMismatch => "project_mismatch",
            ErrorKind::ModeDenied => "mode_denied",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Internal => "internal",
            ErrorKind::DispatchTimeout => "dispatch_timeout",
            ErrorKind::RunnerUnavailable => "runner_unavailable",
            ErrorKind::UnknownJob => "unknown_job",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::UnknownMessage => "unknown_message",
            ErrorKind::NotATodo => "not_a_todo",
            ErrorKind::CompletionKeyConflict => "completion_key_conflict",
            ErrorKind::CompletionPersistenceUncertain => "completion_persistence_uncertain",
            ErrorKind::InvalidObservationToken => "invalid_observation_token",
            ErrorKind::InvalidAssignmentFence => "invalid_assignment_fence",
            ErrorKind::InvalidToken => "invalid_token",
            ErrorKind::ExecutionRejected => "execution_rejected",
            ErrorKind::SpawnFailed => "spawn_failed",
            ErrorKind::ExitNonzero => "exit_nonzero",
            ErrorKind::KilledBySignal => "killed_by_signal",
            ErrorKind::TimedOut => "timed_out",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Lost => "lost",
            ErrorKind::TestCountNotProven => "test_count_not_proven",
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::QueueFull => "queue_full",
            ErrorKind::PathOutsideRoot => "path_outside_root",
            ErrorKind::PathNotFound => "path_not_found",
            ErrorKind::NotAFile => "not_a_file",
            ErrorKind::NotADirectory => "not_a_directory",
            ErrorKind::SpecialFile => "special_file",
            ErrorKind::FileTooLarge => "file_too_large",
            ErrorKind::Unreadable => "unreadable",
            ErrorKind::InvalidCursor => "invalid_cursor",
            ErrorKind::NotARepository => "not_a_repository",
            ErrorKind::GitUnavailable => "git_unavailable",
            ErrorKind::MultipleMatches => "multiple_matches",
            ErrorKind::MatchNotFound => "match_not_found",
            ErrorKind::OccurrenceOutOfRange => "occurrence_out_of_range",
            ErrorKind::OverlappingEdits => "overlapping_edits",
            ErrorKind::Sha256Mismatch => "sha256_mismatch",
            ErrorKind::PatchDoesNotApply => "patch_does_not_apply",
            ErrorKind::AlreadyExists => "already_exists",
            ErrorKind::NotText => "not_text",
            ErrorKind::PathIsSymlink => "path_is_symlink",
            ErrorKind::Unwritable => "unwritable",
            ErrorKind::NothingToCommit => "nothing_to_commit",
            ErrorKind::UnmergedPaths => "unmerged_paths",
            ErrorKind::MergeInProgress => "merge_in_progress",
            ErrorKind::HookRejected => "hook_rejected",
            ErrorKind::UnknownShell => "unknown_shell",
            ErrorKind::ShellBusy => "shell_busy",
            ErrorKind::ShellResetRequired => "shell_reset_required",
            ErrorKind::ShellClosed => "shell_closed",
            ErrorKind::ShellAlreadyOpen => "shell_already_open",
            ErrorKind::PathHidden => "path_hidden",
            ErrorKind::GitMetadataOutsideProject => "git_metadata_outside_project",
            ErrorKind::LimitExceeded => "limit_exceeded",
            ErrorKind::ResourceLimit => "resource_limit",
            ErrorKind::CheckpointNotFound => "checkpoint_not_found",
            ErrorKind::StateChanged => "state_changed",
            ErrorKind::RevisionNotFound => "revision_not_found",
            ErrorKind::StatusUnproven => "status_unproven",
            ErrorKind::PathNotAllowed => "path_not_allowed",
            ErrorKind::UnsavedWork => "unsaved_work",
            ErrorKind::BaseMismatch => "base_mismatch",
            ErrorKind::UnknownRunner => "unknown_runner",
        }
    }

    /// Whether the kind reports how an execution ended (or that the runner would not start it)
    /// rather than a refusal of the request: such a failure carries the execution's `output`.
    pub fn is_execution_outcome(self) -> bool {
        matches!(
            self,
            ErrorKind::ExecutionRejected
                | ErrorKind::SpawnFailed
                | ErrorKind::ExitNonzero
                | ErrorKind::KilledBySignal
                | ErrorKind::TimedOut
                | ErrorKind::Cancelled
                | ErrorKind::Lost
                | ErrorKind::TestCountNotProven
                | ErrorKind::StatusUnproven
        )
    }

    /// Coarse failure class for telemetry.
    pub fn failure_kind(self) -> &'static str {
        match self {
            ErrorKind::InvalidArguments | ErrorKind::UnknownTool => "invalid_request",
            ErrorKind::InsufficientScope => "permission",
            ErrorKind::UnknownProject | ErrorKind::UnknownSessionId => "not_found",
            ErrorKind::SessionClosed | ErrorKind::ProjectMismatch => "invalid_state",
            ErrorKind::ModeDenied => "permission",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Internal => "internal",
            ErrorKind::DispatchTimeout => "timeout",
            ErrorKind::RunnerUnavailable => "unavailable",
            ErrorKind::UnknownJob => "not_found",
            ErrorKind::Unsupported => "invalid_request",
            ErrorKind::UnknownMessage => "not_found",
            ErrorKind::NotATodo => "invalid_state",
            ErrorKind::CompletionKeyConflict => "conflict",
            ErrorKind::CompletionPersistenceUncertain => "unavailable",
            ErrorKind::InvalidObservationToken | ErrorKind::InvalidAssignmentFence => {
                "invalid_request"
            }
            ErrorKind::InvalidToken => "permission",
            ErrorKind::ExecutionRejected | ErrorKind::SpawnFailed => "not_started",
            ErrorKind::ExitNonzero | ErrorKind::KilledBySignal => "execution_failed",
            ErrorKind::TimedOut => "timeout",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Lost => "outcome_unknown",
            ErrorKind::TestCountNotProven => "execution_failed",
            ErrorKind::RateLimited | ErrorKind::QueueFull => "limited",
            ErrorKind::PathOutsideRoot => "invalid_request",
            ErrorKind::PathNotFound => "not_found",
            ErrorKind::NotAFile => "invalid_request",
            ErrorKind::NotADirectory => "invalid_request",
            ErrorKind::SpecialFile => "invalid_request",
            ErrorKind::FileTooLarge => "invalid_request",
            ErrorKind::Unreadable => "invalid_state",
            ErrorKind::InvalidCursor => "invalid_request",
            ErrorKind::NotARepository => "invalid_state",
            ErrorKind::GitUnavailable => "unavailable",
            ErrorKind::MultipleMatches => "conflict",
            ErrorKind::MatchNotFound => "conflict",
            ErrorKind::OccurrenceOutOfRange => "conflict",
            ErrorKind::OverlappingEdits => "conflict",
            ErrorKind::Sha256Mismatch => "conflict",
            ErrorKind::PatchDoesNotApply => "conflict",
            ErrorKind::AlreadyExists => "conflict",
            ErrorKind::NotText => "invalid_request",
            ErrorKind::PathIsSymlink => "invalid_request",
            ErrorKind::Unwritable => "invalid_state",
            ErrorKind::NothingToCommit => "invalid_state",
            ErrorKind::UnmergedPaths => "invalid_state",
            ErrorKind::MergeInProgress => "invalid_state",
            ErrorKind::HookRejected => "invalid_state",
            ErrorKind::UnknownShell => "not_found",
            ErrorKind::ShellBusy | ErrorKind::ShellAlreadyOpen => "conflict",
            ErrorKind::ShellResetRequired | ErrorKind::ShellClosed => "invalid_state",
            ErrorKind::PathHidden => "permission",
            ErrorKind::GitMetadataOutsideProject => "invalid_state",
            ErrorKind::LimitExceeded => "limited",
            ErrorKind::ResourceLimit => "limited",
            ErrorKind::CheckpointNotFound => "not_found",
            ErrorKind::StateChanged => "conflict",
            ErrorKind::RevisionNotFound => "not_found",
            ErrorKind::StatusUnproven => "outcome_unknown",
            ErrorKind::PathNotAllowed => "permission",
            ErrorKind::UnsavedWork => "invalid_state",
            ErrorKind::BaseMismatch => "conflict",
            ErrorKind::UnknownRunner => "not_found",
        }
    }

    /// What the caller can do about it, for telemetry and guidance.
    pub fn recovery_kind(self) -> &'static str {
        match self {
            ErrorKind::InvalidArguments => "fix_arguments",
            ErrorKind::UnknownTool => "list_tools",
            ErrorKind::InsufficientScope => "request_access",
            ErrorKind::UnknownProject | ErrorKind::UnknownSessionId => "check_target",
            ErrorKind::SessionClosed => "start_new_session",
            ErrorKind::ProjectMismatch => "check_target",
            ErrorKind::ModeDenied => "use_normal_session",
            ErrorKind::Conflict | ErrorKind::Unavailable => "retry",
            ErrorKind::Internal => "report",
            ErrorKind::DispatchTimeout => "check_state",
            ErrorKind::RunnerUnavailable => "retry",
            ErrorKind::UnknownJob => "check_target",
            ErrorKind::Unsupported => "fix_arguments",
            ErrorKind::UnknownMessage | ErrorKind::NotATodo => "check_target",
            ErrorKind::CompletionKeyConflict => "fix_arguments",
            ErrorKind::CompletionPersistenceUncertain => "retry_same_key",
            ErrorKind::InvalidObservationToken => "observe_without_token",
            ErrorKind::InvalidAssignmentFence => "get_assignment",
            ErrorKind::InvalidToken => "request_access",
            ErrorKind::ExecutionRejected | ErrorKind::SpawnFailed => "fix_arguments",
            ErrorKind::ExitNonzero | ErrorKind::KilledBySignal => "read_output",
            ErrorKind::TimedOut => "raise_timeout_or_run_job",
            ErrorKind::Cancelled => "check_state",
            ErrorKind::Lost => "check_state",
            ErrorKind::TestCountNotProven => "read_output",
            ErrorKind::RateLimited | ErrorKind::QueueFull => "retry_later",
            ErrorKind::PathOutsideRoot => "fix_arguments",
            ErrorKind::PathNotFound => "check_target",
            ErrorKind::NotAFile => "fix_arguments",
            ErrorKind::NotADirectory => "fix_arguments",
            ErrorKind::SpecialFile => "fix_arguments",
            ErrorKind::FileTooLarge => "fix_arguments",
            ErrorKind::Unreadable => "check_target",
            ErrorKind::InvalidCursor => "restart_listing",
            ErrorKind::NotARepository => "check_target",
            ErrorKind::GitUnavailable => "retry",
            ErrorKind::MultipleMatches => "fix_arguments",
            ErrorKind::MatchNotFound => "reread_and_retry",
            ErrorKind::OccurrenceOutOfRange => "fix_arguments",
            ErrorKind::OverlappingEdits => "fix_arguments",
            ErrorKind::Sha256Mismatch => "reread_and_retry",
            ErrorKind::PatchDoesNotApply => "reread_and_retry",
            ErrorKind::AlreadyExists => "check_target",
            ErrorKind::NotText => "fix_arguments",
            ErrorKind::PathIsSymlink => "fix_arguments",
            ErrorKind::Unwritable => "check_target",
            ErrorKind::NothingToCommit => "check_state",
            ErrorKind::UnmergedPaths => "resolve_conflicts",
            ErrorKind::MergeInProgress => "fix_arguments",
            ErrorKind::HookRejected => "read_output",
            ErrorKind::UnknownShell => "check_target",
            ErrorKind::ShellBusy => "retry_later",
            ErrorKind::ShellResetRequired | ErrorKind::ShellClosed => "open_new_shell",
            ErrorKind::ShellAlreadyOpen => "use_open_shell",
            ErrorKind::PathHidden => "check_target",
            ErrorKind::GitMetadataOutsideProject => "check_target",
            ErrorKind::LimitExceeded => "release_some",
            ErrorKind::ResourceLimit => "read_output",
            ErrorKind::CheckpointNotFound => "check_target",
            ErrorKind::StateChanged => "reread_and_retry",
            ErrorKind::RevisionNotFound => "fix_arguments",
            ErrorKind::StatusUnproven => "check_state",
            ErrorKind::PathNotAllowed => "check_target",
            ErrorKind::UnsavedWork => "save_or_force",
            ErrorKind::BaseMismatch => "fix_arguments",
            ErrorKind::UnknownRunner => "check_target",
        }
    }

    /// HTTP status on the REST surface. An execution outcome answers 200: the request was
    /// valid and carried out, and how the program ended is the result (`success: false`, the
    /// kind and the execution's `output`), not a refusal of the request.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorKind::InvalidArguments => 400,
            ErrorKind::UnknownTool => 404,
            ErrorKind::InsufficientScope => 403,
            ErrorKind::UnknownProject | ErrorKind::UnknownSessionId => 404,
            ErrorKind::SessionClosed | ErrorKind::ProjectMismatch => 409,
            ErrorKind::ModeDenied => 403,
            ErrorKind::Conflict => 409,
            ErrorKind::Unavailable => 503,
            ErrorKind::Internal => 500,
            ErrorKind::DispatchTimeout => 504,
            ErrorKind::RunnerUnavailable => 503,
            ErrorKind::UnknownJob => 404,
            ErrorKind::Unsupported => 400,
            ErrorKind::UnknownMessage => 404,
            ErrorKind::NotATodo => 409,
            ErrorKind::CompletionKeyConflict => 409,
            ErrorKind::CompletionPersistenceUncertain => 503,
            ErrorKind::InvalidObservationToken | ErrorKind::InvalidAssignmentFence => 400,
            ErrorKind::InvalidToken => 401,
            ErrorKind::ExecutionRejected
            | ErrorKind::SpawnFailed
            | ErrorKind::ExitNonzero
            | ErrorKind::KilledBySignal
            | ErrorKind::TimedOut
            | ErrorKind::Cancelled
            | ErrorKind::Lost
            | ErrorKind::TestCountNotProven
            | ErrorKind::StatusUnproven => 200,
            ErrorKind::RateLimited => 429,
            ErrorKind::QueueFull => 429,
            ErrorKind::PathOutsideRoot => 400,
            ErrorKind::PathNotFound => 404,
            ErrorKind::NotAFile => 400,
            ErrorKind::NotADirectory => 400,
            ErrorKind::SpecialFile => 400,
            ErrorKind::FileTooLarge => 400,
            ErrorKind::Unreadable => 422,
            ErrorKind::InvalidCursor => 400,
            ErrorKind::NotARepository => 409,
            ErrorKind::GitUnavailable => 503,
            ErrorKind::MultipleMatches => 409,
            ErrorKind::MatchNotFound => 409,
            ErrorKind::OccurrenceOutOfRange => 409,
            ErrorKind::OverlappingEdits => 409,
            ErrorKind::Sha256Mismatch => 409,
            ErrorKind::PatchDoesNotApply => 409,
            ErrorKind::AlreadyExists => 409,
            ErrorKind::NotText => 400,
            ErrorKind::PathIsSymlink => 400,
            ErrorKind::Unwritable => 422,
            ErrorKind::NothingToCommit => 409,
            ErrorKind::UnmergedPaths => 409,
            ErrorKind::MergeInProgress => 409,
            ErrorKind::HookRejected => 409,
            ErrorKind::UnknownShell => 404,
            ErrorKind::ShellBusy
            | ErrorKind::ShellResetRequired
            | ErrorKind::ShellClosed
            | ErrorKind::ShellAlreadyOpen => 409,
            ErrorKind::PathHidden => 403,
            ErrorKind::GitMetadataOutsideProject => 409,
            ErrorKind::LimitExceeded => 429,
            ErrorKind::ResourceLimit => 422,
            ErrorKind::CheckpointNotFound => 404,
            ErrorKind::StateChanged => 409,
            ErrorKind::RevisionNotFound => 404,
            ErrorKind::PathNotAllowed => 403,
            ErrorKind::UnsavedWork => 409,
            ErrorKind::BaseMismatch => 409,
            ErrorKind::UnknownRunner => 404,
        }
    }

    /// Every kind, for documentation and tests.
    pub const ALL: [ErrorKind; 73] = [
        ErrorKind::InvalidArguments,
        ErrorKind::UnknownTool,
        ErrorKind::InsufficientScope,
        ErrorKind::UnknownProject,
        ErrorKind::UnknownSessionId,
        ErrorKind::SessionClosed,
        ErrorKind::ProjectMismatch,
        ErrorKind::ModeDenied,
        ErrorKind::Conflict,
        ErrorKind::Unavailable,
        ErrorKind::Internal,
        ErrorKind::DispatchTimeout,
        ErrorKind::RunnerUnavailable,
        ErrorKind::UnknownJob,
        ErrorKind::Unsupported,
        ErrorKind::UnknownMessage,
        ErrorKind::NotATodo,
        ErrorKind::CompletionKeyConflict,
        ErrorKind::CompletionPersistenceUncertain,
        ErrorKind::InvalidObservationToken,
        ErrorKind::InvalidAssignmentFence,
        ErrorKind::InvalidToken,
        ErrorKind::ExecutionRejected,
        ErrorKind::SpawnFailed,
        ErrorKind::ExitNonzero,
        ErrorKind::KilledBySignal,
        ErrorKind::TimedOut,
        ErrorKind::Cancelled,
        ErrorKind::Lost,
        ErrorKind::TestCountNotProven,
        ErrorKind::RateLimited,
        ErrorKind::QueueFull,
        ErrorKind::PathOutsideRoot,
        ErrorKind::PathNotFound,
        ErrorKind::NotAFile,
        ErrorKind::NotADirectory,
        ErrorKind::SpecialFile,
        ErrorKind::FileTooLarge,
        ErrorKind::Unreadable,
        ErrorKind::InvalidCursor,
        ErrorKind::NotARepository,
        ErrorKind::GitUnavailable,
        ErrorKind::MultipleMatches,
        ErrorKind::MatchNotFound,
        ErrorKind::OccurrenceOutOfRange,
        ErrorKind::OverlappingEdits,
        ErrorKind::Sha256Mismatch,
        ErrorKind::PatchDoesNotApply,
        ErrorKind::AlreadyExists,
        ErrorKind::NotText,
        ErrorKind::PathIsSymlink,
        ErrorKind::Unwritable,
        ErrorKind::NothingToCommit,
        ErrorKind::UnmergedPaths,
        ErrorKind::MergeInProgress,
        ErrorKind::HookRejected,
        ErrorKind::UnknownShell,
        ErrorKind::ShellBusy,
        ErrorKind::ShellResetRequired,
        ErrorKind::ShellClosed,
        ErrorKind::ShellAlreadyOpen,
        ErrorKind::PathHidden,
        ErrorKind::GitMetadataOutsideProject,
        ErrorKind::LimitExceeded,
        ErrorKind::ResourceLimit,
        ErrorKind::CheckpointNotFound,
        ErrorKind::StateChanged,
        ErrorKind::RevisionNotFound,
        ErrorKind::StatusUnproven,
        ErrorKind::PathNotAllowed,
        ErrorKind::UnsavedWork,
        ErrorKind::BaseMismatch,
        ErrorKind::UnknownRunner,
    ];
}

/// A tool failure: a stable kind, a message naming what was wrong, and structured details.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    /// Stable kind.
    pub kind: ErrorKind,
    /// Human-readable explanation. Never contains secrets or server internals.
    pub message: String,
    /// Extra structured fields, flattened next to `kind` and `message`.
    pub details: Map<String, Value>,
    /// What the tool still has to report although it failed (how an execution ended: exit
    /// code, signal, output, truncation, duration). It becomes the result's `output`, never
    /// part of the `error` object.
    pub output: Option<Value>,
}

impl ToolError {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            details: Map::new(),
            output: None,
        }
    }

    /// Attaches the output a failed result still carries.
    pub fn with_output(mut self, output: Value) -> Self {
        self.output = Some(output);
        self
    }

    /// Adds a structured detail.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.details.insert(key.to_owned(), value.into());
        self
    }

    /// An internal failure: the cause is logged (with the request id), never returned.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "tool failed internally");
        Self::new(ErrorKind::Internal, "internal error")
    }
}

impl From<wc_store::StoreError> for ToolError {
    fn from(e: wc_store::StoreError) -> Self {
        match e {
            e if e.is_unavailable() => {
                tracing::warn!(error = %e, "database unavailable");
                ToolError::new(
                    ErrorKind::Unavailable,
                    "the database is temporarily unavailable; retry shortly",
                )
            }
            wc_store::StoreError::CommitUncertain(_) | wc_store::StoreError::WriterLost => {
                tracing::warn!(error = %e, "commit outcome unknown");
                ToolError::new(
                    ErrorKind::Unavailable,
                    "the database connection failed while committing; the change may or may not have been made, so check before retrying",
                )
                .with("outcome", "unknown")
            }
            other => ToolError::internal(other),
        }
    }
}

impl Serialize for ToolError {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(2 + self.details.len()))?;
        map.serialize_entry("kind", &self.kind)?;
        map.serialize_entry("message", &self.message)?;
        for (k, v) in &self.details {
            if k != "kind" && k != "message" {
                map.serialize_entry(k, v)?;
            }
        }
        map.end()
    }
}

/// The result of one tool call, identical on MCP (`structuredContent`) and REST.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolResult {
    /// Whether the tool did what was asked.
    pub success: bool,
    /// The tool's output: present on success, and on a failure that still has something to
    /// report (an execution that ran or was refused by its runner carries how it ended).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The failure, present when `success` is false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
    /// Unresolved ACK-required messages of the recording session, re-projected on every call
    /// recorded in it until they are acknowledged in that request or resolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_attention: Option<Value>,
    /// The context materials the request's `context_request` sidecar asked for, by name,
    /// projected after the tool ran (stateless MCP only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_materials: Option<Map<String, Value>>,
}

impl ToolResult {
    /// A successful result.
    pub fn ok(output: Value) -> Self {
        Self {
            success: true,
            output: Some(output),
            error: None,
            session_attention: None,
            context_materials: None,
        }
    }

    /// A failed result; the error's output, if any, is the result's `output`.
    pub fn err(mut error: ToolError) -> Self {
        Self {
            success: false,
            output: error.output.take(),
            error: Some(error),
            session_attention: None,
            context_materials: None,
        }
    }

    /// The `serialized_result_bytes` of telemetry: the UTF-8 length of the model-facing
    /// `{success, output, error}` object as serde serializes it. The runtime's sidecars
    /// (`session_attention`, `context_materials`) are not the tool's result and are not
    /// counted. `serialized` is this whole result already serialized, the answer itself when
    /// there is no sidecar.
    pub fn model_facing_bytes(&self, serialized: &str) -> usize {
        // The sidecars are the last fields serde writes, `,"<name>":<value>` each, at the end.
        // Their lengths are taken off instead of serializing the rest (the output may be long)
        // a second time.
        let attention = self.session_attention.as_ref().map_or(0, |v| {
            r#","session_attention":"#.len() + v.to_string().len()
        });
        let materials = self.context_materials.as_ref().map_or(0, |m| {
            r#","context_materials":"#.len() + Value::Object(m.clone()).to_string().len()
        });
        serialized.len() - attention - materials
    }

    /// The result as a JSON value.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("tool results serialize")
    }

    /// The result as a JSON value, moving the output instead of copying it: the same value as
    /// [`ToolResult::to_value`].
    pub fn into_value(self) -> Value {
        let mut map = serde_json::Map::new();
        map.insert("success".into(), Value::Bool(self.success));
        if let Some(output) = self.output {
            map.insert("output".into(), output);
        }
        if let Some(error) = self.error {
            map.insert(
                "error".into(),
                serde_json::to_value(error).expect("tool errors serialize"),
            );
        }
        if let Some(attention) = self.session_attention {
            map.insert("session_attention".into(), attention);
        }
        if let Some(materials) = self.context_materials {
            map.insert("context_materials".into(), Value::Object(materials));
        }
        Value::Object(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn into_value_equals_to_value() {
        let failed = ToolResult::err(
            ToolError::new(ErrorKind::InvalidArguments, "bad").with("field", "limit"),
        );
        let mut attended = ToolResult::ok(json!({"a": [1, {"b": null}]}));
        attended.session_attention = Some(json!({"unacknowledged": 1}));
        for r in [ToolResult::ok(json!({"a": 1})), failed, attended] {
            let expected = r.to_value();
            assert_eq!(r.into_value(), expected);
        }
    }

    #[test]
    fn model_facing_bytes_count_success_output_and_error_but_not_session_attention() {
        let failed = ToolResult::err(
            ToolError::new(ErrorKind::InvalidArguments, "bad").with("field", "limit"),
        );
        for plain in [ToolResult::ok(json!({"a": "é"})), failed] {
            let bare = serde_json::to_string(&plain).unwrap();
            assert_eq!(plain.model_facing_bytes(&bare), bare.len());
            let mut attended = plain;
            attended.session_attention = Some(json!({"unacknowledged": 1, "messages": []}));
            let whole = serde_json::to_string(&attended).unwrap();
            assert!(whole.len() > bare.len(), "{whole}");
            assert_eq!(attended.model_facing_bytes(&whole), bare.len(), "{whole}");
            let mut materials = Map::new();
            materials.insert("webcodex.workflow".into(), json!({"text": "ü"}));
            for attention in [None, Some(json!({"unacknowledged": 0}))] {
                let mut both = attended.clone();
                both.session_attention = attention;
                both.context_materials = Some(materials.clone());
                let whole = serde_json::to_string(&both).unwrap();
                assert_eq!(both.model_facing_bytes(&whole), bare.len(), "{whole}");
                assert_eq!(both.clone().into_value(), both.to_value());
            }
        }
    }

    #[test]
    fn results_serialize_with_only_present_fields() {
        assert_eq!(
            ToolResult::ok(json!({"a": 1})).to_value(),
            json!({"success": true, "output": {"a": 1}})
        );
        let err = ToolError::new(ErrorKind::InvalidArguments, "bad").with("pointer", "/x");
        assert_eq!(
            ToolResult::err(err).to_value(),
            json!({"success": false, "error": {"kind": "invalid_arguments", "message": "bad", "pointer": "/x"}})
        );
    }

    #[test]
    fn a_failure_with_output_carries_it_beside_the_error_not_inside_it() {
        let err = ToolError::new(ErrorKind::ExitNonzero, "exited with code 7")
            .with("exit_code", 7)
            .with_output(json!({"exit_code": 7, "stdout": "x"}));
        let value = ToolResult::err(err).into_value();
        assert_eq!(
            value,
            json!({
                "success": false,
                "output": {"exit_code": 7, "stdout": "x"},
                "error": {"kind": "exit_nonzero", "message": "exited with code 7", "exit_code": 7},
            })
        );
    }

    #[test]
    fn execution_outcomes_answer_200_and_every_other_failure_an_error_status() {
        for k in ErrorKind::ALL {
            let status = k.http_status();
            if k.is_execution_outcome() {
                assert_eq!(status, 200, "{k:?}");
            } else {
                assert!((400..600).contains(&status), "{k:?} answers {status}");
            }
        }
    }

    #[test]
    fn every_kind_has_a_distinct_wire_string() {
        let mut seen = std::collections::BTreeSet::new();
        for k in ErrorKind::ALL {
            assert!(seen.insert(k.as_str()));
            assert_eq!(serde_json::to_value(k).unwrap(), json!(k.as_str()));
        }
    }
}
