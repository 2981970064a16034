//! Git operations: the state, changes and history of the repository a project lives in, and
//! commits of its changes. The runner answers them by running the `git` binary as a sandboxed
//! job, and replies with a typed answer.
//!
//! Every path is a [`RelativePath`] from the project root, also when the root is a directory
//! inside a larger repository; only that directory's files are looked at or committed. Every
//! list and text is bounded by the constants of `bounds.rs`, with a flag wherever something
//! was left out.

use serde::{Deserialize, Serialize};

use crate::{
    DEFAULT_DIFF_BYTES, DEFAULT_DIFF_CONTEXT_LINES, DEFAULT_LOG_COMMITS, MAX_COMMIT_MESSAGE_BYTES,
    MAX_DIFF_BYTES, MAX_DIFF_CONTEXT_LINES, MAX_GIT_PATHS, MAX_GIT_PATHS_BYTES, MAX_LOG_COMMITS,
    ProtocolError, RelativePath, refuse,
};

/// One Git operation, tagged by `op` inside the work spec:
/// `{"kind": "git", "op": "git_diff", "staged": true}`. The tags carry a `git_` prefix so
/// every answer's tag names one operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum GitOp {
    /// The branch, its upstream and the changed files.
    GitStatus(GitStatusOp),
    /// The changes of the work tree against the index, or of the index against HEAD.
    GitDiff(GitDiffOp),
    /// The latest commits.
    GitLog(GitLogOp),
    /// A commit of the project's changes.
    GitCommit(GitCommitOp),
    /// A checkpoint of the working tree.
    GitCreateCheckpoint(crate::CreateCheckpointOp),
    /// The work tree's checkpoints.
    GitListCheckpoints(crate::ListCheckpointsOp),
    /// The changes from a checkpoint to the working tree.
    GitDiffCheckpoint(crate::DiffCheckpointOp),
    /// The working tree put back to a checkpoint.
    GitRestoreCheckpoint(crate::RestoreCheckpointOp),
    /// Checkpoints removed.
    GitDeleteCheckpoints(crate::DeleteCheckpointsOp),
    /// Tracked paths put back to HEAD or the index.
    GitRestorePaths(crate::RestorePathsOp),
    /// Untracked files removed (or listed).
    GitDiscardUntracked(crate::DiscardUntrackedOp),
    /// The changed files against a base commit, paged.
    GitDiffSummary(crate::DiffSummaryOp),
}

/// The branch, its upstream and the changed files of the project. No arguments (unknown ones
/// are refused).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitStatusOp {}

/// The changes as a unified diff with per-file line counts. Untracked files are not part of
/// it (as with `git diff`); `git_status` lists them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitDiffOp {
    /// Only these files or directories (at most [`MAX_GIT_PATHS`], [`MAX_GIT_PATHS_BYTES`]
    /// together); empty is the whole project.
    #[serde(default)]
    pub paths: Vec<RelativePath>,
    /// The index against HEAD (what a commit would record) instead of the work tree against
    /// the index.
    #[serde(default)]
    pub staged: bool,
    /// Lines of context around each change (0..=[`MAX_DIFF_CONTEXT_LINES`]).
    #[serde(default = "default_context_lines")]
    pub context_lines: u32,
    /// Bytes of diff text returned (1..=[`MAX_DIFF_BYTES`]); a longer diff is cut at a line end
    /// and flagged.
    #[serde(default = "default_diff_bytes")]
    pub limit_bytes: u32,
}

impl Default for GitDiffOp {
    fn default() -> Self {
        GitDiffOp {
            paths: Vec::new(),
            staged: false,
            context_lines: DEFAULT_DIFF_CONTEXT_LINES,
            limit_bytes: DEFAULT_DIFF_BYTES,
        }
    }
}

