//! Checkpoints on real repositories: what one holds (untracked files, not ignored ones), what
//! it moves (nothing), a restore over the expected state only, the state it replaces kept,
//! diffs from a checkpoint, deletion all-or-none, and a project inside a larger repository.

use wc_runner_protocol::{
    Checkpoint, CheckpointKind, CreateCheckpointAnswer, CreateCheckpointOp, DeleteCheckpointsOp,
    DiffCheckpointOp, ListCheckpointsAnswer, ListCheckpointsOp, RestoreCheckpointAnswer,
    RestoreCheckpointOp, RestoredFile,
};

use super::*;

fn create_op(label: &str, session: Option<&str>, kind: CheckpointKind) -> GitOp {
    GitOp::GitCreateCheckpoint(CreateCheckpointOp {
        label: label.into(),
        checkpoint_kind: kind,
        session_id: session.map(str::to_owned),
        once_per_session: kind == CheckpointKind::Automatic,
    })
}

async fn create(p: &Project, label: &str) -> Checkpoint {
    match answer(
        p,
        create_op(label, Some("wc_sess_a"), CheckpointKind::Manual),
    )
    .await
    {
        WorkAnswer::GitCreateCheckpoint(CreateCheckpointAnswer {
            checkpoint,
            created: true,
            pruned,
        }) if pruned.is_empty() => checkpoint,
        other => panic!("{other:?}"),
    }
}

async fn list(p: &Project) -> ListCheckpointsAnswer {
    match answer(
        p,
        GitOp::GitListCheckpoints(ListCheckpointsOp { limit: 100 }),
    )
    .await
    {
        WorkAnswer::GitListCheckpoints(l) => l,
        other => panic!("{other:?}"),
    }
}

fn restore_op(id: &str, expected: &str) -> GitOp {
    GitOp::GitRestoreCheckpoint(RestoreCheckpointOp {
        checkpoint: id.into(),
        expected_state: expected.into(),
        session_id: Some("wc_sess_a".into()),
    })
}

async fn restore(p: &Project, id: &str, expected: &str) -> RestoreCheckpointAnswer {
    match answer(p, restore_op(id, expected)).await {
        WorkAnswer::GitRestoreCheckpoint(r) => r,
        other => panic!("{other:?}"),
    }
}

fn read(p: &Project, file: &str) -> Option<String> {
    std::fs::read_to_string(p.root.join(file)).ok()
}

/// What a developer's `git` says about the repository: HEAD, branches, the index and the
/// status, which taking, listing and diffing checkpoints never change.
fn repository_state(p: &Project) -> Vec<String> {
    [
        vec!["rev-parse", "HEAD"],
        vec!["branch", "-a", "-v"],
        vec!["ls-files", "--stage"],
        vec!["diff", "--cached", "--stat"],
    ]
    .iter()
    .map(|args| git(&p.repo, args))
    .collect()
}

/// Files in the project root that look like a checkpoint's leftovers.
fn leftovers(p: &Project) -> Vec<String> {
    std::fs::read_dir(&p.root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".wc-edit-"))
        .collect()
}

/// A repository with a staged change, an unstaged change, an untracked file and an ignored one.
fn busy_repository() -> Project {
    let p = repository();
    write(&p.root, ".gitignore", b"target/\n");
    git(&p.repo, &["add", ".gitignore"]);
    git(&p.repo, &["commit", "-q", "-m", "ignore target"]);
    write(&p.root, "a file.txt", b"first\nstaged\n");
    git(&p.repo, &["add", "a file.txt"]);
    write(&p.root, "src/lib.rs", b"pub fn one() -> u32 {\n    11\n}\n");
    write(&p.root, "notes/new.md", b"untracked\n");
    write(&p.root, "target/build.log", b"ignored\n");
    p
}

