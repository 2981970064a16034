//! One file of an edit: found beneath the root, locked, read as text, and replaced, created or
//! removed through its directory.
//!
//! [`lock`] opens the target's directory beneath the root, opens the target in it without
//! following a symlink, refuses anything but a regular file, takes an exclusive `flock` on it
//! (polling, so a stop is noticed), and then checks that the name still leads to the locked
//! file: a writer that replaced it meanwhile (by renaming a new file over it) has released its
//! lock on the old one, so the new one is opened and locked instead. Only then is it read.
//! The lock is held by [`Current`] until it is dropped, after the rename that replaces it.

use std::fs::File;
use std::io::{self, Read as _, Write as _};
use std::time::Duration;

use rustix::fs::FlockOperation;
use sha2::{Digest as _, Sha256};
use wc_runner_protocol::{
    BINARY_PROBE_BYTES, EntryKind, MAX_EDIT_FILE_SIZE, OpErrorKind, RelativePath,
};

use crate::answer::Refusal;
use crate::beneath::{Dir, Opened, Root};
use crate::explore::{Failure, Stop};

/// Longest pause between two tries of a held lock.
const MAX_LOCK_PAUSE: Duration = Duration::from_millis(20);

/// A file's current text, locked against other edits while this is held.
pub(super) struct Current {
    /// Its directory.
    pub(super) dir: Dir,
    /// Its name in the directory.
    pub(super) name: String,
    /// What it is (its identity, mode and owner when it was locked).
    pub(super) opened: Opened,
    /// The content.
    pub(super) text: String,
    /// SHA-256 of the content, lowercase hex.
    pub(super) sha256: String,
    /// Holds the lock.
    _locked: File,
}

/// The directory and the name of `rel` (never the root).
pub(super) fn split(rel: &RelativePath) -> (&str, &str) {
    let path = rel.as_str();
    match path.rsplit_once('/') {
        Some((dir, name)) => (dir, name),
        None => ("", path),
    }
}

/// A regular file found beneath the root and locked against edits while this is held.
pub(super) struct Locked {
    /// Its directory.
    pub(super) dir: Dir,
    /// Its name in the directory.
    pub(super) name: String,
    /// What it is (its identity, mode, owner and size when it was locked).
    pub(super) opened: Opened,
    /// Holds the lock.
    file: File,
}

/// Finds, locks and reads the file at `rel`; `None` when nothing is there (perhaps not even
/// its directory).
pub(super) fn lock(
    root: &Root,
    rel: &RelativePath,
    stop: &Stop,
) -> Result<Option<Current>, Failure> {
    let Some(locked) = lock_file(root, rel, stop, Some(MAX_EDIT_FILE_SIZE))? else {
        return Ok(None);
    };
    let (text, sha256) = read_text(rel, &locked.file, stop)?;
    Ok(Some(Current {
        dir: locked.dir,
        name: locked.name,
        opened: locked.opened,
        text,
        sha256,
        _locked: locked.file,
    }))
}

/// Finds and locks the regular file at `rel` (of at most `max_size` bytes, when given) without
/// reading it; `None` when nothing is there (perhaps not even its directory).
pub(super) fn lock_file(
    root: &Root,
    rel: &RelativePath,
    stop: &Stop,
    max_size: Option<u64>,
) -> Result<Option<Locked>, Failure> {
    let (dir_path, name) = split(rel);
    let dir = match root.open_dir(dir_path) {
        Ok(dir) => dir,
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOENT.raw_os_error()) => {
            return Ok(None);
        }
        Err(e) => return Err(Refusal::from_open(rel, e).into()),
    };
    // Each new try means another writer replaced the file meanwhile; the work's deadline ends
    // a wait that never ends otherwise.
    loop {
        stop.check()?;
        let opened = match dir.open_entry(name) {
            Ok(opened) => opened,
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOENT.raw_os_error()) => {
                return Ok(None);
            }
            Err(e) => return Err(Refusal::from_open(rel, e).into()),
        };
        check_kind(root, rel, &opened)?;
        if let Some(max) = max_size
            && opened.size() > max
        {
            return Err(too_large(rel, opened.size()).into());
        }
        let file = root.read(&opened).map_err(|e| unreadable(rel, e))?;
        take_lock(&file, rel, stop)?;
        // Locked: the name must still lead to this file, or the lock guards nothing.
        match dir.identity_of(name) {
            Ok(Some(now)) if now == opened.identity() => {}
            Ok(_) => continue,
            Err(e) => return Err(unreadable(rel, e).into()),
        }
        return Ok(Some(Locked {
            dir,
            name: name.to_owned(),
            opened,
            file,
        }));
    }
}

