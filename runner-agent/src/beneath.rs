//! Opening paths beneath a project root, and nowhere else.
//!
//! The root is held open as an `O_PATH` directory. Every path is opened relative to it with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`, so the kernel refuses, at any component,
//! a `..` or a symlink that would leave the root (and every absolute symlink), while symlinks
//! that stay inside work. A path is opened `O_PATH` first and its type read with `fstat`; only a
//! regular file is then opened for reading, through that very descriptor's link in
//! `/proc/self/fd` (opened once and checked to be procfs), so the file read is the file
//! checked, and a device, FIFO or socket is never opened at all.
//!
//! Walks start at the root's `/proc/self/fd` path (the opened directory itself, whatever happens
//! to the root's name meanwhile), and whatever they yield is opened through here again before
//! it is reported or read.
//!
//! Edits work through a [`Dir`]: a directory opened beneath the root (or made there, one
//! component at a time), in which a file is then found, created, renamed or removed by its
//! single name with the `*at` calls, never by a path that could be resolved again.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, ResolveFlags, Stat};
use wc_runner_protocol::{EntryKind, OpErrorKind, RelativePath};

use crate::answer::Refusal;
use crate::boundary::Boundary;

/// A project root held open, with the paths beneath it that are hidden from the project.
pub(crate) struct Root {
    fd: OwnedFd,
    /// `/proc/self/fd/<fd>`: where walks start.
    proc: PathBuf,
    /// The root's canonical path when it was opened.
    real: PathBuf,
    /// Hidden paths beneath the root, relative to it ([`Boundary::hidden_in_root`]).
    hidden: Arc<[PathBuf]>,
}

/// Why a path was not opened: it is hidden from the project. Carried inside an [`io::Error`]
/// so every open reports it the same way ([`Refusal::from_open`]).
#[derive(Debug)]
pub(crate) struct Hidden;

impl std::fmt::Display for Hidden {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the path is hidden from the project")
    }
}

impl std::error::Error for Hidden {}

fn hidden_error() -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, Hidden)
}

/// Whether `rel` is one of `hidden` or lies beneath one.
fn is_hidden(hidden: &[PathBuf], rel: &Path) -> bool {
    hidden.iter().any(|h| rel.starts_with(h))
}

/// A path opened `O_PATH` beneath the root, with what it is.
pub(crate) struct Opened {
    fd: OwnedFd,
    stat: Stat,
}

impl Opened {
    /// What the opened path is.
    pub(crate) fn kind(&self) -> EntryKind {
        match FileType::from_raw_mode(self.stat.st_mode) {
            FileType::RegularFile => EntryKind::File,
            FileType::Directory => EntryKind::Directory,
            FileType::Symlink => EntryKind::Symlink,
            _ => EntryKind::Special,
        }
    }

    /// Its size in bytes.
    pub(crate) fn size(&self) -> u64 {
        u64::try_from(self.stat.st_size).unwrap_or(0)
    }

    /// Which file it is: its device and inode.
    pub(crate) fn identity(&self) -> (u64, u64) {
        identity(&self.stat)
    }

    /// Its permission bits (with set-id and sticky bits).
    pub(crate) fn mode(&self) -> u32 {
        self.stat.st_mode & 0o7777
    }

    /// Its owner and group.
    pub(crate) fn owner(&self) -> (u32, u32) {
        (self.stat.st_uid, self.stat.st_gid)
    }
}

fn identity(stat: &Stat) -> (u64, u64) {
    (stat.st_dev, stat.st_ino)
}

/// A directory beneath the root, held open for reading (so that it can be synced). Edits find,
/// create, replace and remove their files through it, one name at a time, never by a path that
/// could be resolved again through a symlink, and never a hidden one.
pub(crate) struct Dir {
    fd: OwnedFd,
    /// Its canonical path relative to the root.
    rel: PathBuf,
    hidden: Arc<[PathBuf]>,
}

/// Prefix of the temporary files edits write beside their targets.
pub(crate) const TEMP_PREFIX: &str = ".wc-edit-";

impl Root {
    /// Opens the root of `boundary`, refused unless it is the registered directory itself.
    pub(crate) fn open(boundary: &Boundary) -> io::Result<Root> {
        let fd = crate::boundary::open_checked(boundary.root())?;
        Root::held(fd, boundary.hidden_in_root().into())
    }

