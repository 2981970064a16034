//! The diff summary on a real repository: statuses, renames, counts, binary files, untracked
//! files, pages and totals, another base, the index only, and a base that names nothing.

use wc_runner_protocol::{DiffSummaryAnswer, DiffSummaryOp};

use super::*;

fn op(base: Option<&str>, staged: bool, offset: u32, limit: u32) -> GitOp {
    GitOp::GitDiffSummary(DiffSummaryOp {
        paths: Vec::new(),
        base: base.map(str::to_owned),
        staged,
        include_untracked: true,
        offset,
        limit,
    })
}

async fn summary(p: &Project, op: GitOp) -> DiffSummaryAnswer {
    match answer(p, op).await {
        WorkAnswer::GitDiffSummary(s) => s,
        other => panic!("{other:?}"),
    }
}

type Row<'a> = (&'a str, ChangeKind, Option<&'a str>, u64, u64, bool);

fn rows(s: &DiffSummaryAnswer) -> Vec<Row<'_>> {
    s.files
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
        .collect()
}

#[tokio::test]
async fn a_summary_names_every_change_with_counts_renames_and_pages() {
    let p = repository();
    let first = head(&p.repo);
    write(&p.root, "a file.txt", b"first\nsecond\nthird\n");
    git(&p.repo, &["mv", "old.txt", "moved.txt"]);
    std::fs::remove_file(p.root.join("gone.txt")).unwrap();
    write(&p.root, "logo.bin", b"\0\x01\x02binary");
    git(&p.repo, &["add", "logo.bin"]);
    write(&p.root, "notes.md", b"untracked\n");

    let all = summary(&p, op(None, false, 0, 100)).await;
    use ChangeKind::*;
    assert_eq!(
        rows(&all),
        [
            ("a file.txt", Modified, None, 1, 0, false),
            ("gone.txt", Deleted, None, 0, 1, false),
            ("logo.bin", Added, None, 0, 0, true),
            ("moved.txt", Renamed, Some("old.txt"), 0, 0, false),
            ("notes.md", Untracked, None, 0, 0, false),
        ]
    );
    assert_eq!((all.total_files, all.added, all.removed), (5, 1, 1));
    assert_eq!(all.base.as_deref(), Some(first.as_str()));
    assert_eq!(all.next_offset, None);

    // Pages of two: the same files in the same order, totals on every page.
    let mut paged = Vec::new();
    let mut offset = Some(0);
    while let Some(at) = offset {
        let page = summary(&p, op(None, false, at, 2)).await;
        assert_eq!((page.total_files, page.added, page.removed), (5, 1, 1));
        paged.extend(page.files.iter().map(|f| f.path.to_string()));
        offset = page.next_offset;
    }
    let whole: Vec<String> = all.files.iter().map(|f| f.path.to_string()).collect();
    assert_eq!(paged, whole);

    // The index only: the staged rename and the new binary file.
    let staged = summary(&p, op(None, true, 0, 100)).await;
    let names: Vec<&str> = staged.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(names, ["logo.bin", "moved.txt"]);

    // Against a later commit as base, and a base that names nothing.
    git(&p.repo, &["commit", "-q", "-m", "second"]);
    let newer = summary(&p, op(Some(&first), false, 0, 100)).await;
    assert!(newer.files.iter().any(|f| f.path.as_str() == "moved.txt"));
    let (kind, message) = refused(&p, op(Some("no-such-branch"), false, 0, 10)).await;
    assert_eq!(kind, OpErrorKind::RevisionNotFound);
    assert!(message.contains("no-such-branch"), "{message}");
    let (kind, _) = refused(&p, op(Some("--output=/tmp/x"), false, 0, 10)).await;
    assert_eq!(kind, OpErrorKind::InvalidRequest);
}

#[tokio::test]
async fn before_the_first_commit_everything_staged_is_new() {
    let p = project_at("", None);
    git(&p.repo, &["init", "-q", "-b", "main"]);
    write(&p.root, "first.txt", b"one\ntwo\n");
    git(&p.repo, &["add", "first.txt"]);
    write(&p.root, "later.txt", b"not staged\n");
    let s = summary(&p, op(None, true, 0, 100)).await;
    assert_eq!(s.base, None, "there is no commit to name");
    assert_eq!(
        rows(&s),
        [("first.txt", ChangeKind::Added, None, 2, 0, false)]
    );
    // The work tree also lists what is untracked.
    let s = summary(&p, op(None, false, 0, 100)).await;
    let paths: Vec<&str> = s.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["first.txt", "later.txt"]);
}
