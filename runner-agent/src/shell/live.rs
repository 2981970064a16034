//! A live shell: its process, the runner's ends of its pipes, and how one framed command
//! runs in it, from the frame written to the report read, with the one recovery attempt a
//! stopped command gets.
//!
//! Invariants:
//! - a frame is written only by the holder of the shell's [`Io`] (one command at a time);
//! - a frame abandoned in flight ([`InFlight`]) poisons the shell: its framing is unknown;
//! - after a stop, only this frame's report within the grace keeps the shell; anything else
//!   ends it, and an ended shell is never written to again.

use std::path::{Path, PathBuf};
use std::pin::pin;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::unix::pipe;
use tokio::process::ChildStdin;
use tokio::sync::watch;
use uuid::Uuid;
use wc_runner_protocol::{RelativePath, Shell as Dialect, ShellId, ShellState};

use super::frame::{self, BadReport, Report, Token};
use super::output::{Captured, Output};
use super::process::{self, End, Life};
use crate::exec::{self, PrivateDir};

/// How long a shell whose control channel closed, or whose process is gone, has to be seen
/// exiting before it is taken for out of step.
pub(super) const EXIT_GRACE: Duration = Duration::from_secs(2);

/// One open shell: its process, the runner's ends of its pipes, its private directory.
/// Dropping it kills every process it has.
pub(super) struct Shell {
    pub(super) id: ShellId,
    pub(super) project: String,
    /// Where it was opened, relative to the project root.
    pub(super) cwd: RelativePath,
    pub(super) life: Arc<Life>,
    /// The host pid of the shell process, known once it answered its first frame.
    pid: OnceLock<Pid>,
    /// The framing channel, held by the command running.
    pub(super) io: tokio::sync::Mutex<Io>,
    output: Output,
    /// Holds the commands' stdin files.
    pub(super) private: PrivateDir,
    /// `sh` or `bash`: how its frames are written.
    dialect: Dialect,
}

/// The runner's side of the framing: where it writes frames and reads reports.
pub(super) struct Io {
    program: ChildStdin,
    control: BufReader<pipe::Receiver>,
    /// The last command's exit status, restored as `$?` for the next.
    restore: u8,
}

/// One command to frame.
pub(super) struct Command<'a> {
    pub(super) text: &'a str,
    pub(super) stdin: &'a Path,
    pub(super) timeout: Duration,
    /// Bytes of each stream kept.
    pub(super) limit: usize,
}

/// Why a command was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    TimedOut,
    Cancelled,
}

impl Stop {
    /// The stop in words.
    pub(super) fn words(self) -> &'static str {
        match self {
            Stop::TimedOut => "the command ran past its time limit",
            Stop::Cancelled => "the command was cancelled",
        }
    }
}

/// How a framed command ended.
#[derive(Debug)]
pub(super) enum Finish {
    /// It reported its exit status.
    Completed(Report),
    /// It was stopped, interrupted, and reported: the shell is in step again.
    Recovered(Stop, Report),
    /// The shell ended under it (exited, poisoned, closed), stopped first or not.
    Ended(Option<Stop>, End),
}

/// What one command did.
pub(super) struct Ran {
    pub(super) finish: Finish,
    pub(super) stdout: Captured,
    pub(super) stderr: Captured,
    pub(super) duration: Duration,
}

impl Shell {
    /// The shell `started` is, not yet proven.
    pub(super) fn new(
        id: ShellId,
        project: String,
        cwd: RelativePath,
        started: process::Started,
        private: PrivateDir,
        dialect: Dialect,
    ) -> Shell {
        Shell {
            id,
            project,
            cwd,
            life: started.life,
            pid: OnceLock::new(),
            io: tokio::sync::Mutex::new(Io {
                program: started.program,
                control: started.control,
                restore: 0,
            }),
            output: started.output,
            private,
            dialect,
        }
    }

