//! The boundary of one project's work on this host: what its jobs and the runner's own file
//! operations may see and change.
//!
//! A [`Project`] is registered once, from the operator's configuration (or when wc itself makes
//! a project): its canonical root and the Git metadata it owns outside that root (a linked
//! worktree's gitdir and common directory), resolved then and stored. Nothing a job can write
//! later — a `.git` file, a `commondir`, a symlink — changes what is stored.
//!
//! For each work item [`Host::boundary`](crate::exec::Host::boundary) builds a [`Boundary`]
//! from the registered project, the host's sandbox settings and the other projects it serves.
//! The job sandbox mounts it ([`Boundary::mounts`], [`Binds`]) and every file operation of the
//! runner checks it ([`crate::beneath::Root`] refuses [`Boundary::hidden_in_root`]), so the two
//! can never disagree:
//!
//! - *writable*: the project root and its registered Git metadata, each bound into a job by a
//!   descriptor whose real path was checked to be the registered one (a name swapped for a
//!   symlink binds nothing), and the toolchain caches;
//! - *hidden*: the runner's secrets (its token and configuration files, `hide`, the default
//!   credential paths) and every other project of the host with its Git metadata, except a
//!   project that encloses this one's root (its enclosing repository, read-only);
//! - *read-only*: everything else, including a project's surroundings inside a private `/tmp`
//!   (the top directory under `/tmp` that holds the root), as anywhere else on the host.
//!
//! A hidden path inside a writable area is masked after the area is bound, and every directory
//! between the two is bound onto itself first: a mount point cannot be renamed, so no job can
//! move a hidden file out from under its mask for the next job to read.

use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::path::{Component, Path, PathBuf};

use anyhow::bail;
use rustix::fs::{Mode, OFlags};
use wc_runner_protocol::{Notice, OpErrorKind};

use crate::cgroup::{JobLimitSettings, JobLimits};

/// The name of an environment variable the runner passes on to a project's jobs: a shell-style
/// name (`[A-Za-z_][A-Za-z0-9_]*`, at most 128 bytes) that is not one of the runner's own
/// settings (`WC_…`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct EnvName(String);

