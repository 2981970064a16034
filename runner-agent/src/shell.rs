//! Persistent shells: long-lived `sh` or `bash` processes, each opened, driven and closed by
//! [`WorkSpec::PersistentShell`] work and answered by the runner itself with a
//! [`ShellAnswer`](wc_runner_protocol::ShellAnswer), whatever a command's exit status.
//!
//! [`Shells`] is the registry of one runner process (one runner instance): shell id → shell.
//! A command runs in the shell process itself ([`frame`]), so what it changes (cwd, exports,
//! functions, variables, umask) stays for the next one.
//!
//! Invariants:
//! - a shell is confined exactly like a job, through the same spawn path ([`process`]);
//! - a command's end is read from a private control descriptor carrying a per-command token,
//!   never from its output ([`frame`]); its output is cut at exact boundaries ([`output`]);
//! - one command at a time per shell: a second is refused `shell_busy`;
//! - a command that runs past its time limit, or whose work is cancelled, gets one bounded
//!   recovery attempt: SIGINT to the shell's descendants, then this frame's report within the
//!   stop policy's interrupt grace. Otherwise the shell is `poisoned`: killed with everything
//!   it started, and never written to again;
//! - a shell that ended (`exited`, `poisoned`, `closed`) holds no process, and its id never
//!   opens another shell in this process;
//! - work for a shell this instance does not hold is answered `lost`, never an error;
//! - only ids, actions, states and durations are logged, never a command or its output.

mod frame;
mod live;
mod output;
mod process;
mod reply;

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tracing::Instrument as _;
use uuid::Uuid;
use wc_runner_protocol::{
    MAX_ANSWER_BYTES, OpErrorKind, RelativePath, ShellExecOp, ShellId, ShellOp, ShellOpenOp,
    ShellState, ShellTarget, WorkAnswer, WorkItem, WorkOutcome, WorkSpec,
};

use crate::answer::{self, Ended, Refusal};
use crate::confine::{self, CwdError};
use crate::exec::{Host, PrivateDir, StopPolicy};

use frame::Token;
use live::{Command, EXIT_GRACE, InFlight, Input, Shell, wait_end};
use process::End;
use reply::{Reply, millis};

/// Most bytes of each stream an exec answer keeps, whatever the work's limit: even at JSON's
/// worst escaping (six bytes for a control byte) both streams fit the answer's bound.
const MAX_KEPT_BYTES: usize = (MAX_ANSWER_BYTES - 64 * 1024) / 12;

/// Ended shells remembered, so that later work learns how one ended rather than `lost`.
const MAX_RETIRED: usize = 1024;

/// The persistent shells of one runner process, by id.
pub struct Shells {
    host: Arc<Host>,
    instance_id: Uuid,
    /// Its `interrupt_grace` is how long an interrupted command has to report.
    policy: StopPolicy,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    live: HashMap<ShellId, Slot>,
    retired: Retired,
    /// Set by [`Shells::close_all`]: no shell opens any more.
    released: bool,
}

enum Slot {
    /// Being started by an open.
    Opening,
    Open(Arc<Shell>),
}

impl Shells {
    /// No shells yet, for the runner instance `instance_id` on `host`.
    pub fn new(host: Arc<Host>, instance_id: Uuid, policy: StopPolicy) -> Shells {
        Shells {
            host,
            instance_id,
            policy,
            table: Mutex::default(),
        }
    }

    /// Answers one persistent-shell work item. `cancel` turning `true` interrupts a running
    /// command (one recovery attempt, as after a timeout) or abandons an open.
    ///
    /// Never fails: an answered operation is [`wc_runner_protocol::Termination::Exited`] with
    /// a [`WorkAnswer::Shell`] (also when the command failed, timed out, or the shell ended),
    /// a refusal is `rejected` with an [`OpErrorKind`], a shell that cannot start is
    /// `spawn_failed`.
    pub async fn execute(&self, item: &WorkItem, cancel: watch::Receiver<bool>) -> WorkOutcome {
        answer::traced("persistent_shell", item, self.run(item, cancel)).await
    }

