//! What a runner answers for work it executes itself (explore, edit and Git operations): the
//! typed answer of a success, tagged by the operation, and the closed set of refusal kinds.

use serde::{Deserialize, Serialize};

use crate::{
    DeleteFilesAnswer, FileListAnswer, GitCommitAnswer, GitDiffAnswer, GitLogAnswer,
    GitStatusAnswer, MAX_ANSWER_BYTES, OverviewAnswer, PatchAnswer, ProtocolError, ReadFilesAnswer,
    SearchAnswer, ShellAnswer, TextEditsAnswer, TrackedFilesAnswer, ValidationAnswer,
    WriteFileAnswer, refuse,
};

/// Why an operation on project files was refused: a closed set the functions map to typed tool errors.
/// The outcome's `error` says the same in words, naming the path or pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpErrorKind {
    /// The work item broke a bound or form of the protocol.
    InvalidRequest,
    /// The project is not served by this runner, or its root cannot be opened.
    ProjectUnavailable,
    /// The path leads outside the project root (through a symlink, or an absolute symlink).
    PathOutsideRoot,
    /// Nothing exists at the path.
    NotFound,
    /// The path is a directory where a file was expected.
    NotAFile,
    /// The path (or one of its parents) is not a directory where one was expected.
    NotADirectory,
    /// A device, FIFO or socket: never opened for reading.
    SpecialFile,
    /// The file is larger than [`crate::MAX_READ_FILE_SIZE`] (a read) or
    /// [`crate::MAX_EDIT_FILE_SIZE`] (an edit, before or after it).
    FileTooLarge,
    /// The file or directory cannot be read (permissions, a loop of symlinks, an I/O error).
    Unreadable,
    /// The search pattern is not a valid regular expression (or too large once compiled).
    InvalidRegex,
    /// The glob is not valid glob syntax.
    InvalidGlob,
    /// The cursor is not one this runner hands out for this operation.
    InvalidCursor,
    /// The project root is not inside a Git repository.
    NotARepository,
    /// Git could not be run, or failed.
    GitUnavailable,
    /// An edit's `old_text` matches more than once and names no `occurrence`.
    MultipleMatches,
    /// An edit's `old_text` does not match.
    MatchNotFound,
    /// An edit's `occurrence` is past the number of matches.
    OccurrenceOutOfRange,
    /// Two edits' matched texts overlap.
    OverlappingEdits,
    /// The file's content is not the one `expected_sha256` names.
    Sha256Mismatch,
    /// A patch hunk's lines are not in the file where the patch puts them (nor near), or a
    /// file to create exists, or a file to delete holds more than the patch removes.
    PatchDoesNotApply,
    /// The patch cannot be read, or uses a Git feature not applied here (renames, copies,
    /// mode changes, binary diffs).
    InvalidPatch,
    /// The file to create exists.
    AlreadyExists,
    /// The file is not text: a NUL byte in its first [`crate::BINARY_PROBE_BYTES`], or not
    /// UTF-8.
    NotText,
    /// The path names a symbolic link: an edit never writes through one.
    Symlink,
    /// The file or its directory cannot be written (permissions, a read-only or full file
    /// system, an I/O error).
    Unwritable,
    /// A commit would record no change.
    NothingToCommit,
    /// Unmerged files (conflicts) must be resolved before a commit.
    UnmergedPaths,
    /// A merge is in progress: only a commit of every change concludes it.
    MergeInProgress,
    /// A hook of the repository (`pre-commit`, `commit-msg`) refused the commit.
    HookRejected,
    /// The persistent shell is running another command.
    ShellBusy,
    /// The path is hidden from the project's jobs and tools (a secret of the runner's user,
    /// the runner's own files, another project): never read, written, listed or staged.
    PathHidden,
    /// The project's `.git` leads to Git metadata outside the project root that was not
    /// registered with it: jobs run without it and Git tools refuse.
    GitMetadataOutsideProject,
    /// A job reached one of its resource bounds (processes, memory): what the host refused
    /// it.
    ResourceLimit,
    /// No checkpoint of this work tree has the id.
    CheckpointNotFound,
    /// The working tree is not in the state the caller expected: it changed since.
    StateChanged,
    /// A bound on what the runner keeps was reached (checkpoints).
    LimitReached,
    /// The revision names no commit of the repository.
    RevisionNotFound,
    /// The path is outside every directory the runner's filesystem policy lets a caller open.
    PathNotAllowed,
}

