//! Git work: the status, diff and history of the project's repository, and commits of its
//! changes ([`GitOp`]), answered with a typed [`WorkAnswer`].
//!
//! [`execute`] answers one Git work item under the same lease, timeout, stop and result path
//! as a job, and always ends with a [`WorkOutcome`]: `exited` with exit code 0 and the answer,
//! `rejected` with an [`OpErrorKind`] and words naming the problem, or `timed_out` /
//! `cancelled`. Invariants:
//!
//! - Git runs only as a job ([`job`]): the `git` binary in the sandbox, with the allow-list
//!   environment, bounded output and the work's time limit, never in the runner's process
//!   nor through a library in it, because a repository's configuration and hooks name
//!   programs for Git to run;
//! - a path the work names is first opened beneath the project root (explore's
//!   `beneath::Root`): one that leads out through a symlink, or is hidden from the project, is
//!   refused before Git sees it; Git then reads it as a literal path (`:(literal)`) after
//!   `--`, and every path hidden from the project is excluded from what Git shows, stages and
//!   commits ([`job::GitJobs::pathspecs`]);
//! - Git runs only where the project's `.git` leads to metadata inside the root or registered
//!   with the project; anything else is refused (`git_metadata_outside_project`);
//! - every path of an answer is relative to the project root, also when the root is a
//!   directory inside a larger repository, and only that directory's files are looked at or
//!   committed.

mod checkpoint;
mod commit;
mod diff;
pub(crate) mod job;
mod log;
mod restore;
pub(crate) mod status;
mod summary;

use std::time::{Duration, Instant};

use tokio::sync::watch;
use wc_runner_protocol::{
    GitOp, MAX_OUTPUT_BYTES_PER_STREAM, OpErrorKind, RelativePath, Termination, WorkAnswer,
    WorkItem, WorkOutcome, WorkSpec,
};

use crate::answer::{self, Ended, Refusal};
use crate::beneath::Root;
use crate::config::GitIdentity;
use crate::exec::{self, Host, StopPolicy};

use job::GitJobs;

/// Whether this host can run Git work: paths can be confined beneath a root (as for explore
/// work) and a `git` program is on the runner's `PATH` (which jobs inherit). The agent
/// announces the kind only then.
pub fn supported() -> bool {
    let path = std::env::var_os("PATH");
    let git = crate::program::program_path("git", std::path::Path::new("/"), path.as_deref());
    let found = crate::program::is_executable_file(std::path::Path::new(&git));
    if !found {
        tracing::warn!("git work is not supported on this host: no `git` on the runner's PATH");
    }
    found && crate::beneath::supported()
}

/// Answers one Git work item, committing as `identity`. `cancel` turning `true` stops it; its
/// timeout is the item's. Never fails: a refusal is [`Termination::Rejected`] with an
/// [`OpErrorKind`].
pub async fn execute(
    item: &WorkItem,
    host: &Host,
    identity: &GitIdentity,
    cancel: watch::Receiver<bool>,
    policy: &StopPolicy,
) -> WorkOutcome {
    answer::traced("git", item, run(item, host, identity, cancel, policy)).await
}

