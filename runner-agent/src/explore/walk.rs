//! Ignore-aware walks of a project root with ripgrep's walker, in a stable order that a cursor
//! can resume.
//!
//! The order is the walker's sorted depth-first order: paths compared segment by segment, byte
//! by byte ([`cmp_paths`]). `.gitignore` (with or without a Git repository), `.ignore` and
//! `.git/info/exclude` apply; hidden names only when asked; `.git` itself never, nor a path
//! hidden from the project ([`Root::hidden`]); no symlink is followed; the runner's own global
//! Git excludes and anything above the root are never read.
//!
//! A walk restricted to a `target` below the root walks from the root, pruned to the target's
//! ancestors, so the ignore files of those ancestors apply inside the target. A target that
//! this walk never reaches (it is itself ignored or hidden) was named explicitly, so it is
//! walked from itself, as ripgrep walks a path given on its command line.

use std::cmp::Ordering;
use std::ops::ControlFlow;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use ignore::WalkBuilder;
use ignore::overrides::{Override, OverrideBuilder};
use wc_runner_protocol::{EntryKind, OpErrorKind};

use super::{Failure, Refusal, Stop};
use crate::beneath::Root;

/// What to walk.
pub(crate) struct WalkSpec<'a> {
    /// The canonical project-relative path to walk (`""` for the root).
    pub target: &'a str,
    /// Include hidden names.
    pub hidden: bool,
    /// Levels below the target to descend (`None`: all).
    pub max_depth: Option<usize>,
    /// Resume after this path (or at it, when `inclusive`).
    pub resume: Option<(&'a str, bool)>,
}

/// One path the walk met.
pub(crate) struct Entry<'a> {
    /// The project-relative path, when it is UTF-8 (it may still not be a valid project path).
    pub rel: Option<&'a str>,
    /// The full path under the walk base (for glob matching).
    pub path: &'a Path,
    /// What the directory entry says it is (a symlink is never followed).
    pub kind: EntryKind,
}

/// Orders two project-relative paths as the walk meets them: segment by segment, bytewise.
pub(crate) fn cmp_paths(a: &[u8], b: &[u8]) -> Ordering {
    a.split(|&c| c == b'/').cmp(b.split(|&c| c == b'/'))
}

/// Whether `dir` is a proper ancestor of `path`.
fn is_ancestor(dir: &[u8], path: &[u8]) -> bool {
    dir.is_empty() || (path.len() > dir.len() && path.starts_with(dir) && path[dir.len()] == b'/')
}

/// Compiles a listing or search glob (gitignore syntax, relative to the root).
pub(crate) fn glob(root: &Root, glob: &str) -> Result<Override, Refusal> {
    let mut builder = OverrideBuilder::new(root.walk_base());
    builder
        .add(glob)
        .and_then(|b| b.build())
        .map_err(|e| Refusal::new(OpErrorKind::InvalidGlob, format!("glob {glob:?}: {e}")))
}

/// Whether `glob` admits the file at `path`.
pub(crate) fn admits(glob: Option<&Override>, path: &Path) -> bool {
    glob.is_none_or(|g| !g.matched(path, false).is_ignore())
}

