//! Execution of one work item on this host: confinement, spawn, output capture, limits and stop.
//!
//! [`execute`] runs a [`WorkItem`] to its end and always answers with a [`WorkOutcome`]; a
//! refusal or a failed start is an outcome too, never an error. Invariants:
//!
//! - nothing starts before [`WorkItem::validate`] and [`confine::resolve_cwd`] pass;
//! - a child's environment is an allow list (`child_env`): the base set every job gets, the
//!   names the runner configuration passes for its project, and the work's own additions;
//!   nothing else of the runner's environment reaches it;
//! - each job is confined by the host's [`Sandbox`]; every signal the runner sends goes to all of
//!   the job's processes ([`Containment`]), so the background processes of a command, detached
//!   or not, end with it;
//! - at most `output_bytes_per_stream` bytes of each stream are kept (its head); the rest is read,
//!   counted and dropped, so a chatty child never blocks on a full pipe;
//! - when [`execute`] returns, the leader has been reaped and every other process of the job
//!   killed.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::{DirBuilder, OpenOptions};
use std::io::{self, Write as _};
use std::os::fd::{AsRawFd as _, RawFd};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{mpsc, watch};
use tracing::Instrument as _;
use uuid::Uuid;
use wc_runner_protocol::{
    MAX_CHUNK_BYTES, Notice, Stream, Termination, WorkItem, WorkOutcome, WorkSpec,
};

use crate::boundary::{Binds, Boundary, Project};
use crate::cgroup::JobCgroup;
use crate::config::RunnerConfig;
use crate::confine;
use crate::sandbox::{Containment, NamespaceInit, Sandbox, SandboxMode};

/// Longest `error` text an outcome carries, in bytes.
const MAX_ERROR_BYTES: usize = 1000;

/// Kept output as the executor produces it: raw bytes at `offset` in `stream`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputPiece {
    /// Which stream.
    pub stream: Stream,
    /// Byte offset of `data[0]` in the stream.
    pub offset: u64,
    /// At most [`MAX_CHUNK_BYTES`] bytes.
    pub data: Vec<u8>,
}

/// Timing of the stop escalation and of the end of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopPolicy {
    /// How long the leader has to exit after SIGINT before SIGTERM follows.
    pub interrupt_grace: Duration,
    /// How long the leader has to exit after SIGTERM before SIGKILL follows.
    pub terminate_grace: Duration,
    /// How long the output pipes have to reach end-of-file once the leader has exited, before
    /// the rest of the group is killed.
    pub drain_after_exit: Duration,
}

impl Default for StopPolicy {
    fn default() -> Self {
        Self {
            interrupt_grace: Duration::from_secs(2),
            terminate_grace: Duration::from_secs(2),
            drain_after_exit: Duration::from_millis(500),
        }
    }
}

/// What every execution on this host shares: the projects it serves and the sandbox they run
/// in.
#[derive(Debug, Clone)]
pub struct Host {
    /// Runner-local project id → the project as registered.
    projects: BTreeMap<String, Project>,
    /// How jobs are confined.
    pub sandbox: Sandbox,
}

impl Host {
    /// A host serving `projects` in `sandbox`.
    pub fn new(projects: impl IntoIterator<Item = (String, Project)>, sandbox: Sandbox) -> Self {
        Self {
            projects: projects.into_iter().collect(),
            sandbox,
        }
    }

