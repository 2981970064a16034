//! Confinement of jobs on this host: what a job can see, and how every process it starts ends.
//!
//! Two modes, chosen by [`SandboxMode`]:
//!
//! - `bubblewrap` (the default on Linux): each job runs under `bwrap` in its own PID, mount and
//!   IPC namespaces. The whole filesystem is read-only; the project root (and Git metadata it
//!   points to), the configured toolchain caches and a private `/tmp` are writable; the runner's
//!   token file, its configuration file and the configured `hide` list are replaced by empty,
//!   read-only stand-ins; `/proc` shows only the job's own processes; every capability is
//!   dropped. The network is shared. The namespace's pid 1 is killed when the job's sandbox
//!   process (bwrap, the runner's direct child) ends or the runner dies (`--die-with-parent`),
//!   and with it every process of the job, however it detached.
//! - `off`: the job runs with the runner user's full access. Its processes are held in a cgroup
//!   v2 of their own where the runner can create one ([`JobCgroup`]), else only in the process
//!   group of the job's leader; the leader gets `PR_SET_PDEATHSIG` so a dead runner takes it
//!   along.
//!
//! Invariants: a job never starts sandboxed with a sandbox that is not usable (the agent probes
//! it at start and refuses to run otherwise); [`Containment::kill`] leaves no process of the job
//! running in either mode, except a process of an unsandboxed job on a host without a usable
//! cgroup that left the leader's process group. Every job is bounded by the cgroups the host
//! offers ([`crate::cgroup`]).

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{BufRead as _, BufReader};
use std::os::fd::RawFd;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use serde::Deserialize;
use wc_runner_protocol::Notice;

use crate::boundary::{Boundary, Mount, Project};
use crate::cgroup::{JobCgroup, JobLimitSettings, JobLimits};

/// How jobs are confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Each job in its own bubblewrap sandbox (PID, mount and IPC namespaces).
    Bubblewrap,
    /// No sandbox: jobs have the runner user's full access.
    Off,
}

impl SandboxMode {
    /// The mode when the configuration names none: bubblewrap on Linux, off elsewhere.
    pub fn host_default() -> Self {
        if cfg!(target_os = "linux") {
            SandboxMode::Bubblewrap
        } else {
            SandboxMode::Off
        }
    }
}

/// The `[sandbox]` table of the runner configuration, as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSettings {
    /// `"bubblewrap"` or `"off"`; absent: [`SandboxMode::host_default`].
    pub mode: Option<SandboxMode>,
    /// The bubblewrap program; absent: `bwrap` on the runner's `PATH`.
    pub bwrap: Option<PathBuf>,
    /// Directories jobs may write besides the project root and their private tmp (toolchain
    /// caches); a leading `~/` is the runner's home. Absent: [`DEFAULT_WRITABLE`].
    pub writable: Option<Vec<String>>,
    /// Files and directories jobs and file tools must not see, besides the token file, the
    /// configuration file (always hidden) and [`DEFAULT_HIDDEN`]. Absolute paths, or `~/…`.
    #[serde(default)]
    pub hide: Vec<String>,
    /// Entries of [`DEFAULT_HIDDEN`] that jobs may see after all, written as they are there
    /// (`"~/.npmrc"`).
    #[serde(default)]
    pub unhide: Vec<String>,
    /// Processes and threads one job may have at once (default 4096; 0: unbounded).
    pub max_processes: Option<u64>,
    /// Memory one job may use, in MiB (default 8192; 0: unbounded).
    pub max_memory_mib: Option<u64>,
    /// One job's share of the CPU, 1-10000 (default 100: even with the runner).
    pub cpu_weight: Option<u64>,
}

impl SandboxSettings {
    /// The job limits these settings name.
    pub fn job_limits(&self) -> JobLimitSettings {
        JobLimitSettings {
            max_processes: self.max_processes,
            max_memory_mib: self.max_memory_mib,
            cpu_weight: self.cpu_weight,
        }
    }
}

/// The toolchain caches writable inside the sandbox unless the configuration lists its own.
pub const DEFAULT_WRITABLE: [&str; 3] = ["~/.cargo", "~/.npm", "~/.cache"];