/// Walks `spec`, calling `visit` for every path at or below the target (never the root itself)
/// in walk order, until it breaks. Entries the walker cannot read are passed over.
pub(crate) fn walk(
    root: &Root,
    spec: &WalkSpec<'_>,
    stop: &Stop,
    mut visit: impl FnMut(Entry<'_>) -> Result<ControlFlow<()>, Failure>,
) -> Result<(), Failure> {
    let base = root.walk_base();
    let target = spec.target.as_bytes();
    let mut reached = target.is_empty();
    let first = builder(root, base, spec, true).build();
    if pass(first, base, spec, stop, &mut reached, &mut visit)?.is_break() {
        return Ok(());
    }
    if !reached {
        let from = base.join(spec.target);
        let again = builder(root, &from, spec, false).build();
        let _ = pass(again, base, spec, stop, &mut reached, &mut visit)?;
    }
    Ok(())
}

fn builder(root: &Root, from: &Path, spec: &WalkSpec<'_>, prune_to_target: bool) -> WalkBuilder {
    let base = root.walk_base().to_owned();
    let hidden: Vec<PathBuf> = root.hidden().to_vec();
    let target = spec.target.as_bytes().to_vec();
    let resume = spec.resume.map(|(p, _)| p.as_bytes().to_vec());
    let mut b = WalkBuilder::new(from);
    b.hidden(!spec.hidden)
        .parents(false)
        .ignore(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .require_git(false)
        .follow_links(false)
        .max_depth(spec.max_depth.map(|d| d + depth_of(spec.target)))
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(move |e| {
            if e.depth() > 0 && e.file_name() == ".git" {
                return false;
            }
            let Ok(rel) = e.path().strip_prefix(&base) else {
                return false;
            };
            // What the project may not see is never walked into.
            if hidden.iter().any(|h| rel.starts_with(h)) {
                return false;
            }
            let rel = rel.as_os_str().as_bytes();
            if prune_to_target
                && !(rel == target || is_ancestor(rel, &target) || is_ancestor(&target, rel))
            {
                return false;
            }
            // A directory wholly before the resume point holds nothing of this page.
            let is_dir = e.file_type().is_some_and(|t| t.is_dir());
            if let Some(after) = &resume
                && is_dir
                && cmp_paths(rel, after) == Ordering::Less
                && !is_ancestor(rel, after)
            {
                return false;
            }
            true
        });
    // `max_depth` counts from where the walk starts, which is the target or the root.
    if !prune_to_target {
        b.max_depth(spec.max_depth);
    }
    b
}

fn depth_of(rel: &str) -> usize {
    if rel.is_empty() {
        0
    } else {
        rel.split('/').count()
    }
}

fn pass(
    walk: ignore::Walk,
    base: &Path,
    spec: &WalkSpec<'_>,
    stop: &Stop,
    reached: &mut bool,
    visit: &mut impl FnMut(Entry<'_>) -> Result<ControlFlow<()>, Failure>,
) -> Result<ControlFlow<()>, Failure> {
    let target = spec.target.as_bytes();
    for found in walk {
        stop.check()?;
        let Ok(entry) = found else { continue };
        let Ok(rel_path) = entry.path().strip_prefix(base) else {
            continue;
        };
        let rel = rel_path.as_os_str().as_bytes();
        if rel.is_empty() {
            continue;
        }
        if rel == target {
            *reached = true;
        }
        if !(rel == target || is_ancestor(target, rel)) {
            continue;
        }
        if let Some((after, inclusive)) = spec.resume {
            match cmp_paths(rel, after.as_bytes()) {
                Ordering::Less => continue,
                Ordering::Equal if !inclusive => continue,
                _ => {}
            }
        }
        let kind = match entry.file_type() {
            Some(t) if t.is_dir() => EntryKind::Directory,
            Some(t) if t.is_file() => EntryKind::File,
            Some(t) if t.is_symlink() => EntryKind::Symlink,
            _ => EntryKind::Special,
        };
        let flow = visit(Entry {
            rel: std::str::from_utf8(rel).ok(),
            path: entry.path(),
            kind,
        })?;
        if flow.is_break() {
            return Ok(ControlFlow::Break(()));
        }
    }
    Ok(ControlFlow::Continue(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_order_segment_by_segment_as_the_sorted_walk_meets_them() {
        let mut paths = ["a-c", "a/b", "a", "a/b/c", "b", "a.rs", "A"];
        paths.sort_by(|a, b| cmp_paths(a.as_bytes(), b.as_bytes()));
        assert_eq!(paths, ["A", "a", "a/b", "a/b/c", "a-c", "a.rs", "b"]);
        assert!(is_ancestor(b"", b"a"));
        assert!(is_ancestor(b"a", b"a/b"));
        assert!(!is_ancestor(b"a", b"ab"));
        assert!(!is_ancestor(b"a", b"a"));
    }
}
