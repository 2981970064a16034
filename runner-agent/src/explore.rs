//! Explore work: read-only questions about a project's files ([`ExploreOp`]), answered in the
//! runner's own process with a typed [`WorkAnswer`].
//!
//! [`execute`] answers one explore work item under the same lease, timeout, stop and result
//! path as a job, and like [`exec::execute`] always ends with a [`WorkOutcome`]: `exited` with
//! exit code 0 and the answer, or `rejected` with an [`OpErrorKind`] and words naming the
//! path or pattern, or `timed_out` / `cancelled`. Invariants:
//!
//! - every path is opened beneath the canonical project root by [`beneath::Root`] (`openat2`,
//!   `RESOLVE_BENEATH`): a symlink out of the root is refused at any component, and only
//!   regular files are ever opened for reading;
//! - walks are ripgrep's ([`walk`]): ignore-aware, sorted, following no symlink, and what they
//!   yield is opened beneath the root again before it is reported or read;
//! - Git is asked through the `git` binary run as a job ([`exec::execute`]: the sandbox, the
//!   allow-list environment, bounded output), never in the runner's own process, because a
//!   repository's configuration can name programs for Git to run; Git work ([`crate::git`])
//!   runs it the same way, and the overview reads `git status` with its parser;
//! - an answer's JSON stays within [`MAX_ANSWER_BYTES`]: pages end early with a cursor, texts
//!   are cut and flagged.

mod overview;
mod read;
mod search;
mod walk;

use std::io::{self, Read};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use wc_runner_protocol::{
    EntryKind, ExploreOp, FileListAnswer, ListFilesOp, ListedFile, MAX_OUTPUT_BYTES_PER_STREAM,
    OpErrorKind, RelativePath, Termination, TrackedFilesAnswer, TrackedFilesOp, WorkAnswer,
    WorkItem, WorkOutcome, WorkSpec,
};

use crate::answer::{self, rejected};
pub(crate) use crate::answer::{Budget, Ended, Refusal};
use crate::exec::{self, Host, StopPolicy};
use crate::git::job::GitJobs;

use crate::beneath::{self, Root};
use walk::{Entry, WalkSpec};

/// Whether this host can run explore work (the agent announces the kind only then).
pub fn supported() -> bool {
    beneath::supported()
}

/// Answers one explore work item. `cancel` turning `true` stops it; its timeout is the item's.
/// Never fails: a refusal is [`Termination::Rejected`] with an [`OpErrorKind`].
pub async fn execute(
    item: &WorkItem,
    host: &Host,
    cancel: watch::Receiver<bool>,
    policy: &StopPolicy,
) -> WorkOutcome {
    answer::traced("explore", item, run(item, host, cancel, policy)).await
}

async fn run(
    item: &WorkItem,
    host: &Host,
    cancel: watch::Receiver<bool>,
    policy: &StopPolicy,
) -> WorkOutcome {
    let started = Instant::now();
    let picked = answer::op_of(item, "explore", |spec| match spec {
        WorkSpec::Explore(op) => Some(op),
        _ => None,
    });
    let op = match picked {
        Ok(op) => op,
        Err(refusal) => return rejected(started, refusal),
    };
    let root = match open_root(host, &item.project) {
        Ok(root) => root,
        Err(refusal) => return rejected(started, refusal),
    };
    if *cancel.borrow() {
        return exec::not_started(started, Termination::Cancelled, None);
    }
    let ctx = Ctx {
        item,
        host,
        policy,
        cancel,
        deadline: started + Duration::from_millis(item.limits.timeout_ms),
        stop: Stop::default(),
        root,
    };
    let ended = match op {
        ExploreOp::Overview(_) => overview::run(&ctx).await,
        ExploreOp::TrackedFiles(op) => tracked(&ctx, op).await,
        ExploreOp::ListFiles(op) => {
            let op = op.clone();
            ctx.blocking(move |root, stop| list(root, &op, stop)).await
        }
        ExploreOp::ReadFiles(op) => {
            let op = op.clone();
            ctx.blocking(move |root, stop| read::run(root, &op, stop))
                .await
        }
        ExploreOp::Search(op) => {
            let op = op.clone();
            ctx.blocking(move |root, stop| search::run(root, &op, stop))
                .await
        }
    };
    answer::outcome(started, ended)
}

/// Opens the root of `project` on this host within its boundary: the registered directory,
/// hiding what the project may not see.
pub(crate) fn open_root(host: &Host, project: &str) -> Result<Arc<Root>, Refusal> {
    host.boundary(project)
        .map_err(|e| e.to_string())
        .and_then(|boundary| {
            Root::open(&boundary).map_err(|e| format!("the project root cannot be opened: {e}"))
        })
        .map(Arc::new)
        .map_err(|e| Refusal::new(OpErrorKind::ProjectUnavailable, e))
}

