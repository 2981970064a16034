//! `git_commit`: stages the project's changes (or exactly the named paths) and commits them
//! as the runner's configured author, refusing with a kind a user can act on: nothing to
//! commit, unmerged files, a merge a partial commit cannot conclude, a hook that said no.
//!
//! The message reaches Git on standard input (`-F -`), never as an argument. Hooks run as a
//! developer's would, inside the job's sandbox and time limit; a refused commit leaves the
//! changes staged. Commits are never signed: the runner has no signing key of its own, and a
//! key of the host's user would sign in someone else's name.

use wc_runner_protocol::{
    GitCommitAnswer, GitCommitOp, MAX_GIT_TEXT_BYTES, MAX_OUTPUT_BYTES_PER_STREAM, OpErrorKind,
    WorkAnswer,
};

use super::Ctx;
use super::job::{Command, Finished, bounded};
use super::{diff, status};
use crate::answer::{Ended, Refusal};

/// Git's output kept of the steps whose words matter only in a message.
const SAID_BYTES: u64 = 64 * 1024;

/// Unmerged paths a refusal names before it counts the rest.
const NAMED_CONFLICTS: usize = 5;

pub(super) async fn run(ctx: &Ctx<'_>, op: &GitCommitOp) -> Result<WorkAnswer, Ended> {
    ctx.check_beneath(&op.paths)?;
    let jobs = ctx.jobs();
    let (prefix, state) = tokio::join!(
        jobs.prefix(),
        status::query(&jobs, MAX_OUTPUT_BYTES_PER_STREAM)
    );
    let (prefix, state) = (prefix?, state?);
    let state = state.parse();
    let conflicted = state.records.iter().filter(|r| r.conflicted).count();
    if conflicted > 0 {
        return Err(unmerged(conflicted, &state.conflicted(&prefix)).into());
    }
    let scope = jobs.stageable(&super::named(&op.paths));

    let mut add = vec!["add", "--all"];
    add.extend(scope.iter().map(String::as_str));
    let added = jobs.run(Command::new(&add, SAID_BYTES)).await?;
    if !added.succeeded() {
        return Err(add_refusal(&added).into());
    }
    // Whatever a job staged itself of what must never be committed goes back out.
    let mut unstage = vec!["reset", "-q"];
    let never = jobs.never_staged();
    unstage.extend(never.iter().map(String::as_str));
    let reset = jobs.run(Command::new(&unstage, SAID_BYTES)).await?;
    if !reset.succeeded() {
        return Err(reset.error().into());
    }

    let mut staged = vec![
        "diff",
        "--cached",
        "--quiet",
        "--no-ext-diff",
        "--no-textconv",
    ];
    staged.extend(scope.iter().map(String::as_str));
    let check = jobs.run(Command::new(&staged, SAID_BYTES)).await?;
    match check.exit_code {
        Some(1) => {}
        Some(0) => {
            let what = if op.paths.is_empty() {
                "the project has no changes"
            } else {
                "the named paths have no changes"
            };
            return Err(Refusal::new(
                OpErrorKind::NothingToCommit,
                format!("nothing to commit: {what}"),
            )
            .into());
        }
        _ => return Err(check.error().into()),
    }

    let mut args = vec!["commit", "--no-gpg-sign", "--cleanup=whitespace", "-F", "-"];
    // Only a commit of the whole index concludes a merge; a project that is a part of its
    // repository, or named paths, commit just those paths.
    if !(op.paths.is_empty() && prefix.is_empty()) {
        args.extend(scope.iter().map(String::as_str));
    }
    let identity = ctx.identity;
    let command = Command {
        args,
        stdin: Some(op.message.clone()),
        env: vec![
            ("GIT_AUTHOR_NAME", identity.name().to_owned()),
            ("GIT_AUTHOR_EMAIL", identity.email().to_owned()),
            ("GIT_COMMITTER_NAME", identity.name().to_owned()),
            ("GIT_COMMITTER_EMAIL", identity.email().to_owned()),
        ],
        stdout_bytes: SAID_BYTES,
    };
    let committed = jobs.run(command).await?;
    if !committed.succeeded() {
        return Err(commit_refusal(&committed).into());
    }

    let shown = jobs
        .output(
            &[
                "show",
                "--format=%H",
                "--numstat",
                "-z",
                "--diff-merges=first-parent",
                "--no-renames",
                "--no-ext-diff",
                "--no-textconv",
                "--no-color",
                "HEAD",
            ],
            MAX_OUTPUT_BYTES_PER_STREAM,
        )
        .await?;
    let (commit, stats) = split_show(&shown.stdout);
    let (files_changed, insertions, deletions) = diff::totals(stats);
    Ok(WorkAnswer::GitCommit(GitCommitAnswer {
        commit,
        branch: state.branch.clone(),
        files_changed,
        insertions,
        deletions,
        summary: bounded(committed.said(), MAX_GIT_TEXT_BYTES),
    }))
}