impl EnvName {
    /// Checks `name`.
    pub fn parse(name: &str) -> anyhow::Result<Self> {
        let mut bytes = name.bytes();
        let well_formed = name.len() <= 128
            && bytes
                .next()
                .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !well_formed {
            bail!(
                "environment name {name:?} must be 1-128 of A-Z a-z 0-9 _, not starting with a digit"
            );
        }
        if name.to_ascii_uppercase().starts_with("WC_") {
            bail!(
                "environment name {name:?} is one of the runner's own settings (WC_…) and never passes to jobs"
            );
        }
        Ok(Self(name.to_owned()))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A project as this runner serves it: its root and the Git metadata registered with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    root: PathBuf,
    git: Vec<PathBuf>,
    env_pass: Vec<EnvName>,
    /// Caches its jobs may write instead of the runner's (`None`: the runner's).
    writable: Option<Vec<PathBuf>>,
    /// What its jobs may use, where it differs from the runner's.
    limits: JobLimitSettings,
}

impl Project {
    /// Registers the directory `root`: canonicalized, and its Git metadata outside it resolved
    /// now, once. `env_pass` names the runner's environment variables its jobs receive.
    pub fn register(root: &Path, env_pass: Vec<EnvName>) -> io::Result<Project> {
        let root = root.canonicalize()?;
        if !root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", root.display()),
            ));
        }
        let git = registered_git_metadata(&root);
        Ok(Project {
            root,
            git,
            env_pass,
            writable: None,
            limits: JobLimitSettings::default(),
        })
    }

    /// The same project, its jobs bounded by `limits` where they name a bound (checked by
    /// [`JobLimitSettings::over`]).
    pub fn with_limits(mut self, limits: JobLimitSettings) -> Result<Project, String> {
        limits.over(JobLimits::default())?;
        self.limits = limits;
        Ok(self)
    }

    /// What its jobs may use, where it differs from the runner's.
    pub fn limits(&self) -> JobLimitSettings {
        self.limits
    }

    /// The same project, its jobs writing `writable` (absolute directories) instead of the
    /// runner's caches: a project that must not share caches with others.
    pub fn with_writable(mut self, writable: Vec<PathBuf>) -> Project {
        self.writable = Some(writable);
        self
    }

    /// The caches its jobs may write instead of the runner's, if it names its own.
    pub fn writable(&self) -> Option<&[PathBuf]> {
        self.writable.as_deref()
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The Git directories outside the root that its jobs may write (a linked worktree's
    /// gitdir and common directory), as registered.
    pub fn git_dirs(&self) -> &[PathBuf] {
        &self.git
    }

    /// The runner's environment variables its jobs receive besides the base set.
    pub fn env_pass(&self) -> &[EnvName] {
        &self.env_pass
    }
}

/// The Git directories outside `root` that its `.git` names, read at registration: the gitdir
/// of a `.git` file (or symlink) and the common directory that gitdir's `commondir` names.
/// A `.git` directory inside the root owns nothing outside it unless its own `commondir` says
/// so. Whatever does not resolve to a directory is left out, with a warning.
fn registered_git_metadata(root: &Path) -> Vec<PathBuf> {
    let dot_git = root.join(".git");
    let gitdir = match std::fs::symlink_metadata(&dot_git) {
        Ok(meta) if meta.is_dir() => dot_git,
        Ok(meta) if meta.is_symlink() => dot_git,
        Ok(_) => match std::fs::read_to_string(&dot_git) {
            Ok(text) => match gitdir_line(&text) {
                Some(named) => root.join(named),
                None => {
                    tracing::warn!(root = %root.display(), "the project's .git file names no gitdir");
                    return Vec::new();
                }
            },
            Err(e) => {
                tracing::warn!(root = %root.display(), error = %e, "cannot read the project's .git file");
                return Vec::new();
            }
        },
        Err(_) => return Vec::new(),
    };
    let gitdir = match gitdir.canonicalize() {
        Ok(dir) if dir.is_dir() => dir,
        _ => {
            tracing::warn!(root = %root.display(), gitdir = %gitdir.display(), "the project's gitdir does not resolve to a directory; its jobs get no Git metadata outside the root");
            return Vec::new();
        }
    };
    let mut dirs = vec![gitdir.clone()];
    if let Ok(common) = std::fs::read_to_string(gitdir.join("commondir")) {
        match gitdir.join(common.trim_end_matches('\n')).canonicalize() {
            Ok(dir) if dir.is_dir() => dirs.push(dir),
            _ => {
                tracing::warn!(gitdir = %gitdir.display(), "the gitdir's commondir does not resolve to a directory")
            }
        }
    }
    dirs.retain(|d| !d.starts_with(root));
    dirs.dedup();
    dirs
}

/// The path a `.git` file names (`gitdir: PATH`).
fn gitdir_line(text: &str) -> Option<&str> {
    text.lines()
        .find_map(|l| l.strip_prefix("gitdir:"))
        .map(str::trim)
        .filter(|p| !p.is_empty())
}

/// What one work item of a project may see and change.
#[derive(Debug, Clone)]
pub struct Boundary {
    root: PathBuf,
    git: Vec<PathBuf>,
    writable: Vec<PathBuf>,
    private_tmp: Vec<PathBuf>,
    enclosing: Option<PathBuf>,
    /// Hidden paths outside every writable area (or holding one): masked before the
    /// project's own binds.
    hidden_outside: Vec<PathBuf>,
    /// Hidden paths inside a writable area, with the area: masked last.
    hidden_inside: Vec<(PathBuf, PathBuf)>,
    /// Other projects' registered Git metadata inside a writable area of this one (worktrees
    /// of one repository), with the area: pinned as mount points, so no job here can swap
    /// them for a symlink before the other project's next job binds them.
    pinned: Vec<(PathBuf, PathBuf)>,
    /// The hidden paths strictly inside the root, relative to it.
    hidden_in_root: Vec<PathBuf>,
    /// What one job may use.
    limits: JobLimits,
}

/// One step of a job sandbox's mount table, in order (see [`Boundary::mounts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mount {
    /// A private, empty, writable directory (a tmp).
    Tmpfs(PathBuf),
    /// The host's path, read-only.
    ReadOnly(PathBuf),
    /// The host's path, writable (a cache, or a directory pinned as a mount point).
    Writable(PathBuf),
    /// The project root or its Git metadata, writable, bound by a checked descriptor
    /// ([`Binds`]): the index into [`Boundary::bound_dirs`].
    Registered(usize),
    /// A hidden directory: an empty, read-only directory over it.
    MaskDir(PathBuf),
    /// A hidden file: an empty, read-only file over it.
    MaskFile(PathBuf),
}