/// The latest commits reachable from HEAD, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitLogOp {
    /// Commits returned (1..=[`MAX_LOG_COMMITS`]).
    #[serde(default = "default_log_commits")]
    pub limit: u32,
    /// Only commits that change this file or directory; `None` is the whole project.
    #[serde(default)]
    pub path: Option<RelativePath>,
}

impl Default for GitLogOp {
    fn default() -> Self {
        GitLogOp {
            limit: DEFAULT_LOG_COMMITS,
            path: None,
        }
    }
}

/// A commit on the current branch, by the runner's configured author.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitCommitOp {
    /// The commit message (1..=[`MAX_COMMIT_MESSAGE_BYTES`], not only whitespace, no NUL).
    pub message: String,
    /// Exactly these files or directories, their new, changed and deleted files alike (at most
    /// [`MAX_GIT_PATHS`], [`MAX_GIT_PATHS_BYTES`] together); empty commits every change of the
    /// project, untracked files included.
    #[serde(default)]
    pub paths: Vec<RelativePath>,
}

fn default_context_lines() -> u32 {
    DEFAULT_DIFF_CONTEXT_LINES
}

fn default_diff_bytes() -> u32 {
    DEFAULT_DIFF_BYTES
}

fn default_log_commits() -> u32 {
    DEFAULT_LOG_COMMITS
}

impl GitOp {
    /// The operation's name on the wire (`git_status`, …).
    pub fn name(&self) -> &'static str {
        match self {
            GitOp::GitStatus(_) => "git_status",
            GitOp::GitDiff(_) => "git_diff",
            GitOp::GitLog(_) => "git_log",
            GitOp::GitCommit(_) => "git_commit",
            GitOp::GitCreateCheckpoint(_) => "git_create_checkpoint",
            GitOp::GitListCheckpoints(_) => "git_list_checkpoints",
            GitOp::GitDiffCheckpoint(_) => "git_diff_checkpoint",
            GitOp::GitRestoreCheckpoint(_) => "git_restore_checkpoint",
            GitOp::GitDeleteCheckpoints(_) => "git_delete_checkpoints",
            GitOp::GitRestorePaths(_) => "git_restore_paths",
            GitOp::GitDiscardUntracked(_) => "git_discard_untracked",
            GitOp::GitDiffSummary(_) => "git_diff_summary",
        }
    }

    /// Whether the operation changes the repository or the working tree (a commit, a
    /// restore) rather than only reading them. Taking, listing and diffing checkpoints write
    /// only Git's objects and private refs.
    pub fn writes(&self) -> bool {
        matches!(
            self,
            GitOp::GitCommit(_)
                | GitOp::GitRestoreCheckpoint(_)
                | GitOp::GitDeleteCheckpoints(_)
                | GitOp::GitRestorePaths(_)
                | GitOp::GitDiscardUntracked(_)
        )
    }

    /// Whether the operation changes the project's files as an edit does (so a session takes
    /// its automatic checkpoint first). A restore of a checkpoint keeps its own.
    pub fn changes_files(&self) -> bool {
        match self {
            GitOp::GitRestorePaths(_) => true,
            GitOp::GitDiscardUntracked(op) => !op.dry_run,
            _ => false,
        }
    }

    /// Checks every bound of the operation. Whether paths exist, and stay inside the root, is
    /// the runner's check.
    pub fn validate(&self) -> Result<(), ProtocolError> {
        match self {
            GitOp::GitStatus(_) => Ok(()),
            GitOp::GitDiff(op) => check_diff(&op.paths, op.context_lines, op.limit_bytes),
            GitOp::GitDiffCheckpoint(op) => {
                crate::check_checkpoint_id("checkpoint", &op.checkpoint)?;
                check_diff(&op.paths, op.context_lines, op.limit_bytes)
            }
            GitOp::GitCreateCheckpoint(op) => op.validate(),
            GitOp::GitListCheckpoints(op) => op.validate(),
            GitOp::GitRestoreCheckpoint(op) => op.validate(),
            GitOp::GitDeleteCheckpoints(op) => op.validate(),
            GitOp::GitRestorePaths(op) => op.validate(),
            GitOp::GitDiscardUntracked(op) => op.validate(),
            GitOp::GitDiffSummary(op) => op.validate(),
            GitOp::GitLog(op) => {
                if op.limit == 0 || op.limit > MAX_LOG_COMMITS {
                    return refuse(format!("limit must be 1-{MAX_LOG_COMMITS}"));
                }
                Ok(())
            }
            GitOp::GitCommit(op) => {
                check_paths(&op.paths)?;
                if op.message.len() > MAX_COMMIT_MESSAGE_BYTES {
                    return refuse(format!("message is over {MAX_COMMIT_MESSAGE_BYTES} bytes"));
                }
                if op.message.contains('\0') {
                    return refuse("message contains a NUL byte");
                }
                if op.message.trim().is_empty() {
                    return refuse("message is empty");
                }
                Ok(())
            }
        }
    }
}