#[tokio::test]
async fn a_checkpoint_holds_untracked_files_but_not_ignored_ones_and_moves_nothing() {
    let p = busy_repository();
    let before = repository_state(&p);
    let status_before = status(&p).await;
    let checkpoint = create(&p, "before the refactor").await;
    assert_eq!(
        repository_state(&p),
        before,
        "HEAD, branches and the index stay"
    );
    assert_eq!(status(&p).await, status_before);
    assert_eq!(leftovers(&p), Vec::<String>::new());
    assert!(checkpoint.id.starts_with("ck-") && checkpoint.id.len() == 15);
    assert_eq!(checkpoint.label, "before the refactor");
    assert_eq!(checkpoint.kind, CheckpointKind::Manual);
    assert_eq!(checkpoint.head.as_deref(), Some(head(&p.repo).as_str()));
    assert_eq!(checkpoint.session_id.as_deref(), Some("wc_sess_a"));
    let refname = format!("refs/worktree/wc/checkpoints/{}", checkpoint.id);
    let files = git(&p.repo, &["ls-tree", "-r", "--name-only", &refname]);
    let files: Vec<&str> = files.lines().collect();
    assert_eq!(
        files,
        [
            ".gitignore",
            "a file.txt",
            "gone.txt",
            "notes/new.md",
            "old.txt",
            "src/lib.rs"
        ]
    );
    let kept = git(&p.repo, &["show", &format!("{refname}:src/lib.rs")]);
    assert!(kept.contains("11"), "the unstaged content is kept: {kept}");
    assert_eq!(
        git(&p.repo, &["show", &format!("{refname}:a file.txt")]),
        "first\nstaged\n"
    );
    // No branch or tag names it; listing finds it with the working tree's current state.
    assert_eq!(git(&p.repo, &["branch", "--contains", &refname]), "");
    let listed = list(&p).await;
    assert_eq!(listed.checkpoints, vec![checkpoint.clone()]);
    assert_eq!(listed.current_state, checkpoint.state);
    assert!(!listed.truncated);
    assert_eq!(repository_state(&p), before);
    assert_eq!(leftovers(&p), Vec::<String>::new());
}

#[tokio::test]
async fn a_restore_brings_the_checkpoint_back_and_keeps_the_state_it_replaced() {
    let p = busy_repository();
    let checkpoint = create(&p, "good").await;
    let index_before = git(&p.repo, &["ls-files", "--stage"]);
    // Break things: change, delete, add, and touch an ignored file.
    write(&p.root, "src/lib.rs", b"broken\n");
    std::fs::remove_file(p.root.join("notes/new.md")).unwrap();
    std::fs::remove_file(p.root.join("old.txt")).unwrap();
    write(&p.root, "scratch.txt", b"stray\n");
    write(&p.root, "target/build.log", b"ignored, rebuilt\n");
    let now = list(&p).await.current_state;
    assert_ne!(now, checkpoint.state);

    let restored = restore(&p, &checkpoint.id, &now).await;
    assert_eq!(restored.restored, checkpoint);
    let files: Vec<(&str, ChangeKind)> = restored
        .files
        .iter()
        .map(|RestoredFile { path, change }| (path.as_str(), *change))
        .collect();
    assert_eq!(
        files,
        [
            ("notes/new.md", ChangeKind::Added),
            ("old.txt", ChangeKind::Added),
            ("scratch.txt", ChangeKind::Deleted),
            ("src/lib.rs", ChangeKind::Modified),
        ]
    );
    assert_eq!(
        read(&p, "src/lib.rs").unwrap(),
        "pub fn one() -> u32 {\n    11\n}\n"
    );
    assert_eq!(read(&p, "notes/new.md").unwrap(), "untracked\n");
    assert_eq!(read(&p, "old.txt").unwrap(), "moving\nlines\n");
    assert_eq!(read(&p, "scratch.txt"), None);
    assert_eq!(read(&p, "target/build.log").unwrap(), "ignored, rebuilt\n");
    assert_eq!(
        git(&p.repo, &["ls-files", "--stage"]),
        index_before,
        "the index stays"
    );
    assert_eq!(list(&p).await.current_state, checkpoint.state);
    assert_eq!(leftovers(&p), Vec::<String>::new());

    // The broken state was kept, and can itself be restored.
    let replaced = restored.replaced.expect("the replaced state is kept");
    assert_eq!(replaced.kind, CheckpointKind::BeforeRestore);
    assert_eq!(replaced.state, now);
    assert_eq!(
        replaced.label,
        format!("before restoring {}", checkpoint.id)
    );
    let listed = list(&p).await;
    assert_eq!(listed.checkpoints.len(), 2);
    assert!(listed.checkpoints.contains(&replaced));
    let back = restore(&p, &replaced.id, &checkpoint.state).await;
    assert_eq!(read(&p, "src/lib.rs").unwrap(), "broken\n");
    assert_eq!(read(&p, "scratch.txt").unwrap(), "stray\n");
    assert!(back.replaced.is_some());

    // Restoring the state the tree is already in changes nothing and keeps nothing more.
    let same = restore(&p, &replaced.id, &now).await;
    assert_eq!((same.replaced, same.files.len()), (None, 0));
    assert_eq!(list(&p).await.checkpoints.len(), 3);
}