/// Where the runner user's credentials usually live: hidden from every job and file tool
/// unless `unhide` names them. Keys, cloud and cluster credentials, registry and forge tokens,
/// database passwords, password stores.
pub const DEFAULT_HIDDEN: [&str; 22] = [
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "~/.config/gcloud",
    "~/.kube",
    "~/.docker/config.json",
    "~/.netrc",
    "~/.git-credentials",
    "~/.config/git/credentials",
    "~/.config/gh",
    "~/.config/hub",
    "~/.pgpass",
    "~/.my.cnf",
    "~/.npmrc",
    "~/.pypirc",
    "~/.cargo/credentials",
    "~/.cargo/credentials.toml",
    "~/.vault-token",
    "~/.terraform.d/credentials.tfrc.json",
    "~/.password-store",
    "~/.local/share/keyrings",
];

/// Why a sandbox configuration was refused, or a sandbox cannot run.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A configured path is not absolute (after `~/` expansion).
    #[error("sandbox: {field} entry {path:?} must be an absolute path or start with ~/")]
    NotAbsolute {
        /// `writable` or `hide`.
        field: &'static str,
        /// The entry as written.
        path: String,
    },
    /// A path names `/` itself, which would either open or hide everything.
    #[error("sandbox: {field} entry {path:?} names the whole filesystem")]
    WholeFilesystem {
        /// `writable` or `hide`.
        field: &'static str,
        /// The entry as written.
        path: String,
    },
    /// An `unhide` entry is not one of the default hidden paths.
    #[error(
        "sandbox: unhide entry {path:?} is not one of the default hidden paths (write it as \
         listed there, such as \"~/.npmrc\"); only those can be unhidden"
    )]
    NotDefault {
        /// The entry as written.
        path: String,
    },
    /// A job limit is out of its range.
    #[error("sandbox: {0}")]
    Limits(String),
    /// `~/` was used but the runner has no `HOME`.
    #[error("sandbox: {path:?} starts with ~/ but HOME is not set")]
    NoHome {
        /// The entry as written.
        path: String,
    },
    /// bubblewrap is not usable on this host.
    #[error(
        "jobs are sandboxed with bubblewrap (sandbox mode {mode}), but it cannot run here: \
         {reason}; install bubblewrap (apt-get install bubblewrap) or set `mode = \"off\"` in \
         the [sandbox] table (wc-local: --no-sandbox) to run jobs unsandboxed"
    )]
    Unusable {
        /// `bubblewrap (default)` or `bubblewrap`.
        mode: &'static str,
        /// What the probe reported.
        reason: String,
    },
}

/// A validated sandbox: the mode and the paths it opens and hides.
#[derive(Debug, Clone)]
pub struct Sandbox {
    mode: SandboxMode,
    /// Whether the mode was named in the configuration (rather than the host default).
    chosen: bool,
    bwrap: PathBuf,
    writable: Vec<PathBuf>,
    hidden: Vec<PathBuf>,
    limits: JobLimits,
}

impl Sandbox {
    /// Validates `settings`; `always_hidden` are added to its `hide` list (the runner's token and
    /// configuration files).
    pub fn from_settings(
        settings: &SandboxSettings,
        always_hidden: impl IntoIterator<Item = PathBuf>,
    ) -> Result<Self, SandboxError> {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let writable = match &settings.writable {
            Some(list) => list.iter().map(String::as_str).collect::<Vec<_>>(),
            None => DEFAULT_WRITABLE.to_vec(),
        };
        let writable = writable
            .into_iter()
            .map(|p| expand("writable", p, home.as_deref()))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(other) = settings
            .unhide
            .iter()
            .find(|p| !DEFAULT_HIDDEN.contains(&p.as_str()))
        {
            return Err(SandboxError::NotDefault {
                path: other.clone(),
            });
        }
        let defaults = DEFAULT_HIDDEN
            .iter()
            .filter(|d| !settings.unhide.iter().any(|u| u == *d))
            // Without a home there is no user's home to hide from.
            .filter_map(|d| expand("hide", d, home.as_deref()).ok());
        let mut hidden = settings
            .hide
            .iter()
            .map(|p| expand("hide", p, home.as_deref()))
            .collect::<Result<Vec<_>, _>>()?;
        hidden.extend(defaults);
        hidden.extend(always_hidden.into_iter().map(|p| absolute(&p)));
        let limits = settings
            .job_limits()
            .over(JobLimits::default())
            .map_err(SandboxError::Limits)?;
        Ok(Self {
            mode: settings.mode.unwrap_or_else(SandboxMode::host_default),
            chosen: settings.mode.is_some(),
            bwrap: settings.bwrap.clone().unwrap_or_else(find_bwrap),
            writable,
            hidden,
            limits,
        })
    }

