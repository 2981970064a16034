//! The process of a persistent shell: started through the spawn path of every job
//! ([`exec::spawn`]), so it is confined exactly like one (the host's sandbox, the allow-list
//! environment, its own process group or cgroup, death with the runner); watched until it
//! ends; and killed with everything it started.
//!
//! Invariants:
//! - the shell inherits three pipes of the runner and nothing else: its program (stdin), its
//!   output (stdout, stderr) and its control descriptor ([`frame::CONTROL_FD`]); the runner
//!   keeps no write end of the control pipe;
//! - a shell ends once ([`Life::end`]): the first terminal state wins, and every process of the
//!   shell is killed when it is set.

use std::ffi::OsString;
use std::io;
use std::os::fd::AsRawFd as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex, MutexGuard};

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tokio::io::BufReader;
use tokio::net::unix::pipe;
use tokio::process::{Child, ChildStdin};
use tokio::sync::watch;
use wc_runner_protocol::{Notice, Shell as Dialect, ShellState, WorkItem};

use super::frame;
use super::output::Output;
use crate::boundary::Boundary;
use crate::exec::{self, Host, Inherit, Job, Launch};
use crate::sandbox::SandboxMode;

/// How a shell ended: its terminal state, the shell's own exit status when it exited, and why,
/// in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct End {
    pub(super) state: ShellState,
    pub(super) exit_code: Option<i32>,
    pub(super) detail: String,
}

impl End {
    /// An end in `state` for the reason `detail`, with no exit status.
    pub(super) fn new(state: ShellState, detail: impl Into<String>) -> End {
        End {
            state,
            exit_code: None,
            detail: detail.into(),
        }
    }
}

/// Where and how to start a shell.
pub(super) struct Start<'a> {
    pub(super) host: &'a Host,
    /// The open's work item: its project names the environment the shell gets.
    pub(super) item: &'a WorkItem,
    pub(super) dialect: Dialect,
    /// What the shell may see and write.
    pub(super) boundary: &'a Boundary,
    pub(super) cwd: &'a Path,
    /// The runner's directory of files the shell reads (a command's stdin).
    pub(super) private: &'a Path,
}

/// A started shell: its life and the runner's ends of its pipes.
pub(super) struct Started {
    pub(super) life: Arc<Life>,
    /// Where the runner writes the shell's program.
    pub(super) program: ChildStdin,
    /// Where the shell reports each command's end.
    pub(super) control: BufReader<pipe::Receiver>,
    pub(super) output: Output,
    /// What the shell was started without, and why.
    pub(super) notices: Vec<Notice>,
}

/// Starts the shell `start` describes, reading its program from a pipe, and watches it.
pub(super) async fn start(start: Start<'_>) -> io::Result<Started> {
    let sandboxed = start.host.sandbox.mode() == SandboxMode::Bubblewrap;
    let env = exec::child_env(start.host, start.item, sandboxed);
    let search_path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone());
    let name = start.dialect.program();
    let program = crate::program::program_path(name, start.cwd, search_path.as_deref());
    let args: [OsString; 1] = ["-s".into()];
    let (control_read, control_write) = io::pipe()?;
    let inherit = [Inherit {
        fd: control_write.as_raw_fd(),
        child_fd: frame::CONTROL_FD,
    }];
    let launch = Launch {
        name,
        program: &program,
        args: &args,
        boundary: start.boundary,
        cwd: start.cwd,
        env: &env,
        stdin: true,
        inherit: &inherit,
        private: Some(start.private),
    };
    let (mut child, job, notices) = exec::spawn(start.host, launch).await?;
    // The shell holds the only write end now: its end is the control pipe's end.
    drop(control_write);
    let life = Arc::new(Life {
        job: Mutex::new(Some(job)),
        end: watch::channel(None).0,
        sandboxed,
    });
    // From here a failure drops `life` with the job, which kills the shell.
    let missing = || io::Error::other("the shell started without its pipes");
    let program = child.stdin.take().ok_or_else(missing)?;
    let stdout = child.stdout.take().ok_or_else(missing)?.into_owned_fd()?;
    let stderr = child.stderr.take().ok_or_else(missing)?.into_owned_fd()?;
    let output = Output::start(stdout, stderr)?;
    let control = BufReader::new(pipe::Receiver::from_owned_fd(control_read.into())?);
    tokio::spawn(watch_exit(child, life.clone()));
    Ok(Started {
        life,
        program,
        control,
        output,
        notices,
    })
}

/// The processes of one shell and how it ended, shared by the shell and its exit watcher.
pub(super) struct Life {
    /// Taken by the exit watcher once the shell has ended and its processes are released.
    job: Mutex<Option<Job>>,
    end: watch::Sender<Option<End>>,
    sandboxed: bool,
}

impl Life {
    fn job(&self) -> MutexGuard<'_, Option<Job>> {
        // The job is only read and killed under the lock; a panic elsewhere leaves it usable.
        self.job.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How the shell ended, once it has.
    pub(super) fn ended(&self) -> Option<End> {
        self.end.borrow().clone()
    }

