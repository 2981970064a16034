//! Projects a caller opens on a build host, and the managed worktrees the runner makes for
//! them ([`WorkspaceOp`]). The runner alone decides what a path means: it checks the path
//! against its filesystem policy, resolves the base revision to a commit and chooses where a
//! worktree goes. The work item's `project` names the runner-local id the new project gets.

use serde::{Deserialize, Serialize};

use crate::{ProtocolError, RelativePath, refuse};

/// Longest host path a caller may name, in bytes.
pub const MAX_HOST_PATH_BYTES: usize = 4096;

/// Longest revision a caller may name, in bytes.
pub const MAX_REVISION_BYTES: usize = 256;

/// Uncommitted files or unsaved commits one answer lists at most; more are counted.
pub const MAX_UNSAVED_LISTED: usize = 100;

/// An operation on the projects a caller opens on this host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum WorkspaceOp {
    /// Open a source checkout as a project: itself, or an isolated detached worktree of it.
    OpenProject(OpenProjectOp),
    /// Look again at a project opened earlier: is it still there, where is its HEAD, what
    /// commit does a revision name.
    ObserveProject(ObserveProjectOp),
    /// Remove a managed worktree and stop serving it.
    RemoveWorktree(RemoveWorktreeOp),
}

/// How a source checkout becomes a project.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum OpenAs {
    /// The checkout itself is the project.
    Checkout,
    /// A new detached worktree of the checkout, in the runner's worktree store.
    Worktree,
}

/// Open the directory `path` on the runner's host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenProjectOp {
    /// An absolute path on the runner's host.
    pub path: String,
    /// As the checkout itself, or as a new worktree of it.
    pub open_as: OpenAs,
    /// The revision a worktree starts at (a commit, branch or tag); `None`: the checkout's
    /// HEAD. Only for [`OpenAs::Worktree`].
    #[serde(default)]
    pub base_ref: Option<String>,
}

/// Look at an opened project again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObserveProjectOp {
    /// A revision to resolve to its commit in the project's repository.
    #[serde(default)]
    pub base_ref: Option<String>,
}

/// Remove a managed worktree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoveWorktreeOp {
    /// Remove it even though it holds uncommitted files or commits no branch or tag keeps.
    pub force: bool,
}

/// Answer to [`WorkspaceOp::OpenProject`] and [`WorkspaceOp::ObserveProject`]: the project as
/// the runner serves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct OpenedProject {
    /// The runner-local id it is served as (another than asked for when the checkout was
    /// already served).
    pub project: String,
    /// Its root on the runner's host.
    pub root: String,
    /// The checkout it was opened from (its canonical path).
    pub source: String,
    /// As the checkout itself or as a managed worktree.
    pub open_as: OpenAs,
    /// The commit a worktree was made at.
    pub base_commit: Option<String>,
    /// The commit its HEAD is at now (`None` outside Git, or on an unborn branch).
    pub head: Option<String>,
    /// The commit `base_ref` names, when one was asked about.
    pub base_ref_commit: Option<String>,
    /// The project was made by this call (false: it was already served).
    pub created: bool,
}

/// What removing a worktree throws away.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct UnsavedWork {
    /// Files changed, added or untracked (not ignored), at most [`MAX_UNSAVED_LISTED`].
    pub uncommitted: Vec<RelativePath>,
    /// How many there are in all.
    pub uncommitted_count: u64,
    /// Commits reachable from its HEAD that no branch, tag or remote ref keeps, newest first,
    /// at most [`MAX_UNSAVED_LISTED`].
    pub unsaved_commits: Vec<String>,
    /// How many there are in all.
    pub unsaved_commit_count: u64,
}

impl UnsavedWork {
    /// Whether removing the worktree would lose nothing.
    pub fn is_empty(&self) -> bool {
        self.uncommitted_count == 0 && self.unsaved_commit_count == 0
    }
}