    /// Closes every shell and opens no more: the runner is stopping, or its instance was
    /// replaced. A command running in one answers `closed`.
    pub fn close_all(&self) {
        let open: Vec<Arc<Shell>> = {
            let mut table = self.table();
            table.released = true;
            table
                .live
                .drain()
                .filter_map(|(_, slot)| match slot {
                    Slot::Open(shell) => Some(shell),
                    // Its open finds the slot gone and ends what it started.
                    Slot::Opening => None,
                })
                .collect()
        };
        for shell in open {
            shell
                .life
                .end(End::new(ShellState::Closed, "the runner is stopping"));
            self.retire(&shell);
        }
    }

    async fn run(&self, item: &WorkItem, cancel: watch::Receiver<bool>) -> WorkOutcome {
        let started = Instant::now();
        let picked = answer::op_of(item, "persistent shell", |spec| match spec {
            WorkSpec::PersistentShell(op) => Some(op),
            _ => None,
        });
        let op = match picked {
            Ok(op) => op,
            Err(refusal) => return answer::rejected(started, refusal),
        };
        let span = tracing::info_span!(
            "shell",
            shell_id = %op.target().shell_id,
            action = op.name()
        );
        let replied = self.reply(item, op, cancel).instrument(span.clone()).await;
        let mut notices = Vec::new();
        let answered = replied.map(|reply| {
            span.in_scope(|| {
                tracing::info!(
                    state = reply.state.as_str(),
                    duration_ms = millis(started.elapsed()),
                    "shell operation answered"
                );
            });
            notices.clone_from(&reply.notices);
            WorkAnswer::Shell(reply.answer(op.name()))
        });
        WorkOutcome {
            notices,
            ..answer::outcome(started, answered)
        }
    }

    async fn reply(
        &self,
        item: &WorkItem,
        op: &ShellOp,
        cancel: watch::Receiver<bool>,
    ) -> Result<Reply, Ended> {
        match op {
            ShellOp::ShellOpen(open) => self.open(item, open, cancel).await,
            ShellOp::ShellExec(exec) => self.exec(item, exec, cancel).await,
            ShellOp::ShellStatus(target) => self.status(item, target).await,
            ShellOp::ShellClose(target) => Ok(self.close(target)),
        }
    }

    /// Starts the shell in the item's cwd and proves its framing with a first no-op frame;
    /// an id already known answers the state of its shell.
    async fn open(
        &self,
        item: &WorkItem,
        op: &ShellOpenOp,
        mut cancel: watch::Receiver<bool>,
    ) -> Result<Reply, Ended> {
        if op.target.instance_id != self.instance_id {
            return Ok(Reply::lost(
                "the open was meant for another runner instance",
            ));
        }
        let claim = match self.claim(&op.target.shell_id) {
            Ok(claim) => claim,
            Err(Held::Open(shell)) => {
                return Ok(match shell.life.ended() {
                    Some(end) => Reply::ended(&end),
                    None => Reply {
                        cwd: Some(shell.cwd.clone()),
                        ..Reply::state(shell.state())
                    },
                });
            }
            Err(Held::Opening) => return Ok(Reply::state(ShellState::Opening)),
            Err(Held::Retired(end)) => return Ok(Reply::ended(&end)),
            Err(Held::Lost(why)) => return Ok(Reply::lost(why)),
        };
        if *cancel.borrow() {
            // Nothing started; the id stays free.
            let end = End::new(
                ShellState::Closed,
                "the open was cancelled before it started",
            );
            return Ok(Reply::ended(&end));
        }
        let resolved = self.host.boundary(&item.project).and_then(|b| {
            let cwd = confine::resolve_cwd(b.root(), item.cwd.as_ref())?;
            Ok((b, cwd))
        });
        let (boundary, cwd) = resolved.map_err(refusal)?;
        let relative = relative_to(boundary.root(), &cwd)
            .or_else(|| item.cwd.clone())
            .unwrap_or_else(RelativePath::root);
        let token = token()?;
        let private = PrivateDir::create("wc-shell")
            .map_err(|e| Ended::Failed(format!("cannot make the shell's directory: {e}")))?;
        let started = process::start(process::Start {
            host: &self.host,
            item,
            dialect: op.shell,
            boundary: &boundary,
            cwd: &cwd,
            private: private.path(),
        })
        .await
        .map_err(|e| Ended::Failed(format!("cannot start `{}`: {e}", op.shell.program())))?;
        let notices = started.notices.clone();
        let shell = Arc::new(Shell::new(
            op.target.shell_id.clone(),
            item.project.clone(),
            relative,
            started,
            private,
            op.shell,
        ));
        let timeout = Duration::from_millis(item.limits.timeout_ms);
        if let Err(end) = shell.prove(&token, timeout, &mut cancel).await {
            claim.retire(end.clone());
            return Ok(Reply::ended(&end));
        }
        if !claim.install(shell.clone()) {
            // Closed (or every shell released) while it opened.
            let end = shell
                .life
                .end(End::new(ShellState::Closed, "closed while it opened"));
            self.retire(&shell);
            return Ok(Reply::ended(&end));
        }
        Ok(Reply {
            cwd: Some(shell.cwd.clone()),
            notices,
            ..Reply::state(ShellState::Ready)
        })
    }