    /// The mode in force.
    pub fn mode(&self) -> SandboxMode {
        self.mode
    }

    /// The same sandbox in `mode`, as if the configuration had named it.
    pub fn with_mode(mut self, mode: SandboxMode) -> Self {
        self.mode = mode;
        self.chosen = true;
        self
    }

    /// The bubblewrap program.
    pub fn program(&self) -> &Path {
        &self.bwrap
    }

    /// Paths hidden from jobs.
    pub fn hidden(&self) -> &[PathBuf] {
        &self.hidden
    }

    /// What one job may use unless its project says otherwise.
    pub fn limits(&self) -> JobLimits {
        self.limits
    }

    /// Writable directories (toolchain caches) besides the project root and the private tmp.
    pub fn writable(&self) -> &[PathBuf] {
        &self.writable
    }

    /// One line for `--check-config` and logs: the mode and why it is in force.
    pub fn describe(&self) -> String {
        match (self.mode, self.chosen) {
            (SandboxMode::Bubblewrap, true) => format!("bubblewrap ({})", self.bwrap.display()),
            (SandboxMode::Bubblewrap, false) => {
                format!("bubblewrap ({}, the default)", self.bwrap.display())
            }
            (SandboxMode::Off, _) => "off: jobs run with this runner user's full access".to_owned(),
        }
    }