fn check_diff(
    paths: &[RelativePath],
    context_lines: u32,
    limit_bytes: u32,
) -> Result<(), ProtocolError> {
    check_paths(paths)?;
    if context_lines > MAX_DIFF_CONTEXT_LINES {
        return refuse(format!("context_lines must be 0-{MAX_DIFF_CONTEXT_LINES}"));
    }
    if limit_bytes == 0 || limit_bytes > MAX_DIFF_BYTES {
        return refuse(format!("limit_bytes must be 1-{MAX_DIFF_BYTES}"));
    }
    Ok(())
}

pub(crate) fn check_paths(paths: &[RelativePath]) -> Result<(), ProtocolError> {
    if paths.len() > MAX_GIT_PATHS {
        return refuse(format!("paths names more than {MAX_GIT_PATHS} paths"));
    }
    let bytes: usize = paths.iter().map(|p| p.as_str().len()).sum();
    if bytes > MAX_GIT_PATHS_BYTES {
        return refuse(format!(
            "paths are over {MAX_GIT_PATHS_BYTES} bytes together"
        ));
    }
    Ok(())
}

/// Answer to [`GitOp::GitStatus`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct GitStatusAnswer {
    /// The checked-out branch; `None` when HEAD is detached.
    pub branch: Option<String>,
    /// The commit HEAD names (hex); `None` before the first commit.
    pub head: Option<String>,
    /// The branch's upstream (`origin/main`); `None` when it has none.
    pub upstream: Option<String>,
    /// Commits on the branch that its upstream lacks; `None` without an upstream (or when the
    /// upstream is gone).
    pub ahead: Option<u64>,
    /// Commits on the upstream that the branch lacks; as `ahead`.
    pub behind: Option<u64>,
    /// The changed, unmerged and untracked files of the project, in Git's order (at most
    /// [`crate::MAX_STATUS_ENTRIES`]).
    pub entries: Vec<StatusEntry>,
    /// Entries were left out: more than the bound, or more than an answer holds.
    pub entries_truncated: bool,
    /// Entries whose path no project path can name (not UTF-8, or holding `:`, `\` or a
    /// control character such as a newline): counted below, not listed.
    pub unlisted: u64,
    /// Anything is changed, unmerged or untracked.
    pub dirty: bool,
    /// Unmerged (conflicted) files.
    pub conflicts: u64,
    /// Files with changes in the index (what a commit would record).
    pub staged: u64,
    /// Tracked files with changes in the work tree that are not in the index.
    pub unstaged: u64,
    /// Untracked files (an untracked directory counts once, as Git shows it).
    pub untracked: u64,
}

/// One file of a status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct StatusEntry {
    /// The file (an untracked directory ends without `/`).
    pub path: RelativePath,
    /// Where a renamed or copied file came from, when a project path can name it.
    pub original_path: Option<RelativePath>,
    /// Its change in the index against HEAD; `None` when unchanged there.
    pub index: Option<ChangeKind>,
    /// Its change in the work tree against the index; `None` when unchanged there.
    pub worktree: Option<ChangeKind>,
    /// It is unmerged: a merge, rebase or cherry-pick left a conflict to resolve.
    pub conflicted: bool,
}