    /// Runs one command in an open shell.
    async fn exec(
        &self,
        item: &WorkItem,
        op: &ShellExecOp,
        mut cancel: watch::Receiver<bool>,
    ) -> Result<Reply, Ended> {
        self.served(&item.project)?;
        let shell = match self.held(&op.target, &item.project) {
            Held::Open(shell) => shell,
            Held::Opening => {
                return Err(
                    Refusal::new(OpErrorKind::ShellBusy, "the shell is still opening").into(),
                );
            }
            Held::Retired(end) => return Ok(Reply::ended(&end)),
            Held::Lost(why) => return Ok(Reply::lost(why)),
        };
        if *cancel.borrow() {
            return Ok(Reply {
                detail: Some("the command was cancelled before it started".into()),
                ..Reply::state(shell.state())
            });
        }
        let token = token()?;
        let input = Input::new(&shell.private, item.stdin.as_deref())
            .map_err(|e| Ended::Failed(format!("cannot write the command's stdin: {e}")))?;
        let Ok(mut io) = shell.io.try_lock() else {
            return Err(Refusal::new(
                OpErrorKind::ShellBusy,
                "the shell is running another command",
            )
            .into());
        };
        if let Some(end) = shell.life.ended() {
            drop(io);
            self.retire(&shell);
            return Ok(Reply::ended(&end));
        }
        let command = Command {
            text: &op.command,
            stdin: &input.path,
            timeout: Duration::from_millis(item.limits.timeout_ms),
            limit: kept_limit(item),
        };
        let flight = InFlight::new(&shell.life);
        let ran = shell
            .run(
                &mut io,
                command,
                &token,
                &mut cancel,
                self.policy.interrupt_grace,
            )
            .await;
        flight.land();
        drop(io);
        if shell.life.ended().is_some() {
            self.retire(&shell);
        }
        Ok(Reply::ran(ran))
    }

    /// The shell's state now; a shell whose process is gone is `exited`.
    async fn status(&self, item: &WorkItem, target: &ShellTarget) -> Result<Reply, Ended> {
        self.served(&item.project)?;
        let shell = match self.held(target, &item.project) {
            Held::Open(shell) => shell,
            Held::Opening => return Ok(Reply::state(ShellState::Opening)),
            Held::Retired(end) => return Ok(Reply::ended(&end)),
            Held::Lost(why) => return Ok(Reply::lost(why)),
        };
        if shell.life.ended().is_none() && !shell.runs() {
            // Gone, and its exit not seen yet: the watcher reaps it in a moment.
            let mut ended = shell.life.subscribe();
            if tokio::time::timeout(EXIT_GRACE, wait_end(&mut ended))
                .await
                .is_err()
            {
                shell
                    .life
                    .end(End::new(ShellState::Exited, "the shell process is gone"));
            }
        }
        if let Some(end) = shell.life.ended() {
            self.retire(&shell);
            return Ok(Reply::ended(&end));
        }
        Ok(Reply::state(shell.state()))
    }

