//! Job cgroups: every job's processes in cgroups of their own, which bound them (how many
//! processes, how much memory, what share of the CPU) and, for an unsandboxed job, hold them
//! so that a stop kills every one.
//!
//! What the host offers is found once ([`layout`]): the unified hierarchy (cgroup v2) with the
//! `pids`, `memory` and `cpu` controllers delegated to the runner's cgroup, or — on a host that
//! mounts them as separate v1 hierarchies — those; a host may mix both (the unified hierarchy
//! to hold processes, v1 controllers to bound them). A job's cgroups are made under the
//! runner's own, named `wc-job-<runner pid>-<random>`, so a runner started later can tell a
//! dead runner's from a live one's ([`sweep_orphans`]). Where neither can be used, jobs run
//! unbounded and the runner says so when it starts ([`describe`]).
//!
//! After a job ends, what its bounds refused is read back ([`JobCgroup::report`]): forks
//! refused at the process limit, processes the kernel killed at the memory limit.

use std::fs::{self, OpenOptions};
use std::io::{self, Write as _};
use std::os::fd::{AsRawFd as _, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde::Deserialize;
use wc_runner_protocol::{Notice, OpErrorKind};

/// What one job may use. `None` leaves a resource unbounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobLimits {
    /// Processes and threads at once (`pids.max`).
    pub max_processes: Option<u64>,
    /// Memory in bytes (`memory.max`; v1 `memory.limit_in_bytes`).
    pub max_memory: Option<u64>,
    /// Share of the CPU against other jobs and the runner, 1-10000 (`cpu.weight`, 100 is an
    /// even share; v1 `cpu.shares` scaled).
    pub cpu_weight: Option<u64>,
}

impl Default for JobLimits {
    fn default() -> Self {
        JobLimits {
            max_processes: Some(4096),
            max_memory: Some(8 << 30),
            cpu_weight: Some(100),
        }
    }
}

/// Job limits as a configuration writes them (`[sandbox]` for the runner, a project table for
/// one project): each key absent keeps the default (or the runner's), `0` leaves it unbounded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobLimitSettings {
    /// Processes and threads a job may have at once.
    pub max_processes: Option<u64>,
    /// Memory a job may use, in MiB.
    pub max_memory_mib: Option<u64>,
    /// A job's share of the CPU, 1-10000 (100 is even with the runner and other jobs).
    pub cpu_weight: Option<u64>,
}

impl JobLimitSettings {
    /// `base` with what these settings name instead.
    pub fn over(&self, base: JobLimits) -> Result<JobLimits, String> {
        let bound = |v: u64| (v > 0).then_some(v);
        if let Some(w) = self.cpu_weight
            && !(1..=10_000).contains(&w)
        {
            return Err(format!("cpu_weight must be 1-10000, not {w}"));
        }
        if let Some(mib) = self.max_memory_mib
            && mib > 0
            && mib < 16
        {
            return Err(format!(
                "max_memory_mib must be 0 (unbounded) or at least 16, not {mib}"
            ));
        }
        Ok(JobLimits {
            max_processes: self.max_processes.map_or(base.max_processes, bound),
            max_memory: self
                .max_memory_mib
                .map_or(base.max_memory, |m| bound(m).map(|m| m << 20)),
            cpu_weight: self.cpu_weight.or(base.cpu_weight),
        })
    }
}

/// A controller a job's cgroup can bound it with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Controller {
    Pids,
    Memory,
    Cpu,
}

impl Controller {
    const ALL: [Controller; 3] = [Controller::Pids, Controller::Memory, Controller::Cpu];

    fn name(self) -> &'static str {
        match self {
            Controller::Pids => "pids",
            Controller::Memory => "memory",
            Controller::Cpu => "cpu",
        }
    }
}

/// One hierarchy jobs get a cgroup in: the directory their cgroups are made in, whether it is
/// the unified one, and the controllers it bounds them with.
#[derive(Debug, Clone)]
struct Parent {
    dir: PathBuf,
    unified: bool,
    controllers: Vec<Controller>,
}