/// How a blocking part of an operation ends early.
pub(crate) enum Failure {
    /// Refused.
    Refused(Refusal),
    /// Asked to stop (timeout or cancel) and stopped.
    Stopped,
}

impl From<Refusal> for Failure {
    fn from(r: Refusal) -> Self {
        Failure::Refused(r)
    }
}

/// The stop flag a blocking operation checks between files and between reads.
#[derive(Clone, Default)]
pub(crate) struct Stop(Arc<AtomicBool>);

impl Stop {
    pub(crate) fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub(crate) fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// `Err(Stopped)` once a stop was asked.
    pub(crate) fn check(&self) -> Result<(), Failure> {
        if self.is_set() {
            return Err(Failure::Stopped);
        }
        Ok(())
    }

    /// `reader`, failing its next read once a stop was asked.
    pub(crate) fn reader<R: Read>(&self, reader: R) -> StopReader<R> {
        StopReader {
            inner: reader,
            stop: self.clone(),
        }
    }
}

/// A reader that fails once a stop was asked, so a read of a large file ends promptly.
pub(crate) struct StopReader<R> {
    inner: R,
    stop: Stop,
}

impl<R: Read> Read for StopReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.stop.is_set() {
            return Err(io::Error::other("stopped"));
        }
        self.inner.read(buf)
    }
}

/// Where a page ended: the last path it held (and, for a search, the last match's line). The
/// wire form is base64url of its JSON, opaque to the functions.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Cursor {
    op: String,
    path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    line: Option<u64>,
}

pub(crate) fn encode_cursor(op: &str, path: &RelativePath, line: Option<u64>) -> String {
    let cursor = Cursor {
        op: op.to_owned(),
        path: path.as_str().to_owned(),
        line,
    };
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&cursor).expect("a cursor serializes"))
}

/// Reads a cursor handed out for `op`: the path the previous page ended at, and its line.
pub(crate) fn decode_cursor(
    op: &str,
    cursor: Option<&str>,
) -> Result<Option<(RelativePath, Option<u64>)>, Refusal> {
    let Some(raw) = cursor else {
        return Ok(None);
    };
    let invalid = || {
        Refusal::new(
            OpErrorKind::InvalidCursor,
            format!("the cursor is not one this runner handed out for {op}"),
        )
    };
    let bytes = URL_SAFE_NO_PAD.decode(raw).map_err(|_| invalid())?;
    let cursor: Cursor = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    if cursor.op != op || cursor.path.is_empty() {
        return Err(invalid());
    }
    let path = RelativePath::parse(&cursor.path).map_err(|_| invalid())?;
    Ok(Some((path, cursor.line)))
}

/// Resolves the `path` of a listing or search: opened beneath the root, its canonical path.
fn resolve_target(
    root: &Root,
    path: Option<&RelativePath>,
    directory_only: bool,
) -> Result<RelativePath, Refusal> {
    let Some(path) = path else {
        return Ok(RelativePath::root());
    };
    let opened = root.open_path(path, true)?;
    match opened.kind() {
        EntryKind::Directory => {}
        EntryKind::File if !directory_only => {}
        EntryKind::Special if !directory_only => {
            return Err(Refusal::at(
                OpErrorKind::SpecialFile,
                path,
                "is a device, FIFO or socket",
            ));
        }
        _ => {
            return Err(Refusal::at(
                OpErrorKind::NotADirectory,
                path,
                "is not a directory",
            ));
        }
    }
    root.canonical(&opened).ok_or_else(|| {
        Refusal::at(
            OpErrorKind::Unreadable,
            path,
            "leads to a place no project path can name",
        )
    })
}

fn list(root: &Root, op: &ListFilesOp, stop: &Stop) -> Result<WorkAnswer, Failure> {
    const OP: &str = "list_files";
    let after = decode_cursor(OP, op.cursor.as_deref())?;
    let target = resolve_target(root, op.path.as_ref(), true)?;
    let glob = op
        .glob
        .as_deref()
        .map(|g| walk::glob(root, g))
        .transpose()?;
    let spec = WalkSpec {
        target: target.as_str(),
        hidden: op.hidden,
        max_depth: None,
        resume: after.as_ref().map(|(p, _)| (p.as_str(), false)),
    };
    let limit = op.limit as usize;
    let mut budget = Budget::new();
    let mut files: Vec<ListedFile> = Vec::new();
    let mut unlisted = 0;
    let mut more = false;
    walk::walk(root, &spec, stop, |entry: Entry<'_>| {
        if entry.kind == EntryKind::Directory {
            return Ok(ControlFlow::Continue(()));
        }
        let Some(rel) = entry.rel.and_then(|r| RelativePath::parse(r).ok()) else {
            unlisted += 1;
            return Ok(ControlFlow::Continue(()));
        };
        if !walk::admits(glob.as_ref(), entry.path) {
            return Ok(ControlFlow::Continue(()));
        }
        if files.len() == limit {
            more = true;
            return Ok(ControlFlow::Break(()));
        }
        // Opened beneath the root again: what the walk met by name may have changed since.
        let Ok(opened) = root.open_raw(rel.as_str(), false) else {
            return Ok(ControlFlow::Continue(()));
        };
        if opened.kind() == EntryKind::Directory {
            return Ok(ControlFlow::Continue(()));
        }
        let file = ListedFile {
            path: rel,
            kind: opened.kind(),
            size: opened.size(),
        };
        if !budget.take(&file) {
            more = true;
            return Ok(ControlFlow::Break(()));
        }
        files.push(file);
        Ok(ControlFlow::Continue(()))
    })?;
    let next_cursor = match files.last() {
        Some(last) if more => Some(encode_cursor(OP, &last.path, None)),
        _ => None,
    };
    Ok(WorkAnswer::ListFiles(FileListAnswer {
        files,
        next_cursor,
        unlisted,
    }))
}