    /// Kills the shell's processes and closes its pipes; any id answers `closed`.
    fn close(&self, target: &ShellTarget) -> Reply {
        let slot = self.table().live.remove(&target.shell_id);
        match slot {
            Some(Slot::Open(shell)) => {
                shell
                    .life
                    .end(End::new(ShellState::Closed, "closed on request"));
                self.retire(&shell);
            }
            Some(Slot::Opening) => {
                let end = End::new(ShellState::Closed, "closed while it opened");
                self.table().retired.insert(target.shell_id.clone(), end);
            }
            None => {}
        }
        Reply::state(ShellState::Closed)
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // Every change to the table is a single insert or remove; a panic leaves it whole.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Refuses work for a project this host no longer serves (or whose root is gone).
    fn served(&self, project: &str) -> Result<(), Refusal> {
        self.host
            .boundary(project)
            .map(drop)
            .map_err(|e| Refusal::new(OpErrorKind::ProjectUnavailable, e.to_string()))
    }

    /// What this process holds under `target` for `project`.
    fn held(&self, target: &ShellTarget, project: &str) -> Held {
        if target.instance_id != self.instance_id {
            return Held::Lost("the shell belongs to another runner instance");
        }
        let table = self.table();
        match table.live.get(&target.shell_id) {
            Some(Slot::Open(shell)) if shell.project == project => Held::Open(shell.clone()),
            Some(Slot::Open(_)) => Held::Lost("this runner holds no such shell for the project"),
            Some(Slot::Opening) => Held::Opening,
            None => match table.retired.get(&target.shell_id) {
                Some(end) => Held::Retired(end.clone()),
                None => Held::Lost("this runner instance holds no such shell"),
            },
        }
    }

    /// Reserves `id` for an open, or answers what it already names.
    fn claim(&self, id: &ShellId) -> Result<Claim<'_>, Held> {
        let mut table = self.table();
        match table.live.get(id) {
            Some(Slot::Opening) => return Err(Held::Opening),
            Some(Slot::Open(shell)) => return Err(Held::Open(shell.clone())),
            None => {}
        }
        if let Some(end) = table.retired.get(id) {
            return Err(Held::Retired(end.clone()));
        }
        if table.released {
            let end = End::new(ShellState::Closed, "the runner is stopping");
            return Err(Held::Retired(end));
        }
        table.live.insert(id.clone(), Slot::Opening);
        Ok(Claim {
            shells: self,
            id: id.clone(),
            settled: false,
        })
    }

    /// Moves an ended shell to the retired ones; its last holder's drop releases the rest.
    fn retire(&self, shell: &Arc<Shell>) {
        let Some(end) = shell.life.ended() else {
            return;
        };
        let mut table = self.table();
        if matches!(table.live.get(&shell.id), Some(Slot::Open(s)) if Arc::ptr_eq(s, shell)) {
            table.live.remove(&shell.id);
        }
        table.retired.insert(shell.id.clone(), end);
    }
}

/// What this process holds under an id.
enum Held {
    Open(Arc<Shell>),
    Opening,
    Retired(End),
    Lost(&'static str),
}

/// An id reserved by an open until it installs its shell; dropped unsettled (a failed or
/// abandoned open), it frees the id.
struct Claim<'a> {
    shells: &'a Shells,
    id: ShellId,
    settled: bool,
}

impl Claim<'_> {
    /// Puts `shell` under the id; `false` when the id was closed (or every shell released)
    /// meanwhile.
    fn install(mut self, shell: Arc<Shell>) -> bool {
        self.settled = true;
        let mut table = self.shells.table();
        if table.released || !matches!(table.live.get(&self.id), Some(Slot::Opening)) {
            return false;
        }
        table.live.insert(self.id.clone(), Slot::Open(shell));
        true
    }

    /// Records that the shell opened under the id ended as `end`.
    fn retire(mut self, end: End) {
        self.settled = true;
        let mut table = self.shells.table();
        if matches!(table.live.get(&self.id), Some(Slot::Opening)) {
            table.live.remove(&self.id);
        }
        table.retired.insert(self.id.clone(), end);
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let mut table = self.shells.table();
        if matches!(table.live.get(&self.id), Some(Slot::Opening)) {
            table.live.remove(&self.id);
        }
    }
}