    /// `ready` or `busy` while the shell lives, else how it ended.
    pub(super) fn state(&self) -> ShellState {
        match self.life.ended() {
            Some(end) => end.state,
            None if self.io.try_lock().is_ok() => ShellState::Ready,
            None => ShellState::Busy,
        }
    }

    /// Whether the shell process still runs (taken for granted before it is known).
    pub(super) fn runs(&self) -> bool {
        self.pid.get().is_none_or(|&pid| process::alive(pid))
    }

    /// Runs the first frame, a no-op, and learns the shell's pid: the proof that the shell
    /// reads frames and reports on its control descriptor.
    pub(super) async fn prove(
        &self,
        token: &Token,
        timeout: Duration,
        cancel: &mut watch::Receiver<bool>,
    ) -> Result<(), End> {
        let mut io = self.io.lock().await;
        let command = Command {
            text: ":",
            stdin: Path::new("/dev/null"),
            timeout,
            limit: 0,
        };
        let flight = InFlight::new(&self.life);
        let ran = self
            .run(&mut io, command, token, cancel, Duration::ZERO)
            .await;
        flight.land();
        match ran.finish {
            Finish::Completed(_) => {}
            Finish::Ended(_, end) => return Err(end),
            Finish::Recovered(..) => {
                return Err(self.life.end(End::new(
                    ShellState::Poisoned,
                    "the shell did not answer its first frame in time",
                )));
            }
        }
        match self.life.find_shell() {
            Some(pid) => {
                let _ = self.pid.set(pid);
                Ok(())
            }
            None => Err(self.life.end(End::new(
                ShellState::Poisoned,
                "the shell process cannot be found in its sandbox",
            ))),
        }
    }

    /// Frames `command`, collects its output and learns how it ended.
    pub(super) async fn run(
        &self,
        io: &mut Io,
        command: Command<'_>,
        token: &Token,
        cancel: &mut watch::Receiver<bool>,
        grace: Duration,
    ) -> Ran {
        let started = Instant::now();
        let frame = frame::command(command.text, command.stdin, io.restore, token, self.dialect);
        self.output.begin(command.limit);
        let finish = self
            .exchange(io, &frame, token, command.timeout, cancel, grace)
            .await;
        let (stdout, stderr) = self.output.finish();
        if let Finish::Completed(report) | Finish::Recovered(_, report) = finish {
            io.restore = report.status;
        }
        Ran {
            finish,
            stdout,
            stderr,
            duration: started.elapsed(),
        }
    }

    /// Writes `frame` and waits for its report, the shell's end, the time limit or a cancel;
    /// a stopped command gets one interrupt and `grace` to report.
    async fn exchange(
        &self,
        io: &mut Io,
        frame: &[u8],
        token: &Token,
        timeout: Duration,
        cancel: &mut watch::Receiver<bool>,
        grace: Duration,
    ) -> Finish {
        let mut ended = self.life.subscribe();
        let Io {
            program, control, ..
        } = io;
        let mut report = pin!(async {
            // A shell that stopped reading its program has exited, or is about to.
            program
                .write_all(frame)
                .await
                .map_err(|_| BadReport::Closed)?;
            read_report(control, token).await
        });
        let stop = tokio::select! {
            biased;
            reported = &mut report => return self.reported(reported, None).await,
            end = wait_end(&mut ended) => return Finish::Ended(None, end),
            () = tokio::time::sleep(timeout) => Stop::TimedOut,
            () = exec::stop_requested(cancel) => Stop::Cancelled,
        };
        let Some(&pid) = self.pid.get() else {
            // The first frame: a shell that cannot run `:` in time is not in step.
            let end = End::new(
                ShellState::Poisoned,
                "the shell did not answer its first frame",
            );
            return Finish::Ended(Some(stop), self.life.end(end));
        };
        tracing::info!(reason = ?stop, "interrupting the command");
        process::interrupt(pid);
        tokio::select! {
            biased;
            reported = &mut report => self.reported(reported, Some(stop)).await,
            end = wait_end(&mut ended) => Finish::Ended(Some(stop), end),
            () = tokio::time::sleep(grace) => {
                let end = End::new(
                    ShellState::Poisoned,
                    "the command did not end when interrupted; the shell was killed",
                );
                Finish::Ended(Some(stop), self.life.end(end))
            }
        }
    }

