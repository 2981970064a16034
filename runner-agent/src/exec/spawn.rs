//! Starting a job: the one spawn path of every job and persistent shell, in a bubblewrap
//! sandbox or unsandboxed in a process group (and cgroup) of its own. The child joins its
//! bounds and arms its death signal before its program runs, and keeps only the descriptors it
//! is handed.

use std::ffi::OsString;
use std::io::{self, Write as _};
use std::os::fd::{AsRawFd as _, RawFd};
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use wc_runner_protocol::Notice;

use super::{Host, Job};
use crate::boundary::{Binds, Boundary};
use crate::cgroup::JobCgroup;
use crate::sandbox::{Containment, NamespaceInit, Sandbox, SandboxMode};

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