/// Answer to [`WorkspaceOp::RemoveWorktree`]: removed, or left alone because it holds work
/// and `force` was not given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RemovedWorktree {
    /// The runner-local id it was served as.
    pub project: String,
    /// Its root.
    pub root: String,
    /// It is gone and no longer served. False: nothing changed, and `unsaved` is what a
    /// removal would lose.
    pub removed: bool,
    /// What it held that no commit or ref keeps: thrown away when `removed`.
    pub unsaved: UnsavedWork,
}

/// A revision as a caller names it: 1..=[`MAX_REVISION_BYTES`] bytes, no control characters
/// or spaces, not starting with `-` (never read as an option).
fn check_revision(name: &str, rev: &str) -> Result<(), ProtocolError> {
    if rev.is_empty() || rev.len() > MAX_REVISION_BYTES {
        return refuse(format!("{name} must be 1-{MAX_REVISION_BYTES} bytes"));
    }
    if rev.starts_with('-') || rev.chars().any(|c| c.is_control() || c == ' ') {
        return refuse(format!(
            "{name} must be a commit, branch or tag name (no spaces or control characters, not starting with -)"
        ));
    }
    Ok(())
}

impl WorkspaceOp {
    /// The operation's name, as its answer is tagged.
    pub fn name(&self) -> &'static str {
        match self {
            WorkspaceOp::OpenProject(_) => "open_project",
            WorkspaceOp::ObserveProject(_) => "observe_project",
            WorkspaceOp::RemoveWorktree(_) => "remove_worktree",
        }
    }

    pub(crate) fn validate(&self) -> Result<(), ProtocolError> {
        match self {
            WorkspaceOp::OpenProject(op) => {
                if !op.path.starts_with('/') {
                    return refuse("path must be an absolute path on the runner's host");
                }
                if op.path.len() > MAX_HOST_PATH_BYTES || op.path.contains('\0') {
                    return refuse(format!(
                        "path must be at most {MAX_HOST_PATH_BYTES} bytes without NUL"
                    ));
                }
                if let Some(rev) = &op.base_ref {
                    if op.open_as != OpenAs::Worktree {
                        return refuse("base_ref is only for a worktree");
                    }
                    check_revision("base_ref", rev)?;
                }
                Ok(())
            }
            WorkspaceOp::ObserveProject(op) => match &op.base_ref {
                Some(rev) => check_revision("base_ref", rev),
                None => Ok(()),
            },
            WorkspaceOp::RemoveWorktree(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(path: &str, open_as: OpenAs, base_ref: Option<&str>) -> WorkspaceOp {
        WorkspaceOp::OpenProject(OpenProjectOp {
            path: path.into(),
            open_as,
            base_ref: base_ref.map(str::to_owned),
        })
    }

    #[test]
    fn only_absolute_paths_and_plain_revisions_are_sent() {
        assert!(
            open("/src/app", OpenAs::Worktree, Some("main"))
                .validate()
                .is_ok()
        );
        assert!(open("/src/app", OpenAs::Checkout, None).validate().is_ok());
        let refused = |op: WorkspaceOp| op.validate().unwrap_err().0;
        assert!(refused(open("src/app", OpenAs::Checkout, None)).contains("absolute"));
        assert!(refused(open("/a\0b", OpenAs::Checkout, None)).contains("NUL"));
        assert!(
            refused(open("/a", OpenAs::Checkout, Some("main"))).contains("only for a worktree")
        );
        for bad in ["", "--upload-pack=x", "a b", "a\nb"] {
            assert!(
                refused(open("/a", OpenAs::Worktree, Some(bad))).contains("base_ref"),
                "{bad:?}"
            );
        }
        let long = "x".repeat(MAX_REVISION_BYTES + 1);
        assert!(refused(open("/a", OpenAs::Worktree, Some(&long))).contains("1-256"));
    }

    #[test]
    fn unsaved_work_is_empty_only_without_files_or_commits() {
        assert!(UnsavedWork::default().is_empty());
        let files = UnsavedWork {
            uncommitted_count: 1,
            ..UnsavedWork::default()
        };
        assert!(!files.is_empty());
        let commits = UnsavedWork {
            unsaved_commit_count: 2,
            ..UnsavedWork::default()
        };
        assert!(!commits.is_empty());
    }
}