    /// A host serving the directories `projects` (id, root), each registered as it is now and
    /// passing no environment, in `sandbox`.
    pub fn register(
        projects: impl IntoIterator<Item = (String, PathBuf)>,
        sandbox: Sandbox,
    ) -> io::Result<Self> {
        let projects = projects
            .into_iter()
            .map(|(id, root)| Ok((id, Project::register(&root, Vec::new())?)))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Self::new(projects, sandbox))
    }

    /// The host a runner configuration describes.
    pub fn from_config(cfg: &RunnerConfig) -> Self {
        Self::new(cfg.projects.clone(), cfg.sandbox.clone())
    }

    /// The ids of the projects served.
    pub fn project_ids(&self) -> impl Iterator<Item = &str> {
        self.projects.keys().map(String::as_str)
    }

    /// The project served as `id`.
    pub fn project(&self, id: &str) -> Option<&Project> {
        self.projects.get(id)
    }

    /// The boundary of work in project `id`: its registered root, checked to be that directory
    /// still, with what the sandbox hides from it and what it may write.
    pub fn boundary(&self, id: &str) -> Result<Boundary, confine::CwdError> {
        let project = self
            .projects
            .get(id)
            .ok_or_else(|| confine::CwdError::UnknownProject(id.to_owned()))?;
        confine::check_root(project.root())?;
        let others: Vec<&Project> = self
            .projects
            .iter()
            .filter(|(other, _)| *other != id)
            .map(|(_, p)| p)
            .collect();
        Ok(self.sandbox.boundary(project, &others))
    }
}

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
        | WorkSpec::PersistentShell(_) => {
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

/// Whether the runner passes its environment variable `name` to every job: what programs need to
/// find their tools, their home and temporary directory, and the user's language and time zone.
/// Anything else (database URLs, webhooks, tokens under any name) stays with the runner unless
/// the configuration passes it for the project.
fn base_env(name: &str) -> bool {
    matches!(
        name,
        "PATH" | "HOME" | "LANG" | "TERM" | "USER" | "LOGNAME" | "TZ" | "TMPDIR"
    ) || name.starts_with("LC_")
}

/// The whole environment of a child: the runner's variables that [`base_env`] or the project's
/// `env_pass` name, `TMPDIR=/tmp` (the private tmp) when sandboxed, then the work's own `env`
/// additions, which were asked for.
pub(crate) fn child_env(
    host: &Host,
    item: &WorkItem,
    sandboxed: bool,
) -> Vec<(OsString, OsString)> {
    let pass = host.project(&item.project).map(Project::env_pass);
    let passed = |name: &str| {
        base_env(name) || pass.is_some_and(|names| names.iter().any(|n| n.as_str() == name))
    };
    let mut env: BTreeMap<OsString, OsString> = std::env::vars_os()
        .filter(|(k, _)| k.to_str().is_some_and(passed))
        .collect();
    if sandboxed {
        env.insert("TMPDIR".into(), "/tmp".into());
    }
    env.extend(
        item.env
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
    );
    env.into_iter().collect()
}

/// What to start for a job.
pub(crate) struct Launch<'a> {
    /// `argv[0]` as the work gave it (what the child sees as its name).
    pub(crate) name: &'a str,
    /// The program found for it on this host.
    pub(crate) program: &'a OsString,
    pub(crate) args: &'a [OsString],
    /// What the job may see and write.
    pub(crate) boundary: &'a Boundary,
    pub(crate) cwd: &'a Path,
    pub(crate) env: &'a [(OsString, OsString)],
    /// Whether the child's stdin is a pipe from the runner ([`Child::stdin`]), else
    /// `/dev/null`.
    pub(crate) stdin: bool,
    /// Descriptors the child keeps besides its standard streams (at most [`MAX_INHERITED`]).
    pub(crate) inherit: &'a [Inherit],
    /// A runner-made directory the job reads (its script, its input), opened read-only in a
    /// sandbox.
    pub(crate) private: Option<&'a Path>,
}

/// A descriptor of the runner that a child keeps across its exec, under the number it is given
/// there. Every other descriptor the runner makes is close-on-exec and never reaches a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Inherit {
    /// The descriptor in the runner; it must stay open until the spawn returns.
    pub(crate) fd: RawFd,
    /// Its number in the child (3 or more: 0-2 are the standard streams).
    pub(crate) child_fd: RawFd,
}

/// Most descriptors a child inherits besides its standard streams: the caller's and, in a
/// sandbox, bwrap's status and gate descriptors and the project's bound directories.
pub(crate) const MAX_INHERITED: usize = 10;