    /// Creates missing writable directories (mode 0700). A toolchain that finds its cache
    /// missing creates it on first use, which a read-only home would refuse; creating it here
    /// keeps the first build in the sandbox working. A directory that cannot be created is
    /// logged and left out.
    pub fn prepare(&mut self) {
        if self.mode != SandboxMode::Bubblewrap {
            return;
        }
        self.writable.retain(|dir| {
            if dir.is_dir() {
                return true;
            }
            let made = fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir);
            match made {
                Ok(()) => {
                    tracing::info!(dir = %dir.display(), "created a writable cache directory for jobs");
                    true
                }
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "cannot create a writable cache directory; jobs will find it read-only");
                    false
                }
            }
        });
    }

    /// Checks that the sandbox can run a job here: in `bubblewrap` mode, runs `true` in a sandbox
    /// shaped like a job's. `off` always passes.
    pub fn probe(&self) -> Result<(), SandboxError> {
        if self.mode != SandboxMode::Bubblewrap {
            return Ok(());
        }
        let unusable = |reason: String| SandboxError::Unusable {
            mode: if self.chosen {
                "bubblewrap"
            } else {
                "bubblewrap (default)"
            },
            reason,
        };
        // A bare name was not found on the runner's PATH (see `find_bwrap`); starting it would
        // fall back to the C library's default search path behind the configuration's back.
        if !self.bwrap.is_absolute() {
            return Err(unusable(format!(
                "{} is not on the runner's PATH",
                self.bwrap.display()
            )));
        }
        let out = std::process::Command::new(&self.bwrap)
            .args(PROBE_ARGS)
            .env_clear()
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| unusable(format!("cannot start {}: {e}", self.bwrap.display())))?;
        if out.status.success() {
            return self.check_bind_fd().map_err(unusable);
        }
        let said = String::from_utf8_lossy(&out.stderr);
        Err(unusable(format!(
            "{} exited with {}: {}",
            self.bwrap.display(),
            out.status,
            said.trim().chars().take(300).collect::<String>()
        )))
    }

    /// Refuses a bubblewrap without `--bind-fd` (before 0.10, unless the distribution
    /// backported it): a project's writable directories are bound by descriptor, never by a
    /// name a job could swap.
    fn check_bind_fd(&self) -> Result<(), String> {
        let help = std::process::Command::new(&self.bwrap)
            .arg("--help")
            .env_clear()
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("cannot start {}: {e}", self.bwrap.display()))?;
        let text = String::from_utf8_lossy(&help.stdout);
        if text.contains("--bind-fd") {
            return Ok(());
        }
        Err(format!(
            "{} has no --bind-fd option (bubblewrap 0.10 or later, or a distribution's \
             backport, binds a project's directories by descriptor)",
            self.bwrap.display()
        ))
    }

    /// The same sandbox hiding also `path` from every job.
    pub fn also_hiding(mut self, path: PathBuf) -> Sandbox {
        self.hidden.push(absolute(&path));
        self
    }

    /// The boundary of work in `project`, whose host also serves `others`: the sandbox's
    /// hidden paths and caches, and its private tmps, as they resolve now.
    pub(crate) fn boundary(&self, project: &Project, others: &[&Project]) -> Boundary {
        let canonical = |paths: &[PathBuf]| -> Vec<PathBuf> {
            paths.iter().filter_map(|p| p.canonicalize().ok()).collect()
        };
        let limits = project.limits().over(self.limits).unwrap_or(self.limits);
        Boundary::new(
            project,
            &canonical(&self.hidden),
            others,
            &canonical(project.writable().unwrap_or(&self.writable)),
            &canonical(&private_tmps()),
        )
        .with_limits(limits)
    }

    /// The bwrap arguments that run `program args` for a job within `boundary`, starting in
    /// `cwd`. `bound` are the child's descriptors of the boundary's bound directories, in
    /// [`Boundary::bound_dirs`] order (`None`: left out). `private` are runner-made paths the
    /// job must read (its script directory), `status_fd` the descriptor bwrap reports the
    /// namespace's pid 1 on, `gate_fd` the read end of the pipe the program waits on (see
    /// [`GATE_SCRIPT`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn bwrap_args(
        &self,
        boundary: &Boundary,
        bound: &[Option<(RawFd, &Path)>],
        cwd: &Path,
        private: &[&Path],
        status_fd: RawFd,
        gate_fd: RawFd,
        program: &OsString,
        args: &[OsString],
    ) -> Vec<OsString> {
        let mut a = Args::default();
        a.flags(&[
            "--die-with-parent",
            "--new-session",
            "--unshare-pid",
            "--unshare-ipc",
        ]);
        a.pair("--ro-bind", "/", "/");
        a.one("--dev", "/dev");
        a.one("--proc", "/proc");
        // Masks stay writable until every mount beneath them is made, then turn read-only.
        let mut read_only = Vec::new();
        for mount in boundary.mounts() {
            match mount {
                Mount::Tmpfs(dir) => a.one("--tmpfs", dir),
                Mount::ReadOnly(path) => a.pair("--ro-bind", &path, &path),
                Mount::Writable(dir) => a.pair("--bind", &dir, &dir),
                Mount::Registered(i) => {
                    if let Some(Some((fd, dir))) = bound.get(i) {
                        a.pair("--bind-fd", fd.to_string(), dir);
                    }
                }
                Mount::MaskDir(dir) => {
                    a.one("--tmpfs", &dir);
                    read_only.push(dir);
                }
                Mount::MaskFile(file) => a.pair("--ro-bind", "/dev/null", file),
            }
        }
        for path in private {
            a.pair("--ro-bind", path, path);
        }
        for dir in read_only {
            a.one("--remount-ro", dir);
        }
        a.flags(&["--cap-drop", "ALL"]);
        a.one("--json-status-fd", status_fd.to_string());
        a.one("--chdir", cwd);
        a.flags(&["--", "/bin/sh", "-c"]);
        a.0.push(GATE_SCRIPT.replace("GATE_FD", &gate_fd.to_string()).into());
        a.0.push(program.clone());
        a.0.extend(args.iter().cloned());
        a.0
    }
}

