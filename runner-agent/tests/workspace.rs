//! Black-box tests of `workspace::execute` on real repositories: the filesystem policy (what
//! opens, what never does), managed worktrees made at the exact base and served like any
//! project, the manifest that brings them back after a restart (and that no job reads), and
//! removal that refuses to lose work unless forced.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use uuid::Uuid;
use wc_runner_agent::config::GitIdentity;
use wc_runner_agent::exec::{Host, StopPolicy};
use wc_runner_agent::opened::Workspaces;
use wc_runner_agent::sandbox::{Sandbox, SandboxSettings};
use wc_runner_agent::workspace::execute;
use wc_runner_protocol::{
    GitCommitOp, GitOp, GitStatusOp, ObserveProjectOp, OpErrorKind, OpenAs, OpenProjectOp,
    OpenedProject, PROTOCOL_VERSION, RemoveWorktreeOp, RemovedWorktree, Termination, WorkAnswer,
    WorkItem, WorkLimits, WorkOutcome, WorkSpec, WorkspaceOp,
};

const HANG: Duration = Duration::from_secs(60);

/// A host whose policy opens checkouts beneath `allowed/`, with a repository there, one
/// outside it, and a worktree store.
struct Site {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    /// `allowed/app`: a repository on `main` with two commits and a branch `first` at the first.
    repo: PathBuf,
    store: PathBuf,
    host: Host,
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=Dev", "-c", "user.email=dev@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn sandbox(hide: &[PathBuf]) -> Sandbox {
    Sandbox::from_settings(&SandboxSettings::default(), hide.to_vec()).unwrap()
}

fn site() -> Site {
    // Not under /tmp: jobs get a private /tmp.
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let repo = base.join("allowed/app");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("lib.txt"), "one\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    git(&repo, &["branch", "first"]);
    std::fs::write(repo.join("lib.txt"), "two\n").unwrap();
    git(&repo, &["commit", "-q", "-am", "second"]);
    let outside = base.join("outside/other");
    std::fs::create_dir_all(&outside).unwrap();
    git(&outside, &["init", "-q"]);
    let store = base.join("store");
    let workspaces = Workspaces::new(&[base.join("allowed")], &store).unwrap();
    let hidden = vec![workspaces.manifest_path()];
    let host = Host::new([], sandbox(&hidden)).with_workspaces(Arc::new(workspaces));
    Site {
        _tmp: tmp,
        repo,
        store: store.canonicalize().unwrap(),
        base,
        host,
    }
}

fn item(project: &str, spec: WorkSpec) -> WorkItem {
    WorkItem {
        protocol_version: PROTOCOL_VERSION,
        work_id: Uuid::now_v7(),
        project: project.into(),
        cwd: None,
        spec,
        stdin: None,
        env: BTreeMap::new(),
        limits: WorkLimits {
            timeout_ms: 30_000,
            output_bytes_per_stream: 1024,
        },
    }
}

async fn run(host: &Host, project: &str, op: WorkspaceOp) -> WorkOutcome {
    let (_keep, cancel) = watch::channel(false);
    let work = item(project, WorkSpec::Workspace(op));
    tokio::time::timeout(HANG, execute(&work, host, cancel, &StopPolicy::default()))
        .await
        .expect("the operation hung")
}

fn open_op(path: &Path, open_as: OpenAs, base_ref: Option<&str>) -> WorkspaceOp {
    WorkspaceOp::OpenProject(OpenProjectOp {
        path: path.display().to_string(),
        open_as,
        base_ref: base_ref.map(str::to_owned),
    })
}

fn answered(outcome: WorkOutcome) -> WorkAnswer {
    assert_eq!(
        (outcome.termination, outcome.error_kind),
        (Termination::Exited, None),
        "{outcome:?}"
    );
    outcome.answer.expect("a successful operation answers")
}

async fn opened(host: &Host, project: &str, op: WorkspaceOp) -> OpenedProject {
    match answered(run(host, project, op).await) {
        WorkAnswer::OpenProject(a) | WorkAnswer::ObserveProject(a) => a,
        other => panic!("{other:?}"),
    }
}

async fn refused(host: &Host, project: &str, op: WorkspaceOp) -> (OpErrorKind, String) {
    let outcome = run(host, project, op).await;
    assert_eq!(outcome.termination, Termination::Rejected, "{outcome:?}");
    (outcome.error_kind.unwrap(), outcome.error.unwrap())
}

async fn removed(host: &Host, project: &str, force: bool) -> RemovedWorktree {
    let op = WorkspaceOp::RemoveWorktree(RemoveWorktreeOp { force });
    match answered(run(host, project, op).await) {
        WorkAnswer::RemoveWorktree(a) => a,
        other => panic!("{other:?}"),
    }
}

/// A Git operation in `project` through the runner, as a tool would ask.
async fn git_op(host: &Host, project: &str, op: GitOp) -> WorkOutcome {
    let (_keep, cancel) = watch::channel(false);
    let identity = GitIdentity::new("Runner Bot", "bot@example.com").unwrap();
    let work = item(project, WorkSpec::Git(op));
    wc_runner_agent::git::execute(&work, host, &identity, cancel, &StopPolicy::default()).await
}

#[tokio::test]
async fn nothing_opens_outside_the_directories_the_operator_allowed() {
    let s = site();
    // A runner without a policy opens nothing.
    let bare = Host::new([], sandbox(&[]));
    let (kind, words) = refused(&bare, "co-1", open_op(&s.repo, OpenAs::Checkout, None)).await;
    assert_eq!(kind, OpErrorKind::PathNotAllowed);
    assert!(words.contains("[workspaces] open"), "{words}");

    let (kind, words) = refused(
        &s.host,
        "co-1",
        open_op(&s.base.join("outside/other"), OpenAs::Checkout, None),
    )
    .await;
    assert_eq!(kind, OpErrorKind::PathNotAllowed);
    assert!(
        words.contains(&s.base.join("allowed").display().to_string()),
        "{words}"
    );
    // `..` and a symlink are judged by where they lead.
    let dotted = s.base.join("allowed/../outside/other");
    let (kind, _) = refused(&s.host, "co-1", open_op(&dotted, OpenAs::Checkout, None)).await;
    assert_eq!(kind, OpErrorKind::PathNotAllowed);
    std::os::unix::fs::symlink(s.base.join("outside"), s.base.join("allowed/link")).unwrap();
    let linked = s.base.join("allowed/link/other");
    let (kind, _) = refused(&s.host, "co-1", open_op(&linked, OpenAs::Worktree, None)).await;
    assert_eq!(kind, OpErrorKind::PathNotAllowed);
    // Nor the store itself, nor what does not exist, nor a file.
    let (kind, _) = refused(&s.host, "co-1", open_op(&s.store, OpenAs::Checkout, None)).await;
    assert_eq!(kind, OpErrorKind::PathNotAllowed);
    let missing = s.base.join("allowed/missing");
    let (kind, _) = refused(&s.host, "co-1", open_op(&missing, OpenAs::Checkout, None)).await;
    assert_eq!(kind, OpErrorKind::NotFound);
    let file = s.repo.join("lib.txt");
    let (kind, _) = refused(&s.host, "co-1", open_op(&file, OpenAs::Checkout, None)).await;
    assert_eq!(kind, OpErrorKind::NotADirectory);
    assert!(s.host.project_ids().is_empty(), "nothing was registered");
}

#[tokio::test]
async fn a_checkout_opens_once_however_often_it_is_asked() {
    let s = site();
    let first = opened(&s.host, "co-1", open_op(&s.repo, OpenAs::Checkout, None)).await;
    assert_eq!(
        (first.project.as_str(), first.created, first.open_as),
        ("co-1", true, OpenAs::Checkout)
    );
    assert_eq!(first.root, s.repo.display().to_string());
    assert_eq!(
        first.head.as_deref(),
        Some(git(&s.repo, &["rev-parse", "HEAD"]).as_str())
    );
    let again = opened(&s.host, "co-2", open_op(&s.repo, OpenAs::Checkout, None)).await;
    assert_eq!((again.project.as_str(), again.created), ("co-1", false));
    assert_eq!(s.host.project_ids(), ["co-1"]);
    // A worktree is never made over a project that exists.
    let (kind, _) = refused(&s.host, "co-1", open_op(&s.repo, OpenAs::Worktree, None)).await;
    assert_eq!(kind, OpErrorKind::AlreadyExists);
}

#[tokio::test]
async fn a_worktree_starts_at_the_exact_base_and_works_without_touching_its_source() {
    let s = site();
    let base = git(&s.repo, &["rev-parse", "first"]);
    let source_head = git(&s.repo, &["rev-parse", "HEAD"]);
    let wt = opened(
        &s.host,
        "wt-a",
        open_op(&s.repo, OpenAs::Worktree, Some("first")),
    )
    .await;
    assert_eq!((wt.open_as, wt.created), (OpenAs::Worktree, true));
    assert_eq!(wt.base_commit.as_deref(), Some(base.as_str()));
    assert_eq!(wt.head.as_deref(), Some(base.as_str()));
    let root = PathBuf::from(&wt.root);
    assert_eq!(root, s.store.join("wt-a"), "the runner chose where it goes");
    assert_eq!(
        std::fs::read_to_string(root.join("lib.txt")).unwrap(),
        "one\n"
    );
    assert!(git(&s.repo, &["worktree", "list"]).contains(&wt.root));

    // The worktree is a project like any other: edit and commit there.
    std::fs::write(root.join("lib.txt"), "edited in the worktree\n").unwrap();
    let outcome = git_op(
        &s.host,
        "wt-a",
        GitOp::GitCommit(GitCommitOp {
            message: "worktree change".into(),
            paths: Vec::new(),
        }),
    )
    .await;
    assert_eq!(outcome.error_kind, None, "{outcome:?}");
    // The source's branch, HEAD and files did not move.
    assert_eq!(git(&s.repo, &["rev-parse", "HEAD"]), source_head);
    assert_eq!(git(&s.repo, &["rev-parse", "first"]), base);
    assert_eq!(
        std::fs::read_to_string(s.repo.join("lib.txt")).unwrap(),
        "two\n"
    );
    assert_eq!(git(&s.repo, &["status", "--porcelain"]), "");

    // Observed again, with the base named: the stored base and the new head.
    let seen = opened(
        &s.host,
        "wt-a",
        WorkspaceOp::ObserveProject(ObserveProjectOp {
            base_ref: Some("first".into()),
        }),
    )
    .await;
    assert_eq!(seen.base_commit.as_deref(), Some(base.as_str()));
    assert_eq!(seen.base_ref_commit.as_deref(), Some(base.as_str()));
    assert_eq!(
        seen.head.as_deref(),
        Some(git(&root, &["rev-parse", "HEAD"]).as_str())
    );
    assert_ne!(seen.head.as_deref(), Some(base.as_str()));
    assert_eq!(seen.source, s.repo.display().to_string());
}

#[tokio::test]
async fn a_worktree_that_cannot_be_made_leaves_nothing_behind() {
    let s = site();
    let (kind, words) = refused(
        &s.host,
        "wt-x",
        open_op(&s.repo, OpenAs::Worktree, Some("no-such-branch")),
    )
    .await;
    assert_eq!(kind, OpErrorKind::RevisionNotFound, "{words}");
    // A directory in no repository: under /tmp, wherever the build directory is.
    let elsewhere = tempfile::tempdir().unwrap();
    let plain = elsewhere.path().canonicalize().unwrap().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let policy = Workspaces::new(
        std::slice::from_ref(&plain),
        &elsewhere.path().join("store"),
    );
    let host = Host::new([], sandbox(&[])).with_workspaces(Arc::new(policy.unwrap()));
    let (kind, _) = refused(&host, "wt-y", open_op(&plain, OpenAs::Worktree, None)).await;
    assert_eq!(kind, OpErrorKind::NotARepository);
    assert!(host.project_ids().is_empty());
    assert_eq!(std::fs::read_dir(&plain).unwrap().count(), 0);
    let left: Vec<_> = std::fs::read_dir(&s.store)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left, ["projects.json"]);
    assert!(s.host.project_ids().is_empty());
    assert_eq!(git(&s.repo, &["worktree", "list"]).lines().count(), 1);
}

