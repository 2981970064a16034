//! Black-box tests of `validate::execute` on real projects made in temporary directories and
//! real toolchains in the sandbox: a Cargo workspace with a passing and a failing test, a
//! warning and a formatting error; a pytest project; a Go module. The pytest and Go cases need
//! `pytest` and `go` on PATH: `scripts/test` installs both, names its pinned Python in
//! `WC_PYTHON` and sets `WC_TEST_REQUIRE_TOOLCHAINS=1`, which turns a missing toolchain, or a
//! job that would run another Python than the pinned one, into a failure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use uuid::Uuid;
use wc_runner_agent::exec::{Host, OutputPiece, StopPolicy};
use wc_runner_agent::sandbox::{Sandbox, SandboxSettings};
use wc_runner_agent::validate::execute;
use wc_runner_protocol::{
    CargoTargets, PROTOCOL_VERSION, RelativePath, Stream, Termination, TestCounts, ValidateOp,
    ValidationAnswer, ValidationScope, Validator, WorkAnswer, WorkItem, WorkLimits, WorkOutcome,
    WorkSpec,
};

/// Longer than any of these builds takes (a cold debug build of two tiny crates).
const HANG: Duration = Duration::from_secs(600);

struct Project {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    host: Host,
}

fn project() -> Project {
    // Not under /tmp: jobs get a private /tmp.
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let root = tmp.path().canonicalize().unwrap().join("web");
    std::fs::create_dir_all(&root).unwrap();
    let host = Host::register(
        BTreeMap::from([("web".to_owned(), root.clone())]),
        Sandbox::from_settings(&SandboxSettings::default(), []).unwrap(),
    )
    .unwrap();
    Project {
        _tmp: tmp,
        root,
        host,
    }
}

