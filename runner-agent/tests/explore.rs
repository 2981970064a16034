//! Black-box tests of `explore::execute` on real project trees made in temporary directories:
//! ignore files, hidden files, nested directories, binary and non-UTF-8 files, a FIFO and a
//! socket, symlinks inside the root and out of it, large files, and a Git repository.

use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sha2::{Digest as _, Sha256};
use tokio::sync::watch;
use uuid::Uuid;
use wc_runner_agent::exec::{Host, StopPolicy};
use wc_runner_agent::explore::execute;
use wc_runner_agent::sandbox::{Sandbox, SandboxSettings};
use wc_runner_protocol::{
    EntryKind, ExploreOp, FileContent, FileListAnswer, FileRange, FileRead, GitSummary,
    ListFilesOp, MAX_ANSWER_BYTES, MAX_READ_BYTES_PER_CALL, MAX_READ_BYTES_PER_FILE,
    MAX_READ_FILE_SIZE, OpErrorKind, OverviewOp, PROTOCOL_VERSION, ReadFilesOp, RelativePath,
    SearchAnswer, SearchOp, Termination, TrackedFilesAnswer, TrackedFilesOp, WorkAnswer, WorkItem,
    WorkLimits, WorkOutcome, WorkSpec,
};

/// How long an operation may take before the test calls it a hang (a FIFO opened for reading
/// would block forever).
const HANG: Duration = Duration::from_secs(60);

/// A project root beside a directory outside it, served by a host with the default sandbox.
struct Project {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
    host: Host,
}

fn empty_project() -> Project {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let root = base.join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(base.join("outside")).unwrap();
    std::fs::write(base.join("outside/secret.txt"), "secret\n").unwrap();
    let host = Host::register(
        BTreeMap::from([("web".to_owned(), root.clone())]),
        Sandbox::from_settings(&SandboxSettings::default(), []).unwrap(),
    )
    .unwrap();
    Project {
        _tmp: tmp,
        base,
        root,
        host,
    }
}

const MAIN_RS: &str = "fn main() {\n    println!(\"hello\");\n}\n";
const LIB_RS: &str = "pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n";