#[tokio::test]
async fn a_restarted_runner_serves_what_was_opened_and_no_job_reads_its_manifest() {
    let s = site();
    let wt = opened(&s.host, "wt-a", open_op(&s.repo, OpenAs::Worktree, None)).await;
    // A new runner over the same store and policy.
    let workspaces = Workspaces::new(&[s.base.join("allowed")], &s.store).unwrap();
    let manifest = workspaces.manifest_path();
    let restarted = Host::new([], sandbox(std::slice::from_ref(&manifest)))
        .with_workspaces(Arc::new(workspaces));
    assert_eq!(restarted.project_ids(), ["wt-a"]);
    let seen = opened(
        &restarted,
        "wt-a",
        WorkspaceOp::ObserveProject(ObserveProjectOp { base_ref: None }),
    )
    .await;
    assert_eq!(seen.root, wt.root);
    assert_eq!(seen.base_commit, wt.base_commit);
    // A job of the worktree sees its files, never the manifest beside it.
    let script = format!("cat lib.txt; cat {}", manifest.display());
    let out = job_output(&restarted, "wt-a", &script).await;
    assert!(out.contains("two"), "{out}");
    assert!(!out.contains("wt-a"), "the manifest's content: {out}");
    // A `.git` a job rewrote to lead elsewhere is not followed after a restart.
    let other = s.base.join("outside/other/.git");
    std::fs::write(
        PathBuf::from(&wt.root).join(".git"),
        format!("gitdir: {}\n", other.display()),
    )
    .unwrap();
    let again = Workspaces::new(&[s.base.join("allowed")], &s.store).unwrap();
    let again = Host::new([], sandbox(&[])).with_workspaces(Arc::new(again));
    assert!(again.project_ids().is_empty(), "{:?}", again.project_ids());
    // A policy that no longer allows the source serves none of it.
    let narrowed = Workspaces::new(&[s.base.join("outside")], &s.store).unwrap();
    let narrowed = Host::new([], sandbox(&[])).with_workspaces(Arc::new(narrowed));
    assert!(narrowed.project_ids().is_empty());
}