    /// How a command whose report read as `reported` ended.
    async fn reported(&self, reported: Result<Report, BadReport>, stop: Option<Stop>) -> Finish {
        let bad = match (reported, stop) {
            (Ok(status), None) => return Finish::Completed(status),
            (Ok(status), Some(stop)) => return Finish::Recovered(stop, status),
            (Err(bad), _) => bad,
        };
        let end = match bad {
            BadReport::Closed => {
                // Nothing holds the control pipe: the shell is exiting, or it broke its framing.
                let mut ended = self.life.subscribe();
                match tokio::time::timeout(EXIT_GRACE, wait_end(&mut ended)).await {
                    Ok(end) => end,
                    Err(_) => self
                        .life
                        .end(End::new(ShellState::Poisoned, bad.to_string())),
                }
            }
            BadReport::Garbage | BadReport::Unreadable(_) => self
                .life
                .end(End::new(ShellState::Poisoned, bad.to_string())),
        };
        Finish::Ended(stop, end)
    }
}

impl Drop for Shell {
    fn drop(&mut self) {
        self.life.kill();
    }
}

/// A frame in flight. Dropped before it lands (its work was abandoned mid-command), it poisons
/// the shell: whether the shell read the frame, and where it is in it, is unknown.
pub(super) struct InFlight<'a> {
    life: &'a Life,
    landed: bool,
}

impl<'a> InFlight<'a> {
    /// A frame about to be written to the shell `life` is.
    pub(super) fn new(life: &'a Life) -> Self {
        Self {
            life,
            landed: false,
        }
    }

    /// The frame's command ended, one way or another.
    pub(super) fn land(mut self) {
        self.landed = true;
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.landed {
            let end = End::new(ShellState::Poisoned, "the command's work was abandoned");
            self.life.end(end);
        }
    }
}

/// A command's stdin: a private file holding the given text, removed when dropped, or
/// `/dev/null` when there is none.
pub(super) struct Input {
    pub(super) path: PathBuf,
    owned: bool,
}

impl Input {
    /// The stdin of a command given `text`, in `dir`.
    pub(super) fn new(dir: &PrivateDir, text: Option<&str>) -> std::io::Result<Input> {
        let Some(text) = text.filter(|t| !t.is_empty()) else {
            return Ok(Input {
                path: PathBuf::from("/dev/null"),
                owned: false,
            });
        };
        let name = format!("stdin-{}", Uuid::new_v4().simple());
        Ok(Input {
            path: dir.write(&name, text.as_bytes())?,
            owned: true,
        })
    }
}

impl Drop for Input {
    fn drop(&mut self) {
        if self.owned
            && let Err(e) = std::fs::remove_file(&self.path)
        {
            tracing::warn!(error = %e, "cannot remove a command's stdin file");
        }
    }
}

/// Resolves with the shell's end once it is set.
pub(super) async fn wait_end(ended: &mut watch::Receiver<Option<End>>) -> End {
    loop {
        if let Some(end) = ended.borrow_and_update().clone() {
            return end;
        }
        if ended.changed().await.is_err() {
            // The shell's life, which holds the sender, is gone: no end will come this way.
            std::future::pending::<()>().await;
        }
    }
}

/// Reads one report line (bounded) from the control pipe and checks it against `token`.
async fn read_report(
    control: &mut BufReader<pipe::Receiver>,
    token: &Token,
) -> Result<Report, BadReport> {
    let mut line = Vec::new();
    let read = control
        .take(frame::MAX_REPORT_BYTES)
        .read_until(b'\n', &mut line)
        .await;
    match read {
        Ok(0) => Err(BadReport::Closed),
        Ok(_) => frame::report(&line, token),
        Err(e) => Err(BadReport::Unreadable(e.to_string())),
    }
}