/// How a file changed, as Git's status letters tell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Its content or mode changed (`M`).
    Modified,
    /// It is new (`A`).
    Added,
    /// It was removed (`D`).
    Deleted,
    /// It was moved from `original_path` (`R`).
    Renamed,
    /// It was copied from `original_path` (`C`).
    Copied,
    /// Its type changed: a file became a symlink or the other way round (`T`).
    TypeChanged,
    /// Git does not track it (`?`).
    Untracked,
    /// A side of a conflict that is not resolved yet (`U`).
    Unmerged,
}

/// Answer to [`GitOp::GitDiff`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct GitDiffAnswer {
    /// The unified diff (`a/`, `b/` prefixes, paths from the project root; invalid UTF-8
    /// replaced), at most the op's `limit_bytes`, ending at a line end.
    pub diff: String,
    /// The diff was longer and is cut.
    pub truncated: bool,
    /// Every changed file with its line counts, in Git's order (at most
    /// [`crate::MAX_DIFF_FILES`]).
    pub files: Vec<DiffFile>,
    /// Files were left out of `files`.
    pub files_truncated: bool,
}

/// One changed file of a diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DiffFile {
    /// The file (its new path when renamed).
    pub path: RelativePath,
    /// Lines added (0 for a binary file).
    pub added: u64,
    /// Lines removed (0 for a binary file).
    pub removed: u64,
    /// Git sees it as binary: no lines are counted or shown.
    pub binary: bool,
}

/// Answer to [`GitOp::GitLog`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct GitLogAnswer {
    /// The commits, newest first; empty before the first commit.
    pub commits: Vec<CommitSummary>,
}

/// One commit of a log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CommitSummary {
    /// Its id (hex).
    pub commit: String,
    /// Its parents' ids: none for a root commit, two or more for a merge.
    pub parents: Vec<String>,
    /// The author's name (at most [`crate::MAX_GIT_TEXT_BYTES`]).
    pub author_name: String,
    /// The author's email (at most [`crate::MAX_GIT_TEXT_BYTES`]).
    pub author_email: String,
    /// When it was authored: RFC 3339 with the author's UTC offset
    /// (`2025-03-01T12:00:00+01:00`).
    pub authored_at: String,
    /// The first line of its message (at most [`crate::MAX_GIT_TEXT_BYTES`], cut on a
    /// character boundary).
    pub subject: String,
}