#[tokio::test]
async fn removing_a_worktree_refuses_to_lose_work_unless_forced() {
    let s = site();
    let wt = opened(&s.host, "wt-a", open_op(&s.repo, OpenAs::Worktree, None)).await;
    let root = PathBuf::from(&wt.root);
    std::fs::write(root.join("notes.txt"), "unsaved\n").unwrap();
    let kept = removed(&s.host, "wt-a", false).await;
    assert!(!kept.removed);
    assert_eq!(kept.unsaved.uncommitted_count, 1);
    assert_eq!(kept.unsaved.uncommitted[0].as_str(), "notes.txt");
    assert!(root.join("notes.txt").exists(), "nothing was removed");

    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-q", "-m", "only here"]);
    let only_here = git(&root, &["rev-parse", "HEAD"]);
    let kept = removed(&s.host, "wt-a", false).await;
    assert!(!kept.removed);
    assert_eq!(kept.unsaved.uncommitted_count, 0);
    assert_eq!(
        kept.unsaved.unsaved_commits,
        std::slice::from_ref(&only_here)
    );
    assert_eq!(kept.unsaved.unsaved_commit_count, 1);

    // A branch keeps the commit: nothing would be lost.
    git(&s.repo, &["branch", "kept", &only_here]);
    let gone = removed(&s.host, "wt-a", false).await;
    assert!(gone.removed);
    assert!(gone.unsaved.is_empty());
    assert!(!root.exists());
    assert!(!git(&s.repo, &["worktree", "list"]).contains(&wt.root));
    assert!(!s.repo.join(".git/worktrees/wt-a").exists());
    assert!(s.host.project_ids().is_empty());
    let (kind, _) = refused(
        &s.host,
        "wt-a",
        WorkspaceOp::RemoveWorktree(RemoveWorktreeOp { force: true }),
    )
    .await;
    assert_eq!(kind, OpErrorKind::ProjectUnavailable);

    // Forced: what it held is thrown away and said so.
    let wt = opened(&s.host, "wt-b", open_op(&s.repo, OpenAs::Worktree, None)).await;
    std::fs::write(PathBuf::from(&wt.root).join("draft.txt"), "x\n").unwrap();
    let forced = removed(&s.host, "wt-b", true).await;
    assert!(forced.removed);
    assert_eq!(forced.unsaved.uncommitted_count, 1);
    assert!(!PathBuf::from(&wt.root).exists());
    // The checkout itself is never removed.
    opened(&s.host, "co-1", open_op(&s.repo, OpenAs::Checkout, None)).await;
    let (kind, _) = refused(
        &s.host,
        "co-1",
        WorkspaceOp::RemoveWorktree(RemoveWorktreeOp { force: true }),
    )
    .await;
    assert_eq!(kind, OpErrorKind::InvalidRequest);
    assert!(s.repo.join("lib.txt").exists());
    let _ = git_op(&s.host, "co-1", GitOp::GitStatus(GitStatusOp {})).await;
}