async fn run(
    item: &WorkItem,
    host: &Host,
    identity: &GitIdentity,
    cancel: watch::Receiver<bool>,
    policy: &StopPolicy,
) -> WorkOutcome {
    let started = Instant::now();
    let picked = answer::op_of(item, "git", |spec| match spec {
        WorkSpec::Git(op) => Some(op),
        _ => None,
    });
    let op = match picked {
        Ok(op) => op,
        Err(refusal) => return answer::rejected(started, refusal),
    };
    let boundary = match host.boundary(&item.project) {
        Ok(boundary) => boundary,
        Err(e) => {
            let refusal = Refusal::new(OpErrorKind::ProjectUnavailable, e.to_string());
            return answer::rejected(started, refusal);
        }
    };
    // Git would read and write metadata the project does not own: refused, as jobs run
    // without it.
    if let Some(notice) = boundary.git_metadata_notice() {
        return answer::rejected(started, Refusal::new(notice.kind, notice.message));
    }
    let root = match Root::open(&boundary) {
        Ok(root) => root,
        Err(e) => {
            let refusal = Refusal::new(
                OpErrorKind::ProjectUnavailable,
                format!("the project root cannot be opened: {e}"),
            );
            return answer::rejected(started, refusal);
        }
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
        root,
        identity,
    };
    let ended = match op {
        GitOp::GitStatus(_) => git_status(&ctx).await,
        GitOp::GitDiff(op) => diff::run(&ctx, op).await,
        GitOp::GitLog(op) => log::run(&ctx, op).await,
        GitOp::GitCommit(op) => commit::run(&ctx, op).await,
        GitOp::GitCreateCheckpoint(op) => checkpoint::create(&ctx, op).await,
        GitOp::GitListCheckpoints(op) => checkpoint::list(&ctx, op).await,
        GitOp::GitDiffCheckpoint(op) => checkpoint::diff(&ctx, op).await,
        GitOp::GitRestoreCheckpoint(op) => checkpoint::restore(&ctx, op).await,
        GitOp::GitDeleteCheckpoints(op) => checkpoint::delete(&ctx, op).await,
        GitOp::GitRestorePaths(op) => restore::paths(&ctx, op).await,
        GitOp::GitDiscardUntracked(op) => restore::untracked(&ctx, op).await,
        GitOp::GitDiffSummary(op) => summary::run(&ctx, op).await,
    };
    answer::outcome(started, ended)
}

/// What one Git operation shares: the work, the host, the deadline, the root held open and
/// the author of commits.
pub(crate) struct Ctx<'a> {
    item: &'a WorkItem,
    host: &'a Host,
    policy: &'a StopPolicy,
    cancel: watch::Receiver<bool>,
    deadline: Instant,
    root: Root,
    identity: &'a GitIdentity,
}

impl Ctx<'_> {
    /// Git commands of this operation: run as jobs in the project root, within its time left.
    fn jobs(&self) -> GitJobs<'_> {
        GitJobs {
            item: self.item,
            host: self.host,
            policy: self.policy,
            cancel: self.cancel.clone(),
            deadline: self.deadline,
            hidden: self.root.hidden(),
        }
    }

    /// Refuses a named path that leads outside the project root through a symlink, or that is
    /// hidden from the project. A path that does not exist (a deleted file) is Git's to judge.
    fn check_beneath(&self, paths: &[RelativePath]) -> Result<(), Refusal> {
        for path in paths {
            if let Err(refusal) = self.root.open_path(path, true)
                && matches!(
                    refusal.kind,
                    OpErrorKind::PathOutsideRoot | OpErrorKind::PathHidden
                )
            {
                return Err(refusal);
            }
        }
        Ok(())
    }
}

/// A repository whose metadata jobs cannot write: in the sandbox only the project root (and
/// the Git metadata its own `.git` file names) is writable, so a project that is a part of a
/// larger repository cannot commit to it.
pub(super) fn read_only(said: &str) -> Refusal {
    Refusal::new(
        OpErrorKind::GitUnavailable,
        format!(
            "the repository's metadata is read-only to jobs here (it lies outside the project \
             root, the only place a sandboxed job writes): {said}"
        ),
    )
}

/// The named paths as [`GitJobs::pathspecs`] takes them: the root itself when none is named.
fn named(paths: &[RelativePath]) -> Vec<&str> {
    if paths.is_empty() {
        return vec![""];
    }
    paths.iter().map(RelativePath::as_str).collect()
}

async fn git_status(ctx: &Ctx<'_>) -> Result<WorkAnswer, Ended> {
    let jobs = ctx.jobs();
    let (prefix, state) = tokio::join!(
        jobs.prefix(),
        status::query(&jobs, MAX_OUTPUT_BYTES_PER_STREAM)
    );
    let (prefix, state) = (prefix?, state?);
    Ok(WorkAnswer::GitStatus(state.parse().answer(&prefix)))
}
