//! Restoring tracked paths to HEAD or the index, and discarding untracked files: what each
//! changes, what it leaves (ignored files, nested repositories), and its refusals.

use wc_runner_protocol::{
    DiscardUntrackedAnswer, DiscardUntrackedOp, RestorePathsAnswer, RestorePathsOp, RestoreSource,
};

use super::*;

async fn restore(p: &Project, paths: &[&str], source: RestoreSource) -> RestorePathsAnswer {
    let op = GitOp::GitRestorePaths(RestorePathsOp {
        paths: paths.iter().map(|p| path(p)).collect(),
        source,
    });
    match answer(p, op).await {
        WorkAnswer::GitRestorePaths(a) => a,
        other => panic!("{other:?}"),
    }
}

async fn discard(p: &Project, paths: &[&str], dry_run: bool) -> DiscardUntrackedAnswer {
    let op = GitOp::GitDiscardUntracked(DiscardUntrackedOp {
        paths: paths.iter().map(|p| path(p)).collect(),
        dry_run,
    });
    match answer(p, op).await {
        WorkAnswer::GitDiscardUntracked(a) => a,
        other => panic!("{other:?}"),
    }
}

fn names(paths: &[RelativePath]) -> Vec<&str> {
    paths.iter().map(RelativePath::as_str).collect()
}

fn read(p: &Project, file: &str) -> Option<String> {
    std::fs::read_to_string(p.root.join(file)).ok()
}

#[tokio::test]
async fn restoring_to_the_index_keeps_staged_changes_and_to_head_drops_them_all() {
    let p = repository();
    write(&p.root, "src/lib.rs", b"staged\n");
    git(&p.repo, &["add", "src/lib.rs"]);
    write(&p.root, "src/lib.rs", b"staged, then edited\n");
    write(&p.root, "a file.txt", b"edited\n");
    std::fs::remove_file(p.root.join("gone.txt")).unwrap();

    let back = restore(&p, &["src"], RestoreSource::Index).await;
    assert_eq!(names(&back.restored), ["src/lib.rs"]);
    assert_eq!(
        read(&p, "src/lib.rs").unwrap(),
        "staged\n",
        "the staged content stays"
    );
    assert_eq!(
        git(&p.repo, &["diff", "--cached", "--name-only"]),
        "src/lib.rs\n"
    );
    assert_eq!(
        read(&p, "a file.txt").unwrap(),
        "edited\n",
        "other paths stay"
    );

    let back = restore(&p, &["src/lib.rs", "gone.txt"], RestoreSource::Head).await;
    assert_eq!(names(&back.restored), ["gone.txt", "src/lib.rs"]);
    assert_eq!(
        read(&p, "src/lib.rs").unwrap(),
        "pub fn one() -> u32 {\n    1\n}\n"
    );
    assert_eq!(
        read(&p, "gone.txt").unwrap(),
        "soon deleted\n",
        "a deleted file comes back"
    );
    assert_eq!(
        git(&p.repo, &["diff", "--cached", "--name-only"]),
        "",
        "the index too"
    );
    assert_eq!(read(&p, "a file.txt").unwrap(), "edited\n");

    // An untracked path is not Git's to restore.
    write(&p.root, "new.txt", b"untracked\n");
    let op = GitOp::GitRestorePaths(RestorePathsOp {
        paths: vec![path("new.txt")],
        source: RestoreSource::Head,
    });
    let (kind, message) = refused(&p, op).await;
    assert_eq!(kind, OpErrorKind::NotFound);
    assert!(message.contains("no tracked file"), "{message}");
    assert_eq!(read(&p, "new.txt").unwrap(), "untracked\n");
    // A path out through a symlink is refused before Git sees it.
    symlink(p.base.join("outside"), p.root.join("out")).unwrap();
    let op = GitOp::GitRestorePaths(RestorePathsOp {
        paths: vec![path("out/secret.txt")],
        source: RestoreSource::Head,
    });
    assert_eq!(refused(&p, op).await.0, OpErrorKind::PathOutsideRoot);
}

#[tokio::test]
async fn discarding_untracked_files_is_a_dry_run_unless_asked_and_spares_ignored_ones() {
    let p = repository();
    write(&p.root, ".gitignore", b"build/\n");
    git(&p.repo, &["add", ".gitignore"]);
    git(&p.repo, &["commit", "-q", "-m", "ignore build"]);
    write(&p.root, "scratch/a.txt", b"a\n");
    write(&p.root, "scratch/deep/b.txt", b"b\n");
    write(&p.root, "src/tmp.rs", b"tmp\n");
    write(&p.root, "build/out.o", b"ignored\n");
    // A repository of its own inside the project: never removed.
    let nested = p.root.join("vendor/lib");
    std::fs::create_dir_all(&nested).unwrap();
    git(&nested, &["init", "-q"]);
    write(&nested, "x.c", b"int x;\n");
    // A symlink out of the root: the link goes, never its target.
    symlink(p.base.join("outside/secret.txt"), p.root.join("link-out")).unwrap();

    let listed = discard(&p, &[], true).await;
    assert!(listed.dry_run);
    assert_eq!(
        names(&listed.files),
        [
            "link-out",
            "scratch/a.txt",
            "scratch/deep/b.txt",
            "src/tmp.rs"
        ]
    );
    assert_eq!(names(&listed.skipped_repositories), ["vendor/lib"]);
    assert!(!listed.files_truncated);
    assert!(
        p.root.join("scratch/deep/b.txt").exists(),
        "a dry run removes nothing"
    );

    let only = discard(&p, &["scratch"], false).await;
    assert_eq!(names(&only.files), ["scratch/a.txt", "scratch/deep/b.txt"]);
    assert!(
        !p.root.join("scratch").exists(),
        "emptied directories go too"
    );
    assert!(p.root.join("src/tmp.rs").exists());

    let rest = discard(&p, &[], false).await;
    assert_eq!(names(&rest.files), ["link-out", "src/tmp.rs"]);
    assert!(!p.root.join("src/tmp.rs").exists());
    assert!(
        p.root.join("src/lib.rs").exists(),
        "a directory with tracked files stays"
    );
    assert!(p.root.join("link-out").symlink_metadata().is_err());
    assert_eq!(
        std::fs::read_to_string(p.base.join("outside/secret.txt")).unwrap(),
        "secret\n"
    );
    assert_eq!(read(&p, "build/out.o").unwrap(), "ignored\n");
    assert!(nested.join("x.c").exists());
    assert_eq!(
        discard(&p, &[], true).await.files,
        Vec::<RelativePath>::new()
    );
}