/// Runs `sh -c script` as a job of `project` on `host`; what it printed on either stream.
async fn job_output(host: &Host, project: &str, script: &str) -> String {
    let (_keep, cancel) = watch::channel(false);
    let (tx, mut rx) = tokio::sync::mpsc::channel::<wc_runner_agent::exec::OutputPiece>(64);
    let job = item(
        project,
        WorkSpec::Process {
            argv: vec!["sh".into(), "-c".into(), script.into()],
        },
    );
    let drain = tokio::spawn(async move {
        let mut out = Vec::new();
        while let Some(p) = rx.recv().await {
            out.extend_from_slice(&p.data);
        }
        out
    });
    let outcome =
        wc_runner_agent::exec::execute(&job, host, cancel, tx, &StopPolicy::default()).await;
    assert_eq!(outcome.termination, Termination::Exited, "{outcome:?}");
    String::from_utf8(drain.await.unwrap()).unwrap()
}

#[tokio::test]
async fn a_git_file_leading_outside_the_policy_opens_nothing() {
    let s = site();
    // A checkout whose `.git` file anyone with write access to it could have written: it
    // names another repository's metadata, which its jobs would then write.
    let planted = s.base.join("allowed/planted");
    std::fs::create_dir_all(&planted).unwrap();
    let elsewhere = s.base.join("outside/other/.git");
    std::fs::write(
        planted.join(".git"),
        format!("gitdir: {}\n", elsewhere.display()),
    )
    .unwrap();
    for open_as in [OpenAs::Checkout, OpenAs::Worktree] {
        let (kind, words) = refused(&s.host, "co-1", open_op(&planted, open_as, None)).await;
        assert_eq!(kind, OpErrorKind::PathNotAllowed, "{open_as:?}: {words}");
        assert!(words.contains(&elsewhere.display().to_string()), "{words}");
    }
    assert!(s.host.project_ids().is_empty());
    assert_eq!(
        git(&s.base.join("outside/other"), &["worktree", "list"])
            .lines()
            .count(),
        1
    );
}