    /// The canonical directory `path` as a root hiding nothing (a probe's, a test's).
    fn open_path_unchecked(path: &Path) -> io::Result<Root> {
        let fd = crate::boundary::open_checked(path)?;
        Root::held(fd, Arc::from([]))
    }

    fn held(fd: OwnedFd, hidden: Arc<[PathBuf]>) -> io::Result<Root> {
        let proc = proc_path(&fd);
        let real = std::fs::read_link(&proc)?;
        Ok(Root {
            fd,
            proc,
            real,
            hidden,
        })
    }

    /// Whether the project path `rel` is hidden from the project (or lies beneath a hidden
    /// path).
    pub(crate) fn hides(&self, rel: &Path) -> bool {
        is_hidden(&self.hidden, rel)
    }

    /// The hidden paths beneath the root, relative to it.
    pub(crate) fn hidden(&self) -> &[PathBuf] {
        &self.hidden
    }

    /// Refuses `fd` when it is, or lies beneath, a hidden path: what a name led to through
    /// symlinks inside the root is judged by where it is, not by the name.
    fn check_not_hidden(&self, fd: &OwnedFd) -> io::Result<()> {
        if self.hidden.is_empty() {
            return Ok(());
        }
        let real = std::fs::read_link(proc_path(fd))?;
        match real.strip_prefix(&self.real) {
            Ok(rel) if self.hides(rel) => Err(hidden_error()),
            _ => Ok(()),
        }
    }

    /// Where walks of the root start (`/proc/self/fd/<fd>`).
    pub(crate) fn walk_base(&self) -> &Path {
        &self.proc
    }

    /// The root's canonical path (where jobs see it too).
    pub(crate) fn path(&self) -> &Path {
        &self.real
    }

    /// The root directory's own name.
    pub(crate) fn name(&self) -> String {
        self.real
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// Opens `rel` (`O_PATH`) beneath the root. `follow` follows a symlink in the last
    /// component (if it stays inside); otherwise the symlink itself is opened.
    pub(crate) fn open_path(&self, rel: &RelativePath, follow: bool) -> Result<Opened, Refusal> {
        self.open_raw(rel.as_str(), follow)
            .map_err(|e| Refusal::from_open(rel, e))
    }

    /// [`Self::open_path`] for a path a walk yielded (already known to be a valid name).
    pub(crate) fn open_raw(&self, rel: &str, follow: bool) -> io::Result<Opened> {
        if self.hides(Path::new(rel)) {
            return Err(hidden_error());
        }
        let path = if rel.is_empty() { "." } else { rel };
        let mut flags = OFlags::PATH | OFlags::CLOEXEC;
        if !follow {
            flags |= OFlags::NOFOLLOW;
        }
        let fd = self.openat2(path, flags)?;
        self.check_not_hidden(&fd)?;
        let stat = rustix::fs::fstat(&fd)?;
        Ok(Opened { fd, stat })
    }

    /// Opens the directory `rel` beneath the root (the root itself when `rel` is empty).
    pub(crate) fn open_dir(&self, rel: &str) -> io::Result<Dir> {
        if self.hides(Path::new(rel)) {
            return Err(hidden_error());
        }
        let path = if rel.is_empty() { "." } else { rel };
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = self.openat2(path, flags)?;
        self.check_not_hidden(&fd)?;
        // Entries are judged by the directory's real place, wherever its name led.
        let rel = if self.hidden.is_empty() {
            PathBuf::from(rel)
        } else {
            let real = std::fs::read_link(proc_path(&fd))?;
            real.strip_prefix(&self.real)
                .map(Path::to_path_buf)
                .unwrap_or_else(|_| PathBuf::from(rel))
        };
        Ok(Dir {
            fd,
            rel,
            hidden: self.hidden.clone(),
        })
    }

    /// Opens the directory `rel` beneath the root, creating each missing component in the
    /// directory opened before it (mode 0777 less the umask, as `mkdir -p` does).
    pub(crate) fn make_dirs(&self, rel: &str) -> io::Result<Dir> {
        let mut dir = self.open_dir("")?;
        let mut prefix = String::new();
        for segment in rel.split('/').filter(|s| !s.is_empty()) {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(segment);
            dir = match self.open_dir(&prefix) {
                Ok(next) => next,
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOENT.raw_os_error()) => {
                    match rustix::fs::mkdirat(&dir.fd, segment, Mode::from_raw_mode(0o777)) {
                        // Another writer made it first: as good.
                        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                        Err(e) => return Err(e.into()),
                    }
                    self.open_dir(&prefix)?
                }
                Err(e) => return Err(e),
            };
        }
        Ok(dir)
    }

