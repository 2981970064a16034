//! Black-box tests of `git::execute` on real repositories made with the `git` binary in
//! temporary directories: status of every kind of change (a real merge conflict included),
//! diffs, logs, commits, a project root inside a larger repository, paths leaving the root,
//! and repository-named programs kept inside the sandbox.

use std::collections::BTreeMap;
use std::os::unix::fs::{PermissionsExt as _, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tokio::sync::watch;
use uuid::Uuid;
use wc_runner_agent::config::GitIdentity;
use wc_runner_agent::exec::{Host, StopPolicy};
use wc_runner_agent::git::execute;
use wc_runner_agent::sandbox::{Sandbox, SandboxMode, SandboxSettings};
use wc_runner_protocol::{
    ChangeKind, CommitSummary, GitCommitAnswer, GitCommitOp, GitDiffAnswer, GitDiffOp, GitLogOp,
    GitOp, GitStatusAnswer, GitStatusOp, MAX_ANSWER_BYTES, OpErrorKind, PROTOCOL_VERSION,
    RelativePath, StatusEntry, Termination, WorkAnswer, WorkItem, WorkLimits, WorkOutcome,
    WorkSpec,
};

/// How long an operation may take before the test calls it a hang.
const HANG: Duration = Duration::from_secs(60);

/// A project root beside a directory outside it, served by a host.
struct Project {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    /// The repository's top (the project root unless the project is a part of it).
    repo: PathBuf,
    root: PathBuf,
    host: Host,
    identity: GitIdentity,
}

/// A project whose root is `repo/<sub>` (or the repository itself for an empty `sub`), on a
/// host in sandbox `mode` (the default when `None`).
fn project_at(sub: &str, mode: Option<SandboxMode>) -> Project {
    // Not under /tmp: jobs get a private /tmp, and a repository above the project root must be
    // there for them to see (read-only).
    project_in(
        tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap(),
        sub,
        mode,
    )
}

/// [`project_at`] in the temporary directory `tmp`.
fn project_in(tmp: tempfile::TempDir, sub: &str, mode: Option<SandboxMode>) -> Project {
    let base = tmp.path().canonicalize().unwrap();
    let repo = base.join("repo");
    let root = if sub.is_empty() {
        repo.clone()
    } else {
        repo.join(sub)
    };
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(base.join("outside")).unwrap();
    std::fs::write(base.join("outside/secret.txt"), "secret\n").unwrap();
    let settings = SandboxSettings {
        mode,
        ..Default::default()
    };
    let host = Host::register(
        BTreeMap::from([("web".to_owned(), root.clone())]),
        Sandbox::from_settings(&settings, []).unwrap(),
    )
    .unwrap();
    Project {
        _tmp: tmp,
        base,
        repo,
        root,
        host,
        identity: GitIdentity::new("Runner Bot", "bot@example.com").unwrap(),
    }
}

/// Runs `git args` in `dir` as a developer would, and returns what it printed.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=Dev", "-c", "user.email=dev@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn write(dir: &Path, path: &str, content: &[u8]) {
    let path = dir.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// A repository on `main` whose project root is its top, with a few files committed.
fn repository() -> Project {
    repository_in(None)
}

fn repository_in(mode: Option<SandboxMode>) -> Project {
    let p = project_at("", mode);
    git(&p.repo, &["init", "-q", "-b", "main"]);
    for (path, content) in [
        ("src/lib.rs", "pub fn one() -> u32 {\n    1\n}\n"),
        ("a file.txt", "first\nsecond\n"),
        ("old.txt", "moving\nlines\n"),
        ("gone.txt", "soon deleted\n"),
    ] {
        write(&p.root, path, content.as_bytes());
    }
    git(&p.repo, &["add", "-A"]);
    git(&p.repo, &["commit", "-q", "-m", "initial"]);
    p
}

fn head(dir: &Path) -> String {
    git(dir, &["rev-parse", "HEAD"]).trim().to_owned()
}

fn path(p: &str) -> RelativePath {
    RelativePath::parse(p).unwrap()
}

fn work(op: GitOp) -> WorkItem {
    WorkItem {
        protocol_version: PROTOCOL_VERSION,
        work_id: Uuid::now_v7(),
        project: "web".into(),
        cwd: None,
        spec: WorkSpec::Git(op),
        stdin: None,
        env: BTreeMap::new(),
        limits: WorkLimits {
            timeout_ms: 30_000,
            output_bytes_per_stream: 1024,
        },
    }
}

async fn run_item(p: &Project, item: &WorkItem) -> WorkOutcome {
    let (_keep, cancel) = watch::channel(false);
    let policy = StopPolicy::default();
    let done = execute(item, &p.host, &p.identity, cancel, &policy);
    tokio::time::timeout(HANG, done)
        .await
        .expect("the operation hung")
}

/// The answer of an operation that must succeed.
async fn answer(p: &Project, op: GitOp) -> WorkAnswer {
    let outcome = run_item(p, &work(op)).await;
    assert_eq!(
        (outcome.termination, outcome.exit_code, outcome.error_kind),
        (Termination::Exited, Some(0), None),
        "{outcome:?}"
    );
    let answer = outcome.answer.expect("a successful operation answers");
    let json = serde_json::to_vec(&answer).unwrap();
    assert!(json.len() <= MAX_ANSWER_BYTES, "{}", json.len());
    answer
}

/// The kind and message of an operation that must be refused.
async fn refused(p: &Project, op: GitOp) -> (OpErrorKind, String) {
    let outcome = run_item(p, &work(op)).await;
    assert_eq!(outcome.termination, Termination::Rejected, "{outcome:?}");
    assert_eq!(outcome.answer, None);
    (
        outcome.error_kind.expect("a refusal is typed"),
        outcome.error.expect("a refusal says why"),
    )
}

async fn status(p: &Project) -> GitStatusAnswer {
    match answer(p, GitOp::GitStatus(GitStatusOp {})).await {
        WorkAnswer::GitStatus(s) => s,
        other => panic!("{other:?}"),
    }
}

async fn diff(p: &Project, op: GitDiffOp) -> GitDiffAnswer {
    match answer(p, GitOp::GitDiff(op)).await {
        WorkAnswer::GitDiff(d) => d,
        other => panic!("{other:?}"),
    }
}

async fn log(p: &Project, limit: u32, path_: Option<&str>) -> Vec<CommitSummary> {
    let op = GitOp::GitLog(GitLogOp {
        limit,
        path: path_.map(path),
    });
    match answer(p, op).await {
        WorkAnswer::GitLog(l) => l.commits,
        other => panic!("{other:?}"),
    }
}

fn commit_op(message: &str, paths: &[&str]) -> GitOp {
    GitOp::GitCommit(GitCommitOp {
        message: message.into(),
        paths: paths.iter().map(|p| path(p)).collect(),
    })
}

async fn commit(p: &Project, message: &str, paths: &[&str]) -> GitCommitAnswer {
    match answer(p, commit_op(message, paths)).await {
        WorkAnswer::GitCommit(c) => c,
        other => panic!("{other:?}"),
    }
}

fn entry(path_: &str, index: Option<ChangeKind>, worktree: Option<ChangeKind>) -> StatusEntry {
    StatusEntry {
        path: path(path_),
        original_path: None,
        index,
        worktree,
        conflicted: false,
    }
}

/// The paths of a diff's files.
fn diff_paths(d: &GitDiffAnswer) -> Vec<&str> {
    d.files.iter().map(|f| f.path.as_str()).collect()
}

/// The files a commit changed, as Git lists them.
fn committed_files(dir: &Path, commit: &str) -> Vec<String> {
    git(
        dir,
        &["show", "--format=", "--name-only", "--no-renames", commit],
    )
    .lines()
    .map(str::to_owned)
    .collect()
}

#[tokio::test]
async fn status_tells_clean_modified_staged_untracked_and_renamed_files_by_exact_name() {
    let p = repository();
    let clean = status(&p).await;
    assert_eq!(clean.branch.as_deref(), Some("main"));
    assert_eq!(clean.head, Some(head(&p.repo)));
    assert_eq!(
        (clean.upstream, clean.ahead, clean.behind),
        (None, None, None)
    );
    assert!(clean.entries.is_empty() && !clean.dirty);

    write(&p.root, "src/lib.rs", b"pub fn one() -> u32 {\n    2\n}\n");
    write(&p.root, "a file.txt", b"first\nchanged\n");
    git(&p.repo, &["add", "a file.txt"]);
    write(&p.root, "new dir/new file.txt", b"new\n");
    git(&p.repo, &["mv", "old.txt", "moved here.txt"]);
    std::fs::remove_file(p.root.join("gone.txt")).unwrap();
    write(&p.root, "line\nbreak.txt", b"odd name\n");
    let s = status(&p).await;
    assert_eq!(
        s.entries,
        [
            entry("a file.txt", Some(ChangeKind::Modified), None),
            entry("gone.txt", None, Some(ChangeKind::Deleted)),
            StatusEntry {
                original_path: Some(path("old.txt")),
                ..entry("moved here.txt", Some(ChangeKind::Renamed), None)
            },
            entry("src/lib.rs", None, Some(ChangeKind::Modified)),
            // An untracked directory is one entry, as Git shows it.
            entry("new dir", None, Some(ChangeKind::Untracked)),
        ]
    );
    assert_eq!(
        s.unlisted, 1,
        "the name with a newline is counted, not listed"
    );
    assert_eq!(
        (s.staged, s.unstaged, s.untracked, s.conflicts),
        (2, 2, 2, 0)
    );
    assert!(s.dirty && !s.entries_truncated);
}

#[tokio::test]
async fn a_branch_with_an_upstream_reports_how_far_ahead_and_behind_it_is() {
    let p = repository();
    let origin = p.base.join("origin.git");
    let origin = origin.to_str().unwrap();
    git(
        &p.base,
        &["clone", "-q", "--bare", p.repo.to_str().unwrap(), origin],
    );
    // The project is a clone of the origin, which then gains one commit it lacks.
    let q = project_at("", None);
    std::fs::remove_dir(&q.root).unwrap();
    git(&q.base, &["clone", "-q", origin, q.root.to_str().unwrap()]);
    write(&p.root, "upstream.txt", b"u\n");
    git(&p.repo, &["add", "-A"]);
    git(&p.repo, &["commit", "-q", "-m", "upstream work"]);
    git(&p.repo, &["push", "-q", origin, "main:main"]);
    git(&q.root, &["fetch", "-q"]);
    for n in ["one", "two"] {
        write(&q.root, n, n.as_bytes());
        git(&q.root, &["add", "-A"]);
        git(&q.root, &["commit", "-q", "-m", n]);
    }
    let s = status(&q).await;
    assert_eq!(s.branch.as_deref(), Some("main"));
    assert_eq!(s.upstream.as_deref(), Some("origin/main"));
    assert_eq!((s.ahead, s.behind), (Some(2), Some(1)));
    assert!(!s.dirty);
}

/// Makes `file` conflict on `main` through a real merge of a branch that changed it too.
fn conflict(p: &Project, file: &str) {
    git(&p.repo, &["checkout", "-q", "-b", "theirs"]);
    write(&p.root, file, b"first\ntheirs\n");
    git(&p.repo, &["commit", "-q", "-am", "theirs"]);
    git(&p.repo, &["checkout", "-q", "main"]);
    write(&p.root, file, b"first\nours\n");
    git(&p.repo, &["commit", "-q", "-am", "ours"]);
    let merge = Command::new("git")
        .args(["-c", "user.name=Dev", "-c", "user.email=dev@example.com"])
        .args(["merge", "theirs"])
        .current_dir(&p.repo)
        .output()
        .unwrap();
    assert!(!merge.status.success(), "the merge conflicts");
}

#[tokio::test]
async fn a_merge_conflict_is_unmerged_in_status_and_blocks_commits_until_resolved() {
    let p = repository();
    conflict(&p, "a file.txt");
    write(&p.root, "other.txt", b"other\n");
    let s = status(&p).await;
    assert_eq!(s.conflicts, 1);
    assert_eq!(
        s.entries[0],
        StatusEntry {
            conflicted: true,
            ..entry(
                "a file.txt",
                Some(ChangeKind::Unmerged),
                Some(ChangeKind::Unmerged)
            )
        }
    );
    for paths in [&[][..], &["other.txt"][..]] {
        let (kind, why) = refused(&p, commit_op("merge", paths)).await;
        assert_eq!(kind, OpErrorKind::UnmergedPaths, "{why}");
        assert!(why.contains("`a file.txt`"), "{why}");
    }
    // Resolved: named paths cannot conclude the merge, every change does.
    write(&p.root, "a file.txt", b"first\nboth\n");
    git(&p.repo, &["add", "a file.txt"]);
    let (kind, why) = refused(&p, commit_op("part", &["other.txt"])).await;
    assert_eq!(kind, OpErrorKind::MergeInProgress, "{why}");
    let merged = commit(&p, "merge theirs", &[]).await;
    assert_eq!(merged.commit, head(&p.repo));
    let commits = log(&p, 1, None).await;
    assert_eq!(commits[0].parents.len(), 2);
    assert_eq!(commits[0].subject, "merge theirs");
    assert!(!status(&p).await.dirty);
}

#[tokio::test]
async fn a_project_inside_a_larger_repository_sees_and_names_only_its_own_files() {
    for mode in [None, Some(SandboxMode::Off)] {
        let p = project_at("svc/api", mode);
        git(&p.repo, &["init", "-q", "-b", "main"]);
        write(&p.repo, "top.txt", b"top\n");
        write(&p.root, "main.rs", b"fn main() {}\n");
        git(&p.repo, &["add", "-A"]);
        git(&p.repo, &["commit", "-q", "-m", "initial"]);
        write(&p.repo, "top.txt", b"top changed\n");
        git(&p.repo, &["commit", "-q", "-am", "outside only"]);
        write(&p.repo, "top.txt", b"top changed again\n");
        write(&p.root, "main.rs", b"fn main() { run() }\n");
        write(&p.root, "new.rs", b"fn run() {}\n");

        let s = status(&p).await;
        let names: Vec<&str> = s.entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(names, ["main.rs", "new.rs"]);
        assert_eq!((s.unstaged, s.untracked), (1, 1));
        let d = diff(&p, GitDiffOp::default()).await;
        assert_eq!(diff_paths(&d), ["main.rs"]);
        assert!(
            d.diff.contains("--- a/main.rs\n+++ b/main.rs\n"),
            "{}",
            d.diff
        );
        assert!(!d.diff.contains("top.txt"));
        let subjects: Vec<String> = log(&p, 10, None)
            .await
            .into_iter()
            .map(|c| c.subject)
            .collect();
        assert_eq!(subjects, ["initial"], "only commits that touch the project");

        let outcome = run_item(&p, &work(commit_op("api change", &[]))).await;
        match mode {
            // Only the project root is writable in the sandbox; the repository's metadata lies
            // above it.
            None => {
                assert_eq!(
                    outcome.error_kind,
                    Some(OpErrorKind::GitUnavailable),
                    "{outcome:?}"
                );
                let why = outcome.error.unwrap();
                assert!(why.contains("read-only"), "{why}");
            }
            Some(_) => {
                assert_eq!(outcome.termination, Termination::Exited, "{outcome:?}");
                let head = head(&p.repo);
                let mut files = committed_files(&p.repo, &head);
                files.sort();
                assert_eq!(files, ["svc/api/main.rs", "svc/api/new.rs"]);
                // The change above the project stays uncommitted.
                let left = git(&p.repo, &["status", "--porcelain"]);
                assert_eq!(left.trim(), "M top.txt");
            }
        }
    }
}

#[tokio::test]
async fn outside_a_repository_every_git_operation_is_refused_not_a_repository() {
    // Under /tmp: the build directory may itself lie in a repository, and a sandboxed job sees
    // none of /tmp but the project root.
    let p = project_in(tempfile::tempdir().unwrap(), "", None);
    for op in [
        GitOp::GitStatus(GitStatusOp {}),
        GitOp::GitDiff(GitDiffOp::default()),
        GitOp::GitLog(GitLogOp::default()),
        commit_op("m", &[]),
    ] {
        let (kind, why) = refused(&p, op.clone()).await;
        assert_eq!(kind, OpErrorKind::NotARepository, "{op:?}: {why}");
    }
}

#[tokio::test]
async fn diff_shows_unstaged_or_staged_changes_with_counts_for_named_paths() {
    let p = repository();
    write(&p.root, "src/lib.rs", b"pub fn one() -> u32 {\n    2\n}\n");
    write(&p.root, "a file.txt", b"first\nsecond\nthird\n");
    git(&p.repo, &["add", "a file.txt"]);
    write(&p.root, "untracked.txt", b"never in a diff\n");
    write(&p.root, "image.bin", b"\0\x01\x02");
    git(&p.repo, &["add", "image.bin"]);

    let unstaged = diff(&p, GitDiffOp::default()).await;
    assert_eq!(diff_paths(&unstaged), ["src/lib.rs"]);
    assert_eq!((unstaged.files[0].added, unstaged.files[0].removed), (1, 1));
    assert!(
        unstaged.diff.contains("-    1\n+    2\n"),
        "{}",
        unstaged.diff
    );
    assert!(
        unstaged.diff.contains(" pub fn one() -> u32 {\n"),
        "context"
    );
    assert!(!unstaged.diff.contains("untracked.txt"));
    assert!(!unstaged.truncated && !unstaged.files_truncated);

    let staged = diff(
        &p,
        GitDiffOp {
            staged: true,
            ..GitDiffOp::default()
        },
    )
    .await;
    assert_eq!(diff_paths(&staged), ["a file.txt", "image.bin"]);
    assert_eq!(
        (
            staged.files[0].added,
            staged.files[0].removed,
            staged.files[0].binary
        ),
        (1, 0, false)
    );
    assert!(staged.files[1].binary);
    assert!(
        staged
            .diff
            .contains("Binary files /dev/null and b/image.bin differ"),
        "{}",
        staged.diff
    );

    let named = diff(
        &p,
        GitDiffOp {
            paths: vec![path("image.bin")],
            staged: true,
            context_lines: 0,
            ..GitDiffOp::default()
        },
    )
    .await;
    assert_eq!(diff_paths(&named), ["image.bin"]);
    let no_context = diff(
        &p,
        GitDiffOp {
            context_lines: 0,
            ..GitDiffOp::default()
        },
    )
    .await;
    assert!(
        !no_context
            .diff
            .lines()
            .any(|l| l == " pub fn one() -> u32 {"),
        "no context line: {}",
        no_context.diff
    );
}

#[tokio::test]
async fn a_diff_over_its_limit_is_cut_at_a_line_end_and_flagged_while_counts_stay_whole() {
    let p = repository();
    let long: String = (0..500).map(|i| format!("line {i}\n")).collect();
    write(&p.root, "a file.txt", long.as_bytes());
    let d = diff(
        &p,
        GitDiffOp {
            limit_bytes: 300,
            ..GitDiffOp::default()
        },
    )
    .await;
    assert!(d.truncated);
    assert!(
        d.diff.len() <= 300 && d.diff.len() > 200,
        "{}",
        d.diff.len()
    );
    assert!(d.diff.ends_with('\n'));
    assert!(d.diff.starts_with("diff --git a/a file.txt b/a file.txt\n"));
    assert_eq!((d.files[0].added, d.files[0].removed), (500, 2));
}

/// A glob character in a path names that very file, never a pattern.
#[tokio::test]
async fn named_paths_are_literal_and_a_symlink_out_of_the_root_is_refused() {
    let p = repository();
    write(&p.root, "*.txt", b"star\n");
    git(&p.repo, &["add", "*.txt"]);
    git(&p.repo, &["commit", "-q", "-m", "star"]);
    write(&p.root, "*.txt", b"star changed\n");
    write(&p.root, "a file.txt", b"changed\n");
    let d = diff(
        &p,
        GitDiffOp {
            paths: vec![path("*.txt")],
            ..GitDiffOp::default()
        },
    )
    .await;
    assert_eq!(diff_paths(&d), ["*.txt"]);
    let c = commit(&p, "only the star", &["*.txt"]).await;
    assert_eq!(committed_files(&p.repo, &c.commit), ["*.txt"]);

    symlink("../outside", p.root.join("escape")).unwrap();
    symlink("../outside/secret.txt", p.root.join("escape-file")).unwrap();
    for op in [
        GitOp::GitDiff(GitDiffOp {
            paths: vec![path("escape/secret.txt")],
            ..GitDiffOp::default()
        }),
        GitOp::GitLog(GitLogOp {
            limit: 5,
            path: Some(path("escape-file")),
        }),
        commit_op("escape", &["escape/secret.txt"]),
        commit_op("escape", &["escape-file"]),
    ] {
        let (kind, why) = refused(&p, op.clone()).await;
        assert_eq!(kind, OpErrorKind::PathOutsideRoot, "{op:?}: {why}");
        assert!(why.contains("`escape"), "{why}");
    }
    assert_eq!(
        std::fs::read_to_string(p.base.join("outside/secret.txt")).unwrap(),
        "secret\n"
    );
}

#[tokio::test]
async fn log_returns_the_newest_commits_within_its_limit_and_path() {
    let p = project_at("", None);
    git(&p.repo, &["init", "-q", "-b", "main"]);
    assert!(log(&p, 5, None).await.is_empty(), "no commits yet");
    for (n, file) in [(1, "a.txt"), (2, "src/b.rs"), (3, "a.txt"), (4, "c.txt")] {
        write(&p.root, file, format!("{n}\n").as_bytes());
        git(&p.repo, &["add", "-A"]);
        git(
            &p.repo,
            &["commit", "-q", "-m", &format!("commit {n}: {file}")],
        );
    }
    let latest = log(&p, 2, None).await;
    let subjects: Vec<&str> = latest.iter().map(|c| c.subject.as_str()).collect();
    assert_eq!(subjects, ["commit 4: c.txt", "commit 3: a.txt"]);
    assert_eq!(latest[0].commit, head(&p.repo));
    assert_eq!(latest[0].parents, [latest[1].commit.clone()]);
    assert_eq!(
        (
            latest[0].author_name.as_str(),
            latest[0].author_email.as_str()
        ),
        ("Dev", "dev@example.com")
    );
    let at = &latest[0].authored_at;
    assert!(at.len() >= 20 && at.as_bytes()[10] == b'T', "{at}");
    let touching: Vec<String> = log(&p, 10, Some("a.txt"))
        .await
        .into_iter()
        .map(|c| c.subject)
        .collect();
    assert_eq!(touching, ["commit 3: a.txt", "commit 1: a.txt"]);
    let all = log(&p, 10, None).await;
    assert_eq!(all.len(), 4);
    assert!(all[3].parents.is_empty());
}

#[tokio::test]
async fn a_commit_of_every_change_takes_untracked_and_deleted_files_by_the_configured_author() {
    let p = repository();
    write(&p.root, "src/lib.rs", b"pub fn one() -> u32 {\n    2\n}\n");
    std::fs::remove_file(p.root.join("gone.txt")).unwrap();
    write(&p.root, "new dir/new file.txt", b"new\nfile\n");
    let message =
        "-F looks like an option\n\nA body with \"quotes\", $(no expansion) and\n# a hash line\n";
    let c = commit(&p, message, &[]).await;
    assert_eq!(c.commit, head(&p.repo));
    assert_eq!(c.branch.as_deref(), Some("main"));
    assert_eq!(
        (c.files_changed, c.insertions, c.deletions),
        (3, 3, 2),
        "{c:?}"
    );
    assert!(c.summary.contains("[main "), "{}", c.summary);
    assert!(!status(&p).await.dirty);
    assert_eq!(
        git(&p.repo, &["log", "-1", "--format=%B"]).trim_end(),
        message.trim_end()
    );
    assert_eq!(
        git(&p.repo, &["log", "-1", "--format=%an <%ae>|%cn <%ce>"]).trim(),
        "Runner Bot <bot@example.com>|Runner Bot <bot@example.com>"
    );
}

#[tokio::test]
async fn a_commit_of_named_paths_records_exactly_them_including_a_deletion_and_a_new_file() {
    let p = repository();
    write(&p.root, "src/lib.rs", b"pub fn one() -> u32 {\n    3\n}\n");
    std::fs::remove_file(p.root.join("gone.txt")).unwrap();
    write(&p.root, "brand new.txt", b"new\n");
    // Changed but not named: one in the work tree, one already staged.
    write(&p.root, "a file.txt", b"not named\n");
    write(&p.root, "old.txt", b"staged, not named\n");
    git(&p.repo, &["add", "old.txt"]);

    let c = commit(&p, "three named", &["src", "gone.txt", "brand new.txt"]).await;
    let mut files = committed_files(&p.repo, &c.commit);
    files.sort();
    assert_eq!(files, ["brand new.txt", "gone.txt", "src/lib.rs"]);
    assert_eq!(c.files_changed, 3);
    let left = status(&p).await;
    assert_eq!(
        left.entries,
        [
            entry("a file.txt", None, Some(ChangeKind::Modified)),
            entry("old.txt", Some(ChangeKind::Modified), None),
        ]
    );
}

#[tokio::test]
async fn a_commit_without_changes_is_refused_and_a_missing_path_is_not_found() {
    let p = repository();
    let (kind, why) = refused(&p, commit_op("nothing", &[])).await;
    assert_eq!(kind, OpErrorKind::NothingToCommit, "{why}");
    write(&p.root, "a file.txt", b"changed\n");
    let (kind, why) = refused(&p, commit_op("nothing here", &["src/lib.rs"])).await;
    assert_eq!(kind, OpErrorKind::NothingToCommit, "{why}");
    let (kind, why) = refused(&p, commit_op("missing", &["no/such.txt"])).await;
    assert_eq!(kind, OpErrorKind::NotFound, "{why}");
    assert!(why.contains("no/such.txt"), "{why}");
    assert_eq!(log(&p, 5, None).await.len(), 1, "nothing was committed");
}

/// A repository whose configuration and hook name a program that writes `marker` outside the
/// project and `ran` inside it.
fn hostile(p: &Project, marker: &Path, exit: u8) {
    let ran = p.root.join("hook-ran");
    let program = p.base.join("outside/mark.sh");
    std::fs::write(
        &program,
        format!(
            "#!/bin/sh\ntouch '{}'\necho hook said no >&2\nexit 0\n",
            marker.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    git(
        &p.repo,
        &["config", "core.fsmonitor", program.to_str().unwrap()],
    );
    let hook = p.repo.join(".git/hooks/pre-commit");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\ntouch '{}'\necho ran > '{}'\necho hook said no >&2\nexit {exit}\n",
            marker.display(),
            ran.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[tokio::test]
async fn programs_a_repository_names_run_only_inside_the_sandbox() {
    let p = repository();
    let marker = p.base.join("outside/marker");
    hostile(&p, &marker, 0);
    write(&p.root, "a file.txt", b"changed\n");
    status(&p).await;
    diff(&p, GitDiffOp::default()).await;
    let c = commit(&p, "hooked", &["a file.txt"]).await;
    assert_eq!(c.commit, head(&p.repo));
    assert!(p.root.join("hook-ran").exists(), "the hook ran");
    assert!(!marker.exists(), "the hook wrote outside the project");

    // The same hook unsandboxed reaches the marker: the check above can fail.
    let q = repository_in(Some(SandboxMode::Off));
    let marker = q.base.join("outside/marker");
    hostile(&q, &marker, 0);
    write(&q.root, "a file.txt", b"changed\n");
    commit(&q, "hooked", &["a file.txt"]).await;
    assert!(marker.exists());
}

#[tokio::test]
async fn a_hook_that_refuses_a_commit_is_reported_with_its_words() {
    let p = repository();
    let marker = p.base.join("outside/marker");
    hostile(&p, &marker, 1);
    write(&p.root, "a file.txt", b"changed\n");
    let (kind, why) = refused(&p, commit_op("hooked", &[])).await;
    assert_eq!(kind, OpErrorKind::HookRejected, "{why}");
    assert!(why.contains("hook said no"), "{why}");
    assert_eq!(log(&p, 5, None).await.len(), 1, "nothing was committed");
    assert!(!marker.exists());
}

#[tokio::test]
async fn stopped_git_work_ends_cancelled_and_late_work_timed_out() {
    let p = repository();
    let (_keep, cancel) = watch::channel(true);
    let outcome = execute(
        &work(GitOp::GitStatus(GitStatusOp {})),
        &p.host,
        &p.identity,
        cancel,
        &StopPolicy::default(),
    )
    .await;
    assert_eq!(outcome.termination, Termination::Cancelled);
    // Git runs as a job; no job starts and ends within a millisecond.
    let mut late = work(commit_op("late", &[]));
    late.limits.timeout_ms = 1;
    let outcome = run_item(&p, &late).await;
    assert_eq!(outcome.termination, Termination::TimedOut, "{outcome:?}");
    assert_eq!(outcome.answer, None);
    let mut bad = work(GitOp::GitStatus(GitStatusOp {}));
    bad.cwd = Some(path("src"));
    let outcome = run_item(&p, &bad).await;
    assert_eq!(outcome.error_kind, Some(OpErrorKind::InvalidRequest));
}

#[path = "git/checkpoint.rs"]
mod checkpoint;
#[path = "git/restore.rs"]
mod restore;
#[path = "git/summary.rs"]
mod summary;