/// `git show --format=%H --numstat -z` output: the commit id, then the numstat records.
fn split_show(out: &[u8]) -> (String, &[u8]) {
    let end = out.iter().position(|&b| b == 0).unwrap_or(out.len());
    let commit = String::from_utf8_lossy(&out[..end]).trim().to_owned();
    let rest = &out[end..];
    let start = rest
        .iter()
        .position(|&b| b != 0 && b != b'\n')
        .unwrap_or(rest.len());
    (commit, &rest[start..])
}

fn unmerged(count: usize, named: &[wc_runner_protocol::RelativePath]) -> Refusal {
    let mut list: Vec<String> = named
        .iter()
        .take(NAMED_CONFLICTS)
        .map(|p| format!("`{p}`"))
        .collect();
    if count > list.len() {
        list.push(format!("{} more", count - list.len()));
    }
    Refusal::new(
        OpErrorKind::UnmergedPaths,
        format!(
            "{count} unmerged file(s) must be resolved before a commit: {}; edit them, then \
             commit again (or abort the merge)",
            list.join(", ")
        ),
    )
}

/// Why `git add` of the commit's paths failed.
fn add_refusal(added: &Finished) -> Refusal {
    let said = added.said();
    if said.contains("did not match any files") {
        return Refusal::new(
            OpErrorKind::NotFound,
            format!("a named path matches no file, changed or tracked: {said}"),
        );
    }
    if said.contains("ignored by one of your .gitignore files") {
        return Refusal::new(
            OpErrorKind::InvalidRequest,
            format!("a named path is ignored by the repository and is not committed: {said}"),
        );
    }
    if said.contains("Read-only file system") {
        return super::read_only(&said);
    }
    Refusal::new(
        OpErrorKind::GitUnavailable,
        format!("git add failed: {said}"),
    )
}

