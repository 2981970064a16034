//! `git_restore_paths`: tracked paths put back to HEAD (work tree and index) or to the index
//! (work tree only) by `git restore`; and `git_discard_untracked`: the untracked files Git does
//! not ignore, listed by `git ls-files` and removed by the runner through the root it holds
//! open (never through a symlink, never a hidden path), then the directories that emptied.

use wc_runner_protocol::{
    DiscardUntrackedAnswer, DiscardUntrackedOp, MAX_DIFF_FILES, MAX_DISCARDED_FILES,
    MAX_OUTPUT_BYTES_PER_STREAM, OpErrorKind, RelativePath, RestorePathsAnswer, RestorePathsOp,
    RestoreSource, WorkAnswer,
};

use super::Ctx;
use super::job::Command;
use crate::answer::{Ended, Refusal};

/// Git's output kept of a step whose words matter only in a message.
const SAID_BYTES: u64 = 64 * 1024;

pub(super) async fn paths(ctx: &Ctx<'_>, op: &RestorePathsOp) -> Result<WorkAnswer, Ended> {
    ctx.check_beneath(&op.paths)?;
    let jobs = ctx.jobs();
    let specs = jobs.pathspecs(&super::named(&op.paths));
    // What the restore changes: the named files' differences from their source.
    let mut changed = vec![
        "diff",
        "--name-only",
        "-z",
        "--no-renames",
        "--no-ext-diff",
        "--relative",
    ];
    let mut restore = vec!["restore", "--worktree"];
    if op.source == RestoreSource::Head {
        changed.push("HEAD");
        restore.extend(["--staged", "--source=HEAD"]);
    }
    changed.extend(specs.iter().map(String::as_str));
    restore.extend(specs.iter().map(String::as_str));
    let listed = jobs.output(&changed, MAX_OUTPUT_BYTES_PER_STREAM).await?;
    let done = jobs.run(Command::new(&restore, SAID_BYTES)).await?;
    if !done.succeeded() {
        let said = done.said();
        if said.contains("did not match any file") {
            return Err(Refusal::new(
                OpErrorKind::NotFound,
                format!("a named path matches no tracked file (discard_untracked removes untracked ones); nothing was restored: {said}"),
            )
            .into());
        }
        if said.contains("Read-only file system") {
            return Err(super::read_only(&said).into());
        }
        return Err(done.error().into());
    }
    let (restored, restored_truncated) = project_paths(&listed.stdout, MAX_DIFF_FILES);
    Ok(WorkAnswer::GitRestorePaths(RestorePathsAnswer {
        source: op.source,
        restored,
        restored_truncated: restored_truncated || listed.stdout_truncated,
    }))
}

pub(super) async fn untracked(ctx: &Ctx<'_>, op: &DiscardUntrackedOp) -> Result<WorkAnswer, Ended> {
    ctx.check_beneath(&op.paths)?;
    let jobs = ctx.jobs();
    let mut args = vec!["ls-files", "--others", "--exclude-standard", "-z"];
    let specs = jobs.stageable(&super::named(&op.paths));
    args.extend(specs.iter().map(String::as_str));
    let listed = jobs.output(&args, MAX_OUTPUT_BYTES_PER_STREAM).await?;
    // An untracked repository of its own is listed as its directory: never removed.
    let (repositories, files): (Vec<&[u8]>, Vec<&[u8]>) = listed
        .stdout
        .split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .partition(|p| p.ends_with(b"/"));
    let skipped_repositories = repositories
        .iter()
        .filter_map(|p| RelativePath::parse(String::from_utf8_lossy(p).trim_end_matches('/')).ok())
        .collect();
    let mut files: Vec<RelativePath> = files
        .iter()
        .filter_map(|p| std::str::from_utf8(p).ok())
        .filter_map(|p| RelativePath::parse(p).ok())
        .collect();
    files.sort();
    let files_truncated = files.len() > MAX_DISCARDED_FILES || listed.stdout_truncated;
    files.truncate(MAX_DISCARDED_FILES);
    if !op.dry_run {
        remove(ctx, &files)?;
    }
    Ok(WorkAnswer::GitDiscardUntracked(DiscardUntrackedAnswer {
        dry_run: op.dry_run,
        files,
        files_truncated,
        skipped_repositories,
    }))
}

/// Removes `files` through the root held open, then every directory that emptied (deepest
/// first, never the root). A file already gone is as good as removed.
fn remove(ctx: &Ctx<'_>, files: &[RelativePath]) -> Result<(), Refusal> {
    let mut parents = std::collections::BTreeSet::new();
    for (done, file) in files.iter().enumerate() {
        let (dir, name) = split(file.as_str());
        let removed = ctx.root.open_dir(dir).and_then(|d| d.remove(name));
        match removed {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                let refusal = Refusal::from_open(file, e);
                if refusal.kind == OpErrorKind::Unreadable {
                    return Err(Refusal::at(
                        OpErrorKind::Unwritable,
                        file,
                        &format!(
                            "cannot be removed ({} removed before it): {}",
                            done, refusal.message
                        ),
                    ));
                }
                return Err(refusal);
            }
        }
        let mut dir = dir;
        while !dir.is_empty() {
            parents.insert(dir.to_owned());
            dir = split(dir).0;
        }
    }
    // Deepest first: a longer path sorts after its parent.
    for dir in parents.iter().rev() {
        let (parent, name) = split(dir);
        if let Ok(parent) = ctx.root.open_dir(parent) {
            // Not empty, or gone: left as it is.
            let _ = parent.remove_dir(name);
        }
    }
    Ok(())
}

/// The directory and the name of a project path.
fn split(path: &str) -> (&str, &str) {
    path.rsplit_once('/').unwrap_or(("", path))
}

/// Git's NUL-separated project paths (relative to the root), at most `max`; whether any was
/// left out.
fn project_paths(raw: &[u8], max: usize) -> (Vec<RelativePath>, bool) {
    let all: Vec<RelativePath> = raw
        .split(|&b| b == 0)
        .filter_map(|p| super::status::project_path("", p))
        .collect();
    let truncated = all.len() > max;
    (all.into_iter().take(max).collect(), truncated)
}