/// What this host offers jobs, found once.
#[derive(Debug)]
struct Layout {
    parents: Vec<Parent>,
    /// What cannot be bounded, and why (empty when everything can).
    missing: Vec<String>,
}

fn layout() -> &'static Layout {
    static LAYOUT: OnceLock<Layout> = OnceLock::new();
    LAYOUT.get_or_init(|| {
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let cgroups = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        detect(&mountinfo, &cgroups)
    })
}

/// One line saying how jobs are bounded here, for the start log and `--check-config`.
pub fn describe() -> String {
    let l = layout();
    let mut bounded: Vec<String> = Vec::new();
    for p in &l.parents {
        for c in &p.controllers {
            bounded.push(format!(
                "{} ({})",
                c.name(),
                if p.unified { "cgroup v2" } else { "cgroup v1" }
            ));
        }
    }
    let mut line = if bounded.is_empty() {
        "jobs' processes, memory and CPU are NOT bounded".to_owned()
    } else {
        format!("jobs are bounded by {}", bounded.join(", "))
    };
    if !l.missing.is_empty() {
        line.push_str(&format!("; {}", l.missing.join("; ")));
    }
    line
}

/// Whether every controller jobs are bounded by is available here.
pub fn bounds_every_job() -> bool {
    layout().missing.is_empty()
}

/// Finds the hierarchies: the unified one (usable to hold processes wherever the runner's
/// cgroup can have children, to bound them where its controllers are delegated) and v1
/// hierarchies of the controllers the unified one lacks.
fn detect(mountinfo: &str, cgroups: &str) -> Layout {
    let mut parents = Vec::new();
    let mut have: Vec<Controller> = Vec::new();
    let mut missing = Vec::new();
    if let Some(own) = unified_dir(mountinfo, cgroups).filter(|d| writable(d)) {
        let available = fs::read_to_string(own.join("cgroup.controllers")).unwrap_or_default();
        let wanted: Vec<Controller> = Controller::ALL
            .into_iter()
            .filter(|c| available.split_whitespace().any(|a| a == c.name()))
            .collect();
        let controllers = match delegate(&own, &wanted) {
            Ok(()) => wanted,
            Err(e) => {
                if !wanted.is_empty() {
                    missing.push(format!(
                        "cannot enable cgroup v2 controllers in {}: {e}",
                        own.display()
                    ));
                }
                Vec::new()
            }
        };
        have.extend(&controllers);
        parents.push(Parent {
            dir: own,
            unified: true,
            controllers,
        });
    }
    for c in Controller::ALL {
        if have.contains(&c) {
            continue;
        }
        match v1_dir(mountinfo, cgroups, c).filter(|d| writable(d)) {
            Some(dir) => {
                have.push(c);
                parents.push(Parent {
                    dir,
                    unified: false,
                    controllers: vec![c],
                });
            }
            None => missing.push(format!("no usable {} controller", c.name())),
        }
    }
    Layout { parents, missing }
}

/// Whether a job's cgroup can be made in `dir`.
fn writable(dir: &Path) -> bool {
    nix::unistd::access(dir, nix::unistd::AccessFlags::W_OK).is_ok()
        && dir.join("cgroup.procs").exists()
}

/// Enables `controllers` for the children of the runner's unified cgroup `own`. A cgroup with
/// processes of its own cannot enable them for children (cgroup v2's rule of no internal
/// processes): the runner then moves itself into a leaf of its own, `own/wc-runner`, first.
fn delegate(own: &Path, controllers: &[Controller]) -> io::Result<()> {
    if controllers.is_empty() {
        return Ok(());
    }
    let line: String = controllers
        .iter()
        .map(|c| format!("+{} ", c.name()))
        .collect();
    let enable = || fs::write(own.join("cgroup.subtree_control"), line.trim_end());
    match enable() {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(Errno::EBUSY as i32) => {
            let leaf = own.join("wc-runner");
            match fs::create_dir(&leaf) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
            // Every process of the runner's cgroup (the runner, and in wc-local the server
            // with it) moves into the leaf.
            for pid in read_pids(&own.join("cgroup.procs")) {
                let _ = fs::write(leaf.join("cgroup.procs"), pid.to_string());
            }
            enable()
        }
        Err(e) => Err(e),
    }
}