impl OpErrorKind {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            OpErrorKind::InvalidRequest => "invalid_request",
            OpErrorKind::ProjectUnavailable => "project_unavailable",
            OpErrorKind::PathOutsideRoot => "path_outside_root",
            OpErrorKind::NotFound => "not_found",
            OpErrorKind::NotAFile => "not_a_file",
            OpErrorKind::NotADirectory => "not_a_directory",
            OpErrorKind::SpecialFile => "special_file",
            OpErrorKind::FileTooLarge => "file_too_large",
            OpErrorKind::Unreadable => "unreadable",
            OpErrorKind::InvalidRegex => "invalid_regex",
            OpErrorKind::InvalidGlob => "invalid_glob",
            OpErrorKind::InvalidCursor => "invalid_cursor",
            OpErrorKind::NotARepository => "not_a_repository",
            OpErrorKind::GitUnavailable => "git_unavailable",
            OpErrorKind::MultipleMatches => "multiple_matches",
            OpErrorKind::MatchNotFound => "match_not_found",
            OpErrorKind::OccurrenceOutOfRange => "occurrence_out_of_range",
            OpErrorKind::OverlappingEdits => "overlapping_edits",
            OpErrorKind::Sha256Mismatch => "sha256_mismatch",
            OpErrorKind::PatchDoesNotApply => "patch_does_not_apply",
            OpErrorKind::InvalidPatch => "invalid_patch",
            OpErrorKind::AlreadyExists => "already_exists",
            OpErrorKind::NotText => "not_text",
            OpErrorKind::Symlink => "symlink",
            OpErrorKind::Unwritable => "unwritable",
            OpErrorKind::NothingToCommit => "nothing_to_commit",
            OpErrorKind::UnmergedPaths => "unmerged_paths",
            OpErrorKind::MergeInProgress => "merge_in_progress",
            OpErrorKind::HookRejected => "hook_rejected",
            OpErrorKind::ShellBusy => "shell_busy",
            OpErrorKind::PathHidden => "path_hidden",
            OpErrorKind::GitMetadataOutsideProject => "git_metadata_outside_project",
            OpErrorKind::ResourceLimit => "resource_limit",
            OpErrorKind::CheckpointNotFound => "checkpoint_not_found",
            OpErrorKind::StateChanged => "state_changed",
            OpErrorKind::LimitReached => "limit_reached",
            OpErrorKind::RevisionNotFound => "revision_not_found",
            OpErrorKind::PathNotAllowed => "path_not_allowed",
        }
    }
}

/// Something a work item's reply says besides how it ended: what the runner left out of the
/// work's reach, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Notice {
    /// What it is about, as a stable kind.
    pub kind: OpErrorKind,
    /// The same in words (≤ 1,000 bytes).
    pub message: String,
}

/// The typed answer of an operation the runner executes itself, tagged by its `op`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum WorkAnswer {
    /// Answer to [`ExploreOp::Overview`].
    Overview(OverviewAnswer),
    /// Answer to [`ExploreOp::ListFiles`].
    ListFiles(FileListAnswer),
    /// Answer to [`ExploreOp::TrackedFiles`].
    TrackedFiles(TrackedFilesAnswer),
    /// Answer to [`ExploreOp::ReadFiles`].
    ReadFiles(ReadFilesAnswer),
    /// Answer to [`ExploreOp::Search`].
    Search(SearchAnswer),
    /// Answer to [`crate::EditOp::TextEdits`].
    TextEdits(TextEditsAnswer),
    /// Answer to [`crate::EditOp::Patch`].
    Patch(PatchAnswer),
    /// Answer to [`crate::EditOp::WriteFile`].
    WriteFile(WriteFileAnswer),
    /// Answer to [`crate::EditOp::DeleteFiles`].
    DeleteFiles(DeleteFilesAnswer),
    /// Answer to [`crate::EditOp::MoveFile`].
    MoveFile(crate::MoveFileAnswer),
    /// Answer to [`crate::GitOp::GitStatus`].
    GitStatus(GitStatusAnswer),
    /// Answer to [`crate::GitOp::GitDiff`].
    GitDiff(GitDiffAnswer),
    /// Answer to [`crate::GitOp::GitLog`].
    GitLog(GitLogAnswer),
    /// Answer to [`crate::GitOp::GitCommit`].
    GitCommit(GitCommitAnswer),
    /// Answer to [`crate::GitOp::GitCreateCheckpoint`].
    GitCreateCheckpoint(crate::CreateCheckpointAnswer),
    /// Answer to [`crate::GitOp::GitListCheckpoints`].
    GitListCheckpoints(crate::ListCheckpointsAnswer),
    /// Answer to [`crate::GitOp::GitDiffCheckpoint`]: the diff from the checkpoint to now.
    GitDiffCheckpoint(GitDiffAnswer),
    /// Answer to [`crate::GitOp::GitRestoreCheckpoint`].
    GitRestoreCheckpoint(crate::RestoreCheckpointAnswer),
    /// Answer to [`crate::GitOp::GitDeleteCheckpoints`].
    GitDeleteCheckpoints(crate::DeleteCheckpointsAnswer),
    /// Answer to [`crate::GitOp::GitRestorePaths`].
    GitRestorePaths(crate::RestorePathsAnswer),
    /// Answer to [`crate::GitOp::GitDiscardUntracked`].
    GitDiscardUntracked(crate::DiscardUntrackedAnswer),
    /// Answer to [`crate::GitOp::GitDiffSummary`].
    GitDiffSummary(crate::DiffSummaryAnswer),
    /// Answer to [`crate::ValidateOp`]: given whatever the validation's exit status.
    Validate(ValidationAnswer),
    /// Answer to every [`crate::ShellOp`]: given whatever the command's exit status.
    Shell(ShellAnswer),
    /// Answer to [`crate::WorkspaceOp::OpenProject`].
    OpenProject(crate::OpenedProject),
    /// Answer to [`crate::WorkspaceOp::ObserveProject`].
    ObserveProject(crate::OpenedProject),
    /// Answer to [`crate::WorkspaceOp::RemoveWorktree`].
    RemoveWorktree(crate::RemovedWorktree),
}

