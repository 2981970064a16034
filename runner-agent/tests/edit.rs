//! Black-box tests of `edit::execute` on real project trees made in temporary directories:
//! every refusal kind, line endings and modes kept, creation, symlinks out of the root and as
//! the target, special, binary and large files, concurrent edits of one file, and patches over
//! several files.

use std::collections::BTreeMap;
use std::os::unix::fs::{PermissionsExt as _, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest as _, Sha256};
use tokio::sync::watch;
use uuid::Uuid;
use wc_runner_agent::edit::execute;
use wc_runner_agent::exec::Host;
use wc_runner_agent::sandbox::{Sandbox, SandboxSettings};
use wc_runner_protocol::{
    DeleteFilesOp, EditConflict, EditOp, FileChange, MAX_EDIT_FILE_SIZE, MAX_EDIT_TEXT_BYTES,
    MoveFileOp, OpErrorKind, PROTOCOL_VERSION, PatchAnswer, PatchOp, PatchedFile, RelativePath,
    Termination, TextEdit, TextEditsAnswer, TextEditsOp, WorkAnswer, WorkItem, WorkLimits,
    WorkOutcome, WorkSpec, WriteFileAnswer, WriteFileOp,
};

/// How long an operation may take before the test calls it a hang (a FIFO opened for reading
/// would block forever).
const HANG: Duration = Duration::from_secs(60);

/// A project root beside a directory outside it.
struct Project {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
    host: Arc<Host>,
}

const LIB_RS: &str = "pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n\npub fn sub(a: u32, b: u32) -> u32 {\n    a - b\n}\n";

fn project() -> Project {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let root = base.join("root");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(base.join("outside")).unwrap();
    std::fs::write(base.join("outside/secret.txt"), "secret\n").unwrap();
    std::fs::write(root.join("src/lib.rs"), LIB_RS).unwrap();
    symlink("../outside", root.join("escape")).unwrap();
    symlink("../outside/secret.txt", root.join("escape-file")).unwrap();
    symlink("src/lib.rs", root.join("link-to-lib")).unwrap();
    symlink("src", root.join("src-link")).unwrap();
    let host = Host::register(
        BTreeMap::from([("web".to_owned(), root.clone())]),
        Sandbox::from_settings(&SandboxSettings::default(), []).unwrap(),
    )
    .unwrap();
    Project {
        _tmp: tmp,
        base,
        root,
        host: Arc::new(host),
    }
}

fn path(p: &str) -> RelativePath {
    RelativePath::parse(p).unwrap()
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn work(op: EditOp) -> WorkItem {
    WorkItem {
        protocol_version: PROTOCOL_VERSION,
        work_id: Uuid::now_v7(),
        project: "web".into(),
        cwd: None,
        spec: WorkSpec::Edit(op),
        stdin: None,
        env: BTreeMap::new(),
        limits: WorkLimits {
            timeout_ms: 30_000,
            output_bytes_per_stream: 1024,
        },
    }
}

async fn run_item(host: &Host, item: &WorkItem) -> WorkOutcome {
    let (_keep, cancel) = watch::channel(false);
    tokio::time::timeout(HANG, execute(item, host, cancel))
        .await
        .expect("the operation hung")
}

async fn run(p: &Project, op: EditOp) -> WorkOutcome {
    run_item(&p.host, &work(op)).await
}

fn edit(old: &str, new: &str) -> TextEdit {
    TextEdit {
        old_text: old.into(),
        new_text: new.into(),
        occurrence: None,
    }
}

fn edits(file: &str, list: Vec<TextEdit>) -> EditOp {
    EditOp::TextEdits(TextEditsOp {
        path: path(file),
        expected_sha256: None,
        edits: list,
        create: false,
    })
}

fn create(file: &str, content: &str) -> EditOp {
    EditOp::TextEdits(TextEditsOp {
        path: path(file),
        expected_sha256: None,
        edits: vec![edit("", content)],
        create: true,
    })
}

fn write(file: &str, content: &str, expected_sha256: Option<&str>) -> EditOp {
    EditOp::WriteFile(WriteFileOp {
        path: path(file),
        content: content.into(),
        expected_sha256: expected_sha256.map(str::to_owned),
    })
}

async fn written(p: &Project, op: EditOp) -> WriteFileAnswer {
    match succeeded(run(p, op).await) {
        WorkAnswer::WriteFile(a) => a,
        other => panic!("{other:?}"),
    }
}

fn patch(text: &str) -> EditOp {
    EditOp::Patch(PatchOp { patch: text.into() })
}

fn succeeded(outcome: WorkOutcome) -> WorkAnswer {
    assert_eq!(
        (outcome.termination, outcome.exit_code),
        (Termination::Exited, Some(0)),
        "{outcome:?}"
    );
    assert_eq!((outcome.error_kind, &outcome.conflict), (None, &None));
    let answer = outcome.answer.expect("a successful edit answers");
    answer.validate().unwrap();
    answer
}

async fn text_edits(p: &Project, op: EditOp) -> TextEditsAnswer {
    match succeeded(run(p, op).await) {
        WorkAnswer::TextEdits(a) => a,
        other => panic!("{other:?}"),
    }
}

async fn patched(p: &Project, text: &str) -> PatchAnswer {
    match succeeded(run(p, patch(text)).await) {
        WorkAnswer::Patch(a) => a,
        other => panic!("{other:?}"),
    }
}

/// A refusal: its kind, words and conflict facts.
struct Refused {
    kind: OpErrorKind,
    error: String,
    conflict: EditConflict,
}

fn refusal(outcome: WorkOutcome) -> Refused {
    assert_eq!(outcome.termination, Termination::Rejected, "{outcome:?}");
    assert_eq!(outcome.answer, None);
    Refused {
        kind: outcome.error_kind.expect("a refusal is typed"),
        error: outcome.error.expect("a refusal says why"),
        conflict: outcome.conflict.unwrap_or_default(),
    }
}

async fn refused(p: &Project, op: EditOp) -> Refused {
    refusal(run(p, op).await)
}

fn read(p: &Project, file: &str) -> String {
    std::fs::read_to_string(p.root.join(file)).unwrap()
}

/// Every file under `dir` (recursively), relative to it, following no symlink.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let rel = entry
                .path()
                .strip_prefix(dir)
                .unwrap()
                .display()
                .to_string();
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            }
            out.push(rel);
        }
    }
    out.sort();
    out
}

