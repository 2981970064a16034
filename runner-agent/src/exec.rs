//! Execution of one work item on this host: confinement, spawn, output capture, limits and stop.
//!
//! [`execute`] runs a [`WorkItem`] to its end and always answers with a [`WorkOutcome`]; a
//! refusal or a failed start is an outcome too, never an error. Invariants:
//!
//! - nothing starts before [`WorkItem::validate`] and [`confine::resolve_cwd`] pass;
//! - a child's environment is an allow list (`child_env`): the base set every job gets, the
//!   names the runner configuration passes for its project, and the work's own additions;
//!   nothing else of the runner's environment reaches it;
//! - each job is confined by the host's [`Sandbox`](crate::sandbox::Sandbox); every signal the
//!   runner sends goes to all of the job's processes
//!   ([`Containment`](crate::sandbox::Containment)), so the background processes of a command,
//!   detached or not, end with it;
//! - at most `output_bytes_per_stream` bytes of each stream are kept (its head); the rest is read,
//!   counted and dropped, so a chatty child never blocks on a full pipe;
//! - when [`execute`] returns, the leader has been reaped and every other process of the job
//!   killed.

mod env;
mod host;
mod job;
mod private;
mod spawn;
mod stop;
mod streams;

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt as _;
use std::pin::pin;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};
use tracing::Instrument as _;
use wc_runner_protocol::{Stream, Termination, WorkItem, WorkOutcome, WorkSpec};

use crate::confine;
use crate::sandbox::SandboxMode;

pub(crate) use env::child_env;
pub use host::Host;
pub(crate) use job::Job;
pub(crate) use private::PrivateDir;
use private::ScriptFile;
pub(crate) use spawn::{Inherit, Launch, sandboxed_status, spawn};
pub use stop::StopPolicy;
pub(crate) use stop::stop_requested;
use stop::supervise;
pub use streams::OutputPiece;
use streams::{Capture, feed};

/// Longest `error` text an outcome carries, in bytes.
const MAX_ERROR_BYTES: usize = 1000;

/// Executes one work item to its end.
///
/// `host` names the projects (runner-local ids to canonical roots), what environment their jobs
/// receive and the sandbox they run in. `cancel` turning `true`
/// stops the work (a dropped sender never does; `true` before the start means it never starts).
/// Kept output goes to `output` in order per stream; when the receiver is gone the work still
/// runs and the pieces are dropped. The receiver should be drained concurrently: a full channel
/// holds back reading, and output still unsent when the run ends may be lost.
///
/// Never panics on bad input and never fails: a refusal is [`Termination::Rejected`] and a
/// failed start [`Termination::SpawnFailed`], each with `error` naming the problem.
pub async fn execute(
    item: &WorkItem,
    host: &Host,
    cancel: watch::Receiver<bool>,
    output: mpsc::Sender<OutputPiece>,
    policy: &StopPolicy,
) -> WorkOutcome {
    let span = tracing::info_span!("execute", work_id = %item.work_id, project = %item.project);
    let outcome = run(item, host, cancel, output, policy)
        .instrument(span.clone())
        .await;
    span.in_scope(|| {
        tracing::info!(
            termination = ?outcome.termination,
            exit_code = outcome.exit_code,
            signal = outcome.signal,
            error = outcome.error.as_deref(),
            duration_ms = outcome.duration_ms,
            "work ended"
        );
    });
    outcome
}