async fn tracked(ctx: &Ctx<'_>, op: &TrackedFilesOp) -> Result<WorkAnswer, Ended> {
    const OP: &str = "tracked_files";
    let after = decode_cursor(OP, op.cursor.as_deref())?;
    let target = resolve_target(&ctx.root, op.path.as_ref(), false)?;
    let git = ctx.git();
    let mut args = vec!["ls-files", "-z"];
    let specs = git.pathspecs(&[target.as_str()]);
    args.extend(specs.iter().map(String::as_str));
    let listed = git.output(&args, MAX_OUTPUT_BYTES_PER_STREAM).await?;
    let mut names: Vec<&[u8]> = listed.stdout.split(|&b| b == 0).collect();
    // The last piece is empty after a complete listing, or cut by the output bound.
    names.pop();
    let limit = op.limit as usize;
    let mut budget = Budget::new();
    let mut files: Vec<RelativePath> = Vec::new();
    let mut unlisted = 0;
    let mut more = false;
    let mut previous: Option<&[u8]> = None;
    for name in names {
        // An unmerged path is listed once per stage, next to itself (the index is sorted).
        if previous == Some(name) {
            continue;
        }
        previous = Some(name);
        if after
            .as_ref()
            .is_some_and(|(a, _)| name <= a.as_str().as_bytes())
        {
            continue;
        }
        let Some(path) = std::str::from_utf8(name)
            .ok()
            .and_then(|n| RelativePath::parse(n).ok())
        else {
            unlisted += 1;
            continue;
        };
        if files.len() == limit || !budget.take(&path) {
            more = true;
            break;
        }
        files.push(path);
    }
    let next_cursor = match files.last() {
        Some(last) if more => Some(encode_cursor(OP, last, None)),
        _ => None,
    };
    Ok(WorkAnswer::TrackedFiles(TrackedFilesAnswer {
        files,
        next_cursor,
        unlisted,
        truncated: listed.stdout_truncated,
    }))
}

/// What one operation shares: the work, the host, the deadline and the stop flag.
pub(crate) struct Ctx<'a> {
    item: &'a WorkItem,
    host: &'a Host,
    policy: &'a StopPolicy,
    cancel: watch::Receiver<bool>,
    deadline: Instant,
    stop: Stop,
    root: Arc<Root>,
}

impl Ctx<'_> {
    /// Git commands of this operation: run as jobs in the project root, within its time left.
    fn git(&self) -> GitJobs<'_> {
        GitJobs {
            item: self.item,
            host: self.host,
            policy: self.policy,
            cancel: self.cancel.clone(),
            deadline: self.deadline,
            hidden: self.root.hidden(),
        }
    }

    /// Runs `f` on a blocking thread until it returns, the deadline passes or a stop is asked;
    /// then the stop flag is set, and `f` stops at its next check.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Root, &Stop) -> Result<T, Failure> + Send + 'static,
    ) -> Result<T, Ended> {
        let root = self.root.clone();
        let stop = self.stop.clone();
        let mut task = tokio::task::spawn_blocking(move || f(&root, &stop));
        let mut cancel = self.cancel.clone();
        let interrupted = tokio::select! {
            joined = &mut task => {
                return match joined {
                    Ok(Ok(answer)) => Ok(answer),
                    Ok(Err(Failure::Refused(refusal))) => Err(Ended::Refused(refusal)),
                    // Only the branches below set the flag.
                    Ok(Err(Failure::Stopped)) => Err(Ended::Cancelled),
                    Err(e) => Err(Ended::Failed(format!("the explore operation failed: {e}"))),
                };
            }
            () = tokio::time::sleep_until(self.deadline.into()) => Ended::TimedOut,
            () = exec::stop_requested(&mut cancel) => Ended::Cancelled,
        };
        self.stop.set();
        // The operation only reads; one stuck in the kernel is left to finish on its own.
        let _ = tokio::time::timeout(self.policy.terminate_grace, task).await;
        Err(interrupted)
    }
}