/// The directories a job gets a private, empty copy of: `/tmp` (the host's holds other jobs'
/// files and the runner's sockets) and the runner's own temporary directory when it is another.
fn private_tmps() -> Vec<PathBuf> {
    let tmp = PathBuf::from("/tmp");
    let runner_tmp = std::env::temp_dir();
    let mut dirs = vec![tmp];
    if runner_tmp.is_absolute() && !dirs.contains(&runner_tmp) && runner_tmp.is_dir() {
        dirs.push(runner_tmp);
    }
    dirs
}

/// What runs first in a sandbox: it waits for the runner's `go` on the gate pipe, then becomes
/// the job's program (`exec`, same pid, same argv). bwrap's pid 1 arms its death signal only
/// after it has started the program; a runner that died in between would leave the sandbox
/// running with nobody to end it. The runner says `go` once it has seen pid 1 waiting for its
/// children, which it does only after arming ([`await_armed`]); a runner that dies first
/// closes the pipe, and the job ends without running anything. The gate descriptor stays open
/// in the job, at end of file.
pub(crate) const GATE_SCRIPT: &str =
    "IFS= read -r go < /proc/self/fd/GATE_FD && [ \"$go\" = go ] && exec \"$0\" \"$@\"; exit 125";

/// Waits until the namespace's pid 1 (`init`, a host pid) has started the job's first process
/// and sits in its wait loop, which bwrap enters only after arming its death signal. Gives up
/// after `within` (the caller then lets the job go all the same: the wait is a narrowing of a
/// start-up race, never a reason to refuse work) and at once where `/proc/PID/wchan` tells
/// nothing (a kernel that hides it).
pub(crate) fn await_armed(init: Pid, within: Duration) -> bool {
    let deadline = std::time::Instant::now() + within;
    let children = format!("/proc/{init}/task/{init}/children");
    let wchan = format!("/proc/{init}/wchan");
    let mut pause = Duration::from_micros(200);
    loop {
        let started = fs::read_to_string(&children).is_ok_and(|c| !c.trim().is_empty());
        match fs::read_to_string(&wchan) {
            Ok(w) if started && w.trim() == "do_wait" => return true,
            Ok(w) if w.trim().is_empty() || w.trim() == "0" => return false,
            // Gone: the job ended (or never started); nothing is left to arm.
            Err(_) => return false,
            Ok(_) => {}
        }
        if std::time::Instant::now() >= deadline {
            tracing::warn!(
                pid = init.as_raw(),
                "the sandbox's init did not settle in time; letting the job go"
            );
            return false;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(10));
    }
}

/// A sandbox shaped like a job's (without paths), running `true`.
const PROBE_ARGS: &[&str] = &[
    "--die-with-parent",
    "--new-session",
    "--unshare-pid",
    "--unshare-ipc",
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--tmpfs",
    "/tmp",
    "--cap-drop",
    "ALL",
    "--",
    "true",
];

#[derive(Default)]
struct Args(Vec<OsString>);

impl Args {
    fn flags(&mut self, flags: &[&str]) {
        self.0.extend(flags.iter().map(OsString::from));
    }
    fn one(&mut self, flag: &str, value: impl AsRef<std::ffi::OsStr>) {
        self.0.push(flag.into());
        self.0.push(value.as_ref().to_owned());
    }
    fn pair(&mut self, flag: &str, a: impl AsRef<std::ffi::OsStr>, b: impl AsRef<std::ffi::OsStr>) {
        self.one(flag, a);
        self.0.push(b.as_ref().to_owned());
    }
}

/// `paths` as [`SandboxSettings`] reads them (absolute, or `~/…` in the runner's home), for the
/// configuration entry `field`.
pub(crate) fn expand_all(
    field: &'static str,
    paths: &[String],
) -> Result<Vec<PathBuf>, SandboxError> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    paths
        .iter()
        .map(|p| expand(field, p, home.as_deref()))
        .collect()
}

fn expand(field: &'static str, path: &str, home: Option<&Path>) -> Result<PathBuf, SandboxError> {
    let expanded = match path.strip_prefix("~/") {
        Some(rest) => home
            .ok_or_else(|| SandboxError::NoHome {
                path: path.to_owned(),
            })?
            .join(rest),
        None => PathBuf::from(path),
    };
    if !expanded.is_absolute() {
        return Err(SandboxError::NotAbsolute {
            field,
            path: path.to_owned(),
        });
    }
    if expanded.parent().is_none() {
        return Err(SandboxError::WholeFilesystem {
            field,
            path: path.to_owned(),
        });
    }
    Ok(expanded)
}