impl Boundary {
    /// The boundary of `project`, hiding `secrets` and `others` (every other project's root and
    /// Git metadata), with the toolchain caches `writable` and the private tmps `private_tmp`.
    /// Paths must be canonical; those that do not exist are left out.
    pub(crate) fn new(
        project: &Project,
        secrets: &[PathBuf],
        others: &[&Project],
        writable: &[PathBuf],
        private_tmp: &[PathBuf],
    ) -> Boundary {
        let root = project.root.clone();
        let git = project.git.clone();
        let enclosing = private_tmp.iter().find_map(|tmp| {
            let below = root.strip_prefix(tmp).ok()?;
            let first = below.components().next()?;
            let top = tmp.join(first);
            (top != root).then_some(top)
        });
        let mut hidden: Vec<PathBuf> = secrets.to_vec();
        let mut shared = Vec::new();
        let own = |path: &Path| path.starts_with(&root) || git.iter().any(|g| path.starts_with(g));
        for other in others {
            // A project inside which this one lies is its enclosing repository.
            if !root.starts_with(&other.root) {
                hidden.push(other.root.clone());
            }
            for dir in &other.git {
                if root.starts_with(dir) || git.contains(dir) {
                    continue;
                }
                // Git metadata inside this project's own (a worktree's gitdir in the common
                // directory the two share) belongs to one repository: Git here must see it,
                // or its upkeep would drop what the other worktree needs.
                if own(dir) {
                    shared.push(dir.clone());
                } else {
                    hidden.push(dir.clone());
                }
            }
        }
        hidden.sort();
        hidden.dedup();
        let areas: Vec<&PathBuf> = std::iter::once(&root).chain(&git).chain(writable).collect();
        // The innermost writable area that holds `path` strictly.
        let area_of = |path: &Path| -> Option<PathBuf> {
            areas
                .iter()
                .filter(|a| path.starts_with(a) && path != a.as_path())
                .max_by_key(|a| a.components().count())
                .map(|a| (*a).clone())
        };
        let pinned = shared
            .into_iter()
            .filter_map(|dir| Some((area_of(&dir)?, dir)))
            .collect();
        let mut hidden_outside = Vec::new();
        let mut hidden_inside = Vec::new();
        let mut hidden_in_root = Vec::new();
        for path in hidden {
            if let Ok(rel) = path.strip_prefix(&root)
                && !rel.as_os_str().is_empty()
            {
                hidden_in_root.push(rel.to_owned());
            }
            match area_of(&path) {
                Some(area) => hidden_inside.push((area, path)),
                None => hidden_outside.push(path),
            }
        }
        Boundary {
            root,
            git,
            writable: writable.to_vec(),
            private_tmp: private_tmp.to_vec(),
            enclosing,
            hidden_outside,
            hidden_inside,
            pinned,
            hidden_in_root,
            limits: JobLimits::default(),
        }
    }

    /// The same boundary, its jobs bounded by `limits`.
    pub(crate) fn with_limits(mut self, limits: JobLimits) -> Boundary {
        self.limits = limits;
        self
    }

    /// What one job may use.
    pub fn limits(&self) -> JobLimits {
        self.limits
    }

    /// The canonical project root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The hidden paths strictly inside the root, relative to it: what no file operation may
    /// read, write, list, search, stage or show.
    pub fn hidden_in_root(&self) -> &[PathBuf] {
        &self.hidden_in_root
    }

    /// The directories bound writable by descriptor: the root, then its registered Git
    /// metadata.
    pub fn bound_dirs(&self) -> impl Iterator<Item = &Path> {
        std::iter::once(self.root.as_path()).chain(self.git.iter().map(PathBuf::as_path))
    }