/// The unified (cgroup v2) directory of this process: the `cgroup2` mount point joined with
/// the `0::PATH` entry of `/proc/self/cgroup`.
fn unified_dir(mountinfo: &str, cgroups: &str) -> Option<PathBuf> {
    let mount = mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        (right.split_whitespace().next()? == "cgroup2")
            .then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
    })?;
    let own = cgroups
        .lines()
        .find_map(|l| l.strip_prefix("0::"))?
        .trim_start_matches('/');
    Some(mount.join(own))
}

/// The v1 directory of this process in the hierarchy of `controller`: the mount of a `cgroup`
/// file system whose options name it, joined with the matching entry of `/proc/self/cgroup`.
fn v1_dir(mountinfo: &str, cgroups: &str, controller: Controller) -> Option<PathBuf> {
    let name = controller.name();
    let names = |list: &str| list.split(',').any(|n| n == name);
    let mount = mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mut right = right.split_whitespace();
        if right.next()? != "cgroup" {
            return None;
        }
        let options = right.nth(1)?;
        names(options).then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
    })?;
    let own = cgroups.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, list, path) = (parts.next()?, parts.next()?, parts.next()?);
        names(list).then_some(path)
    })?;
    Some(mount.join(own.trim_start_matches('/')))
}

fn read_pids(procs: &Path) -> Vec<i32> {
    fs::read_to_string(procs)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// One job's cgroups, one per hierarchy the host offers.
pub(crate) struct JobCgroup {
    members: Vec<Member>,
    limits: JobLimits,
}

struct Member {
    dir: PathBuf,
    unified: bool,
    controllers: Vec<Controller>,
    /// `cgroup.procs`, opened before the spawn so the child joins with one `write`.
    procs: OwnedFd,
}

impl JobCgroup {
    /// Fresh cgroups for a job bounded by `limits`, or `None` when this host offers none
    /// (logged once at start, by [`describe`]). A hierarchy whose cgroup cannot be made or
    /// bounded is left out.
    pub(crate) fn create(limits: JobLimits) -> Option<Self> {
        let name = format!(
            "wc-job-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        );
        let members: Vec<Member> = layout()
            .parents
            .iter()
            .filter_map(|p| match Member::create(p, &name, limits) {
                Ok(m) => Some(m),
                Err(e) => {
                    tracing::warn!(dir = %p.dir.display(), error = %e, "cannot make a job's cgroup");
                    None
                }
            })
            .collect();
        (!members.is_empty()).then_some(JobCgroup { members, limits })
    }

    /// The descriptors the child writes `0` to (joining each cgroup) before it runs the
    /// program, and how many there are.
    pub(crate) fn procs_fds(&self) -> ([RawFd; 4], usize) {
        let mut fds = [-1; 4];
        for (slot, m) in fds.iter_mut().zip(&self.members) {
            *slot = m.procs.as_raw_fd();
        }
        (fds, self.members.len().min(4))
    }

    /// The cgroup that holds the job's processes: the unified one, else the v1 `pids` one.
    fn holder(&self) -> Option<&Member> {
        self.members.iter().find(|m| m.unified).or_else(|| {
            self.members
                .iter()
                .find(|m| m.controllers.contains(&Controller::Pids))
        })
    }

    /// Whether it can hold every process of a job (so that a kill reaches all of them).
    pub(crate) fn holds(&self) -> bool {
        self.holder().is_some()
    }

    /// Every process of the job.
    pub(crate) fn processes(&self) -> Vec<Pid> {
        self.holder()
            .map(|m| read_pids(&m.dir.join("cgroup.procs")))
            .unwrap_or_default()
            .into_iter()
            .map(Pid::from_raw)
            .collect()
    }

    /// Kills every process in it.
    pub(crate) fn kill(&self) {
        if let Some(m) = self.holder() {
            kill_cgroup(&m.dir, m.unified);
        }
    }

    /// What its bounds refused the job, as notices: forks refused at the process limit,
    /// processes killed at the memory limit.
    pub(crate) fn report(&self) -> Vec<Notice> {
        let mut notices = Vec::new();
        for m in &self.members {
            let count = |file: &str, key: &str| -> u64 {
                fs::read_to_string(m.dir.join(file))
                    .unwrap_or_default()
                    .lines()
                    .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
                    .unwrap_or(0)
            };
            if m.controllers.contains(&Controller::Pids) {
                let refused = count("pids.events", "max ");
                if refused > 0 {
                    notices.push(Notice {
                        kind: OpErrorKind::ResourceLimit,
                        message: format!(
                            "the job reached its limit of {} processes and threads: {refused} \
                             forks were refused",
                            self.limits.max_processes.unwrap_or(0)
                        ),
                    });
                }
            }
            if m.controllers.contains(&Controller::Memory) {
                let file = if m.unified {
                    "memory.events"
                } else {
                    "memory.oom_control"
                };
                let killed = count(file, "oom_kill ");
                if killed > 0 {
                    notices.push(Notice {
                        kind: OpErrorKind::ResourceLimit,
                        message: format!(
                            "the job reached its memory limit of {} MiB: the kernel killed \
                             {killed} of its processes",
                            self.limits.max_memory.unwrap_or(0) >> 20
                        ),
                    });
                }
            }
        }
        notices
    }

    /// Waits (bounded) until no process is left in it, then removes it.
    pub(crate) async fn remove_when_empty(self) {
        for _ in 0..100 {
            if self
                .members
                .iter()
                .all(|m| read_pids(&m.dir.join("cgroup.procs")).is_empty())
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.remove();
    }

    fn remove(&self) {
        for m in &self.members {
            if let Err(e) = fs::remove_dir(&m.dir)
                && e.kind() != io::ErrorKind::NotFound
            {
                tracing::warn!(dir = %m.dir.display(), error = %e, "cannot remove a job's cgroup");
            }
        }
    }
}

impl Member {
    fn create(parent: &Parent, name: &str, limits: JobLimits) -> io::Result<Member> {
        let dir = parent.dir.join(name);
        fs::create_dir(&dir)?;
        let made = (|| {
            for c in &parent.controllers {
                for (file, value) in settings(*c, parent.unified, limits) {
                    fs::write(dir.join(file), value)?;
                }
            }
            OpenOptions::new()
                .write(true)
                .custom_flags(nix::libc::O_CLOEXEC)
                .open(dir.join("cgroup.procs"))
        })();
        match made {
            Ok(procs) => Ok(Member {
                dir,
                unified: parent.unified,
                controllers: parent.controllers.clone(),
                procs: procs.into(),
            }),
            Err(e) => {
                let _ = fs::remove_dir(&dir);
                Err(e)
            }
        }
    }
}

/// The files that bound a job with controller `c`, and their values.
fn settings(c: Controller, unified: bool, limits: JobLimits) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    match (c, unified) {
        (Controller::Pids, _) => {
            if let Some(n) = limits.max_processes {
                out.push(("pids.max", n.to_string()));
            }
        }
        (Controller::Memory, true) => {
            if let Some(bytes) = limits.max_memory {
                out.push(("memory.max", bytes.to_string()));
                // What is over the limit is not moved to swap either.
                out.push(("memory.swap.max", "0".to_owned()));
            }
        }
        (Controller::Memory, false) => {
            if let Some(bytes) = limits.max_memory {
                out.push(("memory.limit_in_bytes", bytes.to_string()));
            }
        }
        (Controller::Cpu, true) => {
            if let Some(w) = limits.cpu_weight {
                out.push(("cpu.weight", w.to_string()));
            }
        }
        (Controller::Cpu, false) => {
            if let Some(w) = limits.cpu_weight {
                // v1 shares: 1024 is an even share, as weight 100 is in v2.
                out.push(("cpu.shares", (w * 1024 / 100).max(2).to_string()));
            }
        }
    }
    out
}

/// Kills every process in the cgroup `dir`: `cgroup.kill` where the kernel has it (v2, 5.14+),
/// else SIGKILL to each listed process until none is left.
fn kill_cgroup(dir: &Path, unified: bool) {
    if unified
        && OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.kill"))
            .and_then(|mut f| f.write_all(b"1"))
            .is_ok()
    {
        return;
    }
    for _ in 0..50 {
        let pids = read_pids(&dir.join("cgroup.procs"));
        if pids.is_empty() {
            return;
        }
        for pid in pids {
            match kill(Pid::from_raw(pid), Signal::SIGKILL) {
                Ok(()) | Err(Errno::ESRCH) => {}
                Err(e) => tracing::warn!(pid, error = %e, "cannot kill a job's process"),
            }
        }
    }
}

/// Kills and removes the job cgroups left by runners that died (named after a pid that no
/// longer runs); the processes of their unsandboxed jobs die here. Runs at agent start.
pub fn sweep_orphans() {
    for parent in &layout().parents {
        let Ok(entries) = fs::read_dir(&parent.dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix("wc-job-"))
                .and_then(|rest| rest.split('-').next())
                .and_then(|p| p.parse::<i32>().ok())
            else {
                continue;
            };
            if kill(Pid::from_raw(pid), None) != Err(Errno::ESRCH) {
                continue;
            }
            let dir = entry.path();
            tracing::warn!(dir = %dir.display(), "killing the processes of a dead runner's job");
            kill_cgroup(&dir, parent.unified);
            for _ in 0..100 {
                if fs::remove_dir(&dir).is_ok() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

impl Drop for JobCgroup {
    fn drop(&mut self) {
        // A run abandoned mid-way: kill what is left; the directories go once empty.
        let populated = self
            .members
            .iter()
            .any(|m| !read_pids(&m.dir.join("cgroup.procs")).is_empty());
        if !populated {
            self.remove();
            return;
        }
        self.kill();
        let dirs: Vec<PathBuf> = self.members.iter().map(|m| m.dir.clone()).collect();
        std::thread::spawn(move || {
            for dir in dirs {
                for _ in 0..100 {
                    if fs::remove_dir(&dir).is_ok() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unified_directory_comes_from_the_cgroup2_mount_and_its_entry() {
        let mountinfo = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
             35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
             41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw\n";
        let cgroups = "4:memory:/x\n0::/system.slice/wc-runner.service\n";
        assert_eq!(
            unified_dir(mountinfo, cgroups),
            Some(PathBuf::from(
                "/sys/fs/cgroup/unified/system.slice/wc-runner.service"
            ))
        );
        assert_eq!(
            v1_dir(mountinfo, cgroups, Controller::Memory),
            Some(PathBuf::from("/sys/fs/cgroup/memory/x"))
        );
        assert_eq!(v1_dir(mountinfo, cgroups, Controller::Pids), None);
        assert_eq!(
            unified_dir("1 2 0:1 / / rw - ext4 /dev/x rw\n", cgroups),
            None
        );
        // v1 controllers mounted together (`cpu,cpuacct`) are found by either name.
        let joined = "40 31 0:40 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n";
        assert_eq!(
            v1_dir(joined, "3:cpu,cpuacct:/a/b\n", Controller::Cpu),
            Some(PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/a/b"))
        );
    }

    #[test]
    fn settings_lower_limits_and_zero_leaves_a_resource_unbounded() {
        let base = JobLimits::default();
        let set = JobLimitSettings {
            max_processes: Some(0),
            max_memory_mib: Some(512),
            cpu_weight: None,
        };
        assert_eq!(
            set.over(base).unwrap(),
            JobLimits {
                max_processes: None,
                max_memory: Some(512 << 20),
                cpu_weight: Some(100),
            }
        );
        for (bad, expect) in [
            (
                JobLimitSettings {
                    cpu_weight: Some(0),
                    ..Default::default()
                },
                "cpu_weight",
            ),
            (
                JobLimitSettings {
                    max_memory_mib: Some(8),
                    ..Default::default()
                },
                "max_memory_mib",
            ),
        ] {
            let err = bad.over(base).unwrap_err();
            assert!(err.contains(expect), "{err}");
        }
        assert_eq!(
            settings(Controller::Cpu, false, base),
            [("cpu.shares", "1024".to_owned())]
        );
    }
}
