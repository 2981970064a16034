//! Putting a project's files back: tracked paths to their committed or staged content
//! ([`RestorePathsOp`]), untracked files removed ([`DiscardUntrackedOp`], a dry run unless told
//! otherwise). Both are [`crate::GitOp`]s; ignored and hidden files are never touched.

use serde::{Deserialize, Serialize};

use crate::{MAX_GIT_PATHS, ProtocolError, RelativePath, refuse};

/// Untracked files one discard lists or removes at most; more are flagged.
pub const MAX_DISCARDED_FILES: usize = 1000;

/// Where restored paths get their content from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum RestoreSource {
    /// The last commit: the work tree and the index both go back to HEAD (every change to
    /// the paths, staged or not, is dropped).
    Head,
    /// The index: the work tree goes back to what is staged (unstaged changes are dropped,
    /// staged ones kept).
    Index,
}

/// Tracked paths put back to HEAD or the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestorePathsOp {
    /// The files or directories (1..=[`MAX_GIT_PATHS`]).
    pub paths: Vec<RelativePath>,
    /// Where their content comes from.
    pub source: RestoreSource,
}

/// Untracked files (not ignored) removed, or listed in a dry run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscardUntrackedOp {
    /// Only beneath these files or directories (at most [`MAX_GIT_PATHS`]); empty is the
    /// whole project.
    #[serde(default)]
    pub paths: Vec<RelativePath>,
    /// List what would be removed, remove nothing.
    pub dry_run: bool,
}

/// Answer to [`crate::GitOp::GitRestorePaths`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RestorePathsAnswer {
    /// Where the content came from.
    pub source: RestoreSource,
    /// The files whose content (or staged state) changed, in Git's order.
    pub restored: Vec<RelativePath>,
    /// Files were left out of `restored` (more than [`crate::MAX_DIFF_FILES`]).
    pub restored_truncated: bool,
}

/// Answer to [`crate::GitOp::GitDiscardUntracked`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DiscardUntrackedAnswer {
    /// Nothing was removed: `files` is what would be.
    pub dry_run: bool,
    /// The untracked files removed (or that would be), in path order.
    pub files: Vec<RelativePath>,
    /// More untracked files exist than one call handles ([`MAX_DISCARDED_FILES`]): call again.
    pub files_truncated: bool,
    /// Untracked directories holding a Git repository of their own: never removed.
    pub skipped_repositories: Vec<RelativePath>,
}

impl RestorePathsOp {
    pub(crate) fn validate(&self) -> Result<(), ProtocolError> {
        if self.paths.is_empty() {
            return refuse("paths must name 1 or more files or directories");
        }
        crate::git::check_paths(&self.paths)
    }
}

impl DiscardUntrackedOp {
    pub(crate) fn validate(&self) -> Result<(), ProtocolError> {
        if self.paths.len() > MAX_GIT_PATHS {
            return refuse(format!("paths names more than {MAX_GIT_PATHS} paths"));
        }
        crate::git::check_paths(&self.paths)
    }
}
