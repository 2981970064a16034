//! `write_file`: the whole content of one text file, created (with its parent directories)
//! when nothing is there, else replaced under the file's lock, keeping its mode. With an
//! expected SHA-256 the file must exist with that content.

use wc_runner_protocol::{OpErrorKind, WorkAnswer, WriteFileAnswer, WriteFileOp};

use super::diff::BoundedDiff;
use super::file;
use crate::answer::Refusal;
use crate::beneath::Root;
use crate::explore::{Failure, Stop};

pub(super) fn run(root: &Root, op: &WriteFileOp, stop: &Stop) -> Result<WorkAnswer, Failure> {
    let path = &op.path;
    let mut diff = BoundedDiff::default();
    let Some(current) = file::lock(root, path, stop)? else {
        if op.expected_sha256.is_some() {
            return Err(Refusal::at(
                OpErrorKind::NotFound,
                path,
                "does not exist, so it cannot have the expected SHA-256 (leave it out to create the file)",
            )
            .into());
        }
        file::create(root, path, &op.content, stop)?;
        diff.add("", &op.content, "/dev/null", &format!("b/{path}"));
        return Ok(answer(op, None, true, diff));
    };
    if let Some(expected) = &op.expected_sha256
        && *expected != current.sha256
    {
        return Err(Refusal::at(
            OpErrorKind::Sha256Mismatch,
            path,
            &format!(
                "has changed: its SHA-256 is {}, not the expected {expected}; read it again",
                current.sha256
            ),
        )
        .conflict(|c| c.current_sha256 = Some(current.sha256.clone()))
        .into());
    }
    let changed = op.content != current.text;
    if changed {
        stop.check()?;
        file::replace(&current, &op.content).map_err(|e| file::unwritable(path, e))?;
    }
    diff.add(
        &current.text,
        &op.content,
        &format!("a/{path}"),
        &format!("b/{path}"),
    );
    Ok(answer(op, Some(current.sha256.clone()), changed, diff))
}

fn answer(
    op: &WriteFileOp,
    previous: Option<String>,
    changed: bool,
    diff: BoundedDiff,
) -> WorkAnswer {
    let (diff, diff_truncated) = diff.finish();
    WorkAnswer::WriteFile(WriteFileAnswer {
        path: op.path.clone(),
        created: previous.is_none(),
        previous_sha256: previous,
        sha256: file::sha256(op.content.as_bytes()),
        size: op.content.len() as u64,
        changed,
        diff,
        diff_truncated,
    })
}
