//! Edit work: changes to a project's files ([`EditOp`]), made in the runner's own process and
//! answered with a typed [`WorkAnswer`].
//!
//! [`execute`] runs one edit work item under the same lease, timeout, stop and result path as
//! a job and always ends with a [`WorkOutcome`]: `exited` with exit code 0 and the answer, or
//! `rejected` with an [`OpErrorKind`], words naming the path, edit or hunk, and the
//! [`EditConflict`] facts, or `timed_out` / `cancelled` (then nothing was written). Invariants:
//!
//! - every file is found through a directory opened beneath the canonical project root
//!   ([`Root`], `openat2` with `RESOLVE_BENEATH`), by its name in that directory: a symlink
//!   out of the root is refused at any parent, a symlink as the target itself is never written
//!   through, and only regular UTF-8 text files are edited ([`file`]);
//! - an edit is all-or-nothing: every check passes before the first byte is written; new
//!   content goes to a temporary file beside its target, made durable, then renamed over it
//!   ([`file::Staged`]), so a reader sees the old file or the new one, never a mix, and a
//!   failed edit leaves no temporary file behind;
//! - edits of one file serialize: each holds an advisory lock (`flock`) on the file from before
//!   it reads until after it renames, and rechecks after locking that the name still leads to
//!   the locked file, so no update is lost between runner tasks or runner processes;
//! - a stop or timeout is honoured until the first rename; from then on the edit finishes and
//!   reports what it wrote.

mod delete;
mod diff;
mod file;
mod move_file;
mod patch;
mod text;
mod write;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use wc_runner_protocol::{
    EditConflict, EditOp, Termination, WorkAnswer, WorkItem, WorkOutcome, WorkSpec,
};

use crate::answer::{self, Ended, Refusal, rejected};
use crate::beneath::Root;
use crate::exec::{self, Host};
use crate::explore::{self, Failure, Stop};

/// Makes one edit work item's change. `cancel` turning `true` stops it before it writes; its
/// timeout is the item's. Never fails: a refusal is [`Termination::Rejected`] with an
/// [`OpErrorKind`] and, about a file's content, an [`EditConflict`].
pub async fn execute(item: &WorkItem, host: &Host, cancel: watch::Receiver<bool>) -> WorkOutcome {
    answer::traced("edit", item, run(item, host, cancel)).await
}

async fn run(item: &WorkItem, host: &Host, cancel: watch::Receiver<bool>) -> WorkOutcome {
    let started = Instant::now();
    let picked = answer::op_of(item, "edit", |spec| match spec {
        WorkSpec::Edit(op) => Some(op),
        _ => None,
    });
    let op = match picked {
        Ok(op) => op,
        Err(refusal) => return rejected(started, refusal),
    };
    let root = match explore::open_root(host, &item.project) {
        Ok(root) => root,
        Err(refusal) => return rejected(started, refusal),
    };
    if *cancel.borrow() {
        return exec::not_started(started, Termination::Cancelled, None);
    }
    let deadline = started + Duration::from_millis(item.limits.timeout_ms);
    let op = op.clone();
    let ended = blocking(root, deadline, cancel, move |root, stop| match &op {
        EditOp::TextEdits(op) => text::run(root, op, stop),
        EditOp::Patch(op) => patch::run(root, op, stop),
        EditOp::WriteFile(op) => write::run(root, op, stop),
        EditOp::DeleteFiles(op) => delete::run(root, op, stop),
        EditOp::MoveFile(op) => move_file::run(root, op, stop),
    })
    .await;
    answer::outcome(started, ended)
}

/// Removes the temporary files edits of an earlier runner left in `project`'s tree (killed
/// between writing one and renaming it over its target): regular files named
/// `.wc-edit-<random>.tmp`, removed through their directory opened beneath the root. Ignored
/// directories are not walked (Git never sees what lies there); hidden paths are never
/// touched. Returns how many were removed.
pub fn sweep_leftovers(host: &Host, project: &str) -> std::io::Result<usize> {
    use std::os::unix::ffi::OsStrExt as _;
    let boundary = host
        .boundary(project)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let root = Root::open(&boundary)?;
    let base = root.walk_base().to_owned();
    let mut removed = 0;
    let walk = ignore::WalkBuilder::new(&base)
        .hidden(false)
        .parents(false)
        .git_global(false)
        .require_git(false)
        .follow_links(false)
        .build();
    for entry in walk.flatten() {
        let name = entry.file_name().as_bytes();
        let leftover = name.starts_with(crate::beneath::TEMP_PREFIX.as_bytes())
            && name.ends_with(b".tmp")
            && entry.file_type().is_some_and(|t| t.is_file());
        let (Some(name), Ok(rel)) = (entry.file_name().to_str(), entry.path().strip_prefix(&base))
        else {
            continue;
        };
        if !leftover || root.hides(rel) {
            continue;
        }
        let parent = rel.parent().and_then(|p| p.to_str()).unwrap_or("");
        let dir = root.open_dir(parent)?;
        match dir.remove(name) {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(removed)
}

/// Runs the edit `f` on a blocking thread. When the deadline passes or a stop is asked first,
/// the stop flag is set: an edit that has not begun writing stops at its next check, and one
/// that has finishes. Either way this waits for it, so the outcome tells what happened to the
/// files.
async fn blocking(
    root: Arc<Root>,
    deadline: Instant,
    mut cancel: watch::Receiver<bool>,
    f: impl FnOnce(&Root, &Stop) -> Result<WorkAnswer, Failure> + Send + 'static,
) -> Result<WorkAnswer, Ended> {
    let stop = Stop::default();
    let flag = stop.clone();
    let mut task = tokio::task::spawn_blocking(move || f(&root, &flag));
    let interrupted = tokio::select! {
        joined = &mut task => return ended(joined, Ended::Cancelled),
        () = tokio::time::sleep_until(deadline.into()) => Ended::TimedOut,
        () = exec::stop_requested(&mut cancel) => Ended::Cancelled,
    };
    stop.set();
    ended(task.await, interrupted)
}

fn ended(
    joined: Result<Result<WorkAnswer, Failure>, tokio::task::JoinError>,
    interrupted: Ended,
) -> Result<WorkAnswer, Ended> {
    match joined {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(Failure::Refused(refusal))) => Err(Ended::Refused(refusal)),
        Ok(Err(Failure::Stopped)) => Err(interrupted),
        Err(e) => Err(Ended::Failed(format!("the edit operation failed: {e}"))),
    }
}

impl Refusal {
    /// This refusal with `fill` applied to its conflict facts (made empty first if none).
    pub(crate) fn conflict(mut self, fill: impl FnOnce(&mut EditConflict)) -> Refusal {
        fill(self.conflict.get_or_insert_with(Box::default));
        self
    }
}
