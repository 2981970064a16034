//! `move_file`: one regular file renamed to a new path beneath the root, its directories made.
//! The file is found and locked like an edit's; the rename refuses to replace anything
//! (`RENAME_NOREPLACE`), so a file another writer put at the new path meanwhile is never lost.
//! A symlink is never moved or followed, and neither path may be hidden.

use wc_runner_protocol::{MoveFileAnswer, MoveFileOp, OpErrorKind, WorkAnswer};

use super::file;
use crate::answer::Refusal;
use crate::beneath::Root;
use crate::explore::{Failure, Stop};

pub(super) fn run(root: &Root, op: &MoveFileOp, stop: &Stop) -> Result<WorkAnswer, Failure> {
    let (from, to) = (&op.from, &op.to);
    let Some(source) = file::lock_file(root, from, stop, None)? else {
        return Err(Refusal::at(
            OpErrorKind::NotFound,
            from,
            "does not exist; nothing was moved",
        )
        .into());
    };
    let taken = || {
        Refusal::at(
            OpErrorKind::AlreadyExists,
            to,
            "exists; nothing was moved (choose another path, or delete it first)",
        )
    };
    let (to_dir, to_name) = file::split(to);
    // Refused before any directory is made for it.
    match root
        .open_dir(to_dir)
        .and_then(|dir| dir.identity_of(to_name))
    {
        Ok(Some(_)) => return Err(taken().into()),
        Ok(None) => {}
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOENT.raw_os_error()) => {}
        Err(e) => return Err(Refusal::from_open(to, e).into()),
    }
    let dest = root
        .make_dirs(to_dir)
        .map_err(|e| file::dir_refusal(to, e))?;
    stop.check()?;
    match source.dir.move_new(&source.name, &dest, to_name) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::EXIST.raw_os_error()) => {
            return Err(taken().into());
        }
        Err(e)
            if e.get_ref()
                .is_some_and(|inner| inner.is::<crate::beneath::Hidden>()) =>
        {
            return Err(Refusal::from_open(to, e).into());
        }
        Err(e) => return Err(file::unwritable(to, e).into()),
    }
    // Both directories' entries made durable: the file is in one place after a crash.
    for dir in [&dest, &source.dir] {
        dir.sync().map_err(|e| file::unwritable(to, e))?;
    }
    Ok(WorkAnswer::MoveFile(MoveFileAnswer {
        from: from.clone(),
        to: to.clone(),
        size: source.opened.size(),
    }))
}