#[tokio::test]
async fn a_restore_over_another_state_than_expected_is_refused_naming_what_changed() {
    let p = busy_repository();
    let checkpoint = create(&p, "good").await;
    let expected = list(&p).await.current_state;
    write(&p.root, "src/lib.rs", b"changed meanwhile\n");
    write(&p.root, "late.txt", b"new meanwhile\n");
    let outcome = run_item(&p, &work(restore_op(&checkpoint.id, &expected))).await;
    assert_eq!(
        outcome.error_kind,
        Some(OpErrorKind::StateChanged),
        "{outcome:?}"
    );
    let error = outcome.error.unwrap();
    assert!(error.contains("2 file(s) changed"), "{error}");
    assert!(
        error.contains("`late.txt`") && error.contains("`src/lib.rs`"),
        "{error}"
    );
    let conflict = outcome.conflict.expect("the conflict is typed");
    let changed: Vec<&str> = conflict
        .changed_paths
        .as_ref()
        .unwrap()
        .iter()
        .map(|p| p.as_str())
        .collect();
    assert_eq!(changed, ["late.txt", "src/lib.rs"]);
    let current = conflict.current_state.unwrap();
    assert_eq!(current, list(&p).await.current_state);
    // Nothing was restored or kept.
    assert_eq!(read(&p, "src/lib.rs").unwrap(), "changed meanwhile\n");
    assert_eq!(list(&p).await.checkpoints, vec![checkpoint.clone()]);
    // A state the repository never saw is refused too, without a list.
    let (kind, message) = refused(&p, restore_op(&checkpoint.id, &"0".repeat(40))).await;
    assert_eq!(kind, OpErrorKind::StateChanged);
    assert!(message.contains("unknown to this repository"), "{message}");
    // An id no checkpoint has.
    let (kind, message) = refused(&p, restore_op("ck-000000000000", &current)).await;
    assert_eq!(kind, OpErrorKind::CheckpointNotFound);
    assert!(message.contains("ck-000000000000"), "{message}");
}