    fn openat2(&self, path: &str, flags: OFlags) -> io::Result<OwnedFd> {
        let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        // The kernel answers EAGAIN when a rename raced the lookup; a few tries settle it.
        let mut tries = 0;
        loop {
            match rustix::fs::openat2(&self.fd, path, flags, Mode::empty(), resolve) {
                Err(rustix::io::Errno::AGAIN) if tries < 8 => tries += 1,
                other => return Ok(other?),
            }
        }
    }

    /// Opens an opened regular file for reading: the very file that was checked, reopened
    /// through its descriptor's link in the verified `/proc/self/fd`.
    pub(crate) fn read(&self, opened: &Opened) -> io::Result<File> {
        if opened.kind() != EntryKind::File {
            return Err(io::Error::other("not a regular file"));
        }
        let name = opened.fd.as_raw_fd().to_string();
        let flags = OFlags::RDONLY | OFlags::CLOEXEC;
        Ok(File::from(rustix::fs::openat(
            proc_fds()?,
            name,
            flags,
            Mode::empty(),
        )?))
    }

    /// The canonical project-relative path of an opened path (where its symlinks lead), or
    /// `None` when it cannot be named as one.
    pub(crate) fn canonical(&self, opened: &Opened) -> Option<RelativePath> {
        let real = std::fs::read_link(proc_path(&opened.fd)).ok()?;
        let rel = real.strip_prefix(&self.real).ok()?;
        RelativePath::parse(std::str::from_utf8(rel.as_os_str().as_bytes()).ok()?).ok()
    }
}

impl Dir {
    /// Another handle on the same open directory.
    pub(crate) fn try_clone(&self) -> io::Result<Dir> {
        Ok(Dir {
            fd: self.fd.try_clone()?,
            rel: self.rel.clone(),
            hidden: self.hidden.clone(),
        })
    }

    /// Refuses the entry `name` when it is hidden from the project.
    fn check(&self, name: &str) -> io::Result<()> {
        if is_hidden(&self.hidden, &self.rel.join(name)) {
            return Err(hidden_error());
        }
        Ok(())
    }

    /// Opens the entry `name` of this directory (`O_PATH`), not following a symlink.
    pub(crate) fn open_entry(&self, name: &str) -> io::Result<Opened> {
        self.check(name)?;
        let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.fd, name, flags, Mode::empty())?;
        let stat = rustix::fs::fstat(&fd)?;
        Ok(Opened { fd, stat })
    }

    /// Which file the entry `name` is now (not following a symlink); `None` when it is gone.
    pub(crate) fn identity_of(&self, name: &str) -> io::Result<Option<(u64, u64)>> {
        self.check(name)?;
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(identity(&stat))),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Creates a new temporary file with a random name in this directory (`O_EXCL`, mode
    /// `mode` less the umask), for writing.
    pub(crate) fn create_temp(&self, mode: u32) -> io::Result<(String, File)> {
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut tries = 0;
        loop {
            let name = format!("{TEMP_PREFIX}{}.tmp", uuid::Uuid::new_v4().simple());
            match rustix::fs::openat(&self.fd, &name, flags, Mode::from_raw_mode(mode)) {
                Ok(fd) => return Ok((name, File::from(fd))),
                Err(rustix::io::Errno::EXIST) if tries < 8 => tries += 1,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Renames the entry `from` over `to` (atomically replacing it).
    pub(crate) fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.check(from)?;
        self.check(to)?;
        Ok(rustix::fs::renameat(&self.fd, from, &self.fd, to)?)
    }

    /// Renames the entry `from` to `to` only if `to` does not exist (`EEXIST` otherwise), in
    /// one step. Where the file system has no `RENAME_NOREPLACE`, a hard link does the same.
    pub(crate) fn rename_new(&self, from: &str, to: &str) -> io::Result<()> {
        self.move_new(from, self, to)
    }

    /// Renames the entry `from` of this directory to `to` in the directory `into` (beneath the
    /// same root), only if `to` does not exist there; as [`Self::rename_new`].
    pub(crate) fn move_new(&self, from: &str, into: &Dir, to: &str) -> io::Result<()> {
        self.check(from)?;
        into.check(to)?;
        match rustix::fs::renameat_with(&self.fd, from, &into.fd, to, RenameFlags::NOREPLACE) {
            Ok(()) => Ok(()),
            Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
                rustix::fs::linkat(&self.fd, from, &into.fd, to, AtFlags::empty())?;
                self.remove(from)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Removes the entry `name` (not a directory).
    pub(crate) fn remove(&self, name: &str) -> io::Result<()> {
        self.check(name)?;
        Ok(rustix::fs::unlinkat(&self.fd, name, AtFlags::empty())?)
    }

    /// Removes the empty directory `name` (`ENOTEMPTY` otherwise).
    pub(crate) fn remove_dir(&self, name: &str) -> io::Result<()> {
        self.check(name)?;
        Ok(rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR)?)
    }

    /// Makes this directory's entries durable (after a rename or removal).
    pub(crate) fn sync(&self) -> io::Result<()> {
        Ok(rustix::fs::fsync(&self.fd)?)
    }
}

/// This process's `/proc/self/fd`, opened once and checked to be procfs, so that a file
/// reopened through it is the very file its descriptor holds.
fn proc_fds() -> io::Result<&'static OwnedFd> {
    static FDS: std::sync::OnceLock<OwnedFd> = std::sync::OnceLock::new();
    if let Some(fds) = FDS.get() {
        return Ok(fds);
    }
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let fds = rustix::fs::open("/proc/self/fd", flags, Mode::empty())?;
    // PROC_SUPER_MAGIC (linux/magic.h).
    const PROC_SUPER_MAGIC: i64 = 0x9fa0;
    if rustix::fs::fstatfs(&fds)?.f_type != PROC_SUPER_MAGIC {
        return Err(io::Error::other("/proc/self/fd is not on procfs"));
    }
    Ok(FDS.get_or_init(|| fds))
}

fn proc_path(fd: &impl AsFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd()))
}