/// Refuses anything but a regular file.
fn check_kind(root: &Root, rel: &RelativePath, opened: &Opened) -> Result<(), Refusal> {
    match opened.kind() {
        EntryKind::File => {}
        EntryKind::Directory => {
            return Err(Refusal::at(OpErrorKind::NotAFile, rel, "is a directory"));
        }
        EntryKind::Special => {
            return Err(Refusal::at(
                OpErrorKind::SpecialFile,
                rel,
                "is a device, FIFO or socket; it is never opened",
            ));
        }
        EntryKind::Symlink => {
            let leads = match root
                .open_path(rel, true)
                .ok()
                .and_then(|o| root.canonical(&o))
            {
                Some(real) if !real.is_root() => format!("it leads to `{real}`; edit that path"),
                _ => "it leads outside the project root or nowhere".to_owned(),
            };
            return Err(Refusal::at(
                OpErrorKind::Symlink,
                rel,
                &format!("is a symbolic link, and edits never write through one: {leads}"),
            ));
        }
    }
    Ok(())
}

pub(super) fn too_large(rel: &RelativePath, size: u64) -> Refusal {
    Refusal::at(
        OpErrorKind::FileTooLarge,
        rel,
        &format!("is {size} bytes; files of at most {MAX_EDIT_FILE_SIZE} bytes are edited"),
    )
}

fn unreadable(rel: &RelativePath, e: io::Error) -> Refusal {
    Refusal::at(
        OpErrorKind::Unreadable,
        rel,
        &format!("cannot be read: {e}"),
    )
}

/// The refusal making the directories of `rel` failed with: where they lead, or why they
/// cannot be written.
pub(super) fn dir_refusal(rel: &RelativePath, e: io::Error) -> Refusal {
    use rustix::io::Errno;
    match e.raw_os_error().map(Errno::from_raw_os_error) {
        Some(Errno::XDEV | Errno::NOENT | Errno::NOTDIR) => Refusal::from_open(rel, e),
        _ => Refusal::at(
            OpErrorKind::Unwritable,
            rel,
            &format!("cannot have its directory made: {e}"),
        ),
    }
}

pub(super) fn unwritable(rel: &RelativePath, e: io::Error) -> Refusal {
    Refusal::at(
        OpErrorKind::Unwritable,
        rel,
        &format!("cannot be written: {e}"),
    )
}

/// Takes the exclusive lock, trying again (with growing pauses) while another holds it.
fn take_lock(file: &File, rel: &RelativePath, stop: &Stop) -> Result<(), Failure> {
    let mut pause = Duration::from_millis(1);
    loop {
        match rustix::fs::flock(file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::WOULDBLOCK | rustix::io::Errno::INTR) => {
                stop.check()?;
                std::thread::sleep(pause);
                pause = (pause * 2).min(MAX_LOCK_PAUSE);
            }
            Err(e) => {
                return Err(Refusal::at(
                    OpErrorKind::Unwritable,
                    rel,
                    &format!("cannot be locked: {e}"),
                )
                .into());
            }
        }
    }
}

/// Reads the whole file: its text and SHA-256. A file that is not text (a NUL byte in its first
/// [`BINARY_PROBE_BYTES`], or not UTF-8) is refused `not_text`, naming its SHA-256.
fn read_text(rel: &RelativePath, file: &File, stop: &Stop) -> Result<(String, String), Failure> {
    let mut bytes = Vec::new();
    let read = stop
        .reader(file)
        .take(MAX_EDIT_FILE_SIZE + 1)
        .read_to_end(&mut bytes);
    if let Err(e) = read {
        stop.check()?;
        return Err(unreadable(rel, e).into());
    }
    if bytes.len() as u64 > MAX_EDIT_FILE_SIZE {
        return Err(too_large(rel, bytes.len() as u64).into());
    }
    let sha256 = sha256(bytes.as_slice());
    let refuse = |what: &str| {
        Refusal::at(OpErrorKind::NotText, rel, what)
            .conflict(|c| c.current_sha256 = Some(sha256.clone()))
    };
    if bytes[..bytes.len().min(BINARY_PROBE_BYTES)].contains(&0) {
        return Err(refuse(&format!(
            "is binary (a NUL byte in its first {BINARY_PROBE_BYTES} bytes); only text files are edited"
        ))
        .into());
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| refuse("is not UTF-8 text; only UTF-8 text files are edited"))?;
    Ok((text, sha256))
}

