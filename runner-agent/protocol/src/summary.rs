//! A review of the project's changes in one answer: every changed file with its status, line
//! counts, rename origin and binary flag against a base commit ([`DiffSummaryOp`]), paged.

use serde::{Deserialize, Serialize};

use crate::{ChangeKind, MAX_DIFF_FILES, ProtocolError, RelativePath, refuse};

/// The changed files of the project against a base commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiffSummaryOp {
    /// Only these files or directories; empty is the whole project.
    #[serde(default)]
    pub paths: Vec<RelativePath>,
    /// The commit compared against (a branch, tag or commit id); `None` is HEAD.
    #[serde(default)]
    pub base: Option<String>,
    /// The index against the base (what a commit would record) instead of the work tree.
    #[serde(default)]
    pub staged: bool,
    /// Untracked files Git does not ignore are listed too (status `untracked`, no counts).
    #[serde(default)]
    pub include_untracked: bool,
    /// Files skipped from the start of the path-ordered list (a page's `next_offset`).
    #[serde(default)]
    pub offset: u32,
    /// Files in this page (1..=[`MAX_DIFF_FILES`]).
    pub limit: u32,
}

/// One changed file of a summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SummaryFile {
    /// The file (its new path when renamed).
    pub path: RelativePath,
    /// How it changed.
    pub status: ChangeKind,
    /// Where a renamed or copied file came from.
    pub original_path: Option<RelativePath>,
    /// Lines added (0 for a binary or untracked file).
    pub added: u64,
    /// Lines removed (0 for a binary or untracked file).
    pub removed: u64,
    /// Git sees it as binary: no lines are counted.
    pub binary: bool,
}

/// Answer to [`crate::GitOp::GitDiffSummary`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DiffSummaryAnswer {
    /// The base commit (hex); `None` before the first commit.
    pub base: Option<String>,
    /// This page of changed files, in path order.
    pub files: Vec<SummaryFile>,
    /// Every changed file, on every page.
    pub total_files: u64,
    /// Lines added, over every page.
    pub added: u64,
    /// Lines removed, over every page.
    pub removed: u64,
    /// The `offset` of the next page; `None` on the last.
    pub next_offset: Option<u32>,
}

impl DiffSummaryOp {
    pub(crate) fn validate(&self) -> Result<(), ProtocolError> {
        crate::git::check_paths(&self.paths)?;
        if self.limit == 0 || self.limit as usize > MAX_DIFF_FILES {
            return refuse(format!("limit must be 1-{MAX_DIFF_FILES}"));
        }
        if let Some(base) = &self.base {
            check_revision(base)?;
        }
        Ok(())
    }
}

/// Refuses a revision [`wc_domain::Revision`] refuses: one Git could read as an option.
pub fn check_revision(rev: &str) -> Result<(), ProtocolError> {
    match wc_domain::Revision::parse(rev) {
        Ok(_) => Ok(()),
        Err(e) => refuse(format!("base {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_are_names_never_options() {
        for good in ["HEAD", "main", "origin/main", "HEAD~2", "v1.0^", "0123abcd"] {
            check_revision(good).unwrap();
        }
        for bad in ["", "-p", "--output=/tmp/x", "a b", "a:b", "a..b\0", "@{u}"] {
            assert!(check_revision(bad).is_err(), "{bad}");
        }
    }
}
