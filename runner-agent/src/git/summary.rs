//! `git_diff_summary`: every changed file of the project against a base commit (HEAD unless
//! named), with its status and rename origin, line counts and binary flag (one
//! `--raw --numstat -M` pass over the work tree), and optionally the untracked files
//! (`ls-files --others`), in path order, one page at a time; totals count every file.

use std::collections::HashMap;

use wc_runner_protocol::{
    ChangeKind, DiffSummaryAnswer, DiffSummaryOp, MAX_OUTPUT_BYTES_PER_STREAM, OpErrorKind,
    SummaryFile, WorkAnswer,
};

use super::Ctx;
use super::job::Command;
use crate::answer::{Budget, Ended, Refusal};

/// Output kept of a command that prints one id.
const SMALL: u64 = 64 * 1024;

pub(super) async fn run(ctx: &Ctx<'_>, op: &DiffSummaryOp) -> Result<WorkAnswer, Ended> {
    ctx.check_beneath(&op.paths)?;
    let jobs = ctx.jobs();
    let named = op.base.as_deref().unwrap_or("HEAD");
    let rev = format!("{named}^{{commit}}");
    let specs = jobs.pathspecs(&super::named(&op.paths));
    // One pass of Git over the work tree gives statuses and counts alike.
    let diff_args = |against: &str| -> Vec<String> {
        let mut args: Vec<String> = super::diff::DIFF.iter().map(|a| a.to_string()).collect();
        args.extend(["-M", "-z", "--raw", "--numstat"].map(str::to_owned));
        if op.staged {
            args.push("--cached".to_owned());
        }
        args.push(against.to_owned());
        args.extend(specs.iter().cloned());
        args
    };
    let first = diff_args(&rev);
    let first: Vec<&str> = first.iter().map(String::as_str).collect();
    let stageable = jobs.stageable(&super::named(&op.paths));
    let mut untracked_args = vec!["ls-files", "--others", "--exclude-standard", "-z"];
    untracked_args.extend(stageable.iter().map(String::as_str));
    let untracked = async {
        if op.include_untracked && !op.staged {
            jobs.output(&untracked_args, MAX_OUTPUT_BYTES_PER_STREAM)
                .await
                .map(|o| Some(o.stdout))
        } else {
            Ok(None)
        }
    };
    // The base's commit is asked beside the diff; only a base that names none costs a turn.
    let (found, diffed, untracked) = tokio::join!(
        jobs.run(Command::new(&["rev-parse", "-q", "--verify", &rev], SMALL)),
        jobs.run(Command::new(&first, MAX_OUTPUT_BYTES_PER_STREAM)),
        untracked,
    );
    let (found, diffed, untracked) = (found?, diffed?, untracked?);
    let base = found
        .succeeded()
        .then(|| String::from_utf8_lossy(&found.stdout).trim().to_owned());
    let diffed = match (&base, &op.base) {
        (Some(_), _) if diffed.succeeded() => diffed,
        (Some(_), _) => return Err(diffed.error().into()),
        (None, Some(name)) => {
            return Err(Refusal::new(
                OpErrorKind::RevisionNotFound,
                format!("base `{name}` names no commit of this repository (git_log lists commits)"),
            )
            .into());
        }
        // Before the first commit everything is new: compared with the empty tree.
        (None, None) => {
            let empty = Command {
                stdin: Some(String::new()),
                ..Command::new(&["hash-object", "-t", "tree", "--stdin"], SMALL)
            };
            let out = jobs.run(empty).await?;
            if !out.succeeded() {
                return Err(out.error().into());
            }
            let tree = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            let args = diff_args(&tree);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            jobs.output(&args, MAX_OUTPUT_BYTES_PER_STREAM).await?
        }
    };
    let mut files = changed(&diffed.stdout);
    if let Some(raw) = untracked {
        files.extend(
            raw.split(|&b| b == 0)
                .filter_map(|p| super::status::project_path("", p))
                .map(|path| SummaryFile {
                    path,
                    status: ChangeKind::Untracked,
                    original_path: None,
                    added: 0,
                    removed: 0,
                    binary: false,
                }),
        );
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let (added, removed) = files
        .iter()
        .fold((0, 0), |(a, r), f| (a + f.added, r + f.removed));
    let total = files.len();
    let start = (op.offset as usize).min(total);
    let mut budget = Budget::new();
    let page: Vec<SummaryFile> = files
        .into_iter()
        .skip(start)
        .take(op.limit as usize)
        .take_while(|f| budget.take(f))
        .collect();
    let end = start + page.len();
    Ok(WorkAnswer::GitDiffSummary(DiffSummaryAnswer {
        base,
        files: page,
        total_files: total as u64,
        added,
        removed,
        next_offset: (end < total).then(|| u32::try_from(end).unwrap_or(u32::MAX)),
    }))
}

/// The files of `--raw --numstat -z`: first a raw record a file (`:MODES SHAS STATUS NUL path
/// NUL`, or for a rename or copy `... R100 NUL from NUL to NUL`), then the counts of each by
/// its new path. Files whose path no project path can name are left out.
fn changed(out: &[u8]) -> Vec<SummaryFile> {
    let mut raw = Vec::new();
    let mut at = 0;
    let token = |at: &mut usize| -> Option<&[u8]> {
        let rest = out.get(*at..)?;
        let end = rest.iter().position(|&b| b == 0)?;
        *at += end + 1;
        Some(&rest[..end])
    };
    while out.get(at) == Some(&b':') {
        let Some(header) = token(&mut at) else { break };
        let status = header.rsplit(|&b| b == b' ').next().unwrap_or_default();
        let kind = match status.first() {
            Some(b'A') => ChangeKind::Added,
            Some(b'D') => ChangeKind::Deleted,
            Some(b'R') => ChangeKind::Renamed,
            Some(b'C') => ChangeKind::Copied,
            Some(b'T') => ChangeKind::TypeChanged,
            Some(b'U') => ChangeKind::Unmerged,
            _ => ChangeKind::Modified,
        };
        let original = if matches!(kind, ChangeKind::Renamed | ChangeKind::Copied) {
            token(&mut at)
        } else {
            None
        };
        let Some(path) = token(&mut at) else { break };
        raw.push((kind, original, path));
    }
    let counted = numstat(&out[at.min(out.len())..]);
    let mut files = Vec::new();
    for (kind, original, raw_path) in raw {
        let Some(path) = super::status::project_path("", raw_path) else {
            continue;
        };
        let (added, removed, binary) = match counted.get(raw_path) {
            Some(Some((added, removed))) => (*added, *removed, false),
            Some(None) => (0, 0, true),
            None => (0, 0, false),
        };
        files.push(SummaryFile {
            path,
            status: kind,
            original_path: original.and_then(|o| super::status::project_path("", o)),
            added,
            removed,
            binary,
        });
    }
    files
}

/// `--numstat -z` as line counts by new path (`None`: binary).
fn numstat(raw: &[u8]) -> HashMap<&[u8], Option<(u64, u64)>> {
    let (records, _) = super::diff::numstat_records(raw);
    records.into_iter().map(|r| (r.path, r.lines)).collect()
}

#[cfg(test)]
mod tests {
    use wc_runner_protocol::RelativePath;

    use super::*;

    #[test]
    fn statuses_and_counts_meet_by_new_path_renames_included() {
        let out = [
            b":100644 100644 0fdf397 0000000 M\0src/a.rs\0" as &[u8],
            b":100644 100644 587be6b 587be6b R087\0old.txt\0new.txt\0",
            b":000000 100644 0000000 8ba3a16 A\0img.png\0",
            b":100644 000000 01058d8 0000000 D\0gone.txt\0",
            b"3\t1\tsrc/a.rs\0",
            b"1\t1\t\0old.txt\0new.txt\0",
            b"-\t-\timg.png\0",
            b"0\t2\tgone.txt\0",
        ]
        .concat();
        let files = changed(&out);
        type Row<'a> = (&'a str, ChangeKind, Option<&'a str>, u64, u64, bool);
        let got: Vec<Row<'_>> = files
            .iter()
            .map(|f| {
                (
                    f.path.as_str(),
                    f.status,
                    f.original_path.as_ref().map(RelativePath::as_str),
                    f.added,
                    f.removed,
                    f.binary,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("src/a.rs", ChangeKind::Modified, None, 3, 1, false),
                ("new.txt", ChangeKind::Renamed, Some("old.txt"), 1, 1, false),
                ("img.png", ChangeKind::Added, None, 0, 0, true),
                ("gone.txt", ChangeKind::Deleted, None, 0, 2, false),
            ]
        );
    }
}