/// `bwrap` as found on the runner's `PATH` (an executable file in an absolute directory), or the
/// bare name when it is not there, which the probe then refuses.
fn find_bwrap() -> PathBuf {
    let found =
        crate::program::program_path("bwrap", Path::new("/"), std::env::var_os("PATH").as_deref());
    PathBuf::from(found)
}

/// `path` made absolute against the working directory (the runner's files named relatively).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

// ---------------------------------------------------------------------------------------------
// Containment of a running job

/// What bwrap reports on its status descriptor once the namespaces exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NamespaceInit {
    /// The namespace's pid 1, as the host sees it.
    pub init: Pid,
    /// The inode of the job's PID namespace.
    pub pid_namespace: u64,
}

impl NamespaceInit {
    /// Reads the first status line bwrap writes (`{ "child-pid": N, …, "pid-namespace": M }`);
    /// `None` when bwrap ended before creating the namespace.
    pub(crate) fn read(status: &mut BufReader<File>) -> Option<Self> {
        let mut line = String::new();
        status.read_line(&mut line).ok()?;
        let value: serde_json::Value = serde_json::from_str(&line).ok()?;
        let init = i32::try_from(value.get("child-pid")?.as_u64()?).ok()?;
        Some(Self {
            init: Pid::from_raw(init),
            pid_namespace: value.get("pid-namespace")?.as_u64()?,
        })
    }
}

/// How the processes of one running job are held until it ends, and the cgroups that bound
/// them (if the host offers any).
pub(crate) enum Containment {
    /// Sandboxed: `leader` is bwrap (the runner's child); the job lives in a PID namespace.
    Namespace {
        leader: Pid,
        ns: Option<NamespaceInit>,
        /// bwrap's status pipe, kept open: bwrap writes the exit status to it at the end, and
        /// a closed pipe would kill it with SIGPIPE.
        _status: BufReader<File>,
        bounds: Option<JobCgroup>,
    },
    /// Unsandboxed, in cgroups of its own that hold every process.
    Cgroup { leader: Pid, cgroup: JobCgroup },
    /// Unsandboxed, in the leader's process group only (and bounded, where the host can).
    Group {
        leader: Pid,
        bounds: Option<JobCgroup>,
    },
}

impl Containment {
    /// The sandbox's pid 1 (a host pid), when the job runs in a PID namespace whose start bwrap
    /// reported.
    pub(crate) fn init(&self) -> Option<Pid> {
        match self {
            Containment::Namespace { ns: Some(ns), .. } => Some(ns.init),
            _ => None,
        }
    }

    /// Sends `signal` to every process of the job but the sandbox's own (bwrap and the
    /// namespace's pid 1, which would end the whole job at once).
    pub(crate) fn signal(&self, signal: Signal) {
        match self {
            Containment::Namespace { ns: Some(ns), .. } => {
                for pid in processes_in_namespace(ns.pid_namespace) {
                    if pid != ns.init {
                        send(pid, signal);
                    }
                }
            }
            // The namespace was never made: bwrap alone runs, and it ends on its own.
            Containment::Namespace { ns: None, .. } => {}
            Containment::Cgroup { leader, cgroup } => {
                group_signal(*leader, signal);
                for pid in cgroup.processes() {
                    send(pid, signal);
                }
            }
            Containment::Group { leader, .. } => group_signal(*leader, signal),
        }
    }

    /// Kills every process of the job. `leader_reaped`: the leader has been waited for, so its
    /// pid is no longer the job's and is not signalled.
    pub(crate) fn kill(&self, leader_reaped: bool) {
        match self {
            Containment::Namespace { leader, ns, .. } => {
                // bwrap first: `--die-with-parent` then kills the namespace's pid 1, which takes
                // every process in the namespace with it. The job runs in a session of its own,
                // so bwrap's process group holds nothing else.
                if !leader_reaped {
                    send(*leader, Signal::SIGKILL);
                }
                if let Some(ns) = ns
                    && namespace_of(ns.init) == Some(ns.pid_namespace)
                {
                    send(ns.init, Signal::SIGKILL);
                }
            }
            Containment::Cgroup { leader, cgroup } => {
                group_signal(*leader, Signal::SIGKILL);
                cgroup.kill();
            }
            Containment::Group { leader, .. } => group_signal(*leader, Signal::SIGKILL),
        }
    }