/// Between fork and exec: puts each descriptor of `inherit` under its child number, open across
/// the exec. Every source is first copied above all the child numbers, so placing one never
/// closes the source of another; the copies are close-on-exec and vanish with the exec. Only
/// async-signal-safe calls (fcntl, dup2), and nothing is allocated.
fn place_inherited(inherit: &[Inherit]) -> io::Result<()> {
    let above = inherit.iter().map(|i| i.child_fd).max().unwrap_or(2) + 1;
    let mut copies: [RawFd; MAX_INHERITED] = [-1; MAX_INHERITED];
    for (copy, i) in copies.iter_mut().zip(inherit) {
        // SAFETY: fcntl on a descriptor number; an invalid one fails with EBADF.
        *copy = unsafe { nix::libc::fcntl(i.fd, nix::libc::F_DUPFD_CLOEXEC, above) };
        if *copy < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    for (copy, i) in copies.iter().zip(inherit) {
        // SAFETY: dup2 between descriptor numbers; the target is replaced, which in this child
        // is only ever a close-on-exec descriptor of the runner or a standard stream's copy.
        if unsafe { nix::libc::dup2(*copy, i.child_fd) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Refuses an inheritance the child cannot get: too many descriptors, or a number that would
/// replace a standard stream or repeat another.
fn check_inherited(inherit: &[Inherit]) -> io::Result<()> {
    let repeated = inherit
        .iter()
        .enumerate()
        .any(|(n, i)| inherit[..n].iter().any(|j| j.child_fd == i.child_fd));
    if inherit.len() > MAX_INHERITED || repeated || inherit.iter().any(|i| i.child_fd < 3) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the descriptors to inherit do not fit the child",
        ));
    }
    Ok(())
}

/// Starts `launch` confined as the host says: in a bubblewrap sandbox, or unsandboxed in a
/// process group (and cgroup) of its own. The one spawn path of every job and persistent shell.
/// The notices say what the job was started without (Git metadata the project's `.git` leads
/// to but was not registered with it, or that is not there as registered).
pub(crate) async fn spawn(
    host: &Host,
    launch: Launch<'_>,
) -> io::Result<(Child, Job, Vec<Notice>)> {
    check_inherited(launch.inherit)?;
    let mut notices: Vec<Notice> = launch.boundary.git_metadata_notice().into_iter().collect();
    let (child, job) = if host.sandbox.mode() == SandboxMode::Bubblewrap {
        let binds = Binds::open(launch.boundary)?;
        notices.extend(binds.notices.iter().cloned());
        spawn_sandboxed(&host.sandbox, launch, &binds).await?
    } else {
        spawn_unsandboxed(launch)?
    };
    notices.truncate(wc_runner_protocol::MAX_NOTICES);
    Ok((child, job, notices))
}

impl Launch<'_> {
    /// The command with the job's environment and pipes, in a process group of its own.
    fn command(&self, program: &OsString) -> Command {
        let mut command = Command::new(program);
        command
            .current_dir(self.cwd)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(if self.stdin {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        command
    }
}

/// Between fork and exec: the child joins its job's cgroups (writing `0` to each one's
/// `cgroup.procs`), before the program runs, so nothing it forks starts outside them.
/// Async-signal-safe: `write` only.
fn join_cgroups(procs: &[RawFd]) -> io::Result<()> {
    for &fd in procs {
        // SAFETY: the descriptor is open until the spawn returns (the cgroup is held).
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        nix::unistd::write(fd, b"0")?;
    }
    Ok(())
}

/// Between fork and exec: the child dies with the runner (`parent`). The death signal survives
/// the exec of a program that is not set-id; a runner already gone before it was armed is
/// caught by the parent check. Only async-signal-safe calls (prctl, getppid, kill).
fn die_with_runner(parent: Pid) -> io::Result<()> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
    if nix::unistd::getppid() != parent {
        let _ = nix::sys::signal::raise(Signal::SIGKILL);
    }
    Ok(())
}

/// Starts the job unsandboxed: in a cgroup of its own where the host offers one, with
/// `PR_SET_PDEATHSIG` so the runner's death kills it. The spawn runs on the calling thread, a
/// runtime worker that lives as long as the runner (the death signal follows the thread that
/// spawned the child, so never spawn from a blocking-pool thread that may retire).
fn spawn_unsandboxed(launch: Launch<'_>) -> io::Result<(Child, Job)> {
    let cgroup = JobCgroup::create(launch.boundary.limits());
    let (procs, joins) = cgroup.as_ref().map_or(([-1; 4], 0), JobCgroup::procs_fds);
    let parent = Pid::this();
    let mut command = launch.command(launch.program);
    // The child sees the name it was given, not the resolved path.
    command.arg0(launch.name).args(launch.args);
    let inherit = launch.inherit.to_vec();
    // SAFETY: the closure runs in the child between fork and exec and only makes system calls
    // (write, fcntl, dup2, prctl, getppid, kill) that are async-signal-safe; it allocates
    // nothing.
    unsafe {
        command.pre_exec(move || {
            join_cgroups(&procs[..joins])?;
            // After the join: placing a descriptor may replace the cgroup's.
            place_inherited(&inherit)?;
            die_with_runner(parent)
        });
    }
    let child = command.spawn()?;
    let leader = leader_pid(&child)?;
    let containment = match cgroup {
        Some(cgroup) if cgroup.holds() => Containment::Cgroup { leader, cgroup },
        bounds => Containment::Group { leader, bounds },
    };
    Ok((child, Job::new(leader, containment)))
}

/// Starts the job in a bubblewrap sandbox (see [`crate::sandbox`]) and learns its PID namespace.
/// The launch's private directory is opened read-only inside it. The program is checked on this
/// host first, so a missing or unexecutable one fails to start as it would unsandboxed.
async fn spawn_sandboxed(
    sandbox: &Sandbox,
    launch: Launch<'_>,
    binds: &Binds,
) -> io::Result<(Child, Job)> {
    let found = Path::new(launch.program);
    if !found.is_absolute() || !found.exists() {
        return Err(io::Error::from_raw_os_error(nix::libc::ENOENT));
    }
    if !crate::program::is_executable_file(found) {
        return Err(io::Error::from_raw_os_error(nix::libc::EACCES));
    }
    let (status_read, status_write) = io::pipe()?;
    let (gate_read, mut gate_write) = io::pipe()?;
    // bwrap's own descriptors take the lowest numbers the caller's leave free.
    let mut inherit = launch.inherit.to_vec();
    let mut free = (3..).filter(|n| launch.inherit.iter().all(|i| i.child_fd != *n));
    let (status_fd, gate_fd) = (free.next().unwrap_or(3), free.next().unwrap_or(4));
    for (fd, child_fd) in [
        (status_write.as_raw_fd(), status_fd),
        (gate_read.as_raw_fd(), gate_fd),
    ] {
        inherit.push(Inherit { fd, child_fd });
    }
    // The project's writable directories reach bwrap as descriptors, checked to be the
    // registered directories: nothing swapped under a name after the check is bound.
    let mut bound = Vec::with_capacity(binds.dirs.len());
    for dir in &binds.dirs {
        bound.push(match dir {
            Some((fd, path)) => {
                let child_fd = free.next().unwrap_or(-1);
                inherit.push(Inherit {
                    fd: fd.as_raw_fd(),
                    child_fd,
                });
                Some((child_fd, path.as_path()))
            }
            None => None,
        });
    }
    check_inherited(&inherit)?;
    let private: Vec<&Path> = launch.private.into_iter().collect();
    // bwrap finds the program as the work named it (on the child's PATH, or relative to the cwd),
    // so the child sees that name as its argv[0].
    let args = sandbox.bwrap_args(
        launch.boundary,
        &bound,
        launch.cwd,
        &private,
        status_fd,
        gate_fd,
        &OsString::from(launch.name),
        launch.args,
    );
    let bounds = JobCgroup::create(launch.boundary.limits());
    let (procs, joins) = bounds.as_ref().map_or(([-1; 4], 0), JobCgroup::procs_fds);
    let parent = Pid::this();
    let mut command = launch.command(&sandbox.program().as_os_str().to_owned());
    command.args(args);
    // SAFETY: runs in the child between fork and exec; fcntl, dup2, prctl, getppid and kill
    // are async-signal-safe and nothing is allocated.
    unsafe {
        command.pre_exec(move || {
            // bwrap and everything in its sandbox live in the job's bounds.
            join_cgroups(&procs[..joins])?;
            // The status and gate descriptors are close-on-exec like every descriptor the
            // runner makes; this child alone keeps them (and the caller's) across its exec.
            place_inherited(&inherit)?;
            // bwrap arms its own death signal (`--die-with-parent`) only once it runs; a runner
            // killed while bwrap loads would leave the sandbox with no parent to follow.
            die_with_runner(parent)
        });
    }
    let spawned = command.spawn();
    drop(status_write);
    drop(gate_read);
    let child = spawned?;
    let leader = leader_pid(&child)?;
    // bwrap writes the status line once the namespaces exist, or closes the pipe on failure.
    // Then the job's first process waits at the gate until pid 1 has armed its death signal.
    let (ns, status) = tokio::task::spawn_blocking(move || {
        let mut status =
            std::io::BufReader::new(std::fs::File::from(std::os::fd::OwnedFd::from(status_read)));
        let ns = NamespaceInit::read(&mut status);
        if let Some(ns) = &ns {
            crate::sandbox::await_armed(ns.init, Duration::from_secs(5));
        }
        // Nobody reads when bwrap failed before the program; the job ends either way.
        let _ = gate_write.write_all(b"go\n");
        drop(gate_write);
        (ns, status)
    })
    .await
    .map_err(io::Error::other)?;
    let containment = Containment::Namespace {
        leader,
        ns,
        _status: status,
        bounds,
    };
    Ok((child, Job::new(leader, containment)))
}

fn leader_pid(child: &Child) -> io::Result<Pid> {
    // Only a child already reaped has no id, and nothing has waited for this one yet.
    child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw)
        .ok_or_else(|| io::Error::other("the process started without a process id"))
}