/// How the most recent shells that ended here ended, oldest forgotten first.
#[derive(Default)]
struct Retired {
    order: VecDeque<ShellId>,
    ends: HashMap<ShellId, End>,
}

impl Retired {
    fn get(&self, id: &ShellId) -> Option<&End> {
        self.ends.get(id)
    }

    /// Records `end` for `id` unless an end is recorded already (the first end is the truth).
    fn insert(&mut self, id: ShellId, end: End) {
        if self.ends.contains_key(&id) {
            return;
        }
        self.ends.insert(id.clone(), end);
        self.order.push_back(id);
        if self.order.len() > MAX_RETIRED
            && let Some(oldest) = self.order.pop_front()
        {
            self.ends.remove(&oldest);
        }
    }
}

fn token() -> Result<Token, Ended> {
    Token::generate().map_err(|e| Ended::Failed(format!("cannot make a frame token: {e}")))
}

/// The refusal of an open whose cwd cannot be used.
fn refusal(e: CwdError) -> Ended {
    let kind = match &e {
        CwdError::UnknownProject(_)
        | CwdError::RootUnavailable { .. }
        | CwdError::RootMoved { .. } => OpErrorKind::ProjectUnavailable,
        CwdError::Missing(_) => OpErrorKind::NotFound,
        CwdError::NotADirectory(_) => OpErrorKind::NotADirectory,
        CwdError::Escapes => OpErrorKind::PathOutsideRoot,
        CwdError::Unresolvable { .. } => OpErrorKind::Unreadable,
    };
    Refusal::new(kind, e.to_string()).into()
}

/// `cwd` relative to `root`, when it can be written as a project-relative path.
fn relative_to(root: &Path, cwd: &Path) -> Option<RelativePath> {
    RelativePath::parse(cwd.strip_prefix(root).ok()?.to_str()?).ok()
}

/// Bytes of each stream an exec keeps.
fn kept_limit(item: &WorkItem) -> usize {
    usize::try_from(item.limits.output_bytes_per_stream)
        .unwrap_or(usize::MAX)
        .min(MAX_KEPT_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wc_runner_protocol::{ShellAnswer, ShellExecResult};

    #[test]
    fn retired_shells_keep_their_first_end_and_the_oldest_are_forgotten() {
        let mut r = Retired::default();
        let first = ShellId::generate();
        r.insert(first.clone(), End::new(ShellState::Exited, "exit"));
        r.insert(first.clone(), End::new(ShellState::Closed, "close"));
        assert_eq!(r.get(&first).map(|e| e.state), Some(ShellState::Exited));
        for _ in 0..MAX_RETIRED {
            r.insert(ShellId::generate(), End::new(ShellState::Closed, "x"));
        }
        assert!(r.get(&first).is_none());
        assert_eq!(r.ends.len(), MAX_RETIRED);
    }

    #[test]
    fn kept_output_fits_the_answer_at_the_worst_escaping() {
        let worst = "\u{1}".repeat(MAX_KEPT_BYTES);
        let answer = WorkAnswer::Shell(ShellAnswer {
            action: "shell_exec".into(),
            state: ShellState::Ready,
            cwd: None,
            exec: Some(ShellExecResult {
                exit_code: Some(0),
                status_proven: true,
                timed_out: false,
                recovered: false,
                stdout: worst.clone(),
                stderr: worst,
                stdout_bytes: u64::MAX,
                stderr_bytes: u64::MAX,
                stdout_truncated: true,
                stderr_truncated: true,
                duration_ms: u64::MAX,
            }),
            detail: Some("d".repeat(1000)),
        });
        answer.validate().unwrap();
    }
}