    /// Sees the end as soon as it is set.
    pub(super) fn subscribe(&self) -> watch::Receiver<Option<End>> {
        self.end.subscribe()
    }

    /// Ends the shell as `end` unless it has ended already, and kills every process it has;
    /// answers how it ended (the first end set).
    pub(super) fn end(&self, end: End) -> End {
        self.end.send_if_modified(|current| {
            let first = current.is_none();
            if first {
                *current = Some(end.clone());
            }
            first
        });
        self.kill();
        self.ended().unwrap_or(end)
    }

    /// Kills every process of the shell.
    pub(super) fn kill(&self) {
        if let Some(job) = self.job().as_ref() {
            job.kill_all();
        }
    }

    /// The host pid of the shell process: the runner's child when unsandboxed, the sandbox's
    /// first process (the only child of its pid 1 until a command orphans one) when sandboxed.
    /// Asked once the shell has answered a frame, when it surely runs.
    pub(super) fn find_shell(&self) -> Option<Pid> {
        let job = self.job();
        let job = job.as_ref()?;
        if !self.sandboxed {
            return Some(job.leader());
        }
        match children(job.sandbox_init()?).as_slice() {
            [shell] => Some(*shell),
            _ => None,
        }
    }
}

/// Waits for the runner's child to exit, then ends the shell (`exited`, unless it ended
/// otherwise first) and releases what held its processes.
async fn watch_exit(mut child: Child, life: Arc<Life>) {
    let status = child.wait().await;
    if let Some(job) = life.job().as_mut() {
        job.leader_reaped();
    }
    let end = match status {
        Ok(status) => exited(status, life.sandboxed),
        Err(e) => End::new(
            ShellState::Exited,
            format!("the shell's exit cannot be read: {e}"),
        ),
    };
    life.end(end);
    let job = life.job().take();
    if let Some(mut job) = job {
        for notice in job.release().await {
            tracing::warn!(message = %notice.message, "the shell reached a bound");
        }
    }
}

/// The end of a shell whose process (or sandbox) exited with `status`.
fn exited(status: ExitStatus, sandboxed: bool) -> End {
    let (code, signal) = if sandboxed {
        exec::sandboxed_status(status)
    } else {
        (status.code(), status.signal())
    };
    let detail = match (code, signal) {
        (Some(code), _) => format!("the shell exited with status {code}"),
        (None, Some(signal)) => format!("the shell was killed by signal {signal}"),
        (None, None) => "the shell ended".to_owned(),
    };
    End {
        state: ShellState::Exited,
        exit_code: code,
        detail,
    }
}

/// Sends SIGINT to every process descended from `shell`, not to the shell itself: the
/// foreground command and whatever it started that has not left it.
pub(super) fn interrupt(shell: Pid) {
    for pid in descendants(shell) {
        match nix::sys::signal::kill(pid, Signal::SIGINT) {
            Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
            Err(e) => tracing::warn!(pid = pid.as_raw(), error = %e, "cannot interrupt a command"),
        }
    }
}

/// Whether `pid` runs (exists and has not exited).
pub(super) fn alive(pid: Pid) -> bool {
    stat(pid).is_some_and(|(state, _)| state != 'Z' && state != 'X')
}

/// The state letter and parent of `pid`, from `/proc/PID/stat` (`pid (comm) S ppid …`; the
/// command name may hold spaces and parentheses, so fields are counted after the last `)`).
fn stat(pid: Pid) -> Option<(char, Pid)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = text.rsplit_once(") ")?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    Some((state, Pid::from_raw(parent)))
}

/// Every process on the host and its parent.
fn parents() -> Vec<(Pid, Pid)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .map(Pid::from_raw)
        .filter_map(|pid| Some((pid, stat(pid)?.1)))
        .collect()
}

/// The processes whose parent is `parent`.
fn children(parent: Pid) -> Vec<Pid> {
    parents()
        .into_iter()
        .filter(|&(_, p)| p == parent)
        .map(|(pid, _)| pid)
        .collect()
}

/// Every process descended from `root`, `root` excluded.
fn descendants(root: Pid) -> Vec<Pid> {
    let all = parents();
    let mut found = vec![root];
    let mut next = 0;
    while next < found.len() {
        let parent = found[next];
        found.extend(
            all.iter()
                .filter(|&&(_, p)| p == parent)
                .map(|&(pid, _)| pid),
        );
        next += 1;
    }
    found.remove(0);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descendants_are_found_through_parent_links_and_exclude_the_root() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30; true"])
            .spawn()
            .unwrap();
        let shell = Pid::from_raw(child.id() as i32);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while descendants(shell).len() < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "the sleeps never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let found = descendants(shell);
        assert!(!found.contains(&shell));
        assert!(found.iter().all(|&p| alive(p)));
        assert_eq!(children(shell).len(), 2);
        for pid in found {
            let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!alive(shell));
    }
}