/// No temporary file of an edit is left anywhere under the root.
fn assert_no_temp_files(p: &Project) {
    let left: Vec<String> = tree(&p.root)
        .into_iter()
        .filter(|f| f.contains(".wc-edit-"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

#[tokio::test]
async fn text_edits_replace_exact_text_and_answer_hashes_size_and_a_diff() {
    let p = project();
    let before = sha256(LIB_RS.as_bytes());
    let op = EditOp::TextEdits(TextEditsOp {
        path: path("src/lib.rs"),
        expected_sha256: Some(before.clone()),
        edits: vec![
            edit("a + b", "a.wrapping_add(b)"),
            edit("a - b", "a.wrapping_sub(b)"),
        ],
        create: false,
    });
    let answer = text_edits(&p, op).await;
    let now = read(&p, "src/lib.rs");
    assert_eq!(
        now,
        LIB_RS
            .replace("a + b", "a.wrapping_add(b)")
            .replace("a - b", "a.wrapping_sub(b)")
    );
    assert_eq!(answer.path, path("src/lib.rs"));
    assert!(!answer.created && answer.changed);
    assert_eq!(answer.previous_sha256, Some(before));
    assert_eq!(answer.sha256, sha256(now.as_bytes()));
    assert_eq!(answer.size, now.len() as u64);
    assert_eq!(answer.edits_applied, 2);
    assert!(!answer.diff_truncated);
    assert!(
        answer
            .diff
            .starts_with("--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ "),
        "{}",
        answer.diff
    );
    assert!(
        answer
            .diff
            .contains("\n-    a + b\n+    a.wrapping_add(b)\n"),
        "{}",
        answer.diff
    );
    assert_no_temp_files(&p);

    // An edit that changes nothing is answered, and the file is left as it is.
    let inode = std::fs::metadata(p.root.join("src/lib.rs")).unwrap();
    let same = text_edits(
        &p,
        edits("src/lib.rs", vec![edit("wrapping_add", "wrapping_add")]),
    )
    .await;
    assert!(!same.changed);
    assert_eq!(same.previous_sha256.as_deref(), Some(same.sha256.as_str()));
    assert_eq!(same.diff, "");
    let after = std::fs::metadata(p.root.join("src/lib.rs")).unwrap();
    assert_eq!(
        std::os::unix::fs::MetadataExt::ino(&inode),
        std::os::unix::fs::MetadataExt::ino(&after)
    );
}

#[tokio::test]
async fn each_conflict_is_refused_typed_with_the_edit_and_the_current_hash_and_changes_nothing() {
    let p = project();
    let current = sha256(LIB_RS.as_bytes());
    let with = |list: Vec<TextEdit>| edits("src/lib.rs", list);
    let nth = |old: &str, k: u32| TextEdit {
        occurrence: Some(k),
        ..edit(old, "x")
    };
    // The op, then the refusal: kind, edit index, matches and words.
    type Case = (EditOp, OpErrorKind, Option<u32>, Option<u64>, &'static str);
    let cases: Vec<Case> = vec![
        (
            with(vec![edit("a + b", "c"), edit("u32", "u64")]),
            OpErrorKind::MultipleMatches,
            Some(1),
            Some(6),
            "matches 6 times",
        ),
        (
            with(vec![edit("a * b", "c")]),
            OpErrorKind::MatchNotFound,
            Some(0),
            Some(0),
            "not in the file",
        ),
        (
            with(vec![nth("pub fn", 3)]),
            OpErrorKind::OccurrenceOutOfRange,
            Some(0),
            Some(2),
            "occurrence 3",
        ),
        (
            with(vec![edit("a + b\n}", "x"), edit("b\n}\n\npub", "y")]),
            OpErrorKind::OverlappingEdits,
            Some(1),
            None,
            "overlaps the match of edits[0]",
        ),
        (
            EditOp::TextEdits(TextEditsOp {
                path: path("src/lib.rs"),
                expected_sha256: Some("0".repeat(64)),
                edits: vec![edit("a + b", "c")],
                create: false,
            }),
            OpErrorKind::Sha256Mismatch,
            None,
            None,
            "not the expected",
        ),
    ];
    for (op, kind, index, matches, words) in cases {
        let r = refused(&p, op.clone()).await;
        assert_eq!(r.kind, kind, "{op:?}: {}", r.error);
        assert!(r.error.contains(words), "{op:?}: {}", r.error);
        assert!(r.error.contains("`src/lib.rs`"), "{}", r.error);
        assert_eq!(r.conflict.edit_index, index, "{op:?}");
        assert_eq!(r.conflict.matches, matches, "{op:?}");
        assert_eq!(r.conflict.current_sha256.as_deref(), Some(current.as_str()));
        assert_eq!(
            read(&p, "src/lib.rs"),
            LIB_RS,
            "a refused edit changes nothing"
        );
    }
    // Missing files, and an empty old_text outside a create.
    let r = refused(&p, edits("src/none.rs", vec![edit("a", "b")])).await;
    assert_eq!(r.kind, OpErrorKind::NotFound, "{}", r.error);
    let r = refused(&p, edits("nodir/none.rs", vec![edit("a", "b")])).await;
    assert_eq!(r.kind, OpErrorKind::NotFound, "{}", r.error);
    let r = refused(&p, edits("src/lib.rs", vec![edit("", "b")])).await;
    assert_eq!(r.kind, OpErrorKind::InvalidRequest, "{}", r.error);
    assert_no_temp_files(&p);
}

#[tokio::test]
async fn crlf_line_endings_and_the_files_mode_are_kept() {
    let p = project();
    let file = p.root.join("win.txt");
    std::fs::write(&file, "first\r\nsecond\r\nthird\r\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o751)).unwrap();
    let answer = text_edits(
        &p,
        edits(
            "win.txt",
            vec![edit("first\nsecond\n", "one\ntwo\nthree-and-a-half\n")],
        ),
    )
    .await;
    assert_eq!(
        read(&p, "win.txt"),
        "one\r\ntwo\r\nthree-and-a-half\r\nthird\r\n"
    );
    assert_eq!(answer.size, read(&p, "win.txt").len() as u64);
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o751);
    // An LF file takes the texts as given.
    std::fs::write(p.root.join("unix.txt"), "a\nb\n").unwrap();
    text_edits(&p, edits("unix.txt", vec![edit("a\n", "x\r\n")])).await;
    assert_eq!(read(&p, "unix.txt"), "x\r\nb\n");
}

#[tokio::test]
async fn create_makes_a_new_file_and_its_directories_and_never_overwrites() {
    let p = project();
    let answer = text_edits(&p, create("new/deep/dir/mod.rs", "pub mod x;\n")).await;
    assert_eq!(read(&p, "new/deep/dir/mod.rs"), "pub mod x;\n");
    assert!(answer.created && answer.changed);
    assert_eq!(answer.previous_sha256, None);
    assert_eq!(answer.sha256, sha256(b"pub mod x;\n"));
    assert_eq!(answer.edits_applied, 1);
    assert!(
        answer
            .diff
            .starts_with("--- /dev/null\n+++ b/new/deep/dir/mod.rs\n"),
        "{}",
        answer.diff
    );
    let mode = std::fs::metadata(p.root.join("new/deep/dir/mod.rs"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0, "a created file is not executable");

    let r = refused(&p, create("src/lib.rs", "x")).await;
    assert_eq!(r.kind, OpErrorKind::AlreadyExists, "{}", r.error);
    assert_eq!(r.conflict.current_sha256, Some(sha256(LIB_RS.as_bytes())));
    assert_eq!(read(&p, "src/lib.rs"), LIB_RS);
    // A file where a directory is needed.
    let r = refused(&p, create("src/lib.rs/inner.rs", "x")).await;
    assert_eq!(r.kind, OpErrorKind::NotADirectory, "{}", r.error);
    // An empty file.
    let empty = text_edits(&p, create("empty.txt", "")).await;
    assert_eq!((empty.size, read(&p, "empty.txt").as_str()), (0, ""));
    assert_no_temp_files(&p);
}

#[tokio::test]
async fn symlinks_out_of_the_root_are_refused_and_a_symlink_target_is_never_written_through() {
    let p = project();
    let outside_before = tree(&p.base.join("outside"));
    // A parent component leaving the root: for an edit, a create and a patch.
    let r = refused(
        &p,
        edits("escape/secret.txt", vec![edit("secret", "owned")]),
    )
    .await;
    assert_eq!(r.kind, OpErrorKind::PathOutsideRoot, "{}", r.error);
    let r = refused(&p, create("escape/new.txt", "x")).await;
    assert_eq!(r.kind, OpErrorKind::PathOutsideRoot, "{}", r.error);
    let r = refused(&p, create("escape/sub/new.txt", "x")).await;
    assert_eq!(r.kind, OpErrorKind::PathOutsideRoot, "{}", r.error);
    let r = refused(
        &p,
        patch("--- /dev/null\n+++ b/escape/p.txt\n@@ -0,0 +1 @@\n+x\n"),
    )
    .await;
    assert_eq!(r.kind, OpErrorKind::PathOutsideRoot, "{}", r.error);
    assert_eq!(r.conflict.path, Some(path("escape/p.txt")));
    // The target itself a symlink, out of the root or inside it.
    let r = refused(&p, edits("escape-file", vec![edit("secret", "owned")])).await;
    assert_eq!(r.kind, OpErrorKind::Symlink, "{}", r.error);
    assert!(r.error.contains("outside the project root"), "{}", r.error);
    let r = refused(&p, edits("link-to-lib", vec![edit("a + b", "c")])).await;
    assert_eq!(r.kind, OpErrorKind::Symlink, "{}", r.error);
    assert!(r.error.contains("leads to `src/lib.rs`"), "{}", r.error);
    let r = refused(&p, create("link-to-lib", "x")).await;
    assert_eq!(r.kind, OpErrorKind::Symlink, "{}", r.error);
    assert_eq!(
        std::fs::read_to_string(p.base.join("outside/secret.txt")).unwrap(),
        "secret\n"
    );
    assert_eq!(tree(&p.base.join("outside")), outside_before);
    assert_eq!(read(&p, "src/lib.rs"), LIB_RS);
    assert!(
        std::fs::symlink_metadata(p.root.join("link-to-lib"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // A symlinked directory inside the root is a way to the file, and the link stays a link.
    text_edits(&p, edits("src-link/lib.rs", vec![edit("a + b", "b + a")])).await;
    assert!(read(&p, "src/lib.rs").contains("b + a"));
    assert!(
        std::fs::symlink_metadata(p.root.join("src-link"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_no_temp_files(&p);
}

#[tokio::test]
async fn special_binary_non_utf8_large_and_directory_targets_are_refused_typed() {
    let p = project();
    nix::unistd::mkfifo(&p.root.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    drop(std::os::unix::net::UnixListener::bind(p.root.join("sock")).unwrap());
    std::fs::write(p.root.join("bin.dat"), b"head\0tail").unwrap();
    std::fs::write(p.root.join("latin1.txt"), b"caf\xe9\n").unwrap();
    let big = vec![b'a'; MAX_EDIT_FILE_SIZE as usize + 1];
    std::fs::write(p.root.join("big.txt"), &big).unwrap();
    let one = |f: &str| edits(f, vec![edit("a", "b")]);
    for (file, kind) in [
        ("fifo", OpErrorKind::SpecialFile),
        ("sock", OpErrorKind::SpecialFile),
        ("bin.dat", OpErrorKind::NotText),
        ("latin1.txt", OpErrorKind::NotText),
        ("big.txt", OpErrorKind::FileTooLarge),
        ("src", OpErrorKind::NotAFile),
    ] {
        let r = refused(&p, one(file)).await;
        assert_eq!(r.kind, kind, "{file}: {}", r.error);
        assert!(r.error.contains(&format!("`{file}`")), "{}", r.error);
    }
    let r = refused(&p, one("bin.dat")).await;
    assert_eq!(r.conflict.current_sha256, Some(sha256(b"head\0tail")));
    // An edit whose result passes the bound is refused too.
    let near = "x".repeat(MAX_EDIT_FILE_SIZE as usize - 10);
    std::fs::write(p.root.join("near.txt"), &near).unwrap();
    let grow = TextEdit {
        occurrence: Some(1),
        ..edit("x", &"y".repeat(MAX_EDIT_TEXT_BYTES / 2))
    };
    let r = refused(&p, edits("near.txt", vec![grow])).await;
    assert_eq!(r.kind, OpErrorKind::FileTooLarge, "{}", r.error);
    assert_eq!(
        std::fs::read(p.root.join("bin.dat")).unwrap(),
        b"head\0tail"
    );
    assert_no_temp_files(&p);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_edits_naming_one_hash_have_exactly_one_winner() {
    let p = project();
    let first = sha256(LIB_RS.as_bytes());
    let mut tasks = Vec::new();
    for k in 0..16 {
        let host = p.host.clone();
        let op = EditOp::TextEdits(TextEditsOp {
            path: path("src/lib.rs"),
            expected_sha256: Some(first.clone()),
            edits: vec![edit("a + b", &format!("a + b + {k}"))],
            create: false,
        });
        tasks.push(tokio::spawn(
            async move { run_item(&host, &work(op)).await },
        ));
    }
    let mut winners = Vec::new();
    let mut losers = Vec::new();
    for (k, task) in tasks.into_iter().enumerate() {
        let outcome = task.await.unwrap();
        match outcome.answer {
            Some(WorkAnswer::TextEdits(a)) => winners.push((k, a)),
            _ => losers.push(refusal(outcome)),
        }
    }
    assert_eq!(
        winners.len(),
        1,
        "exactly one edit wins: {:?}",
        winners.iter().map(|w| w.0).collect::<Vec<_>>()
    );
    let (k, won) = &winners[0];
    let content = read(&p, "src/lib.rs");
    assert_eq!(content, LIB_RS.replace("a + b", &format!("a + b + {k}")));
    assert_eq!(won.sha256, sha256(content.as_bytes()));
    assert_eq!(losers.len(), 15);
    for r in losers {
        assert_eq!(r.kind, OpErrorKind::Sha256Mismatch, "{}", r.error);
        assert_eq!(
            r.conflict.current_sha256.as_deref(),
            Some(won.sha256.as_str())
        );
    }
    assert_no_temp_files(&p);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_edits_of_one_file_lose_no_update() {
    // Each edit finds the last line and adds one before it. Without the lock two edits would
    // read the same content and the later rename would drop the earlier edit's line. Locks are
    // per open file, so tasks of one runner contend as runner processes do.
    let p = project();
    std::fs::write(p.root.join("log.txt"), "END\n").unwrap();
    std::fs::set_permissions(
        p.root.join("log.txt"),
        std::fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    let mut tasks = Vec::new();
    for t in 0..8 {
        let host = p.host.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..5 {
                let op = edits(
                    "log.txt",
                    vec![edit("END\n", &format!("line {t}-{i}\nEND\n"))],
                );
                succeeded(run_item(&host, &work(op)).await);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let content = read(&p, "log.txt");
    let mut lines: Vec<&str> = content.lines().collect();
    assert_eq!(lines.pop(), Some("END"));
    assert_eq!(lines.len(), 40, "{content}");
    for t in 0..8 {
        let mine: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|l| l.starts_with(&format!("line {t}-")))
            .collect();
        let expected: Vec<String> = (0..5).map(|i| format!("line {t}-{i}")).collect();
        assert_eq!(mine, expected, "each task's lines, in its order");
    }
    let mode = std::fs::metadata(p.root.join("log.txt"))
        .unwrap()
        .permissions()
        .mode()
        & 0o7777;
    assert_eq!(mode, 0o640);
    assert_no_temp_files(&p);
}

/// Holds an exclusive `flock` on `file`, as another edit would.
fn hold_lock(file: &Path) -> std::fs::File {
    let f = std::fs::File::open(file).unwrap();
    rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive).unwrap();
    f
}

#[tokio::test]
async fn an_edit_waiting_for_the_lock_stops_on_timeout_or_cancel_and_writes_nothing() {
    let p = project();
    let held = hold_lock(&p.root.join("src/lib.rs"));
    let mut late = work(edits("src/lib.rs", vec![edit("a + b", "c")]));
    late.limits.timeout_ms = 300;
    let outcome = run_item(&p.host, &late).await;
    assert_eq!(outcome.termination, Termination::TimedOut, "{outcome:?}");
    assert_eq!(outcome.answer, None);
    let (stop, cancel) = watch::channel(false);
    let item = work(edits("src/lib.rs", vec![edit("a + b", "c")]));
    let host = p.host.clone();
    let running = tokio::spawn(async move { execute(&item, &host, cancel).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.send(true).unwrap();
    let outcome = tokio::time::timeout(HANG, running).await.unwrap().unwrap();
    assert_eq!(outcome.termination, Termination::Cancelled, "{outcome:?}");
    drop(held);
    assert_eq!(read(&p, "src/lib.rs"), LIB_RS);
    assert_no_temp_files(&p);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_replaced_while_an_edit_waits_for_its_lock_is_read_anew() {
    let p = project();
    let file = p.root.join("src/lib.rs");
    let held = hold_lock(&file);
    let op = EditOp::TextEdits(TextEditsOp {
        path: path("src/lib.rs"),
        expected_sha256: Some(sha256(LIB_RS.as_bytes())),
        edits: vec![edit("a + b", "c")],
        create: false,
    });
    let host = p.host.clone();
    let waiting = tokio::spawn(async move { run_item(&host, &work(op)).await });
    // Give the edit time to open the old file and wait for its lock; then replace the file by
    // a rename, as another edit would, and let go of the old one.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let replacement = "pub fn add(a: u32, b: u32) -> u32 {\n    b + a\n}\n";
    std::fs::write(p.root.join("src/.next"), replacement).unwrap();
    std::fs::rename(p.root.join("src/.next"), &file).unwrap();
    drop(held);
    let r = refusal(waiting.await.unwrap());
    assert_eq!(r.kind, OpErrorKind::Sha256Mismatch, "{}", r.error);
    assert_eq!(
        r.conflict.current_sha256,
        Some(sha256(replacement.as_bytes()))
    );
    assert_eq!(read(&p, "src/lib.rs"), replacement);
}

const THREE_FILES: &str = "\
diff --git a/src/lib.rs b/src/lib.rs
index 1111111..2222222 100644
--- a/src/lib.rs
+++ b/src/lib.rs
@@ -1,3 +1,3 @@
 pub fn add(a: u32, b: u32) -> u32 {
-    a + b
+    a.wrapping_add(b)
 }
@@ -5,3 +5,3 @@ pub fn add(a: u32, b: u32) -> u32 {
 pub fn sub(a: u32, b: u32) -> u32 {
-    a - b
+    a.wrapping_sub(b)
 }
diff --git a/docs/new/guide.md b/docs/new/guide.md
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/docs/new/guide.md
@@ -0,0 +1,2 @@
+# Guide
+Read this.
diff --git a/old.txt b/old.txt
deleted file mode 100644
index 4444444..0000000
--- a/old.txt
+++ /dev/null
@@ -1,2 +0,0 @@
-old
-stuff
";

#[tokio::test]
async fn a_patch_modifies_creates_and_deletes_files_together() {
    let p = project();
    std::fs::write(p.root.join("old.txt"), "old\nstuff\n").unwrap();
    let answer = patched(&p, THREE_FILES).await;
    let lib = read(&p, "src/lib.rs");
    assert_eq!(
        lib,
        LIB_RS
            .replace("a + b", "a.wrapping_add(b)")
            .replace("a - b", "a.wrapping_sub(b)")
    );
    assert_eq!(read(&p, "docs/new/guide.md"), "# Guide\nRead this.\n");
    assert!(!p.root.join("old.txt").exists());
    assert_eq!(
        answer.files,
        [
            PatchedFile {
                path: path("src/lib.rs"),
                change: FileChange::Modified,
                previous_sha256: Some(sha256(LIB_RS.as_bytes())),
                sha256: Some(sha256(lib.as_bytes())),
                hunks: 2,
            },
            PatchedFile {
                path: path("docs/new/guide.md"),
                change: FileChange::Added,
                previous_sha256: None,
                sha256: Some(sha256(b"# Guide\nRead this.\n")),
                hunks: 1,
            },
            PatchedFile {
                path: path("old.txt"),
                change: FileChange::Deleted,
                previous_sha256: Some(sha256(b"old\nstuff\n")),
                sha256: None,
                hunks: 1,
            },
        ]
    );
    for header in [
        "--- a/src/lib.rs",
        "+++ b/docs/new/guide.md",
        "+++ /dev/null",
    ] {
        assert!(answer.diff.contains(header), "{}", answer.diff);
    }
    assert!(!answer.diff_truncated);
    // The same patch again: the lines it changes are gone, the file to create exists.
    let r = refused(&p, patch(THREE_FILES)).await;
    assert_eq!(r.kind, OpErrorKind::PatchDoesNotApply, "{}", r.error);
    assert_no_temp_files(&p);
}

#[tokio::test]
async fn a_patch_with_one_bad_hunk_changes_nothing_and_names_the_file_and_hunk() {
    let p = project();
    std::fs::write(p.root.join("old.txt"), "old\nstuff\n").unwrap();
    let bad = THREE_FILES.replace("-    a - b\n", "-    a - c\n");
    let before = tree(&p.root);
    let r = refused(&p, patch(&bad)).await;
    assert_eq!(r.kind, OpErrorKind::PatchDoesNotApply, "{}", r.error);
    assert!(
        r.error.contains("`src/lib.rs`") && r.error.contains("hunk 2"),
        "{}",
        r.error
    );
    assert!(
        r.error
            .contains("`    a - b` where the hunk has `    a - c`"),
        "{}",
        r.error
    );
    assert_eq!(r.conflict.path, Some(path("src/lib.rs")));
    assert_eq!(r.conflict.hunk, Some(2));
    assert_eq!(r.conflict.patch_line, Some(10));
    assert_eq!(r.conflict.current_sha256, Some(sha256(LIB_RS.as_bytes())));
    assert_eq!(tree(&p.root), before, "nothing created, nothing deleted");
    assert_eq!(read(&p, "src/lib.rs"), LIB_RS);
    assert_eq!(read(&p, "old.txt"), "old\nstuff\n");

    // A file to delete that holds more than the patch removes, and a file to create that exists.
    std::fs::write(p.root.join("old.txt"), "old\nstuff\nmore\n").unwrap();
    let r = refused(&p, patch(THREE_FILES)).await;
    assert_eq!(r.kind, OpErrorKind::PatchDoesNotApply, "{}", r.error);
    assert_eq!(r.conflict.path, Some(path("old.txt")));
    std::fs::write(p.root.join("old.txt"), "old\nstuff\n").unwrap();
    std::fs::create_dir_all(p.root.join("docs/new")).unwrap();
    std::fs::write(p.root.join("docs/new/guide.md"), "mine\n").unwrap();
    let r = refused(&p, patch(THREE_FILES)).await;
    assert_eq!(r.kind, OpErrorKind::AlreadyExists, "{}", r.error);
    assert_eq!(r.conflict.current_sha256, Some(sha256(b"mine\n")));
    assert_eq!(read(&p, "src/lib.rs"), LIB_RS);
    assert_no_temp_files(&p);
}

#[tokio::test]
async fn unreadable_patches_and_paths_leaving_the_root_are_refused_naming_the_line() {
    let p = project();
    for (text, line, words) in [
        ("hello\n", 1, "no file"),
        (
            "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,2 +1,2 @@\n-x\n",
            3,
            "ends inside",
        ),
        (
            "--- a/../etc/passwd\n+++ b/../etc/passwd\n@@ -1 +1 @@\n-a\n+b\n",
            1,
            "`..`",
        ),
        (
            "--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-a\n+b\n",
            1,
            "absolute",
        ),
        (
            "diff --git a/a b/b\nrename from a\nrename to b\n",
            2,
            "`rename from`",
        ),
    ] {
        let r = refused(&p, patch(text)).await;
        assert_eq!(r.kind, OpErrorKind::InvalidPatch, "{text:?}: {}", r.error);
        assert!(r.error.contains(words), "{text:?}: {}", r.error);
        assert!(
            r.error.contains(&format!("line {line} of the patch")),
            "{}",
            r.error
        );
        assert_eq!(r.conflict.patch_line, Some(line));
    }
    // In text edits a path leaving the root does not even parse.
    for bad in [r#""../x""#, r#""/etc/passwd""#] {
        let json = format!(
            r#"{{"kind":"edit","op":"text_edits","path":{bad},"edits":[{{"old_text":"a","new_text":"b"}}]}}"#
        );
        assert!(serde_json::from_str::<WorkSpec>(&json).is_err(), "{json}");
    }
    assert_eq!(read(&p, "src/lib.rs"), LIB_RS);
}

#[tokio::test]
async fn stopped_edit_work_ends_cancelled_before_it_writes() {
    let p = project();
    let (_keep, cancel) = watch::channel(true);
    let outcome = execute(
        &work(edits("src/lib.rs", vec![edit("a + b", "c")])),
        &p.host,
        cancel,
    )
    .await;
    assert_eq!(outcome.termination, Termination::Cancelled);
    assert_eq!(read(&p, "src/lib.rs"), LIB_RS);
    // An unknown project is refused typed.
    let mut elsewhere = work(edits("src/lib.rs", vec![edit("a + b", "c")]));
    elsewhere.project = "api".into();
    let r = refusal(run_item(&p.host, &elsewhere).await);
    assert_eq!(r.kind, OpErrorKind::ProjectUnavailable, "{}", r.error);
}

#[tokio::test]
async fn write_file_creates_replaces_and_refuses_a_stale_or_missing_expected_content() {
    let p = project();
    // Created, with its directories.
    let made = written(&p, write("docs/new/notes.md", "# Notes\n", None)).await;
    assert!(made.created && made.changed, "{made:?}");
    assert_eq!(made.previous_sha256, None);
    assert_eq!(made.sha256, sha256(b"# Notes\n"));
    assert_eq!(made.size, 8);
    assert!(
        made.diff
            .starts_with("--- /dev/null\n+++ b/docs/new/notes.md\n"),
        "{}",
        made.diff
    );
    assert_eq!(read(&p, "docs/new/notes.md"), "# Notes\n");

    // Replaced whole, keeping the file's mode; the previous content's hash is answered.
    let lib = p.root.join("src/lib.rs");
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o751)).unwrap();
    let before = sha256(LIB_RS.as_bytes());
    let new = "pub fn one() -> u32 {\n    1\n}\n";
    let replaced = written(&p, write("src/lib.rs", new, Some(&before))).await;
    assert!(!replaced.created && replaced.changed, "{replaced:?}");
    assert_eq!(replaced.previous_sha256.as_deref(), Some(before.as_str()));
    assert!(
        replaced.diff.contains("+pub fn one() -> u32 {"),
        "{}",
        replaced.diff
    );
    assert_eq!(read(&p, "src/lib.rs"), new);
    let mode = std::fs::metadata(&lib).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o751);

    // The same content again: nothing is written (the inode stays).
    let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&lib).unwrap());
    let same = written(&p, write("src/lib.rs", new, None)).await;
    assert!(!same.changed && !same.created, "{same:?}");
    assert_eq!(
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&lib).unwrap()),
        inode
    );

    // A stale expected content is refused with the current hash, and nothing changes.
    let r = refused(&p, write("src/lib.rs", "lost\n", Some(&before))).await;
    assert_eq!(r.kind, OpErrorKind::Sha256Mismatch, "{}", r.error);
    assert_eq!(r.conflict.current_sha256, Some(sha256(new.as_bytes())));
    assert_eq!(read(&p, "src/lib.rs"), new);
    // An expected content of a file that is not there: nothing is created.
    let r = refused(&p, write("src/absent.rs", "x\n", Some(&before))).await;
    assert_eq!(r.kind, OpErrorKind::NotFound, "{}", r.error);
    assert!(!p.root.join("src/absent.rs").exists());
    assert_no_temp_files(&p);
}

#[tokio::test]
async fn write_file_never_writes_through_a_symlink_or_outside_the_root() {
    let p = project();
    let outside_before = tree(&p.base.join("outside"));
    for (target, kind) in [
        ("link-to-lib", OpErrorKind::Symlink),
        ("escape-file", OpErrorKind::Symlink),
        ("escape/new.txt", OpErrorKind::PathOutsideRoot),
    ] {
        let r = refused(&p, write(target, "pwned\n", None)).await;
        assert_eq!(r.kind, kind, "{target}: {}", r.error);
    }
    assert_eq!(tree(&p.base.join("outside")), outside_before);
    assert_eq!(
        std::fs::read_to_string(p.base.join("outside/secret.txt")).unwrap(),
        "secret\n"
    );
    assert_eq!(read(&p, "src/lib.rs"), LIB_RS);
    // A binary file is not replaced by a text write.
    std::fs::write(p.root.join("blob.bin"), b"\0\x01\x02").unwrap();
    let r = refused(&p, write("blob.bin", "text\n", None)).await;
    assert_eq!(r.kind, OpErrorKind::NotText, "{}", r.error);
    assert_eq!(
        std::fs::read(p.root.join("blob.bin")).unwrap(),
        b"\0\x01\x02"
    );
    assert_no_temp_files(&p);
}

fn delete(paths: &[&str]) -> EditOp {
    EditOp::DeleteFiles(DeleteFilesOp {
        paths: paths.iter().map(|p| path(p)).collect(),
    })
}

#[tokio::test]
async fn delete_files_removes_every_file_or_none_and_never_a_symlink_target() {
    let p = project();
    std::fs::write(p.root.join("src/a.rs"), "a\n").unwrap();
    std::fs::write(p.root.join("blob.bin"), b"\0\x01").unwrap();
    // One missing file: nothing is removed.
    let r = refused(&p, delete(&["src/a.rs", "src/missing.rs"])).await;
    assert_eq!(r.kind, OpErrorKind::NotFound, "{}", r.error);
    assert!(p.root.join("src/a.rs").exists());
    // A symlink, a directory and a path outside the root are refused; their targets stay.
    for (target, kind) in [
        ("link-to-lib", OpErrorKind::Symlink),
        ("src", OpErrorKind::NotAFile),
        ("escape/secret.txt", OpErrorKind::PathOutsideRoot),
    ] {
        let r = refused(&p, delete(&["src/a.rs", target])).await;
        assert_eq!(r.kind, kind, "{target}: {}", r.error);
    }
    assert!(p.root.join("src/a.rs").exists());
    assert_eq!(read(&p, "src/lib.rs"), LIB_RS);
    assert!(p.base.join("outside/secret.txt").exists());
    // Text and binary files go together, answered in the order asked.
    let answer = match succeeded(run(&p, delete(&["src/a.rs", "blob.bin"])).await) {
        WorkAnswer::DeleteFiles(a) => a,
        other => panic!("{other:?}"),
    };
    let got: Vec<(String, u64)> = answer
        .deleted
        .iter()
        .map(|d| (d.path.to_string(), d.size))
        .collect();
    assert_eq!(
        got,
        [("src/a.rs".to_owned(), 2), ("blob.bin".to_owned(), 2)]
    );
    assert!(!p.root.join("src/a.rs").exists() && !p.root.join("blob.bin").exists());
}

fn move_file(from: &str, to: &str) -> EditOp {
    EditOp::MoveFile(MoveFileOp {
        from: path(from),
        to: path(to),
    })
}

#[tokio::test]
async fn move_file_renames_into_new_directories_and_never_over_an_entry_or_through_a_link() {
    let p = project();
    std::fs::write(p.root.join("src/a.rs"), "a\n").unwrap();
    std::fs::write(p.root.join("src/b.rs"), "b\n").unwrap();
    // Into directories that do not exist yet.
    let answer = match succeeded(run(&p, move_file("src/a.rs", "lib/deep/a2.rs")).await) {
        WorkAnswer::MoveFile(a) => a,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        (answer.from.as_str(), answer.to.as_str(), answer.size),
        ("src/a.rs", "lib/deep/a2.rs", 2)
    );
    assert!(!p.root.join("src/a.rs").exists());
    assert_eq!(read(&p, "lib/deep/a2.rs"), "a\n");
    // Never over an existing file (its content stays), nor a missing source.
    let r = refused(&p, move_file("src/b.rs", "src/lib.rs")).await;
    assert_eq!(r.kind, OpErrorKind::AlreadyExists, "{}", r.error);
    assert_eq!(
        (read(&p, "src/b.rs"), read(&p, "src/lib.rs")),
        ("b\n".to_owned(), LIB_RS.to_owned())
    );
    let r = refused(&p, move_file("src/missing.rs", "src/m.rs")).await;
    assert_eq!(r.kind, OpErrorKind::NotFound, "{}", r.error);
    // A symlink, a directory, and paths through a link out of the root are refused, and no
    // directory is made for a refused move.
    for (from, to, kind) in [
        ("link-to-lib", "moved/link", OpErrorKind::Symlink),
        ("src", "moved/src", OpErrorKind::NotAFile),
        (
            "escape/secret.txt",
            "moved/secret.txt",
            OpErrorKind::PathOutsideRoot,
        ),
        ("src/b.rs", "escape/b.rs", OpErrorKind::PathOutsideRoot),
        ("src/b.rs", "escape-file", OpErrorKind::AlreadyExists),
    ] {
        let r = refused(&p, move_file(from, to)).await;
        assert_eq!(r.kind, kind, "{from} -> {to}: {}", r.error);
    }
    assert!(!p.root.join("moved").exists());
    assert!(!p.base.join("outside/b.rs").exists());
    assert_eq!(read(&p, "src/b.rs"), "b\n");
    assert!(p.root.join("link-to-lib").is_symlink());
    assert_no_temp_files(&p);
}