    /// Waits (bounded) until no process of the job remains, then releases what holds them.
    /// Returns what the job's bounds refused it.
    pub(crate) async fn release(self) -> Vec<Notice> {
        let cgroup = match self {
            Containment::Cgroup { cgroup, .. } => Some(cgroup),
            Containment::Namespace { bounds, .. } | Containment::Group { bounds, .. } => bounds,
        };
        let Some(cgroup) = cgroup else {
            return Vec::new();
        };
        let notices = cgroup.report();
        cgroup.remove_when_empty().await;
        notices
    }
}

fn send(pid: Pid, signal: Signal) {
    match kill(pid, signal) {
        Ok(()) | Err(Errno::ESRCH) => {}
        Err(e) => {
            tracing::warn!(pid = pid.as_raw(), %signal, error = %e, "cannot signal a process")
        }
    }
}

fn group_signal(leader: Pid, signal: Signal) {
    match killpg(leader, signal) {
        // The group is already empty.
        Ok(()) | Err(Errno::ESRCH) => {}
        Err(e) => {
            tracing::warn!(pgid = leader.as_raw(), %signal, error = %e, "cannot signal the process group")
        }
    }
}

/// The PID namespace inode of `pid`, if it still runs.
fn namespace_of(pid: Pid) -> Option<u64> {
    let link = fs::read_link(format!("/proc/{pid}/ns/pid")).ok()?;
    let link = link.to_str()?;
    link.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

/// Every process on the host whose PID namespace is `namespace`.
fn processes_in_namespace(namespace: u64) -> Vec<Pid> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .map(Pid::from_raw)
        .filter(|&pid| namespace_of(pid) == Some(namespace))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_paths_expand_home_and_must_be_absolute() {
        let home = Some(Path::new("/home/u"));
        assert_eq!(
            expand("writable", "~/.cargo", home).unwrap(),
            Path::new("/home/u/.cargo")
        );
        assert_eq!(
            expand("hide", "/etc/wc", home).unwrap(),
            Path::new("/etc/wc")
        );
        for (path, home, expect) in [
            ("relative/dir", home, "must be an absolute path"),
            ("~user/x", home, "must be an absolute path"),
            ("/", home, "names the whole filesystem"),
            ("~/x", None, "HOME is not set"),
        ] {
            let err = expand("hide", path, home).unwrap_err().to_string();
            assert!(err.contains(expect), "{path}: {err}");
        }
    }

    #[test]
    fn the_default_mode_is_bubblewrap_on_linux_and_named_as_the_default() {
        let sandbox = Sandbox::from_settings(&SandboxSettings::default(), []).unwrap();
        assert_eq!(sandbox.mode(), SandboxMode::Bubblewrap);
        assert!(
            sandbox.describe().contains("the default"),
            "{}",
            sandbox.describe()
        );
        let off = sandbox.with_mode(SandboxMode::Off);
        assert!(off.describe().starts_with("off"), "{}", off.describe());
        assert!(off.probe().is_ok(), "off needs nothing");
    }

    #[test]
    fn an_unusable_bubblewrap_names_both_fixes() {
        let settings = SandboxSettings {
            bwrap: Some("/nonexistent/bwrap".into()),
            ..Default::default()
        };
        let err = Sandbox::from_settings(&settings, [])
            .unwrap()
            .probe()
            .unwrap_err()
            .to_string();
        assert!(err.contains("apt-get install bubblewrap"), "{err}");
        assert!(err.contains("mode = \"off\""), "{err}");
        assert!(err.contains("(default)"), "{err}");
    }

    #[test]
    fn the_installed_bubblewrap_passes_the_probe() {
        let sandbox = Sandbox::from_settings(&SandboxSettings::default(), []).unwrap();
        sandbox.probe().unwrap();
    }
}