/// A small Rust crate with everything the explore operations must tell apart.
fn project() -> Project {
    let p = empty_project();
    let files: &[(&str, &[u8])] = &[
        (".gitignore", b"target/\n*.log\n"),
        (".hidden", b"hidden add\n"),
        (".github/copilot-instructions.md", b"be brief\n"),
        ("AGENTS.md", b"# Agents\nrun the tests\n"),
        (
            "Cargo.toml",
            b"[package]\nname = \"demo\"\nversion = \"0.1.0\"\n",
        ),
        ("src/main.rs", MAIN_RS.as_bytes()),
        ("src/lib.rs", LIB_RS.as_bytes()),
        ("src/nested/deep/mod.rs", b"// deep\nfn add_deep() {}\n"),
        ("target/debug/out.txt", b"build output add\n"),
        ("debug.log", b"log add\n"),
        ("bin.dat", b"add\0\x01\x02binary"),
        ("latin1.txt", b"caf\xe9 add\n"),
    ];
    for (path, content) in files {
        let path = p.root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    nix::unistd::mkfifo(&p.root.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    // A socket file; the listener may go, the file stays.
    drop(std::os::unix::net::UnixListener::bind(p.root.join("sock")).unwrap());
    symlink("src/lib.rs", p.root.join("link-to-lib")).unwrap();
    symlink("src", p.root.join("src-link")).unwrap();
    symlink("../outside", p.root.join("escape")).unwrap();
    symlink("../outside/secret.txt", p.root.join("escape-file")).unwrap();
    symlink(p.root.join("src/lib.rs"), p.root.join("absolute-link")).unwrap();
    p
}

fn git(root: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// [`project`] as a Git repository on `main` with everything not ignored committed.
fn repository() -> Project {
    let p = project();
    git(&p.root, &["init", "-q", "-b", "main"]);
    git(&p.root, &["add", "-A"]);
    git(&p.root, &["commit", "-q", "-m", "initial"]);
    p
}

fn path(p: &str) -> RelativePath {
    RelativePath::parse(p).unwrap()
}

fn work(op: ExploreOp) -> WorkItem {
    WorkItem {
        protocol_version: PROTOCOL_VERSION,
        work_id: Uuid::now_v7(),
        project: "web".into(),
        cwd: None,
        spec: WorkSpec::Explore(op),
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
    tokio::time::timeout(HANG, execute(item, &p.host, cancel, &StopPolicy::default()))
        .await
        .expect("the operation hung")
}

async fn run(p: &Project, op: ExploreOp) -> WorkOutcome {
    run_item(p, &work(op)).await
}

/// The answer of an operation that must succeed.
async fn answer(p: &Project, op: ExploreOp) -> WorkAnswer {
    let outcome = run(p, op).await;
    assert_eq!(
        (outcome.termination, outcome.exit_code),
        (Termination::Exited, Some(0)),
        "{outcome:?}"
    );
    assert_eq!(outcome.error_kind, None);
    let answer = outcome.answer.expect("a successful operation answers");
    let json = serde_json::to_vec(&answer).unwrap();
    assert!(json.len() <= MAX_ANSWER_BYTES, "{}", json.len());
    answer
}

/// The kind and message of an operation that must be refused.
async fn refused(p: &Project, op: ExploreOp) -> (OpErrorKind, String) {
    let outcome = run(p, op).await;
    assert_eq!(outcome.termination, Termination::Rejected, "{outcome:?}");
    assert_eq!(outcome.answer, None);
    (
        outcome.error_kind.expect("a refusal is typed"),
        outcome.error.expect("a refusal says why"),
    )
}

fn read(files: &[(&str, Option<u64>, Option<u64>)]) -> ExploreOp {
    ExploreOp::ReadFiles(ReadFilesOp {
        files: files
            .iter()
            .map(|(p, start_line, end_line)| FileRange {
                path: path(p),
                start_line: *start_line,
                end_line: *end_line,
            })
            .collect(),
    })
}

async fn read_files(p: &Project, files: &[(&str, Option<u64>, Option<u64>)]) -> Vec<FileRead> {
    match answer(p, read(files)).await {
        WorkAnswer::ReadFiles(r) => r.files,
        other => panic!("{other:?}"),
    }
}

fn text(read: &FileRead) -> (u64, u64, &str, bool) {
    match &read.content {
        FileContent::Text {
            start_line,
            end_line,
            text,
            truncated,
        } => (*start_line, *end_line, text, *truncated),
        other => panic!("{}: not text: {other:?}", read.path),
    }
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[tokio::test]
async fn read_files_returns_line_ranges_with_the_whole_files_size_hash_and_line_count() {
    let p = project();
    let files = read_files(
        &p,
        &[
            ("src/main.rs", None, None),
            ("src/main.rs", Some(2), Some(3)),
            ("src/main.rs", Some(3), Some(99)),
            ("src/main.rs", Some(9), None),
            ("link-to-lib", None, None),
            ("src-link/nested/deep/mod.rs", Some(2), Some(2)),
            ("debug.log", None, None),
        ],
    )
    .await;
    for f in &files[..4] {
        assert_eq!(f.size, MAIN_RS.len() as u64);
        assert_eq!(f.sha256, sha256(MAIN_RS.as_bytes()));
        assert_eq!(f.lines, 3);
    }
    assert_eq!(text(&files[0]), (1, 3, MAIN_RS, false));
    assert_eq!(
        text(&files[1]),
        (2, 3, "    println!(\"hello\");\n}\n", false)
    );
    assert_eq!(text(&files[2]), (3, 3, "}\n", false));
    assert_eq!(text(&files[3]), (9, 8, "", false), "a range past the end");
    // A symlink inside the root is read where it leads; the path stays as asked.
    assert_eq!(files[4].path, "link-to-lib");
    assert_eq!(text(&files[4]), (1, 3, LIB_RS, false));
    assert_eq!(text(&files[5]), (2, 2, "fn add_deep() {}\n", false));
    // Ignore files decide what is listed and searched, never what may be read.
    assert_eq!(text(&files[6]).2, "log add\n");
}

#[tokio::test]
async fn binary_and_non_utf8_files_are_reported_not_shown() {
    let p = project();
    let files = read_files(&p, &[("bin.dat", None, None), ("latin1.txt", None, None)]).await;
    assert_eq!(files[0].content, FileContent::Binary);
    assert_eq!(files[0].sha256, sha256(b"add\0\x01\x02binary"));
    assert_eq!(files[0].size, 12);
    assert_eq!(files[1].content, FileContent::NotUtf8);
    assert_eq!(files[1].lines, 1);
}

/// `n` lines of 64 bytes each (63 visible characters and a newline).
fn lines(n: usize) -> String {
    (1..=n).map(|i| format!("{i:062}|\n")).collect()
}

#[tokio::test]
async fn text_past_the_byte_bounds_is_left_out_on_a_line_boundary_and_flagged() {
    let p = project();
    let big = lines(4096); // 256 KiB
    for i in 0..5 {
        std::fs::write(p.root.join(format!("big{i}.txt")), &big).unwrap();
    }
    let names: Vec<String> = (0..5).map(|i| format!("big{i}.txt")).collect();
    let asked: Vec<(&str, Option<u64>, Option<u64>)> =
        names.iter().map(|n| (n.as_str(), None, None)).collect();
    let files = read_files(&p, &asked).await;
    let mut total = 0;
    for (i, f) in files.iter().enumerate() {
        assert_eq!(f.size, big.len() as u64);
        assert_eq!(f.sha256, sha256(big.as_bytes()), "the whole file is hashed");
        assert_eq!(f.lines, 4096);
        let (start, end, kept, truncated) = text(f);
        assert!(truncated, "{i}");
        assert!(kept.len() <= MAX_READ_BYTES_PER_FILE, "{i}: {}", kept.len());
        assert_eq!(kept, &big[..kept.len()], "{i}: the head of the range");
        assert!(kept.is_empty() || kept.ends_with('\n'), "{i}: whole lines");
        assert_eq!(end + 1 - start, (kept.len() / 64) as u64, "{i}");
        total += kept.len();
    }
    assert_eq!(text(&files[0]).2.len(), MAX_READ_BYTES_PER_FILE);
    assert!(total <= MAX_READ_BYTES_PER_CALL, "{total}");
    // The per-call bound is spent by the first four files; the fifth gets nothing.
    assert_eq!(text(&files[4]), (1, 0, "", true));

    // A single line longer than the bound: its beginning, flagged.
    let long = "é".repeat(MAX_READ_BYTES_PER_FILE);
    std::fs::write(p.root.join("long.txt"), &long).unwrap();
    let files = read_files(&p, &[("long.txt", None, None)]).await;
    let (start, end, kept, truncated) = text(&files[0]);
    assert_eq!((start, end, truncated), (1, 1, true));
    assert!(kept.len() <= MAX_READ_BYTES_PER_FILE && long.starts_with(kept));
}

#[tokio::test]
async fn text_that_escapes_six_fold_still_fits_the_answer() {
    let p = project();
    let control = "\u{1}".repeat(MAX_READ_BYTES_PER_FILE);
    let mut asked = Vec::new();
    let names: Vec<String> = (0..8).map(|i| format!("ctl{i}.txt")).collect();
    for name in &names {
        std::fs::write(p.root.join(name), &control).unwrap();
        asked.push((name.as_str(), None, None));
    }
    // `answer` checks the JSON against the bound.
    let files = read_files(&p, &asked).await;
    assert_eq!(text(&files[0]).2.len(), MAX_READ_BYTES_PER_FILE);
}

#[tokio::test]
async fn a_file_over_the_size_bound_is_refused_before_it_is_read() {
    let p = project();
    let sparse = std::fs::File::create(p.root.join("huge.bin")).unwrap();
    sparse.set_len(MAX_READ_FILE_SIZE + 1).unwrap();
    let (kind, why) = refused(&p, read(&[("huge.bin", None, None)])).await;
    assert_eq!(kind, OpErrorKind::FileTooLarge);
    assert!(why.contains("`huge.bin`"), "{why}");
}

#[tokio::test]
async fn every_bad_path_is_refused_with_its_kind_naming_the_path() {
    let p = project();
    let cases = [
        ("escape/secret.txt", OpErrorKind::PathOutsideRoot),
        ("escape-file", OpErrorKind::PathOutsideRoot),
        ("absolute-link", OpErrorKind::PathOutsideRoot),
        ("missing.rs", OpErrorKind::NotFound),
        ("src", OpErrorKind::NotAFile),
        ("fifo", OpErrorKind::SpecialFile),
        ("sock", OpErrorKind::SpecialFile),
        ("AGENTS.md/x", OpErrorKind::NotADirectory),
    ];
    for (bad, expect) in cases {
        // The good file first: one bad path refuses the whole read.
        let (kind, why) = refused(&p, read(&[("src/lib.rs", None, None), (bad, None, None)])).await;
        assert_eq!(kind, expect, "{bad}: {why}");
        assert!(why.contains(&format!("`{bad}`")), "{bad}: {why}");
        // No host path leaks into the words.
        assert!(!why.contains(p.base.to_str().unwrap()), "{bad}: {why}");
    }
    let mut elsewhere = work(read(&[("src/lib.rs", None, None)]));
    elsewhere.project = "api".into();
    let outcome = run_item(&p, &elsewhere).await;
    assert_eq!(outcome.error_kind, Some(OpErrorKind::ProjectUnavailable));
    let mut with_cwd = work(read(&[("src/lib.rs", None, None)]));
    with_cwd.cwd = Some(path("src"));
    let outcome = run_item(&p, &with_cwd).await;
    assert_eq!(outcome.error_kind, Some(OpErrorKind::InvalidRequest));
    assert!(outcome.error.unwrap().contains("no cwd"));
}

fn list(path_: Option<&str>, glob: Option<&str>, hidden: bool, limit: u32) -> ListFilesOp {
    ListFilesOp {
        path: path_.map(path),
        glob: glob.map(Into::into),
        hidden,
        limit,
        cursor: None,
    }
}

async fn list_page(p: &Project, op: ListFilesOp) -> FileListAnswer {
    match answer(p, ExploreOp::ListFiles(op)).await {
        WorkAnswer::ListFiles(l) => l,
        other => panic!("{other:?}"),
    }
}

fn names(l: &FileListAnswer) -> Vec<&str> {
    l.files.iter().map(|f| f.path.as_str()).collect()
}

#[tokio::test]
async fn listings_honour_ignore_files_and_hidden_names_and_report_kinds_in_path_order() {
    let p = repository();
    let all = list_page(&p, list(None, None, false, 100)).await;
    assert_eq!(
        names(&all),
        [
            "AGENTS.md",
            "Cargo.toml",
            "absolute-link",
            "bin.dat",
            "escape",
            "escape-file",
            "fifo",
            "latin1.txt",
            "link-to-lib",
            "sock",
            "src/lib.rs",
            "src/main.rs",
            "src/nested/deep/mod.rs",
            "src-link",
        ]
    );
    assert_eq!(all.next_cursor, None);
    let kind = |name: &str| all.files.iter().find(|f| f.path == name).unwrap().kind;
    assert_eq!(kind("src/lib.rs"), EntryKind::File);
    assert_eq!(kind("src-link"), EntryKind::Symlink);
    assert_eq!(kind("escape"), EntryKind::Symlink, "listed, never followed");
    assert_eq!(kind("fifo"), EntryKind::Special);
    let size = all
        .files
        .iter()
        .find(|f| f.path == "src/lib.rs")
        .unwrap()
        .size;
    assert_eq!(size, LIB_RS.len() as u64);

    let hidden = list_page(&p, list(None, None, true, 100)).await;
    let hidden = names(&hidden);
    for name in [".gitignore", ".hidden", ".github/copilot-instructions.md"] {
        assert!(hidden.contains(&name), "{name}: {hidden:?}");
    }
    assert!(!hidden.iter().any(|n| n.starts_with(".git/")), "{hidden:?}");
    assert!(
        !hidden.iter().any(|n| n.starts_with("target/")),
        "{hidden:?}"
    );

    let rust = list_page(&p, list(None, Some("*.rs"), false, 100)).await;
    assert_eq!(
        names(&rust),
        ["src/lib.rs", "src/main.rs", "src/nested/deep/mod.rs"]
    );
    let not_rust = list_page(&p, list(Some("src"), Some("!*.rs"), false, 100)).await;
    assert!(not_rust.files.is_empty(), "{:?}", names(&not_rust));
    let nested = list_page(&p, list(Some("src/nested"), None, false, 100)).await;
    assert_eq!(names(&nested), ["src/nested/deep/mod.rs"]);
    // A symlinked directory inside the root lists under its real path.
    let linked = list_page(&p, list(Some("src-link/nested"), None, false, 100)).await;
    assert_eq!(names(&linked), ["src/nested/deep/mod.rs"]);
    // A path named explicitly is listed even though it is ignored, as ripgrep would.
    let target = list_page(&p, list(Some("target"), None, false, 100)).await;
    assert_eq!(names(&target), ["target/debug/out.txt"]);
    let github = list_page(&p, list(Some(".github"), None, false, 100)).await;
    assert_eq!(names(&github), [".github/copilot-instructions.md"]);
}

#[tokio::test]
async fn listing_refusals_are_typed() {
    let p = project();
    let cases = [
        (
            list(Some("AGENTS.md"), None, false, 10),
            OpErrorKind::NotADirectory,
        ),
        (
            list(Some("escape"), None, false, 10),
            OpErrorKind::PathOutsideRoot,
        ),
        (
            list(Some("nowhere"), None, false, 10),
            OpErrorKind::NotFound,
        ),
        (
            list(None, Some("src/[a"), false, 10),
            OpErrorKind::InvalidGlob,
        ),
        (
            ListFilesOp {
                cursor: Some("bm90LWEtY3Vyc29y".into()),
                ..list(None, None, false, 10)
            },
            OpErrorKind::InvalidCursor,
        ),
    ];
    for (op, expect) in cases {
        let (kind, why) = refused(&p, ExploreOp::ListFiles(op.clone())).await;
        assert_eq!(kind, expect, "{op:?}: {why}");
    }
    // A cursor of another operation is not one for this.
    let page = search_page(
        &p,
        SearchOp {
            limit: 1,
            ..SearchOp::new("add")
        },
    )
    .await;
    let (kind, _) = refused(
        &p,
        ExploreOp::ListFiles(ListFilesOp {
            cursor: page.next_cursor,
            ..list(None, None, false, 10)
        }),
    )
    .await;
    assert_eq!(kind, OpErrorKind::InvalidCursor);
}

#[tokio::test]
async fn list_pages_continue_each_other_exactly() {
    let p = project();
    for i in 0..25 {
        let dir = p.root.join(format!("gen/d{}", i % 4));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("f{i}.txt")), "x").unwrap();
    }
    let whole = names(&list_page(&p, list(None, None, true, 1000)).await)
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    for limit in [1, 3, 7] {
        let mut paged = Vec::new();
        let mut op = list(None, None, true, limit);
        let mut pages = 0;
        loop {
            let page = list_page(&p, op.clone()).await;
            assert!(page.files.len() <= limit as usize);
            paged.extend(names(&page).into_iter().map(str::to_owned));
            pages += 1;
            match page.next_cursor {
                Some(c) => op.cursor = Some(c),
                None => break,
            }
        }
        assert_eq!(paged, whole, "limit {limit}");
        assert_eq!(pages, whole.len().div_ceil(limit as usize), "limit {limit}");
    }
}

async fn search_page(p: &Project, op: SearchOp) -> SearchAnswer {
    match answer(p, ExploreOp::Search(op)).await {
        WorkAnswer::Search(s) => s,
        other => panic!("{other:?}"),
    }
}

fn hits(s: &SearchAnswer) -> Vec<(String, u64)> {
    s.matches
        .iter()
        .map(|m| (m.path.to_string(), m.line.number))
        .collect()
}

#[tokio::test]
async fn search_finds_lines_in_stable_order_and_skips_what_it_must() {
    let p = project();
    let all = search_page(&p, SearchOp::new(r"\badd\w*")).await;
    assert_eq!(
        hits(&all),
        [
            ("latin1.txt".to_owned(), 1),
            ("src/lib.rs".to_owned(), 1),
            ("src/nested/deep/mod.rs".to_owned(), 2),
        ],
        "ignored, hidden, binary files and symlinks are not searched"
    );
    assert_eq!(all.matches[0].line.text, "caf\u{FFFD} add");
    assert_eq!(
        all.matches[1].line.text,
        "pub fn add(a: u32, b: u32) -> u32 {"
    );
    assert!(all.files_skipped >= 1, "bin.dat is binary");
    assert_eq!(all.next_cursor, None);

    // Each option against the expected matches: (path, line).
    let cases: Vec<(SearchOp, Vec<(&str, u64)>)> = vec![
        (
            SearchOp {
                literal: true,
                ..SearchOp::new("a + b")
            },
            vec![("src/lib.rs", 2)],
        ),
        // As a regex, `a +` is a repetition.
        (SearchOp::new("a + b"), vec![]),
        (
            SearchOp {
                case_sensitive: false,
                ..SearchOp::new("PRINTLN")
            },
            vec![("src/main.rs", 2)],
        ),
        (SearchOp::new("PRINTLN"), vec![]),
        (
            SearchOp {
                hidden: true,
                glob: Some(".hid*".into()),
                ..SearchOp::new("add")
            },
            vec![(".hidden", 1)],
        ),
        (
            SearchOp {
                path: Some(path("src/main.rs")),
                ..SearchOp::new("fn")
            },
            vec![("src/main.rs", 1)],
        ),
        // A file named explicitly is searched though it is ignored.
        (
            SearchOp {
                path: Some(path("debug.log")),
                ..SearchOp::new("add")
            },
            vec![("debug.log", 1)],
        ),
    ];
    for (op, expect) in cases {
        let found = hits(&search_page(&p, op.clone()).await);
        let expect: Vec<(String, u64)> = expect.iter().map(|(f, n)| (f.to_string(), *n)).collect();
        assert_eq!(found, expect, "{op:?}");
    }
}

#[tokio::test]
async fn context_lines_surround_matches_without_repeating() {
    let p = project();
    std::fs::write(
        p.root.join("ctx.txt"),
        "a\nb\nHIT 3\nc\nHIT 5\nd\ne\nf\ng\nHIT 10\n",
    )
    .unwrap();
    let page = search_page(
        &p,
        SearchOp {
            context_lines: 2,
            path: Some(path("ctx.txt")),
            ..SearchOp::new("HIT")
        },
    )
    .await;
    let numbers = |lines: &[wc_runner_protocol::SearchLine]| -> Vec<u64> {
        lines.iter().map(|l| l.number).collect()
    };
    let shape: Vec<(u64, Vec<u64>, Vec<u64>)> = page
        .matches
        .iter()
        .map(|m| (m.line.number, numbers(&m.before), numbers(&m.after)))
        .collect();
    assert_eq!(
        shape,
        [
            (3, vec![1, 2], vec![4]),
            (5, vec![], vec![6, 7]),
            (10, vec![8, 9], vec![]),
        ]
    );
    assert_eq!(page.matches[0].before[0].text, "a");
}

#[tokio::test]
async fn search_pages_continue_each_other_exactly_within_and_across_files() {
    let p = project();
    for f in ["a.txt", "b/c.txt", "b/d.txt", "e.txt"] {
        let path = p.root.join(f);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "needle\nhay\nneedle needle\nneedle\n").unwrap();
    }
    let whole = hits(
        &search_page(
            &p,
            SearchOp {
                limit: 500,
                ..SearchOp::new("needle")
            },
        )
        .await,
    );
    assert_eq!(whole.len(), 12);
    for limit in [1, 2, 5] {
        let mut op = SearchOp {
            limit,
            context_lines: 1,
            ..SearchOp::new("needle")
        };
        let mut paged = Vec::new();
        loop {
            let page = search_page(&p, op.clone()).await;
            assert!(page.matches.len() <= limit as usize);
            paged.extend(hits(&page));
            match page.next_cursor {
                Some(c) => op.cursor = Some(c),
                None => break,
            }
        }
        assert_eq!(paged, whole, "limit {limit}");
    }
}

#[tokio::test]
async fn a_search_over_many_files_keeps_the_walk_order_across_pages() {
    let p = empty_project();
    for i in 0..300 {
        let dir = p.root.join(format!("d{}/e{}", i % 5, i % 3));
        std::fs::create_dir_all(&dir).unwrap();
        let body = if i % 4 == 0 { "x\nneedle\n" } else { "x\n" };
        std::fs::write(dir.join(format!("f{i:03}.txt")), body).unwrap();
    }
    let listed: Vec<String> = names(&list_page(&p, list(None, None, false, 1000)).await)
        .into_iter()
        .map(str::to_owned)
        .collect();
    let expected: Vec<(String, u64)> = listed
        .iter()
        .filter(|f| {
            std::fs::read_to_string(p.root.join(f))
                .unwrap()
                .contains("needle")
        })
        .map(|f| (f.clone(), 2))
        .collect();
    assert_eq!(expected.len(), 75);
    let whole = search_page(
        &p,
        SearchOp {
            limit: 500,
            ..SearchOp::new("needle")
        },
    )
    .await;
    assert_eq!(hits(&whole), expected, "matches in walk order");
    assert_eq!((whole.files_searched, whole.files_skipped), (300, 0));
    let mut op = SearchOp {
        limit: 13,
        ..SearchOp::new("needle")
    };
    let mut paged = Vec::new();
    loop {
        let page = search_page(&p, op.clone()).await;
        paged.extend(hits(&page));
        match page.next_cursor {
            Some(c) => op.cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(paged, expected);
}

#[tokio::test]
async fn bad_patterns_and_globs_are_refused_naming_the_problem() {
    let p = project();
    let (kind, why) = refused(&p, ExploreOp::Search(SearchOp::new("fn ("))).await;
    assert_eq!(kind, OpErrorKind::InvalidRegex);
    assert!(why.contains("regular expression"), "{why}");
    let cases = [
        (
            SearchOp {
                glob: Some("[".into()),
                ..SearchOp::new("x")
            },
            OpErrorKind::InvalidGlob,
        ),
        (
            SearchOp {
                path: Some(path("escape")),
                ..SearchOp::new("secret")
            },
            OpErrorKind::PathOutsideRoot,
        ),
        (
            SearchOp {
                path: Some(path("fifo")),
                ..SearchOp::new("x")
            },
            OpErrorKind::SpecialFile,
        ),
    ];
    for (op, expect) in cases {
        let (kind, why) = refused(&p, ExploreOp::Search(op.clone())).await;
        assert_eq!(kind, expect, "{op:?}: {why}");
    }
}

fn tracked(path_: Option<&str>, limit: u32, cursor: Option<String>) -> ExploreOp {
    ExploreOp::TrackedFiles(TrackedFilesOp {
        path: path_.map(path),
        limit,
        cursor,
    })
}

async fn tracked_page(p: &Project, op: ExploreOp) -> TrackedFilesAnswer {
    match answer(p, op).await {
        WorkAnswer::TrackedFiles(t) => t,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn tracked_files_are_gits_index_in_pages() {
    let p = repository();
    std::fs::write(p.root.join("untracked.txt"), "new").unwrap();
    let all = tracked_page(&p, tracked(None, 100, None)).await;
    let all: Vec<&str> = all.files.iter().map(|f| f.as_str()).collect();
    assert_eq!(
        all,
        [
            ".github/copilot-instructions.md",
            ".gitignore",
            ".hidden",
            "AGENTS.md",
            "Cargo.toml",
            "absolute-link",
            "bin.dat",
            "escape",
            "escape-file",
            "latin1.txt",
            "link-to-lib",
            "src-link",
            "src/lib.rs",
            "src/main.rs",
            "src/nested/deep/mod.rs",
        ]
    );
    let src = tracked_page(&p, tracked(Some("src"), 100, None)).await;
    assert_eq!(
        src.files,
        [
            path("src/lib.rs"),
            path("src/main.rs"),
            path("src/nested/deep/mod.rs")
        ]
    );
    let mut paged = Vec::new();
    let mut cursor = None;
    loop {
        let page = tracked_page(&p, tracked(None, 4, cursor)).await;
        paged.extend(page.files.iter().map(|f| f.to_string()));
        assert!(!page.truncated);
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(paged, all);
}

#[tokio::test]
async fn a_root_outside_git_has_no_tracked_files_and_an_overview_says_so() {
    let p = project();
    let (kind, _) = refused(&p, tracked(None, 10, None)).await;
    assert_eq!(kind, OpErrorKind::NotARepository);
    match answer(&p, ExploreOp::Overview(OverviewOp {})).await {
        WorkAnswer::Overview(o) => assert_eq!(o.git, GitSummary::NotARepository),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_overview_names_the_project_its_languages_manifests_instructions_tree_and_git_state() {
    let p = repository();
    let o = match answer(&p, ExploreOp::Overview(OverviewOp {})).await {
        WorkAnswer::Overview(o) => o,
        other => panic!("{other:?}"),
    };
    assert_eq!(o.root_name, "root");
    assert_eq!(o.languages[0].language, "Rust");
    assert_eq!(o.languages[0].files, 3);
    assert_eq!(o.manifests.len(), 1);
    assert_eq!(
        (
            o.manifests[0].path.as_str(),
            o.manifests[0].ecosystem.as_str()
        ),
        ("Cargo.toml", "cargo")
    );
    assert_eq!(
        o.instruction_files,
        [path("AGENTS.md"), path(".github/copilot-instructions.md")]
    );
    let tree: Vec<(&str, EntryKind)> = o.tree.iter().map(|e| (e.path.as_str(), e.kind)).collect();
    assert!(tree.contains(&("src", EntryKind::Directory)), "{tree:?}");
    assert!(
        tree.contains(&("src/nested", EntryKind::Directory)),
        "{tree:?}"
    );
    assert!(tree.contains(&("src/main.rs", EntryKind::File)), "{tree:?}");
    assert!(
        !tree.iter().any(|(p, _)| p.starts_with("src/nested/")),
        "two levels: {tree:?}"
    );
    assert!(
        !tree
            .iter()
            .any(|(p, _)| p.starts_with('.') || p.starts_with("target")),
        "{tree:?}"
    );
    assert!(!o.tree_truncated && !o.scan_truncated);
    let head = String::from_utf8(
        Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(&p.root)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(
        o.git,
        GitSummary::Repository {
            branch: Some("main".into()),
            head: Some(head.trim().to_owned()),
            dirty: false,
        }
    );
    std::fs::write(p.root.join("src/main.rs"), "fn main() {}\n").unwrap();
    match answer(&p, ExploreOp::Overview(OverviewOp {})).await {
        WorkAnswer::Overview(o) => {
            assert!(
                matches!(o.git, GitSummary::Repository { dirty: true, .. }),
                "{:?}",
                o.git
            )
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn stopped_work_ends_cancelled_and_late_work_timed_out() {
    let p = repository();
    let (_keep, cancel) = watch::channel(true);
    let outcome = execute(
        &work(tracked(None, 10, None)),
        &p.host,
        cancel,
        &StopPolicy::default(),
    )
    .await;
    assert_eq!(outcome.termination, Termination::Cancelled);
    assert_eq!(outcome.answer, None);
    // Git runs as a job; no job starts and ends within a millisecond.
    let mut late = work(tracked(None, 10, None));
    late.limits.timeout_ms = 1;
    let outcome = run_item(&p, &late).await;
    assert_eq!(outcome.termination, Termination::TimedOut, "{outcome:?}");
    assert_eq!(outcome.answer, None);
}