#[tokio::test]
async fn a_worktree_of_a_project_never_reaches_that_projects_files() {
    let s = site();
    // The checkout is itself a configured project of the runner.
    let workspaces = Workspaces::new(&[s.base.join("allowed")], &s.base.join("store2")).unwrap();
    let hidden = vec![workspaces.manifest_path()];
    let host = Host::register([("app".to_owned(), s.repo.clone())], sandbox(&hidden))
        .unwrap()
        .with_workspaces(Arc::new(workspaces));
    let wt = opened(&host, "wt-a", open_op(&s.repo, OpenAs::Worktree, None)).await;
    // Its Git metadata is the source's, and works; the source's files are out of sight.
    let status = git_op(&host, "wt-a", GitOp::GitStatus(GitStatusOp {})).await;
    assert_eq!(status.error_kind, None, "{status:?}");
    let out = job_output(
        &host,
        "wt-a",
        &format!("cat lib.txt; cat {0}/lib.txt; ls {0}", s.repo.display()),
    )
    .await;
    assert_eq!(out.matches("two").count(), 1, "only its own copy: {out}");
    assert!(!out.contains("lib.txt\n"), "the source's listing: {out}");
    assert!(
        wt.root
            .starts_with(&s.base.join("store2").display().to_string())
    );
}

#[tokio::test]
async fn an_opened_checkout_keeps_hidden_paths_hidden_and_removal_never_follows_a_link() {
    let s = site();
    std::fs::write(s.repo.join("secret.env"), "TOKEN=hunter2\n").unwrap();
    let workspaces = Workspaces::new(&[s.base.join("allowed")], &s.store).unwrap();
    let hidden = vec![workspaces.manifest_path(), s.repo.join("secret.env")];
    let host = Host::new([], sandbox(&hidden)).with_workspaces(Arc::new(workspaces));
    opened(&host, "co-1", open_op(&s.repo, OpenAs::Checkout, None)).await;
    let out = job_output(&host, "co-1", "cat secret.env; cat lib.txt").await;
    assert!(out.contains("two") && !out.contains("hunter2"), "{out}");

    // A worktree holding links out of it: removal deletes the links, never their targets.
    let wt = opened(&host, "wt-a", open_op(&s.repo, OpenAs::Worktree, None)).await;
    let root = PathBuf::from(&wt.root);
    std::os::unix::fs::symlink(s.base.join("outside"), root.join("escape")).unwrap();
    std::os::unix::fs::symlink(s.base.join("outside/other"), root.join("other")).unwrap();
    let gone = removed(&host, "wt-a", true).await;
    assert!(gone.removed);
    assert!(!root.exists());
    assert!(
        s.base.join("outside/other/.git").is_dir(),
        "a link's target survives"
    );
    assert!(s.repo.join("secret.env").exists());
}