/// Whether this host can confine explore work: `openat2` with `RESOLVE_BENEATH` works (Linux
/// 5.6 and later, not filtered away) and `/proc/self/fd` reopens descriptors.
pub(crate) fn supported() -> bool {
    let probe = || -> io::Result<()> {
        let root = Root::open_path_unchecked(Path::new("/"))?;
        let opened = root.open_raw("proc/self", true)?;
        if opened.kind() != EntryKind::Directory {
            return Err(io::Error::other("/proc/self is not a directory"));
        }
        proc_fds().map(|_| ())
    };
    match probe() {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(error = %e, "explore work is not supported on this host");
            false
        }
    }
}

impl Refusal {
    /// The refusal an open of `rel` failed with.
    pub(crate) fn from_open(rel: &RelativePath, e: io::Error) -> Refusal {
        use rustix::io::Errno;
        let errno = e.raw_os_error().map(Errno::from_raw_os_error);
        if e.get_ref().is_some_and(|inner| inner.is::<Hidden>()) {
            return Refusal::at(
                OpErrorKind::PathHidden,
                rel,
                "is hidden from this project's jobs and tools by the runner's configuration \
                 (a credential, the runner's own files, or another project)",
            );
        }
        let (kind, what) = match errno {
            Some(Errno::XDEV) => (
                OpErrorKind::PathOutsideRoot,
                "leads outside the project root (through a symlink; an absolute symlink always \
                 counts as leaving it)"
                    .to_owned(),
            ),
            Some(Errno::NOENT) => (OpErrorKind::NotFound, "does not exist".to_owned()),
            Some(Errno::NOTDIR) => (
                OpErrorKind::NotADirectory,
                "has a parent that is not a directory".to_owned(),
            ),
            _ => (OpErrorKind::Unreadable, format!("cannot be opened: {e}")),
        };
        Refusal::at(kind, rel, &what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_host_confines_explore_work_and_a_root_refuses_to_be_left() {
        assert!(supported(), "openat2 and /proc/self/fd work here");
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("root")).unwrap();
        std::os::unix::fs::symlink("..", tmp.path().join("root/up")).unwrap();
        let root =
            Root::open_path_unchecked(&tmp.path().join("root").canonicalize().unwrap()).unwrap();
        assert_eq!(root.name(), "root");
        let err = root.open_raw("up", true).err().unwrap();
        assert_eq!(
            err.raw_os_error(),
            Some(rustix::io::Errno::XDEV.raw_os_error())
        );
        // Not followed, the link itself is inside.
        assert_eq!(
            root.open_raw("up", false).unwrap().kind(),
            EntryKind::Symlink
        );
    }
}