/// Why `git commit` failed once the checks before it passed: Git's own refusals by their
/// words, anything else a hook's. A failing `pre-commit` or `commit-msg` hook makes Git exit
/// without a word of its own, and what the hook printed may say anything; Git's own fatal
/// errors are the lines it starts with `fatal: `.
fn commit_refusal(committed: &Finished) -> Refusal {
    let said = committed.said();
    let fatal = said.lines().find(|l| l.starts_with("fatal: "));
    let (kind, message) = if said.contains("partial commit during a merge") {
        (
            OpErrorKind::MergeInProgress,
            "a merge is in progress, and a commit of named paths, or of a project that is a \
             part of its repository, cannot conclude it: commit every change from the \
             repository's top, or abort the merge"
                .to_owned(),
        )
    } else if said.contains("Committing is not possible because you have unmerged files") {
        (
            OpErrorKind::UnmergedPaths,
            format!("unmerged files must be resolved before a commit: {said}"),
        )
    } else if said.contains("nothing to commit") || said.contains("no changes added to commit") {
        (
            OpErrorKind::NothingToCommit,
            format!("nothing to commit: {said}"),
        )
    } else if let Some(fatal) = fatal {
        if fatal.contains("Read-only file system") {
            return super::read_only(fatal);
        }
        let hint = if fatal.contains("index.lock") {
            "another Git process holds the repository's index lock; wait for it, or remove a \
             stale lock: "
        } else {
            ""
        };
        (
            OpErrorKind::GitUnavailable,
            format!("git commit failed: {hint}{said}"),
        )
    } else if said.is_empty() {
        (
            OpErrorKind::HookRejected,
            "a hook of the repository refused the commit (it printed nothing)".to_owned(),
        )
    } else {
        (
            OpErrorKind::HookRejected,
            format!("a hook of the repository refused the commit: {said}"),
        )
    };
    Refusal::new(kind, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(stderr: &str, stdout: &str) -> Finished {
        Finished {
            exit_code: Some(1),
            stdout: stdout.as_bytes().to_vec(),
            stdout_truncated: false,
            stderr: stderr.to_owned(),
        }
    }

    #[test]
    fn commit_failures_are_told_apart_by_gits_own_words() {
        for (stderr, stdout, kind) in [
            (
                "fatal: cannot do a partial commit during a merge.",
                "",
                OpErrorKind::MergeInProgress,
            ),
            (
                "error: Committing is not possible because you have unmerged files.",
                "",
                OpErrorKind::UnmergedPaths,
            ),
            (
                "",
                "On branch main\nnothing to commit, working tree clean",
                OpErrorKind::NothingToCommit,
            ),
            (
                "fatal: Unable to create '/r/.git/index.lock': File exists.",
                "",
                OpErrorKind::GitUnavailable,
            ),
            ("lint failed: src/a.rs", "", OpErrorKind::HookRejected),
            (
                "touch: cannot touch '/x': Read-only file system\nerror: no",
                "",
                OpErrorKind::HookRejected,
            ),
            (
                "fatal: could not read log file 'x': Permission denied",
                "",
                OpErrorKind::GitUnavailable,
            ),
            ("", "", OpErrorKind::HookRejected),
        ] {
            let refusal = commit_refusal(&failed(stderr, stdout));
            assert_eq!(refusal.kind, kind, "{stderr} {stdout}");
            assert!(!refusal.message.is_empty());
        }
        let hook = commit_refusal(&failed("lint failed: src/a.rs", ""));
        assert!(
            hook.message.contains("lint failed: src/a.rs"),
            "{}",
            hook.message
        );
    }

    #[test]
    fn add_failures_name_the_problem() {
        let missing = add_refusal(&failed(
            "fatal: pathspec 'nope' did not match any files",
            "",
        ));
        assert_eq!(missing.kind, OpErrorKind::NotFound);
        assert!(missing.message.contains("'nope'"));
        let ignored = add_refusal(&failed(
            "The following paths are ignored by one of your .gitignore files:\nx.log",
            "",
        ));
        assert_eq!(ignored.kind, OpErrorKind::InvalidRequest);
    }

    #[test]
    fn git_show_output_splits_into_the_id_and_its_numstat() {
        let out = b"fa414eb7\0\0\n1\t0\ta\x002\t3\tb c\0";
        let (commit, stats) = split_show(out);
        assert_eq!(commit, "fa414eb7");
        assert_eq!(diff::totals(stats), (2, 3, 3));
        let (commit, stats) = split_show(b"abc\0\0");
        assert_eq!((commit.as_str(), stats), ("abc", &b""[..]));
    }

    #[test]
    fn a_refusal_for_conflicts_names_a_few_and_counts_the_rest() {
        let named: Vec<_> = (0..7)
            .map(|i| wc_runner_protocol::RelativePath::parse(&format!("f{i}")).unwrap())
            .collect();
        let r = unmerged(8, &named);
        assert_eq!(r.kind, OpErrorKind::UnmergedPaths);
        assert!(
            r.message.contains("`f4`") && !r.message.contains("`f5`"),
            "{}",
            r.message
        );
        assert!(r.message.contains("3 more"), "{}", r.message);
    }
}