/// An operation the runner executes itself, and the one answer it gets: what a tool asks for
/// is typed to what it gets back, so no caller matches on [`WorkAnswer`].
pub trait Operation: Into<crate::WorkSpec> {
    /// The answer of this operation.
    type Answer;

    /// This operation's answer out of `answer`, or the name of the operation `answer`
    /// answers instead.
    fn answer(answer: WorkAnswer) -> Result<Self::Answer, &'static str>;
}

/// Each operation: the spec it becomes and the answer it gets.
macro_rules! operations {
    ($($op:ty => $spec:expr, $variant:ident($answer:ty);)*) => {$(
        impl From<$op> for crate::WorkSpec {
            fn from(op: $op) -> crate::WorkSpec {
                $spec(op)
            }
        }

        impl Operation for $op {
            type Answer = $answer;

            fn answer(answer: WorkAnswer) -> Result<$answer, &'static str> {
                match answer {
                    WorkAnswer::$variant(a) => Ok(a),
                    other => Err(other.op()),
                }
            }
        }
    )*};
}

operations! {
    crate::OverviewOp => |op| crate::WorkSpec::Explore(crate::ExploreOp::Overview(op)), Overview(OverviewAnswer);
    crate::ListFilesOp => |op| crate::WorkSpec::Explore(crate::ExploreOp::ListFiles(op)), ListFiles(FileListAnswer);
    crate::TrackedFilesOp => |op| crate::WorkSpec::Explore(crate::ExploreOp::TrackedFiles(op)), TrackedFiles(TrackedFilesAnswer);
    crate::ReadFilesOp => |op| crate::WorkSpec::Explore(crate::ExploreOp::ReadFiles(op)), ReadFiles(ReadFilesAnswer);
    crate::SearchOp => |op| crate::WorkSpec::Explore(crate::ExploreOp::Search(op)), Search(SearchAnswer);
    crate::TextEditsOp => |op| crate::WorkSpec::Edit(crate::EditOp::TextEdits(op)), TextEdits(TextEditsAnswer);
    crate::PatchOp => |op| crate::WorkSpec::Edit(crate::EditOp::Patch(op)), Patch(PatchAnswer);
    crate::WriteFileOp => |op| crate::WorkSpec::Edit(crate::EditOp::WriteFile(op)), WriteFile(WriteFileAnswer);
    crate::DeleteFilesOp => |op| crate::WorkSpec::Edit(crate::EditOp::DeleteFiles(op)), DeleteFiles(DeleteFilesAnswer);
    crate::MoveFileOp => |op| crate::WorkSpec::Edit(crate::EditOp::MoveFile(op)), MoveFile(crate::MoveFileAnswer);
    crate::GitStatusOp => |op| crate::WorkSpec::Git(crate::GitOp::GitStatus(op)), GitStatus(GitStatusAnswer);
    crate::GitDiffOp => |op| crate::WorkSpec::Git(crate::GitOp::GitDiff(op)), GitDiff(GitDiffAnswer);
    crate::GitLogOp => |op| crate::WorkSpec::Git(crate::GitOp::GitLog(op)), GitLog(GitLogAnswer);
    crate::GitCommitOp => |op| crate::WorkSpec::Git(crate::GitOp::GitCommit(op)), GitCommit(GitCommitAnswer);
    crate::CreateCheckpointOp => |op| crate::WorkSpec::Git(crate::GitOp::GitCreateCheckpoint(op)), GitCreateCheckpoint(crate::CreateCheckpointAnswer);
    crate::ListCheckpointsOp => |op| crate::WorkSpec::Git(crate::GitOp::GitListCheckpoints(op)), GitListCheckpoints(crate::ListCheckpointsAnswer);
    crate::DiffCheckpointOp => |op| crate::WorkSpec::Git(crate::GitOp::GitDiffCheckpoint(op)), GitDiffCheckpoint(GitDiffAnswer);
    crate::RestoreCheckpointOp => |op| crate::WorkSpec::Git(crate::GitOp::GitRestoreCheckpoint(op)), GitRestoreCheckpoint(crate::RestoreCheckpointAnswer);
    crate::DeleteCheckpointsOp => |op| crate::WorkSpec::Git(crate::GitOp::GitDeleteCheckpoints(op)), GitDeleteCheckpoints(crate::DeleteCheckpointsAnswer);
    crate::RestorePathsOp => |op| crate::WorkSpec::Git(crate::GitOp::GitRestorePaths(op)), GitRestorePaths(crate::RestorePathsAnswer);
    crate::DiscardUntrackedOp => |op| crate::WorkSpec::Git(crate::GitOp::GitDiscardUntracked(op)), GitDiscardUntracked(crate::DiscardUntrackedAnswer);
    crate::DiffSummaryOp => |op| crate::WorkSpec::Git(crate::GitOp::GitDiffSummary(op)), GitDiffSummary(crate::DiffSummaryAnswer);
    crate::ValidateOp => crate::WorkSpec::Validate, Validate(ValidationAnswer);
    crate::ShellOp => crate::WorkSpec::PersistentShell, Shell(ShellAnswer);
    crate::OpenProjectOp => |op| crate::WorkSpec::Workspace(crate::WorkspaceOp::OpenProject(op)), OpenProject(crate::OpenedProject);
    crate::ObserveProjectOp => |op| crate::WorkSpec::Workspace(crate::WorkspaceOp::ObserveProject(op)), ObserveProject(crate::OpenedProject);
    crate::RemoveWorktreeOp => |op| crate::WorkSpec::Workspace(crate::WorkspaceOp::RemoveWorktree(op)), RemoveWorktree(crate::RemovedWorktree);
}

