//! `delete_files`: regular files removed through their directories, all of them or none: every
//! file is found and locked (in path order, so two deletions never wait on each other) before
//! the first is removed. A symlink is never followed or removed, and a hidden path is refused.
//! Only the file system can refuse after that (a directory that cannot be written); the refusal
//! then names the files already removed.

use wc_runner_protocol::{DeleteFilesAnswer, DeleteFilesOp, DeletedFile, OpErrorKind, WorkAnswer};

use super::file;
use crate::answer::Refusal;
use crate::beneath::Root;
use crate::explore::{Failure, Stop};

pub(super) fn run(root: &Root, op: &DeleteFilesOp, stop: &Stop) -> Result<WorkAnswer, Failure> {
    let mut paths: Vec<_> = op.paths.iter().collect();
    paths.sort();
    let mut locked = Vec::with_capacity(paths.len());
    for path in paths {
        let Some(file) = file::lock_file(root, path, stop, None)? else {
            return Err(Refusal::at(
                OpErrorKind::NotFound,
                path,
                "does not exist; nothing was deleted",
            )
            .into());
        };
        locked.push((path, file));
    }
    stop.check()?;
    let mut deleted = Vec::with_capacity(locked.len());
    for (path, file) in &locked {
        if let Err(e) = file.dir.remove(&file.name).and_then(|()| file.dir.sync()) {
            // Every file was found and locked, so only the file system can refuse now (a
            // directory that cannot be written): the words say what is already gone.
            let gone: Vec<String> = deleted
                .iter()
                .map(|d: &DeletedFile| d.path.to_string())
                .collect();
            let message = format!(
                "cannot be removed: {e}; removed before it: [{}]",
                gone.join(", ")
            );
            return Err(Refusal::at(OpErrorKind::Unwritable, path, &message).into());
        }
        deleted.push(DeletedFile {
            path: (*path).clone(),
            size: file.opened.size(),
        });
    }
    // Answered in the order asked.
    deleted.sort_by_key(|d| op.paths.iter().position(|p| *p == d.path));
    Ok(WorkAnswer::DeleteFiles(DeleteFilesAnswer { deleted }))
}