fn write(dir: &Path, path: &str, content: &str) {
    let path = dir.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

const ALPHA_OK: &str = "pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() {\n        assert_eq!(super::add(1, 2), 3);\n    }\n\n    #[test]\n    fn adds_zero() {\n        assert_eq!(super::add(0, 2), 2);\n    }\n}\n";

/// A workspace of `alpha` (one passing and one failing test, one unused variable) and `beta`
/// (a badly formatted file).
fn workspace() -> Project {
    let p = project();
    write(
        &p.root,
        "Cargo.toml",
        "[workspace]\nmembers = [\"crates/alpha\", \"crates/beta\"]\nresolver = \"2\"\n",
    );
    for name in ["alpha", "beta"] {
        write(
            &p.root,
            &format!("crates/{name}/Cargo.toml"),
            &format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n"),
        );
    }
    write(
        &p.root,
        "crates/alpha/src/lib.rs",
        &ALPHA_OK
            .replace("a + b\n", "let unused = 1;\n    a + b\n")
            .replace("add(0, 2), 2)", "add(0, 2), 3)"),
    );
    write(
        &p.root,
        "crates/beta/src/lib.rs",
        "pub fn  beta( )->u32{ 2 }\n",
    );
    p
}

fn item(validator: Validator, scope: ValidationScope, cwd: Option<&str>) -> WorkItem {
    WorkItem {
        protocol_version: PROTOCOL_VERSION,
        work_id: Uuid::now_v7(),
        project: "web".into(),
        cwd: cwd.map(|c| RelativePath::parse(c).unwrap()),
        spec: WorkSpec::Validate(ValidateOp { validator, scope }),
        stdin: None,
        env: BTreeMap::new(),
        limits: WorkLimits {
            timeout_ms: 600_000,
            // Less than a cargo test run prints: the answer must not depend on it.
            output_bytes_per_stream: 512,
        },
    }
}

/// Runs `item` and returns its outcome and the output it kept.
async fn run(p: &Project, item: &WorkItem) -> (WorkOutcome, Vec<u8>) {
    let (_keep, cancel) = watch::channel(false);
    let policy = StopPolicy::default();
    let (tx, mut rx) = mpsc::channel::<OutputPiece>(64);
    let collect = async {
        let mut kept = Vec::new();
        while let Some(piece) = rx.recv().await {
            assert!(piece.offset + piece.data.len() as u64 <= 512, "{piece:?}");
            if piece.stream == Stream::Stdout {
                kept.extend_from_slice(&piece.data);
            } else {
                eprintln!("stderr: {}", String::from_utf8_lossy(&piece.data));
            }
        }
        kept
    };
    let done = async { tokio::join!(execute(item, &p.host, cancel, tx, &policy), collect) };
    tokio::time::timeout(HANG, done)
        .await
        .expect("the validation hung")
}

fn answer(outcome: &WorkOutcome) -> &ValidationAnswer {
    assert_eq!(outcome.termination, Termination::Exited, "{outcome:?}");
    match &outcome.answer {
        Some(WorkAnswer::Validate(a)) => a,
        other => panic!("no validation answer: {other:?} in {outcome:?}"),
    }
}

#[tokio::test]
async fn cargo_validators_count_tests_diagnostics_and_unformatted_files() {
    let p = workspace();

    let (outcome, _) = run(&p, &item(Validator::CargoCheck, Default::default(), None)).await;
    let a = answer(&outcome);
    assert_eq!(outcome.exit_code, Some(0));
    assert!(a.complete, "{a:?}");
    assert_eq!(
        (a.diagnostics.errors, a.diagnostics.warnings),
        (0, 1),
        "{a:?}"
    );
    let warning = &a.shown_diagnostics[0];
    assert_eq!(
        (warning.file.as_ref().map(|f| f.as_str()), warning.line),
        (Some("crates/alpha/src/lib.rs"), Some(2))
    );
    assert_eq!(warning.code.as_deref(), Some("unused_variables"));
    assert_eq!(a.parser.name, "cargo-json");

    let scope = ValidationScope {
        package: Some("alpha".into()),
        ..Default::default()
    };
    let (outcome, kept) = run(&p, &item(Validator::CargoTest, scope.clone(), None)).await;
    let a = answer(&outcome);
    assert_eq!(outcome.exit_code, Some(101));
    assert!(a.complete, "{a:?}");
    // Unit tests and (empty) doc tests of alpha.
    assert_eq!(
        a.tests,
        Some(TestCounts {
            passed: 1,
            failed: 1,
            ignored: 0
        })
    );
    assert_eq!(a.failures, ["tests::adds_zero"]);
    assert_eq!(a.parser.name, "cargo-libtest");
    // The work kept its own head of the output and said it was cut.
    assert!(outcome.stdout_truncated && outcome.stdout_bytes > 512);
    assert_eq!(kept.len(), 512);

    // A filter narrows what runs; the run from the crate's directory finds the same files.
    let filtered = ValidationScope {
        test_filter: Some("adds_zero".into()),
        targets: CargoTargets::Lib,
        ..Default::default()
    };
    let (outcome, _) = run(
        &p,
        &item(Validator::CargoTest, filtered, Some("crates/alpha")),
    )
    .await;
    let a = answer(&outcome);
    assert_eq!(a.tests.map(|t| (t.passed, t.failed)), Some((0, 1)));

    let (outcome, _) = run(&p, &item(Validator::CargoFmt, Default::default(), None)).await;
    let a = answer(&outcome);
    assert_eq!(outcome.exit_code, Some(1));
    assert!(a.complete, "{a:?}");
    assert_eq!(a.failures, ["fmt:crates/beta/src/lib.rs"]);
    assert_eq!(a.diagnostics.errors, 1);

    // Fixed: the same validations pass.
    write(&p.root, "crates/alpha/src/lib.rs", ALPHA_OK);
    write(
        &p.root,
        "crates/beta/src/lib.rs",
        "pub fn beta() -> u32 {\n    2\n}\n",
    );
    let (outcome, _) = run(&p, &item(Validator::CargoTest, scope, None)).await;
    let a = answer(&outcome);
    assert_eq!(outcome.exit_code, Some(0));
    assert!(a.complete && a.failures.is_empty(), "{a:?}");
    assert_eq!(a.tests.map(|t| (t.passed, t.failed)), Some((2, 0)));
    let (outcome, _) = run(&p, &item(Validator::CargoFmt, Default::default(), None)).await;
    assert_eq!(outcome.exit_code, Some(0));
    assert!(answer(&outcome).complete);
}

#[tokio::test]
async fn a_build_error_names_the_crate_and_points_at_the_line() {
    let p = workspace();
    write(
        &p.root,
        "crates/beta/src/lib.rs",
        "pub fn beta() -> u32 {\n    \"two\"\n}\n",
    );
    for validator in [Validator::CargoCheck, Validator::CargoTest] {
        let (outcome, _) = run(&p, &item(validator, Default::default(), None)).await;
        let a = answer(&outcome);
        assert_eq!(outcome.exit_code, Some(101));
        assert!(a.complete, "{a:?}");
        assert!(a.failures.contains(&"build:beta".to_owned()), "{a:?}");
        assert_eq!(a.tests, None, "no test ran: none is counted");
        let error = &a.shown_diagnostics[0];
        assert_eq!(error.level, "error");
        assert_eq!(error.code.as_deref(), Some("E0308"));
        assert_eq!(
            error.file.as_ref().map(|f| f.as_str()),
            Some("crates/beta/src/lib.rs")
        );
    }
    // Cargo refusing before any build: named, and never complete.
    let scope = ValidationScope {
        package: Some("nope".into()),
        ..Default::default()
    };
    let (outcome, _) = run(&p, &item(Validator::CargoCheck, scope, None)).await;
    let a = answer(&outcome);
    assert!(!a.complete);
    assert_eq!(a.failures, ["cargo"]);
    assert!(a.shown_diagnostics[0].message.contains("nope"), "{a:?}");
}

#[tokio::test]
async fn a_validation_that_runs_out_of_time_answers_nothing() {
    let p = workspace();
    write(
        &p.root,
        "crates/beta/build.rs",
        "fn main() {\n    std::thread::sleep(std::time::Duration::from_secs(60));\n}\n",
    );
    let mut slow = item(Validator::CargoCheck, Default::default(), None);
    slow.limits.timeout_ms = 3000;
    let (outcome, _) = run(&p, &slow).await;
    assert_eq!(outcome.termination, Termination::TimedOut, "{outcome:?}");
    assert_eq!(outcome.answer, None);
}

/// Whether `program args` runs here; a missing toolchain fails the test when
/// `WC_TEST_REQUIRE_TOOLCHAINS=1`, and is reported as skipped otherwise.
fn toolchain(program: &str, args: &[&str]) -> bool {
    let found = std::process::Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("WC_TEST_REQUIRE_TOOLCHAINS").as_deref() != Ok("1"),
            "`{program} {}` does not run here",
            args.join(" ")
        );
        eprintln!("skipped: `{program} {}` does not run here", args.join(" "));
    }
    found
}