/// Replaces the locked file's content with `new`, keeping its mode.
pub(super) fn replace(current: &Current, new: &str) -> io::Result<()> {
    Staged::write(&current.dir, new.as_bytes(), Some(&current.opened), 0)?.replace(&current.name)
}

/// Creates the file `rel`, which must not exist, with `content`, making its parent directories.
/// Another writer creating it meanwhile is refused `already_exists`.
pub(super) fn create(
    root: &Root,
    rel: &RelativePath,
    content: &str,
    stop: &Stop,
) -> Result<(), Failure> {
    stop.check()?;
    let (dir_path, name) = split(rel);
    let dir = root.make_dirs(dir_path).map_err(|e| dir_refusal(rel, e))?;
    let mut staged = Staged::write(&dir, content.as_bytes(), None, new_file_mode(false))
        .map_err(|e| unwritable(rel, e))?;
    match staged.create(name) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::EXIST.raw_os_error()) => {
            Err(Refusal::at(
                OpErrorKind::AlreadyExists,
                rel,
                "was created by another writer meanwhile; read it and edit it instead",
            )
            .into())
        }
        Err(e) => Err(unwritable(rel, e).into()),
    }
}

/// SHA-256 of `bytes`, lowercase hex.
pub(super) fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// New content written to a temporary file beside its target and made durable; removed when
/// dropped unless it was renamed into place.
pub(super) struct Staged {
    dir: Dir,
    temp: String,
    placed: bool,
}

/// The mode a new file is created with (less the umask): executable or not.
pub(super) fn new_file_mode(executable: bool) -> u32 {
    if executable { 0o777 } else { 0o666 }
}

impl Staged {
    /// Writes `content` to a new temporary file in `dir`. `like` is the file it will replace:
    /// its owner (where the runner may set it) and mode are copied; a new file gets `mode` less
    /// the umask.
    pub(super) fn write(
        dir: &Dir,
        content: &[u8],
        like: Option<&Opened>,
        mode: u32,
    ) -> io::Result<Staged> {
        let dir = dir.try_clone()?;
        let (temp, mut file) = dir.create_temp(if like.is_some() { 0o600 } else { mode })?;
        let staged = Staged {
            dir,
            temp,
            placed: false,
        };
        file.write_all(content)?;
        if let Some(like) = like {
            let (uid, gid) = like.owner();
            let now = rustix::fs::fstat(&file)?;
            if (now.st_uid, now.st_gid) != (uid, gid) {
                // Only a privileged runner may give a file away; otherwise it stays the runner's.
                let (uid, gid) = (
                    rustix::fs::Uid::from_raw(uid),
                    rustix::fs::Gid::from_raw(gid),
                );
                match rustix::fs::fchown(&file, Some(uid), Some(gid)) {
                    Ok(()) | Err(rustix::io::Errno::PERM) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            // After the owner: a change of owner clears the set-id bits.
            rustix::fs::fchmod(&file, rustix::fs::Mode::from_raw_mode(like.mode()))?;
        }
        file.sync_all()?;
        Ok(staged)
    }

    /// The directory the file is staged in.
    pub(super) fn dir(&self) -> &Dir {
        &self.dir
    }

    /// Renames the staged file over `name`, replacing it.
    pub(super) fn replace(&mut self, name: &str) -> io::Result<()> {
        self.dir.rename(&self.temp, name)?;
        self.placed = true;
        self.dir.sync()
    }

    /// Renames the staged file to `name`, which must not exist (`EEXIST` otherwise).
    pub(super) fn create(&mut self, name: &str) -> io::Result<()> {
        self.dir.rename_new(&self.temp, name)?;
        self.placed = true;
        self.dir.sync()
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.placed {
            let _ = self.dir.remove(&self.temp);
        }
    }
}