    /// The mount table of a job's sandbox after the read-only host, `/dev` and `/proc`:
    /// private tmps, the surroundings a private tmp would hide, caches, masks of what lies
    /// outside the project, the project itself, then masks inside what it may write (their
    /// directories pinned first). Only existing paths are listed; a hidden directory is masked
    /// as a directory, anything else as a file.
    pub fn mounts(&self) -> Vec<Mount> {
        let mut m: Vec<Mount> = self.private_tmp.iter().cloned().map(Mount::Tmpfs).collect();
        if let Some(top) = &self.enclosing {
            m.push(Mount::ReadOnly(top.clone()));
        }
        m.extend(
            self.writable
                .iter()
                .filter(|d| d.is_dir())
                .cloned()
                .map(Mount::Writable),
        );
        m.extend(self.hidden_outside.iter().filter_map(|p| mask(p)));
        // Outer directories first, so a registered directory inside another stays a mount
        // point of its own, which no job can move.
        let mut registered: Vec<(usize, &Path)> = self.bound_dirs().enumerate().collect();
        registered.sort_by_key(|(_, dir)| dir.components().count());
        m.extend(registered.into_iter().map(|(i, _)| Mount::Registered(i)));
        let pins = self.pinned.iter().filter(|(_, dir)| dir.is_dir());
        for (area, dir) in pins {
            pin_between(&mut m, area, dir);
            push_new(&mut m, Mount::Writable(dir.clone()));
        }
        for (area, path) in &self.hidden_inside {
            let Some(masked) = mask(path) else { continue };
            pin_between(&mut m, area, path);
            m.push(masked);
        }
        m
    }

    /// Why the `.git` this project's root holds now leads to Git metadata the project was not
    /// registered with, if it does: a `.git` file or symlink, or a `commondir`, naming a
    /// directory outside the root other than the registered ones. Jobs then run without it
    /// (only registered metadata is ever bound) and Git tools refuse.
    pub fn git_metadata_notice(&self) -> Option<Notice> {
        let outside = self.unregistered_git_metadata()?;
        Some(Notice {
            kind: OpErrorKind::GitMetadataOutsideProject,
            message: format!(
                "the project's .git leads to {}, outside the project root and not registered \
                 with the project: jobs run without write access to it and Git tools refuse \
                 (register the worktree with the runner, or restore .git)",
                outside.display()
            ),
        })
    }

    fn unregistered_git_metadata(&self) -> Option<PathBuf> {
        let dot_git = self.root.join(".git");
        let meta = std::fs::symlink_metadata(&dot_git).ok()?;
        let gitdir = if meta.is_file() {
            let text = read_small(&dot_git)?;
            let named = gitdir_line(&text)?;
            self.root.join(named)
        } else {
            dot_git
        };
        let dirs = [gitdir.clone(), gitdir.join(commondir(&gitdir)?)];
        let take = |d: &Path| -> Option<PathBuf> {
            // What it names now; a name that resolves nowhere gives Git nothing to use.
            let real = d.canonicalize().ok()?;
            (!real.starts_with(&self.root) && !self.git.contains(&real)).then_some(real)
        };
        take(&dirs[0]).or_else(|| take(&dirs[1]))
    }
}

/// The `commondir` a gitdir names, or `.` (itself) when it names none.
fn commondir(gitdir: &Path) -> Option<PathBuf> {
    match read_small(&gitdir.join("commondir")) {
        Some(text) => Some(PathBuf::from(text.trim_end_matches('\n'))),
        None => Some(PathBuf::from(".")),
    }
}