impl WorkAnswer {
    /// The name of the operation this answers, as [`ExploreOp::name`], [`crate::EditOp::name`]
    /// or [`crate::GitOp::name`] gives it.
    pub fn op(&self) -> &'static str {
        match self {
            WorkAnswer::Overview(_) => "overview",
            WorkAnswer::ListFiles(_) => "list_files",
            WorkAnswer::TrackedFiles(_) => "tracked_files",
            WorkAnswer::ReadFiles(_) => "read_files",
            WorkAnswer::Search(_) => "search",
            WorkAnswer::TextEdits(_) => "text_edits",
            WorkAnswer::Patch(_) => "patch",
            WorkAnswer::WriteFile(_) => "write_file",
            WorkAnswer::DeleteFiles(_) => "delete_files",
            WorkAnswer::MoveFile(_) => "move_file",
            WorkAnswer::GitStatus(_) => "git_status",
            WorkAnswer::GitDiff(_) => "git_diff",
            WorkAnswer::GitLog(_) => "git_log",
            WorkAnswer::GitCommit(_) => "git_commit",
            WorkAnswer::GitCreateCheckpoint(_) => "git_create_checkpoint",
            WorkAnswer::GitListCheckpoints(_) => "git_list_checkpoints",
            WorkAnswer::GitDiffCheckpoint(_) => "git_diff_checkpoint",
            WorkAnswer::GitRestoreCheckpoint(_) => "git_restore_checkpoint",
            WorkAnswer::GitDeleteCheckpoints(_) => "git_delete_checkpoints",
            WorkAnswer::GitRestorePaths(_) => "git_restore_paths",
            WorkAnswer::GitDiscardUntracked(_) => "git_discard_untracked",
            WorkAnswer::GitDiffSummary(_) => "git_diff_summary",
            WorkAnswer::Validate(_) => "validate",
            WorkAnswer::Shell(_) => "shell",
            WorkAnswer::OpenProject(_) => "open_project",
            WorkAnswer::ObserveProject(_) => "observe_project",
            WorkAnswer::RemoveWorktree(_) => "remove_worktree",
        }
    }

    /// Checks the one bound every answer keeps: its JSON is at most [`MAX_ANSWER_BYTES`].
    pub fn validate(&self) -> Result<(), ProtocolError> {
        let bytes = serde_json::to_vec(self)
            .map_err(|e| ProtocolError(format!("answer does not serialize: {e}")))?;
        if bytes.len() > MAX_ANSWER_BYTES {
            return refuse(format!("answer is over {MAX_ANSWER_BYTES} bytes of JSON"));
        }
        Ok(())
    }
}