/// The exit of a sandboxed command from bwrap's. bwrap reports its command's end as a shell
/// does: killed by signal N becomes exit status 128+N (N ≤ 64). Such a status is read back as the
/// signal, so a stopped job reads the same sandboxed or not; a program that itself exits with
/// 129-192 is therefore reported as killed by the signal that status conventionally means. A
/// signal on bwrap itself (the final SIGKILL) is reported as it is.
pub(crate) fn sandboxed_status(status: ExitStatus) -> (Option<i32>, Option<i32>) {
    match status.code() {
        Some(code @ 129..=192) => (None, Some(code - 128)),
        code => (code, status.signal()),
    }
}

/// An outcome for work that never ran.
pub(crate) fn not_started(
    started: Instant,
    termination: Termination,
    error: Option<String>,
) -> WorkOutcome {
    WorkOutcome {
        termination,
        exit_code: None,
        signal: None,
        error: error.map(bounded),
        duration_ms: millis(started.elapsed()),
        stdout_bytes: 0,
        stderr_bytes: 0,
        stdout_truncated: false,
        stderr_truncated: false,
        answer: None,
        error_kind: None,
        conflict: None,
        notices: Vec::new(),
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

/// Waits for the leader to exit, stopping its group when the time runs out or a stop is asked.
async fn supervise(
    child: &mut Child,
    group: &Job,
    timeout: Duration,
    cancel: &mut watch::Receiver<bool>,
    policy: &StopPolicy,
) -> (Termination, io::Result<ExitStatus>) {
    let stop = tokio::select! {
        // An exit that races the deadline counts as an exit.
        biased;
        status = child.wait() => return (Termination::Exited, status),
        () = tokio::time::sleep(timeout) => Termination::TimedOut,
        () = stop_requested(cancel) => Termination::Cancelled,
    };
    tracing::info!(reason = ?stop, "stopping the job");
    (stop, escalate(child, group, policy).await)
}

/// Resolves when `cancel` turns `true`; never, once its sender is gone without asking.
pub(crate) async fn stop_requested(cancel: &mut watch::Receiver<bool>) {
    if cancel.wait_for(|stop| *stop).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// SIGINT, then SIGTERM to every process of the job, each followed by the leader's grace period,
/// then SIGKILL to all of them; answers the leader's exit status.
async fn escalate(child: &mut Child, group: &Job, policy: &StopPolicy) -> io::Result<ExitStatus> {
    for (signal, grace) in [
        (Signal::SIGINT, policy.interrupt_grace),
        (Signal::SIGTERM, policy.terminate_grace),
    ] {
        group.signal(signal);
        if let Ok(status) = tokio::time::timeout(grace, child.wait()).await {
            return status;
        }
    }
    group.kill_all();
    child.wait().await
}

/// The processes of a running job. Dropping it unfinished kills them all, so work whose
/// [`execute`] future is abandoned mid-run leaves nothing running.
pub(crate) struct Job {
    leader: Pid,
    reaped: bool,
    containment: Option<Containment>,
}

impl Job {
    fn new(leader: Pid, containment: Containment) -> Self {
        Self {
            leader,
            reaped: false,
            containment: Some(containment),
        }
    }

    /// The runner's child: the job's first process, or bwrap when sandboxed.
    pub(crate) fn leader(&self) -> Pid {
        self.leader
    }

    /// The sandbox's pid 1 (a host pid), when the job runs in a PID namespace whose start bwrap
    /// reported: the parent of the job's first process.
    pub(crate) fn sandbox_init(&self) -> Option<Pid> {
        self.containment.as_ref().and_then(Containment::init)
    }

    /// Notes that the leader has been waited for: its pid may now belong to someone else.
    pub(crate) fn leader_reaped(&mut self) {
        self.reaped = true;
    }

    fn signal(&self, signal: Signal) {
        if let Some(c) = &self.containment {
            c.signal(signal);
        }
    }

    /// Kills every process of the job.
    pub(crate) fn kill_all(&self) {
        if let Some(c) = &self.containment {
            c.kill(self.reaped);
        }
    }

    /// Kills what is left of the job.
    fn kill(&mut self) {
        self.kill_all();
    }

    /// Waits (bounded) for the job's processes to be gone and releases what held them; says
    /// what the job's bounds refused it.
    pub(crate) async fn release(&mut self) -> Vec<Notice> {
        match self.containment.take() {
            Some(c) => {
                c.kill(self.reaped);
                c.release().await
            }
            None => Vec::new(),
        }
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// Writes the work's stdin and closes it. A child that exits without reading everything is not
/// an error: its stdin was offered.
async fn feed(stdin: Option<ChildStdin>, text: Option<String>) {
    let (Some(mut pipe), Some(text)) = (stdin, text) else {
        return;
    };
    match pipe.write_all(text.as_bytes()).await {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
        Err(e) => tracing::warn!(error = %e, "cannot write stdin"),
    }
}

/// The capture of one output stream: its head up to `limit` goes to `output`, all of it is
/// counted.
struct Capture {
    stream: Stream,
    limit: u64,
    total: u64,
    output: Option<mpsc::Sender<OutputPiece>>,
}

impl Capture {
    fn new(stream: Stream, limit: u64, output: Option<mpsc::Sender<OutputPiece>>) -> Self {
        Self {
            stream,
            limit,
            total: 0,
            output,
        }
    }

    fn truncated(&self) -> bool {
        self.total > self.limit
    }

    /// Reads `pipe` to its end.
    async fn pump(&mut self, pipe: Option<impl AsyncRead + Unpin>) {
        let Some(mut pipe) = pipe else {
            return;
        };
        // Reads of at most one chunk keep every piece within MAX_CHUNK_BYTES.
        let mut buf = vec![0; MAX_CHUNK_BYTES];
        loop {
            match pipe.read(&mut buf).await {
                Ok(0) => return,
                Ok(n) => self.take(&buf[..n]).await,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!(stream = ?self.stream, error = %e, "cannot read output");
                    return;
                }
            }
        }
    }

    async fn take(&mut self, bytes: &[u8]) {
        let offset = self.total;
        self.total += bytes.len() as u64;
        let room = usize::try_from(self.limit.saturating_sub(offset)).unwrap_or(usize::MAX);
        let kept = &bytes[..bytes.len().min(room)];
        if kept.is_empty() {
            return;
        }
        if let Some(output) = &self.output {
            let piece = OutputPiece {
                stream: self.stream,
                offset,
                data: kept.to_vec(),
            };
            if output.send(piece).await.is_err() {
                // Nobody listens any more; the work still runs to its end.
                self.output = None;
            }
        }
    }
}

/// A fresh private directory (0700, under the system temporary directory) for the files the
/// runner hands a job, removed with everything in it when dropped. A sandboxed job gets a
/// private `/tmp`, into which its own directory alone is bound read-only ([`Launch::private`]).
pub(crate) struct PrivateDir {
    path: PathBuf,
}

impl PrivateDir {
    /// A new directory named `{prefix}-{random}`.
    pub(crate) fn create(prefix: &str) -> io::Result<Self> {
        let path = std::env::temp_dir().join(format!("{prefix}-{}", Uuid::new_v4()));
        // `create`, not `create_all`: a directory that already exists is someone else's.
        DirBuilder::new().mode(0o700).create(&path)?;
        Ok(Self { path })
    }

    /// Where it is.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `body` to the new private file (0600) `name` in it; answers its path.
    pub(crate) fn write(&self, name: &str, body: &[u8]) -> io::Result<PathBuf> {
        let path = self.path.join(name);
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?
            .write_all(body)?;
        Ok(path)
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %self.path.display(), error = %e, "cannot remove a private directory");
        }
    }
}

/// A script body in a private file, removed with its directory when dropped.
struct ScriptFile {
    dir: PrivateDir,
    path: PathBuf,
}

impl ScriptFile {
    fn write(body: &str) -> io::Result<Self> {
        let dir = PrivateDir::create("wc-script")?;
        let path = dir.write("script", body.as_bytes())?;
        Ok(Self { dir, path })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::EnvName;

    #[test]
    fn only_the_base_set_passes_by_name() {
        let held_back = [
            "DATABASE_URL",
            "SLACK_WEBHOOK_URL",
            "DB_CONN",
            "NPM_AUTH",
            "WC_LOCAL_TOKEN",
            "WC_RUNNER_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "GITHUB_TOKEN",
            "path",
            "PATHS",
            "HOMEDIR",
            "LD_PRELOAD",
            "SSH_AUTH_SOCK",
        ];
        for name in held_back {
            assert!(!base_env(name), "{name} must be held back");
        }
        for name in [
            "PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "USER", "LOGNAME", "TZ", "TMPDIR",
        ] {
            assert!(base_env(name), "{name} must be passed on");
        }
    }

    fn host(env_pass: &[(&str, &[&str])]) -> Host {
        let root = std::env::temp_dir();
        Host::new(
            env_pass.iter().map(|(p, names)| {
                let names = names.iter().map(|n| EnvName::parse(n).unwrap()).collect();
                (p.to_string(), Project::register(&root, names).unwrap())
            }),
            Sandbox::from_settings(&Default::default(), []).unwrap(),
        )
    }

    fn work(project: &str, env: &[(&str, &str)]) -> WorkItem {
        WorkItem {
            protocol_version: wc_runner_protocol::PROTOCOL_VERSION,
            work_id: Uuid::new_v4(),
            project: project.into(),
            cwd: None,
            spec: WorkSpec::Process {
                argv: vec!["env".into()],
            },
            stdin: None,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            limits: wc_runner_protocol::WorkLimits {
                timeout_ms: 1000,
                output_bytes_per_stream: 1024,
            },
        }
    }

    #[test]
    fn a_childs_environment_is_the_allow_list_the_projects_names_and_the_works_additions() {
        // SAFETY: this test binary's environment is touched only through std, which serializes
        // `set_var` with reads; the names are unique to this test.
        unsafe {
            std::env::set_var("DATABASE_URL", "postgres://secret@db/wc");
            std::env::set_var(
                "SLACK_WEBHOOK_URL",
                "https://hooks.slack.com/services/T/B/x",
            );
            std::env::set_var("DB_CONN", "secret");
            std::env::set_var("NPM_AUTH", "secret");
            std::env::set_var("WC_LOCAL_TOKEN", "secret");
            std::env::set_var("EXEC_UNIT_CARGO_HOME", "/opt/cargo");
        }
        let host = host(&[("web", &["EXEC_UNIT_CARGO_HOME", "NPM_AUTH"])]);
        let names = |env: &[(OsString, OsString)]| -> Vec<String> {
            env.iter()
                .map(|(k, _)| k.to_string_lossy().into_owned())
                .collect()
        };
        let api = child_env(&host, &work("api", &[("BUILD", "1")]), true);
        let api_names = names(&api);
        for secret in [
            "DATABASE_URL",
            "SLACK_WEBHOOK_URL",
            "DB_CONN",
            "NPM_AUTH",
            "WC_LOCAL_TOKEN",
            "EXEC_UNIT_CARGO_HOME",
        ] {
            assert!(
                !api_names.iter().any(|n| n == secret),
                "{secret}: {api_names:?}"
            );
        }
        assert!(api.contains(&("BUILD".into(), "1".into())), "{api_names:?}");
        assert!(
            api.contains(&("TMPDIR".into(), "/tmp".into())),
            "the private tmp"
        );
        assert!(api_names.iter().any(|n| n == "PATH"), "{api_names:?}");

        // The project that passes names gets exactly those, and a work addition wins.
        let web = child_env(&host, &work("web", &[("NPM_AUTH", "asked")]), false);
        assert!(web.contains(&("EXEC_UNIT_CARGO_HOME".into(), "/opt/cargo".into())));
        assert!(web.contains(&("NPM_AUTH".into(), "asked".into())));
        let web_names = names(&web);
        for secret in [
            "DATABASE_URL",
            "SLACK_WEBHOOK_URL",
            "DB_CONN",
            "WC_LOCAL_TOKEN",
        ] {
            assert!(
                !web_names.iter().any(|n| n == secret),
                "{secret}: {web_names:?}"
            );
        }
    }

    #[test]
    fn long_errors_are_cut_on_a_character_boundary() {
        assert_eq!(bounded("short".into()), "short");
        let cut = bounded("é".repeat(800));
        assert!(cut.len() <= MAX_ERROR_BYTES, "{}", cut.len());
        assert!(cut.ends_with('…'));
        assert!(cut.starts_with("éé"));
    }

    #[test]
    fn script_files_are_private_and_removed_on_drop() {
        use std::os::unix::fs::PermissionsExt as _;
        let file = ScriptFile::write("echo hi\n").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(file.dir.path()), 0o700);
        assert_eq!(mode(&file.path), 0o600);
        assert_eq!(std::fs::read_to_string(&file.path).unwrap(), "echo hi\n");
        let dir = file.dir.path().to_owned();
        drop(file);
        assert!(!dir.exists());
    }
}