/// Answer to [`GitOp::GitCommit`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct GitCommitAnswer {
    /// The new commit's id (hex).
    pub commit: String,
    /// The branch it was made on; `None` when HEAD is detached.
    pub branch: Option<String>,
    /// Files it changes against its first parent.
    pub files_changed: u64,
    /// Lines it adds.
    pub insertions: u64,
    /// Lines it removes.
    pub deletions: u64,
    /// What Git said of it (`[main 1a2b3c4] subject` and its counts, and anything hooks
    /// printed), at most [`crate::MAX_GIT_TEXT_BYTES`].
    pub summary: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        MAX_DIFF_BYTES, OpErrorKind, WorkAnswer, WorkItem, WorkKind, WorkLimits, WorkSpec,
    };

    fn path(p: &str) -> RelativePath {
        RelativePath::parse(p).unwrap()
    }

    fn item(op: GitOp) -> WorkItem {
        WorkItem {
            protocol_version: crate::PROTOCOL_VERSION,
            work_id: uuid::Uuid::now_v7(),
            project: "web".into(),
            cwd: None,
            spec: WorkSpec::Git(op),
            stdin: None,
            env: Default::default(),
            limits: WorkLimits {
                timeout_ms: 1000,
                output_bytes_per_stream: 1024,
            },
        }
    }

    fn commit(message: &str) -> GitOp {
        GitOp::GitCommit(GitCommitOp {
            message: message.into(),
            paths: Vec::new(),
        })
    }

    #[test]
    fn git_specs_are_tagged_by_kind_then_a_prefixed_op_and_take_defaults() {
        let cases = [
            (
                serde_json::json!({"kind": "git", "op": "git_status"}),
                GitOp::GitStatus(GitStatusOp {}),
            ),
            (
                serde_json::json!({"kind": "git", "op": "git_diff"}),
                GitOp::GitDiff(GitDiffOp {
                    paths: vec![],
                    staged: false,
                    context_lines: 3,
                    limit_bytes: 64 * 1024,
                }),
            ),
            (
                serde_json::json!({"kind": "git", "op": "git_diff", "paths": ["./src//a b.rs"],
                    "staged": true, "context_lines": 0, "limit_bytes": 10}),
                GitOp::GitDiff(GitDiffOp {
                    paths: vec![path("src/a b.rs")],
                    staged: true,
                    context_lines: 0,
                    limit_bytes: 10,
                }),
            ),
            (
                serde_json::json!({"kind": "git", "op": "git_log"}),
                GitOp::GitLog(GitLogOp {
                    limit: 20,
                    path: None,
                }),
            ),
            (
                serde_json::json!({"kind": "git", "op": "git_log", "limit": 5, "path": "src"}),
                GitOp::GitLog(GitLogOp {
                    limit: 5,
                    path: Some(path("src")),
                }),
            ),
            (
                serde_json::json!({"kind": "git", "op": "git_commit", "message": "fix: x\n\nwhy"}),
                commit("fix: x\n\nwhy"),
            ),
            (
                serde_json::json!({"kind": "git", "op": "git_create_checkpoint",
                    "label": "before", "checkpoint_kind": "automatic",
                    "session_id": "wc_sess_a", "once_per_session": true}),
                GitOp::GitCreateCheckpoint(crate::CreateCheckpointOp {
                    label: "before".into(),
                    checkpoint_kind: crate::CheckpointKind::Automatic,
                    session_id: Some("wc_sess_a".into()),
                    once_per_session: true,
                }),
            ),
            (
                serde_json::json!({"kind": "git", "op": "git_list_checkpoints", "limit": 5}),
                GitOp::GitListCheckpoints(crate::ListCheckpointsOp { limit: 5 }),
            ),
            (
                serde_json::json!({"kind": "git", "op": "git_diff_checkpoint",
                    "checkpoint": "ck-0123456789ab", "paths": ["src"],
                    "context_lines": 3, "limit_bytes": 100}),
                GitOp::GitDiffCheckpoint(crate::DiffCheckpointOp {
                    checkpoint: "ck-0123456789ab".into(),
                    paths: vec![path("src")],
                    context_lines: 3,
                    limit_bytes: 100,
                }),
            ),
            (
                serde_json::json!({"kind": "git", "op": "git_restore_checkpoint",
                    "checkpoint": "ck-0123456789ab", "expected_state": "a".repeat(40)}),
                GitOp::GitRestoreCheckpoint(crate::RestoreCheckpointOp {
                    checkpoint: "ck-0123456789ab".into(),
                    expected_state: "a".repeat(40),
                    session_id: None,
                }),
            ),
            (
                serde_json::json!({"kind": "git", "op": "git_restore_paths",
                    "paths": ["src"], "source": "index"}),
                GitOp::GitRestorePaths(crate::RestorePathsOp {
                    paths: vec![path("src")],
                    source: crate::RestoreSource::Index,
                }),
            ),
            (
                serde_json::json!({"kind": "git", "op": "git_discard_untracked", "dry_run": true}),
                GitOp::GitDiscardUntracked(crate::DiscardUntrackedOp {
                    paths: Vec::new(),
                    dry_run: true,
                }),
            ),
            (
                serde_json::json!({"kind": "git", "op": "git_delete_checkpoints",
                    "checkpoints": ["ck-0123456789ab"]}),
                GitOp::GitDeleteCheckpoints(crate::DeleteCheckpointsOp {
                    checkpoints: vec!["ck-0123456789ab".into()],
                }),
            ),
        ];
        for (json, op) in cases {
            let spec: WorkSpec = serde_json::from_value(json.clone()).unwrap();
            assert_eq!(spec, WorkSpec::Git(op.clone()), "{json}");
            assert_eq!(spec.kind(), WorkKind::Git);
            assert_eq!(json["op"], op.name());
            let work = item(op.clone());
            work.validate().unwrap();
            let back = serde_json::to_value(&work).unwrap();
            assert_eq!(back["spec"]["kind"], "git");
            assert_eq!(serde_json::from_value::<WorkItem>(back).unwrap(), work);
        }
        assert!(commit("m").writes() && !GitOp::GitStatus(GitStatusOp {}).writes());
    }

    #[test]
    fn git_specs_are_strict() {
        for (bad, why) in [
            (r#"{"kind":"git","op":"git_status","x":1}"#, "unknown field"),
            (r#"{"kind":"git","op":"status"}"#, "unknown variant"),
            (r#"{"kind":"git","op":"git_commit"}"#, "missing field"),
            (
                r#"{"kind":"git","op":"git_diff","paths":["../up"]}"#,
                "`..`",
            ),
            (r#"{"kind":"git","op":"git_log","path":"/etc"}"#, "absolute"),
            (
                r#"{"kind":"git","op":"git_commit","message":"m","paths":["a:b"]}"#,
                "`:`",
            ),
        ] {
            let err = serde_json::from_str::<WorkSpec>(bad)
                .unwrap_err()
                .to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn each_git_bound_is_checked_naming_its_field() {
        let many = vec![path("a"); MAX_GIT_PATHS + 1];
        let diff = |f: fn(&mut GitDiffOp)| {
            let mut op = GitDiffOp::default();
            f(&mut op);
            GitOp::GitDiff(op)
        };
        let cases: Vec<(GitOp, &str)> = vec![
            (
                GitOp::GitDiff(GitDiffOp {
                    paths: many.clone(),
                    ..GitDiffOp::default()
                }),
                "paths",
            ),
            (
                diff(|o| o.context_lines = MAX_DIFF_CONTEXT_LINES + 1),
                "context_lines",
            ),
            (diff(|o| o.limit_bytes = 0), "limit_bytes"),
            (diff(|o| o.limit_bytes = MAX_DIFF_BYTES + 1), "limit_bytes"),
            (
                GitOp::GitLog(GitLogOp {
                    limit: 0,
                    path: None,
                }),
                "limit",
            ),
            (
                GitOp::GitLog(GitLogOp {
                    limit: MAX_LOG_COMMITS + 1,
                    path: None,
                }),
                "limit",
            ),
            (commit(""), "empty"),
            (commit(" \n\t"), "empty"),
            (commit("a\0b"), "NUL"),
            (
                commit(&"x".repeat(MAX_COMMIT_MESSAGE_BYTES + 1)),
                "message is over",
            ),
            (
                GitOp::GitCommit(GitCommitOp {
                    message: "m".into(),
                    paths: many,
                }),
                "paths",
            ),
            (
                GitOp::GitCommit(GitCommitOp {
                    message: "m".into(),
                    paths: vec![path(&"a".repeat(1000)); MAX_GIT_PATHS_BYTES / 1000 + 1],
                }),
                "together",
            ),
        ];
        for (op, expect) in cases {
            let err = item(op.clone()).validate().unwrap_err().to_string();
            assert!(err.contains(expect), "{op:?}: {err}");
        }
        // The largest allowed values pass.
        item(diff(|o| {
            o.context_lines = MAX_DIFF_CONTEXT_LINES;
            o.limit_bytes = MAX_DIFF_BYTES;
        }))
        .validate()
        .unwrap();
        item(commit(&"x".repeat(MAX_COMMIT_MESSAGE_BYTES)))
            .validate()
            .unwrap();
        for extra in [
            WorkItem {
                cwd: Some(path("src")),
                ..item(commit("m"))
            },
            WorkItem {
                stdin: Some("m".into()),
                ..item(commit("m"))
            },
            WorkItem {
                env: [("GIT_DIR".to_owned(), "/x".to_owned())].into(),
                ..item(commit("m"))
            },
        ] {
            let err = extra.validate().unwrap_err().to_string();
            assert!(err.contains("no cwd, stdin or env"), "{err}");
        }
    }

    #[test]
    fn git_answers_are_tagged_by_their_op_and_round_trip() {
        let answers = [
            WorkAnswer::GitStatus(GitStatusAnswer {
                branch: Some("main".into()),
                head: Some("ab".repeat(20)),
                upstream: Some("origin/main".into()),
                ahead: Some(1),
                behind: Some(0),
                entries: vec![StatusEntry {
                    path: path("new name.rs"),
                    original_path: Some(path("old.rs")),
                    index: Some(ChangeKind::Renamed),
                    worktree: Some(ChangeKind::Modified),
                    conflicted: false,
                }],
                entries_truncated: false,
                unlisted: 1,
                dirty: true,
                conflicts: 0,
                staged: 1,
                unstaged: 1,
                untracked: 0,
            }),
            WorkAnswer::GitDiff(GitDiffAnswer {
                diff: "diff --git a/x b/x\n".into(),
                truncated: true,
                files: vec![DiffFile {
                    path: path("x"),
                    added: 1,
                    removed: 2,
                    binary: false,
                }],
                files_truncated: false,
            }),
            WorkAnswer::GitLog(GitLogAnswer {
                commits: vec![CommitSummary {
                    commit: "ab".repeat(20),
                    parents: vec![],
                    author_name: "A".into(),
                    author_email: "a@example.com".into(),
                    authored_at: "2025-03-01T12:00:00+01:00".into(),
                    subject: "init".into(),
                }],
            }),
            WorkAnswer::GitCommit(GitCommitAnswer {
                commit: "cd".repeat(20),
                branch: None,
                files_changed: 2,
                insertions: 3,
                deletions: 1,
                summary: "[main cdcdcdc] fix".into(),
            }),
        ];
        for answer in answers {
            answer.validate().unwrap();
            let json = serde_json::to_value(&answer).unwrap();
            assert_eq!(json["op"], answer.op());
            assert!(answer.op().starts_with("git_"));
            assert_eq!(serde_json::from_value::<WorkAnswer>(json).unwrap(), answer);
        }
        let status = serde_json::json!({"op": "git_status", "branch": null, "head": null,
            "upstream": null, "ahead": null, "behind": null, "entries": [
                {"path": "a", "original_path": null, "index": null, "worktree": "type_changed",
                 "conflicted": false}],
            "entries_truncated": false, "unlisted": 0, "dirty": true, "conflicts": 0,
            "staged": 0, "unstaged": 1, "untracked": 0});
        let parsed: WorkAnswer = serde_json::from_value(status.clone()).unwrap();
        assert_eq!(serde_json::to_value(&parsed).unwrap(), status);
        let mut extra = status;
        extra["surprise"] = true.into();
        assert!(serde_json::from_value::<WorkAnswer>(extra).is_err());
    }

    #[test]
    fn git_refusal_kinds_have_wire_names() {
        for (kind, wire) in [
            (OpErrorKind::NothingToCommit, "nothing_to_commit"),
            (OpErrorKind::UnmergedPaths, "unmerged_paths"),
            (OpErrorKind::MergeInProgress, "merge_in_progress"),
            (OpErrorKind::HookRejected, "hook_rejected"),
        ] {
            assert_eq!(kind.as_str(), wire);
            assert_eq!(serde_json::to_value(kind).unwrap(), wire);
        }
    }
}
