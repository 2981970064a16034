//! `git_diff_summary`: every changed file of the project against a base commit (HEAD unless
//! named), with its status and rename origin (`--name-status -M`), line counts and binary flag
//! (`--numstat -M`), and optionally the untracked files (`ls-files --others`), in path order,
//! one page at a time; totals count every file.

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
    let found = jobs
        .run(Command::new(&["rev-parse", "-q", "--verify", &rev], SMALL))
        .await?;
    let base = found
        .succeeded()
        .then(|| String::from_utf8_lossy(&found.stdout).trim().to_owned());
    let compared = match (&base, &op.base) {
        (Some(commit), _) => commit.clone(),
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
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        }
    };
    let mut common = super::diff::DIFF.to_vec();
    common.extend(["-M", "-z"]);
    if op.staged {
        common.push("--cached");
    }
    common.push(&compared);
    let specs = jobs.pathspecs(&super::named(&op.paths));
    let mut status_args = common.clone();
    status_args.push("--name-status");
    status_args.extend(specs.iter().map(String::as_str));
    let mut count_args = common;
    count_args.push("--numstat");
    count_args.extend(specs.iter().map(String::as_str));
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
    let (statuses, counts, untracked) = tokio::join!(
        jobs.output(&status_args, MAX_OUTPUT_BYTES_PER_STREAM),
        jobs.output(&count_args, MAX_OUTPUT_BYTES_PER_STREAM),
        untracked,
    );
    let (statuses, counts, untracked) = (statuses?, counts?, untracked?);
    let mut files = changed(&statuses.stdout, &counts.stdout);
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

/// The files of `--name-status -z` (`STATUS NUL path NUL`, or for a rename or copy `R100 NUL
/// from NUL to NUL`), with the counts `--numstat -z` gives their new paths. Files whose path
/// no project path can name are left out.
fn changed(statuses: &[u8], counts: &[u8]) -> Vec<SummaryFile> {
    let counted = numstat(counts);
    let mut tokens = statuses.split(|&b| b == 0).filter(|t| !t.is_empty());
    let mut files = Vec::new();
    while let Some(status) = tokens.next() {
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
            tokens.next()
        } else {
            None
        };
        let Some(raw) = tokens.next() else { break };
        let Some(path) = super::status::project_path("", raw) else {
            continue;
        };
        let (added, removed, binary) = match counted.get(raw) {
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
        let statuses = b"M\0src/a.rs\0R087\0old.txt\0new.txt\0A\0img.png\0D\0gone.txt\0";
        let counts = b"3\t1\tsrc/a.rs\0" as &[u8];
        let counts = [
            counts,
            b"1\t1\t\0old.txt\0new.txt\0",
            b"-\t-\timg.png\0",
            b"0\t2\tgone.txt\0",
        ]
        .concat();
        let files = changed(statuses, &counts);
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