async fn run(
    item: &WorkItem,
    host: &Host,
    mut cancel: watch::Receiver<bool>,
    output: mpsc::Sender<OutputPiece>,
    policy: &StopPolicy,
) -> WorkOutcome {
    let started = Instant::now();
    if let Err(e) = item.validate() {
        return not_started(started, Termination::Rejected, Some(e.to_string()));
    }
    // The boundary is what the sandbox opens; the cwd is where the work starts, inside it.
    let resolved = host.boundary(&item.project).and_then(|b| {
        let cwd = confine::resolve_cwd(b.root(), item.cwd.as_ref())?;
        Ok((b, cwd))
    });
    let (boundary, cwd) = match resolved {
        Ok(found) => found,
        Err(e) => return not_started(started, Termination::Rejected, Some(e.to_string())),
    };
    if *cancel.borrow() {
        return not_started(started, Termination::Cancelled, None);
    }

    // Held until the end of the run: `sh` and friends read a script while running it.
    let mut script_file = None;
    // The child's PATH: the work's own, else the runner's (PATH is never held back).
    let search_path = item
        .env
        .get("PATH")
        .map(OsString::from)
        .or_else(|| std::env::var_os("PATH"));
    let find = |name: &str| crate::program::program_path(name, &cwd, search_path.as_deref());
    let (name, program, args): (&str, OsString, Vec<OsString>) = match &item.spec {
        WorkSpec::Process { argv } => (
            &argv[0],
            find(&argv[0]),
            argv[1..].iter().map(OsString::from).collect(),
        ),
        WorkSpec::Shell { shell, command } => (
            shell.program(),
            find(shell.program()),
            vec!["-c".into(), command.into()],
        ),
        WorkSpec::Script {
            interpreter,
            script,
            args,
        } => {
            let file = match ScriptFile::write(script) {
                Ok(file) => file,
                Err(e) => {
                    return not_started(
                        started,
                        Termination::SpawnFailed,
                        Some(format!("cannot write the script file: {e}")),
                    );
                }
            };
            let mut all = vec![file.path.clone().into_os_string()];
            all.extend(args.iter().map(OsString::from));
            script_file = Some(file);
            (interpreter, find(interpreter), all)
        }
        WorkSpec::Explore(_)
        | WorkSpec::Edit(_)
        | WorkSpec::Validate(_)
        | WorkSpec::PersistentShell(_)
        | WorkSpec::Workspace(_) => {
            return not_started(
                started,
                Termination::Rejected,
                Some(format!(
                    "{} work is executed by the runner itself, not run as a job",
                    item.spec.kind().as_str()
                )),
            );
        }
        WorkSpec::Git(_) => {
            return not_started(
                started,
                Termination::Rejected,
                Some("git work is answered by the runner itself, not run as a job".into()),
            );
        }
    };

    let sandboxed = host.sandbox.mode() == SandboxMode::Bubblewrap;
    let env = child_env(host, item, sandboxed);
    let launch = Launch {
        name,
        program: &program,
        args: &args,
        boundary: &boundary,
        cwd: &cwd,
        env: &env,
        stdin: item.stdin.is_some(),
        inherit: &[],
        private: script_file.as_ref().map(|f| f.dir.path()),
    };
    let (mut child, mut group, notices) = match spawn(host, launch).await {
        Ok(spawned) => spawned,
        Err(e) => {
            return not_started(
                started,
                Termination::SpawnFailed,
                Some(format!("cannot start `{name}`: {e}")),
            );
        }
    };
    tracing::debug!(pid = group.leader().as_raw(), cwd = %cwd.display(), sandboxed, "work started");

    let feeder = tokio::spawn(feed(child.stdin.take(), item.stdin.clone()));
    let limit = item.limits.output_bytes_per_stream;
    let mut out = Capture::new(Stream::Stdout, limit, Some(output.clone()));
    let mut err = Capture::new(Stream::Stderr, limit, Some(output));
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let timeout = Duration::from_millis(item.limits.timeout_ms);

    let (termination, status) = {
        let mut pumps = pin!(async {
            tokio::join!(out.pump(stdout), err.pump(stderr));
        });
        let mut pumps_done = false;
        let ended = {
            let mut supervised = pin!(supervise(&mut child, &group, timeout, &mut cancel, policy));
            loop {
                tokio::select! {
                    ended = &mut supervised => break ended,
                    () = &mut pumps, if !pumps_done => pumps_done = true,
                }
            }
        };
        // The leader is reaped. Its pipes reach end-of-file once every process holding them
        // has gone, which a background process may never do on its own. Signalling the group
        // after the reap is sound: its id stays reserved while any member lives, and once none
        // does, the kernel hands the id out again only after the pid space wraps around. The
        // leader's own pid is never signalled again.
        group.leader_reaped();
        if !pumps_done {
            pumps_done = tokio::time::timeout(policy.drain_after_exit, &mut pumps)
                .await
                .is_ok();
        }
        group.kill();
        if !pumps_done
            && tokio::time::timeout(policy.drain_after_exit, &mut pumps)
                .await
                .is_err()
        {
            tracing::warn!(
                "output pipes stayed open after the job was killed; a process escaped it holding \
                 them, and its output is abandoned"
            );
        }
        ended
    };
    feeder.abort();
    let mut notices = notices;
    notices.extend(group.release().await);
    notices.truncate(wc_runner_protocol::MAX_NOTICES);
    drop(script_file);

    let (exit_code, signal, error) = match status {
        Ok(status) if sandboxed => {
            let (code, signal) = sandboxed_status(status);
            (code, signal, None)
        }
        Ok(status) => (status.code(), status.signal(), None),
        Err(e) => (
            None,
            None,
            Some(bounded(format!("cannot wait for the process: {e}"))),
        ),
    };
    WorkOutcome {
        termination,
        exit_code,
        signal,
        error,
        duration_ms: millis(started.elapsed()),
        stdout_bytes: out.total,
        stderr_bytes: err.total,
        stdout_truncated: out.truncated(),
        stderr_truncated: err.truncated(),
        answer: None,
        error_kind: None,
        conflict: None,
        notices,
    }
}

/// An outcome for work that never ran.
pub(crate) fn not_started(
    started: Instant,
    termination: Termination,
    error: Option<String>,
) -> WorkOutcome {
    WorkOutcome {
        error: error.map(bounded),
        duration_ms: millis(started.elapsed()),
        ..WorkOutcome::ended(termination)
    }
}

/// Cuts an error text to [`MAX_ERROR_BYTES`] on a character boundary, marking the cut with `…`.
pub(crate) fn bounded(mut msg: String) -> String {
    if msg.len() > MAX_ERROR_BYTES {
        let mut end = MAX_ERROR_BYTES - '…'.len_utf8();
        while !msg.is_char_boundary(end) {
            end -= 1;
        }
        msg.truncate(end);
        msg.push('…');
    }
    msg
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_errors_are_cut_on_a_character_boundary() {
        assert_eq!(bounded("short".into()), "short");
        let cut = bounded("é".repeat(800));
        assert!(cut.len() <= MAX_ERROR_BYTES, "{}", cut.len());
        assert!(cut.ends_with('…'));
        assert!(cut.starts_with("éé"));
    }
}