/// A small text file's content (a `.git` file, a `commondir`), read without following a final
/// symlink out of a FIFO's reach: only regular files, at most 4 KiB.
fn read_small(path: &Path) -> Option<String> {
    use std::io::Read as _;
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(4096)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// Makes every directory strictly between `area` and `path` a mount point (bound onto itself,
/// writable as before), which no rename or removal can move.
fn pin_between(m: &mut Vec<Mount>, area: &Path, path: &Path) {
    let rel = path.strip_prefix(area).unwrap_or(path);
    let parts: Vec<Component<'_>> = rel.components().collect();
    let mut dir = area.to_path_buf();
    for part in &parts[..parts.len().saturating_sub(1)] {
        dir.push(part);
        push_new(m, Mount::Writable(dir.clone()));
    }
}

fn push_new(m: &mut Vec<Mount>, mount: Mount) {
    if !m.contains(&mount) {
        m.push(mount);
    }
}

fn mask(path: &Path) -> Option<Mount> {
    let meta = std::fs::metadata(path).ok()?;
    Some(if meta.is_dir() {
        Mount::MaskDir(path.to_owned())
    } else {
        Mount::MaskFile(path.to_owned())
    })
}

/// The project's writable directories opened for a job: each one's descriptor, checked to be
/// the registered directory itself (not whatever a name swapped for a symlink leads to). What
/// fails the check is left out, and said in `notices`.
pub struct Binds {
    /// `(descriptor, where it is mounted)`, in [`Boundary::bound_dirs`] order; `None` for a
    /// directory left out.
    pub dirs: Vec<Option<(OwnedFd, PathBuf)>>,
    /// Why something was left out.
    pub notices: Vec<Notice>,
}

impl Binds {
    /// Opens the boundary's root and Git metadata. A root that is not the registered one any
    /// more is an error: the job must not run.
    pub fn open(boundary: &Boundary) -> io::Result<Binds> {
        let mut dirs = Vec::new();
        let mut notices = Vec::new();
        for (i, dir) in boundary.bound_dirs().enumerate() {
            match open_checked(dir) {
                Ok(fd) => dirs.push(Some((fd, dir.to_owned()))),
                Err(e) if i == 0 => return Err(e),
                Err(e) => {
                    notices.push(Notice {
                        kind: OpErrorKind::GitMetadataOutsideProject,
                        message: format!(
                            "the Git metadata registered with the project at {} is not there \
                             as registered ({e}); jobs run without it",
                            dir.display()
                        ),
                    });
                    dirs.push(None);
                }
            }
        }
        Ok(Binds { dirs, notices })
    }
}

/// `dir` opened as a directory (`O_PATH`), refused unless the opened directory's real path is
/// `dir` itself: a component swapped for a symlink leads elsewhere, and is caught on the
/// descriptor, where no later swap can change it.
pub(crate) fn open_checked(dir: &Path) -> io::Result<OwnedFd> {
    let fd = rustix::fs::open(
        dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let real = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    if real != dir {
        return Err(io::Error::other(format!(
            "{} now leads to {}",
            dir.display(),
            real.display()
        )));
    }
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn project(root: &Path) -> Project {
        Project::register(root, Vec::new()).unwrap()
    }

    #[test]
    fn a_linked_worktree_registers_its_gitdir_and_common_directory_once() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let main_git = base.join("main/.git");
        let wt_git = main_git.join("worktrees/feature");
        fs::create_dir_all(&wt_git).unwrap();
        fs::write(wt_git.join("commondir"), "../..\n").unwrap();
        let root = base.join("feature");
        fs::create_dir_all(&root).unwrap();
        fs::write(root.join(".git"), format!("gitdir: {}\n", wt_git.display())).unwrap();
        let p = project(&root);
        assert_eq!(p.git_dirs(), [wt_git.clone(), main_git.clone()]);
        // A .git directory lies inside the root: nothing more is registered.
        fs::create_dir_all(base.join("plain/.git")).unwrap();
        assert!(project(&base.join("plain")).git_dirs().is_empty());
        // What .git says later changes nothing registered, and is noticed.
        fs::write(root.join(".git"), "gitdir: /\n").unwrap();
        let b = Boundary::new(&p, &[], &[], &[], &[]);
        assert_eq!(
            b.bound_dirs().collect::<Vec<_>>(),
            [&root, &wt_git, &main_git]
        );
        let notice = b.git_metadata_notice().expect("gitdir: / is noticed");
        assert_eq!(notice.kind, OpErrorKind::GitMetadataOutsideProject);
        assert!(notice.message.contains("leads to /,"), "{}", notice.message);
        assert!(!b.mounts().contains(&Mount::Writable(PathBuf::from("/"))));
    }

    #[test]
    fn other_projects_are_hidden_unless_they_enclose_or_share_this_ones_metadata() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        for d in ["repo/.git/worktrees/wt", "repo/svc/api", "other", "wt"] {
            fs::create_dir_all(base.join(d)).unwrap();
        }
        fs::write(base.join("repo/.git/worktrees/wt/commondir"), "../..\n").unwrap();
        fs::write(
            base.join("wt/.git"),
            format!(
                "gitdir: {}\n",
                base.join("repo/.git/worktrees/wt").display()
            ),
        )
        .unwrap();
        let repo = project(&base.join("repo"));
        let api = project(&base.join("repo/svc/api"));
        let other = project(&base.join("other"));
        let wt = project(&base.join("wt"));

        // api lies inside repo: repo is its enclosing repository, other and wt are hidden.
        let b = Boundary::new(&api, &[], &[&repo, &other, &wt], &[], &[]);
        let masked: Vec<Mount> = b.mounts();
        assert!(masked.contains(&Mount::MaskDir(base.join("other"))));
        assert!(masked.contains(&Mount::MaskDir(base.join("wt"))));
        assert!(!masked.contains(&Mount::MaskDir(base.join("repo"))));

        // repo holds api: hidden inside repo's root, its directories pinned first. wt's
        // gitdir in repo's .git is the repository's own metadata: not hidden.
        let b = Boundary::new(&repo, &[], &[&api, &other, &wt], &[], &[]);
        assert_eq!(b.hidden_in_root(), [PathBuf::from("svc/api")]);
        let m = b.mounts();
        let pin = m
            .iter()
            .position(|x| *x == Mount::Writable(base.join("repo/svc")))
            .unwrap();
        let masked = m
            .iter()
            .position(|x| *x == Mount::MaskDir(base.join("repo/svc/api")))
            .unwrap();
        let own = m.iter().position(|x| *x == Mount::Registered(0)).unwrap();
        assert!(own < pin && pin < masked, "{m:?}");
        // wt's gitdir in repo's .git is pinned there, its directories too.
        for dir in ["repo/.git", "repo/.git/worktrees", "repo/.git/worktrees/wt"] {
            let at = m.iter().position(|x| *x == Mount::Writable(base.join(dir)));
            assert!(at.is_some_and(|at| at > own), "{dir}: {m:?}");
        }

        // wt shares repo's .git as its common directory: repo is masked, its .git bound after.
        let b = Boundary::new(&wt, &[], &[&repo, &api, &other], &[], &[]);
        let m = b.mounts();
        let hide_repo = m
            .iter()
            .position(|x| *x == Mount::MaskDir(base.join("repo")))
            .unwrap();
        let common = 1 + wt
            .git_dirs()
            .iter()
            .position(|d| *d == base.join("repo/.git"))
            .unwrap();
        let bind_common = m
            .iter()
            .position(|x| *x == Mount::Registered(common))
            .unwrap();
        assert!(hide_repo < bind_common, "{m:?}");
        // The common directory is bound before the gitdir inside it, which stays a mount point.
        let bind_gitdir = m.iter().position(|x| *x == Mount::Registered(1)).unwrap();
        assert_eq!(wt.git_dirs()[0], base.join("repo/.git/worktrees/wt"));
        assert!(bind_common < bind_gitdir, "{m:?}");
    }

    #[test]
    fn a_root_in_a_private_tmp_keeps_its_top_directory_there_read_only() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        fs::create_dir_all(base.join("clone/target/tmp/x/web")).unwrap();
        let p = project(&base.join("clone/target/tmp/x/web"));
        let b = Boundary::new(&p, &[], &[], &[], std::slice::from_ref(&base));
        assert_eq!(
            b.mounts()[..2],
            [
                Mount::Tmpfs(base.clone()),
                Mount::ReadOnly(base.join("clone"))
            ]
        );
        // A root that is itself the top directory needs nothing more.
        let p = project(&base.join("clone"));
        let b = Boundary::new(&p, &[], &[], &[], std::slice::from_ref(&base));
        assert!(!b.mounts().iter().any(|m| matches!(m, Mount::ReadOnly(_))));
    }

    #[test]
    fn a_bind_is_refused_when_a_name_now_leads_elsewhere() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        fs::create_dir_all(base.join("real")).unwrap();
        fs::create_dir_all(base.join("elsewhere")).unwrap();
        assert!(open_checked(&base.join("real")).is_ok());
        fs::remove_dir(base.join("real")).unwrap();
        std::os::unix::fs::symlink(base.join("elsewhere"), base.join("real")).unwrap();
        let err = open_checked(&base.join("real")).unwrap_err().to_string();
        assert!(err.contains("now leads to"), "{err}");
    }
}