/// The prefix of the Python that `python` names, run here.
fn python_prefix(python: &str) -> Option<String> {
    let out = std::process::Command::new(python)
        .args(["-c", "import sys; print(sys.prefix)"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Checks that a job of `p` runs the pinned Python (`WC_PYTHON`, which `scripts/test`
/// installs with pytest) as `python3`, as the pytest validator does: the sandbox must show it,
/// wherever the checkout lies. Without a pinned Python the test is skipped, unless toolchains
/// are required.
async fn jobs_run_the_pinned_python(p: &Project) -> bool {
    let required = std::env::var("WC_TEST_REQUIRE_TOOLCHAINS").as_deref() == Ok("1");
    let Some(pinned) = std::env::var("WC_PYTHON").ok().filter(|v| !v.is_empty()) else {
        assert!(
            !required,
            "scripts/test names its pinned Python in WC_PYTHON"
        );
        eprintln!("skipped: no pinned Python (WC_PYTHON)");
        return false;
    };
    let want = python_prefix(&pinned).unwrap_or_else(|| panic!("WC_PYTHON={pinned} does not run"));
    let mut probe = item(Validator::Pytest, Default::default(), None);
    probe.spec = WorkSpec::Process {
        argv: ["python3", "-c", "import sys, pytest; print(sys.prefix)"]
            .map(String::from)
            .to_vec(),
    };
    let (_keep, cancel) = watch::channel(false);
    let (tx, mut rx) = mpsc::channel::<OutputPiece>(64);
    let collect = async {
        let mut kept = Vec::new();
        while let Some(piece) = rx.recv().await {
            if piece.stream == Stream::Stdout {
                kept.extend_from_slice(&piece.data);
            }
        }
        kept
    };
    let policy = StopPolicy::default();
    let job = wc_runner_agent::exec::execute(&probe, &p.host, cancel, tx, &policy);
    let (outcome, stdout) = tokio::join!(job, collect);
    let seen = String::from_utf8_lossy(&stdout).trim().to_owned();
    assert_eq!(
        (outcome.exit_code, seen.as_str()),
        (Some(0), want.as_str()),
        "a job's python3 must be the pinned {pinned} (sys.prefix {want}), with pytest: is it \
         on the runner's PATH and visible in the sandbox? {outcome:?}"
    );
    true
}

#[tokio::test]
async fn pytest_counts_and_names_failures() {
    let p = project();
    if !jobs_run_the_pinned_python(&p).await {
        return;
    }
    write(
        &p.root,
        "tests/test_math.py",
        "import pytest\n\ndef test_ok():\n    assert 1 + 1 == 2\n\ndef test_bad():\n    assert 1 + 1 == 3\n\n@pytest.mark.skip(reason='later')\ndef test_later():\n    pass\n",
    );
    write(
        &p.root,
        "other/test_other.py",
        "def test_other():\n    pass\n",
    );
    let scope = ValidationScope {
        path: Some(RelativePath::parse("tests").unwrap()),
        ..Default::default()
    };
    let (outcome, _) = run(&p, &item(Validator::Pytest, scope, None)).await;
    let a = answer(&outcome);
    assert_eq!(outcome.exit_code, Some(1));
    assert!(a.complete, "{a:?}");
    assert_eq!(
        a.tests,
        Some(TestCounts {
            passed: 1,
            failed: 1,
            ignored: 1
        })
    );
    assert_eq!(a.failures, ["tests/test_math.py::test_bad"]);
    let filter = ValidationScope {
        test_filter: Some("ok".into()),
        ..Default::default()
    };
    let (outcome, _) = run(&p, &item(Validator::Pytest, filter, None)).await;
    assert_eq!(outcome.exit_code, Some(0));
    assert_eq!(answer(&outcome).tests.map(|t| t.passed), Some(1));
    assert!(
        !p.root.join("tests/__pycache__").exists(),
        "validation leaves no bytecode in the project"
    );
}

#[tokio::test]
async fn go_test_counts_and_names_failures_and_broken_packages() {
    if !toolchain("go", &["version"]) {
        return;
    }
    let p = project();
    write(&p.root, "go.mod", "module example.com/m\n\ngo 1.18\n");
    write(
        &p.root,
        "a/a.go",
        "package a\n\nfunc Add(x, y int) int { return x + y }\n",
    );
    write(
        &p.root,
        "a/a_test.go",
        "package a\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal(\"add\")\n\t}\n}\n\nfunc TestWrong(t *testing.T) {\n\tif Add(1, 2) != 4 {\n\t\tt.Fatal(\"wrong\")\n\t}\n}\n\nfunc TestLater(t *testing.T) { t.Skip(\"later\") }\n",
    );
    let (outcome, _) = run(&p, &item(Validator::GoTest, Default::default(), None)).await;
    let a = answer(&outcome);
    assert_eq!(outcome.exit_code, Some(1), "{a:?}");
    assert!(a.complete, "{a:?}");
    assert_eq!(
        a.tests,
        Some(TestCounts {
            passed: 1,
            failed: 1,
            ignored: 1
        })
    );
    assert_eq!(a.failures, ["example.com/m/a.TestWrong"]);
    write(
        &p.root,
        "b/b.go",
        "package b\n\nfunc B() int { return nope }\n",
    );
    write(
        &p.root,
        "b/b_test.go",
        "package b\n\nimport \"testing\"\n\nfunc TestB(t *testing.T) { B() }\n",
    );
    let scope = ValidationScope {
        package: Some("./b".into()),
        ..Default::default()
    };
    let (outcome, _) = run(&p, &item(Validator::GoTest, scope, None)).await;
    let a = answer(&outcome);
    assert_ne!(outcome.exit_code, Some(0));
    assert!(
        a.failures.contains(&"build:example.com/m/b".to_owned()),
        "{a:?}"
    );
}