#[tokio::test]
async fn a_diff_from_a_checkpoint_shows_changed_new_and_removed_files() {
    let p = busy_repository();
    let checkpoint = create(&p, "").await;
    assert_eq!(checkpoint.label, "checkpoint");
    write(&p.root, "src/lib.rs", b"pub fn one() -> u32 {\n    12\n}\n");
    write(&p.root, "fresh.txt", b"brand new\n");
    std::fs::remove_file(p.root.join("gone.txt")).unwrap();
    let op = GitOp::GitDiffCheckpoint(DiffCheckpointOp {
        checkpoint: checkpoint.id.clone(),
        paths: Vec::new(),
        context_lines: 1,
        limit_bytes: 65536,
    });
    let d = match answer(&p, op).await {
        WorkAnswer::GitDiffCheckpoint(d) => d,
        other => panic!("{other:?}"),
    };
    assert_eq!(diff_paths(&d), ["fresh.txt", "gone.txt", "src/lib.rs"]);
    assert!(d.diff.contains("-    11\n+    12\n"), "{}", d.diff);
    assert!(d.diff.contains("+brand new"), "{}", d.diff);
    assert!(!d.truncated);
    let only = GitOp::GitDiffCheckpoint(DiffCheckpointOp {
        checkpoint: checkpoint.id,
        paths: vec![path("src")],
        context_lines: 1,
        limit_bytes: 65536,
    });
    match answer(&p, only).await {
        WorkAnswer::GitDiffCheckpoint(d) => assert_eq!(diff_paths(&d), ["src/lib.rs"]),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn checkpoints_are_deleted_all_or_none_and_a_session_takes_one_automatic_checkpoint() {
    let p = busy_repository();
    let first = create(&p, "one").await;
    let second = create(&p, "two").await;
    let delete = |ids: &[&str]| {
        GitOp::GitDeleteCheckpoints(DeleteCheckpointsOp {
            checkpoints: ids.iter().map(|s| (*s).to_owned()).collect(),
        })
    };
    let (kind, message) = refused(&p, delete(&[&first.id, "ck-000000000000"])).await;
    assert_eq!(kind, OpErrorKind::CheckpointNotFound);
    assert!(message.contains("ck-000000000000"), "{message}");
    assert_eq!(list(&p).await.checkpoints.len(), 2, "none was deleted");
    match answer(&p, delete(&[&first.id])).await {
        WorkAnswer::GitDeleteCheckpoints(d) => assert_eq!(d.deleted, vec![first.id.clone()]),
        other => panic!("{other:?}"),
    }
    assert_eq!(list(&p).await.checkpoints, vec![second]);

    // Automatic checkpoints: one per session, however often asked.
    let auto = |session: &str| create_op("first change", Some(session), CheckpointKind::Automatic);
    let taken = match answer(&p, auto("wc_sess_b")).await {
        WorkAnswer::GitCreateCheckpoint(a) => a,
        other => panic!("{other:?}"),
    };
    assert!(taken.created);
    write(&p.root, "src/lib.rs", b"later\n");
    let again = match answer(&p, auto("wc_sess_b")).await {
        WorkAnswer::GitCreateCheckpoint(a) => a,
        other => panic!("{other:?}"),
    };
    assert!(!again.created);
    assert_eq!(again.checkpoint, taken.checkpoint);
    let other = match answer(&p, auto("wc_sess_c")).await {
        WorkAnswer::GitCreateCheckpoint(a) => a,
        other => panic!("{other:?}"),
    };
    assert!(other.created);
    assert_ne!(other.checkpoint.state, taken.checkpoint.state);
    assert_eq!(list(&p).await.checkpoints.len(), 3);
}

#[tokio::test]
async fn a_project_inside_a_larger_repository_is_told_its_metadata_is_read_only() {
    // Jobs write only the project root: the repository's objects above it are read-only, so
    // a checkpoint cannot be kept (as a commit cannot), and the refusal says why.
    let p = project_at("app", None);
    git(&p.repo, &["init", "-q", "-b", "main"]);
    write(&p.repo, "other/keep.txt", b"other project\n");
    write(&p.root, "main.py", b"print(1)\n");
    git(&p.repo, &["add", "-A"]);
    git(&p.repo, &["commit", "-q", "-m", "two projects"]);
    write(&p.root, "main.py", b"print(2)\n");
    let before = repository_state(&p);
    let op = create_op("app only", None, CheckpointKind::Manual);
    let (kind, message) = refused(&p, op).await;
    assert_eq!(kind, OpErrorKind::GitUnavailable);
    assert!(
        message.contains("metadata is read-only to jobs"),
        "{message}"
    );
    assert_eq!(repository_state(&p), before);
    assert_eq!(leftovers(&p), Vec::<String>::new());
    assert_eq!(git(&p.repo, &["for-each-ref", "refs/worktree"]), "");
}
