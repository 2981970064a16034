//! Black-box tests of `exec::execute` with real processes in temporary project roots.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;
use tokio::sync::{mpsc, watch};
use uuid::Uuid;
use wc_runner_agent::exec::{Host, OutputPiece, StopPolicy, execute};
use wc_runner_agent::sandbox::{Sandbox, SandboxMode, SandboxSettings};
use wc_runner_protocol::{
    MAX_CHUNK_BYTES, PROTOCOL_VERSION, Shell, Stream, Termination, WorkItem, WorkLimits,
    WorkOutcome, WorkSpec,
};

/// Short enough to keep the suite fast, long enough for a shell to react on a busy machine.
/// How long a run or a wait may take before the test calls it a hang.
const HANG: Duration = Duration::from_secs(60);

const FAST: StopPolicy = StopPolicy {
    interrupt_grace: Duration::from_millis(200),
    terminate_grace: Duration::from_millis(200),
    drain_after_exit: Duration::from_millis(300),
};

/// A project root in a fresh temporary directory, next to a directory outside it, served by a
/// host in some sandbox mode.
struct Project {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
    host: Host,
}

/// A project on a host with the default sandbox (bubblewrap).
fn project() -> Project {
    project_in(None)
}

/// A project on a host whose jobs are not sandboxed.
fn unsandboxed() -> Project {
    project_in(Some(SandboxMode::Off))
}

fn project_in(mode: Option<SandboxMode>) -> Project {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let root = base.join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(base.join("outside")).unwrap();
    let projects = BTreeMap::from([("web".to_owned(), root.clone())]);
    let settings = SandboxSettings {
        mode,
        ..Default::default()
    };
    let host = Host::register(projects, Sandbox::from_settings(&settings, []).unwrap()).unwrap();
    Project {
        _tmp: tmp,
        base,
        root,
        host,
    }
}

fn item(spec: WorkSpec) -> WorkItem {
    WorkItem {
        protocol_version: PROTOCOL_VERSION,
        work_id: Uuid::new_v4(),
        project: "web".into(),
        cwd: None,
        spec,
        stdin: None,
        env: BTreeMap::new(),
        limits: WorkLimits {
            timeout_ms: 20_000,
            output_bytes_per_stream: 1024 * 1024,
        },
    }
}

fn sh(command: &str) -> WorkSpec {
    WorkSpec::Shell {
        shell: Shell::Sh,
        command: command.into(),
    }
}

fn argv(args: &[&str]) -> WorkSpec {
    WorkSpec::Process {
        argv: args.iter().map(|a| a.to_string()).collect(),
    }
}

/// What one run produced: the outcome and the kept output of each stream, reassembled.
struct Run {
    outcome: WorkOutcome,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    pieces: usize,
}

impl Run {
    fn stdout(&self) -> String {
        String::from_utf8(self.stdout.clone()).unwrap()
    }
}

async fn run(item: &WorkItem, p: &Project) -> Run {
    let (_stop, cancel) = watch::channel(false);
    run_with(item, p, cancel, &FAST).await
}

/// Runs `item`, collecting output concurrently, and checks the piece invariants on the way:
/// pieces are at most one chunk and contiguous from offset 0 in each stream.
async fn run_with(
    item: &WorkItem,
    p: &Project,
    cancel: watch::Receiver<bool>,
    policy: &StopPolicy,
) -> Run {
    let (tx, mut rx) = mpsc::channel::<OutputPiece>(8);
    let collector = tokio::spawn(async move {
        let (mut stdout, mut stderr, mut pieces) = (Vec::new(), Vec::new(), 0);
        while let Some(piece) = rx.recv().await {
            assert!(!piece.data.is_empty());
            assert!(piece.data.len() <= MAX_CHUNK_BYTES, "{}", piece.data.len());
            let kept = match piece.stream {
                Stream::Stdout => &mut stdout,
                Stream::Stderr => &mut stderr,
            };
            assert_eq!(piece.offset, kept.len() as u64, "offsets are contiguous");
            kept.extend_from_slice(&piece.data);
            pieces += 1;
        }
        (stdout, stderr, pieces)
    });
    // Bounds a hang only: the processes the tests leave behind sleep far longer than this, so
    // a run that waited for one of them fails here.
    let outcome = tokio::time::timeout(HANG, execute(item, &p.host, cancel, tx, policy))
        .await
        .expect("the run hung");
    let (stdout, stderr, pieces) = collector.await.unwrap();
    Run {
        outcome,
        stdout,
        stderr,
        pieces,
    }
}

/// A process a job wrote the pid of (`$$`, `$!`): the pid as the job saw it (in its own PID
/// namespace when sandboxed), and the job's root, where the process was started.
#[derive(Debug, Clone)]
struct JobPid {
    seen: i32,
    root: PathBuf,
}

fn read_pid(path: &Path) -> JobPid {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    JobPid {
        seen: text.trim().parse().unwrap(),
        root: path.parent().unwrap().to_owned(),
    }
}

impl JobPid {
    /// The host pid of the process, while it runs: the one whose innermost pid (the last
    /// `NSpid` entry, the only one outside a namespace) is `seen` and whose cwd is the root.
    fn on_host(&self) -> Option<Pid> {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .find(|pid| {
                let status = std::fs::read_to_string(format!("/proc/{pid}/status"));
                let innermost = status.ok().and_then(|s| {
                    s.lines()
                        .find_map(|l| l.strip_prefix("NSpid:"))
                        .and_then(|ids| ids.split_whitespace().last()?.parse::<i32>().ok())
                });
                innermost == Some(self.seen)
                    && std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c == self.root)
            })
            .map(Pid::from_raw)
    }
}

/// Whether `pid` has ended. An orphan killed here is re-parented to PID 1, which in a container
/// may never reap it; a zombie has exited all the same.
fn ended(pid: Pid) -> bool {
    match kill(pid, None) {
        Err(Errno::ESRCH) => true,
        _ => std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            stat.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X'))
        }),
    }
}

/// Waits until the process `pid` names has ended; fails only after [`HANG`], long before a
/// test's sleeping process would end on its own.
async fn assert_ended(pid: JobPid) {
    let deadline = tokio::time::Instant::now() + HANG;
    while !pid.on_host().is_none_or(ended) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "process {pid:?} is still running"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn echo_prints_and_exits_zero() {
    let p = project();
    let r = run(&item(argv(&["echo", "hi"])), &p).await;
    assert_eq!(r.outcome.termination, Termination::Exited);
    assert_eq!(r.outcome.exit_code, Some(0));
    assert_eq!(r.outcome.signal, None);
    assert_eq!(r.outcome.error, None);
    assert_eq!(r.stdout(), "hi\n");
    assert_eq!(r.outcome.stdout_bytes, 3);
    assert_eq!(r.outcome.stderr_bytes, 0);
    assert!(!r.outcome.stdout_truncated);
}

#[tokio::test]
async fn exit_codes_and_signals_are_reported() {
    let p = unsandboxed();
    let r = run(&item(sh("exit 3")), &p).await;
    assert_eq!(r.outcome.termination, Termination::Exited);
    assert_eq!((r.outcome.exit_code, r.outcome.signal), (Some(3), None));

    let r = run(&item(sh("kill -TERM $$")), &p).await;
    assert_eq!(r.outcome.termination, Termination::Exited);
    assert_eq!((r.outcome.exit_code, r.outcome.signal), (None, Some(15)));
}

#[tokio::test]
async fn exit_codes_and_signals_are_reported_from_the_sandbox() {
    let p = project();
    let r = run(&item(sh("exit 3")), &p).await;
    assert_eq!(r.outcome.termination, Termination::Exited);
    assert_eq!((r.outcome.exit_code, r.outcome.signal), (Some(3), None));

    let r = run(&item(sh("kill -TERM $$")), &p).await;
    assert_eq!(r.outcome.termination, Termination::Exited);
    assert_eq!((r.outcome.exit_code, r.outcome.signal), (None, Some(15)));

    // bubblewrap reports a signal N as status 128+N, so a program exiting with such a status
    // itself reads as that signal (the documented limit of the sandbox); 128 and 193 do not.
    for (code, expect) in [
        (130, (None, Some(2))),
        (128, (Some(128), None)),
        (193, (Some(193), None)),
    ] {
        let r = run(&item(sh(&format!("exit {code}"))), &p).await;
        assert_eq!(
            (r.outcome.exit_code, r.outcome.signal),
            expect,
            "exit {code}"
        );
    }
}

#[tokio::test]
async fn stderr_is_captured_separately() {
    let p = project();
    let r = run(&item(sh("echo out; echo err >&2; echo more >&2")), &p).await;
    assert_eq!(r.stdout(), "out\n");
    assert_eq!(r.stderr, b"err\nmore\n");
    assert_eq!((r.outcome.stdout_bytes, r.outcome.stderr_bytes), (4, 9));
}

#[tokio::test]
async fn stdin_round_trips_through_cat() {
    let p = project();
    let mut work = item(argv(&["cat"]));
    work.stdin = Some("line one\nline two\n".into());
    assert_eq!(run(&work, &p).await.stdout(), "line one\nline two\n");

    // Larger than a pipe buffer both ways: stdin is fed while stdout is read.
    let big: String = "0123456789abcdef\n".repeat(12_000);
    work.stdin = Some(big.clone());
    let r = run(&work, &p).await;
    assert_eq!(r.outcome.exit_code, Some(0));
    assert_eq!(r.stdout(), big);
}

#[tokio::test]
async fn stdin_is_empty_without_text_and_may_go_unread() {
    let p = project();
    let r = run(&item(argv(&["cat"])), &p).await;
    assert_eq!((r.outcome.exit_code, r.stdout()), (Some(0), String::new()));

    let mut work = item(sh("echo ignored"));
    work.stdin = Some("x".repeat(200_000));
    let r = run(&work, &p).await;
    assert_eq!(r.outcome.termination, Termination::Exited);
    assert_eq!(
        (r.outcome.exit_code, r.stdout()),
        (Some(0), "ignored\n".into())
    );
}

#[tokio::test]
async fn argv_runs_without_a_shell() {
    let p = project();
    let r = run(&item(argv(&["printf", "%s|", "a b", "$HOME", "*"])), &p).await;
    assert_eq!(r.stdout(), "a b|$HOME|*|");
}

#[tokio::test]
async fn sh_and_bash_run_shell_text() {
    let p = project();
    let r = run(&item(sh("echo $0; echo one two | wc -w")), &p).await;
    assert_eq!(
        r.stdout().split_whitespace().collect::<Vec<_>>(),
        ["sh", "2"]
    );

    let bash = WorkSpec::Shell {
        shell: Shell::Bash,
        command: r#"[[ -n "$BASH_VERSION" ]] && echo "$0""#.into(),
    };
    let r = run(&item(bash), &p).await;
    assert_eq!(
        (r.outcome.exit_code, r.stdout()),
        (Some(0), "bash\n".into())
    );
}

#[tokio::test]
async fn scripts_run_from_a_private_file_that_is_removed_afterwards() {
    let p = project();
    let work = item(WorkSpec::Script {
        interpreter: "sh".into(),
        script: concat!(
            "echo \"$0\"\n",
            "echo \"$1|$2\"\n",
            "stat -c %a \"$0\" \"$(dirname \"$0\")\"\n",
            "pwd\n",
        )
        .into(),
        args: vec!["a".into(), "b c".into()],
    });
    let r = run(&work, &p).await;
    assert_eq!(
        r.outcome.exit_code,
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let stdout = r.stdout();
    let lines: Vec<&str> = stdout.lines().collect();
    let [script, args, file_mode, dir_mode, pwd] = lines[..] else {
        panic!("unexpected output {stdout:?}");
    };
    assert_eq!(args, "a|b c");
    assert_eq!((file_mode, dir_mode), ("600", "700"));
    assert_eq!(Path::new(pwd), p.root);
    let script = Path::new(script);
    assert!(!script.starts_with(&p.root), "{}", script.display());
    assert!(!script.exists(), "the script file is removed");
    assert!(!script.parent().unwrap().exists(), "its directory too");
}

#[tokio::test]
async fn cwd_resolves_inside_the_project() {
    let p = project();
    std::fs::create_dir_all(p.root.join("sub/deep")).unwrap();
    std::os::unix::fs::symlink(p.root.join("sub"), p.root.join("alias")).unwrap();
    for (cwd, expect) in [("sub/deep", "sub/deep"), ("alias/deep", "sub/deep")] {
        let mut work = item(argv(&["pwd", "-P"]));
        work.cwd = Some(wc_runner_protocol::RelativePath::parse(cwd).unwrap());
        let r = run(&work, &p).await;
        assert_eq!(r.stdout().trim_end(), p.root.join(expect).to_str().unwrap());
    }
}

#[tokio::test]
async fn refused_work_never_runs() {
    let p = project();
    std::fs::write(p.root.join("file"), "x").unwrap();
    std::os::unix::fs::symlink(p.base.join("outside"), p.root.join("out")).unwrap();
    let marker = p.base.join("marker");
    // Forms a `RelativePath` cannot take (`..`, absolute) never reach the runner: the work item
    // does not parse (the protocol's tests).
    let cases = [
        ("web", Some("out"), "cwd escapes the project root"),
        ("web", Some("missing"), "does not exist"),
        ("web", Some("file"), "not a directory"),
        ("api", None, "project \"api\" is not served"),
    ];
    for (project, cwd, expect) in cases {
        let mut work = item(argv(&["touch", marker.to_str().unwrap()]));
        work.project = project.into();
        work.cwd = cwd.map(|c| wc_runner_protocol::RelativePath::parse(c).unwrap());
        let r = run(&work, &p).await;
        assert_eq!(r.outcome.termination, Termination::Rejected, "{cwd:?}");
        let error = r.outcome.error.unwrap_or_default();
        assert!(error.contains(expect), "{cwd:?}: {error}");
        assert!(!marker.exists(), "{cwd:?}: the command ran");
    }
}

#[tokio::test]
async fn runner_secrets_stay_out_and_additions_go_in() {
    // SAFETY: every environment access in this test binary goes through std, which serializes
    // `set_var` with reads and with process spawning under its environment lock; no C code here
    // reads the environment. The names are unique to this test.
    unsafe {
        std::env::set_var("WC_RUNNER_TOKEN", "xyz");
        std::env::set_var("MY_SECRET", "1");
        std::env::set_var("EXEC_TEST_PLAIN", "held");
        std::env::set_var("EXEC_TEST_PASSED", "kept");
    }
    let mut p = project();
    let passed = vec![wc_runner_agent::config::EnvName::parse("EXEC_TEST_PASSED").unwrap()];
    let web = wc_runner_agent::boundary::Project::register(&p.root, passed).unwrap();
    p.host = Host::new([("web".to_owned(), web)], p.host.sandbox.clone());
    let mut work = item(argv(&["env"]));
    work.env = BTreeMap::from([("BUILD_MODE".to_owned(), "release".to_owned())]);
    let r = run(&work, &p).await;
    let env = r.stdout();
    let names: Vec<&str> = env
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k)
        .collect();
    assert!(!names.contains(&"WC_RUNNER_TOKEN"), "{env}");
    assert!(!names.contains(&"MY_SECRET"), "{env}");
    assert!(
        !names.contains(&"EXEC_TEST_PLAIN"),
        "only the allow list passes: {env}"
    );
    assert!(env.lines().any(|l| l == "BUILD_MODE=release"), "{env}");
    assert!(env.lines().any(|l| l == "EXEC_TEST_PASSED=kept"), "{env}");
    assert!(names.contains(&"PATH"), "{env}");
}

#[tokio::test]
async fn a_missing_or_unexecutable_program_fails_to_spawn() {
    let p = project();
    let r = run(&item(argv(&["wc-no-such-program-7f3a"])), &p).await;
    assert_eq!(r.outcome.termination, Termination::SpawnFailed);
    let error = r.outcome.error.unwrap();
    assert!(error.contains("wc-no-such-program-7f3a"), "{error}");
    assert!(error.contains("No such file"), "{error}");

    std::fs::write(p.root.join("tool.sh"), "#!/bin/sh\necho ran\n").unwrap();
    let r = run(&item(argv(&["./tool.sh"])), &p).await;
    assert_eq!(r.outcome.termination, Termination::SpawnFailed);
    let error = r.outcome.error.unwrap();
    assert!(
        error.contains("./tool.sh") && error.contains("Permission denied"),
        "{error}"
    );

    let r = run(
        &item(WorkSpec::Script {
            interpreter: "wc-no-such-interpreter".into(),
            script: "echo hi".into(),
            args: vec![],
        }),
        &p,
    )
    .await;
    assert_eq!(r.outcome.termination, Termination::SpawnFailed);
    assert!(r.outcome.error.unwrap().contains("wc-no-such-interpreter"));
}

/// A leader whose grandchild ignores SIGINT and SIGTERM and keeps the pipes open. The child
/// shell writes its own pid before it starts the sleep, so once `sleep.pid` is complete both
/// pid files are (the leader writing `$!` after the fork could lose that race).
const STUBBORN_GROUP: &str = concat!(
    "sh -c 'echo $$ > inner.pid; trap \"\" INT TERM; sleep 600 & echo $! > sleep.pid; wait' & ",
    "wait",
);

/// A timed-out `STUBBORN_GROUP` ends, with every process it started.
async fn assert_a_timeout_stops_everything(p: &Project) {
    let mut work = item(sh(STUBBORN_GROUP));
    work.limits.timeout_ms = 300;
    let r = run(&work, p).await;
    assert_eq!(r.outcome.termination, Termination::TimedOut);
    assert_eq!(r.outcome.exit_code, None);
    assert!(r.outcome.signal.is_some());
    assert_ended(read_pid(&p.root.join("inner.pid"))).await;
    assert_ended(read_pid(&p.root.join("sleep.pid"))).await;
}

#[tokio::test]
async fn a_timeout_stops_the_whole_group() {
    assert_a_timeout_stops_everything(&unsandboxed()).await;
}

#[tokio::test]
async fn a_timeout_stops_the_whole_sandbox() {
    assert_a_timeout_stops_everything(&project()).await;
}

#[tokio::test]
async fn a_cancel_stops_the_whole_group() {
    let p = project();
    let work = item(sh(STUBBORN_GROUP));
    let (stop, cancel) = watch::channel(false);
    let sleep_pid = p.root.join("sleep.pid");
    let canceller = {
        let sleep_pid = sleep_pid.clone();
        tokio::spawn(async move {
            while std::fs::read_to_string(&sleep_pid).map_or(true, |s| !s.ends_with('\n')) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            stop.send(true).unwrap();
        })
    };
    let r = run_with(&work, &p, cancel, &FAST).await;
    canceller.await.unwrap();
    assert_eq!(r.outcome.termination, Termination::Cancelled);
    assert_ended(read_pid(&p.root.join("inner.pid"))).await;
    assert_ended(read_pid(&sleep_pid)).await;
}

#[tokio::test]
async fn escalation_ends_in_sigkill_when_int_and_term_are_ignored() {
    let p = project();
    // The leader notes each signal it is sent and carries on; graces long enough for a loaded
    // machine to run the note before the next signal comes.
    let mut work = item(sh(
        "trap 'echo int >> signals.txt' INT; trap 'echo term >> signals.txt' TERM; \
         echo ready; while :; do sleep 0.05; done",
    ));
    work.limits.timeout_ms = 300;
    let patient = StopPolicy {
        interrupt_grace: Duration::from_secs(2),
        terminate_grace: Duration::from_secs(2),
        ..FAST
    };
    let (_stop, cancel) = watch::channel(false);
    let r = run_with(&work, &p, cancel, &patient).await;
    assert_eq!(r.outcome.termination, Termination::TimedOut);
    assert_eq!(r.outcome.signal, Some(9));
    assert_eq!(r.stdout(), "ready\n");
    // SIGINT, then SIGTERM, each outlived, before the SIGKILL that ended it.
    assert_eq!(
        std::fs::read_to_string(p.root.join("signals.txt")).unwrap(),
        "int\nterm\n"
    );
}

#[tokio::test]
async fn a_leader_may_handle_sigint_and_exit_on_its_own_terms() {
    let p = project();
    let mut work = item(sh("trap 'echo bye; exit 7' INT; sleep 30 & wait"));
    work.limits.timeout_ms = 300;
    let r = run(&work, &p).await;
    assert_eq!(r.outcome.termination, Termination::TimedOut);
    assert_eq!((r.outcome.exit_code, r.outcome.signal), (Some(7), None));
    assert_eq!(r.stdout(), "bye\n");
}

#[tokio::test]
async fn a_cancel_before_the_start_runs_nothing() {
    let p = project();
    let marker = p.base.join("marker");
    let (_stop, cancel) = watch::channel(true);
    let work = item(argv(&["touch", marker.to_str().unwrap()]));
    let r = run_with(&work, &p, cancel, &FAST).await;
    assert_eq!(r.outcome.termination, Termination::Cancelled);
    assert!(!marker.exists());
}

#[tokio::test]
async fn a_dropped_cancel_sender_lets_the_work_finish() {
    let p = project();
    let (stop, cancel) = watch::channel(false);
    drop(stop);
    let r = run_with(&item(sh("sleep 0.2; echo done")), &p, cancel, &FAST).await;
    assert_eq!(r.outcome.termination, Termination::Exited);
    assert_eq!(r.stdout(), "done\n");
}

#[tokio::test]
async fn a_background_process_holding_stdout_does_not_hang_the_run() {
    let p = project();
    let r = run(
        &item(sh("sleep 600 & echo $! > bg.pid; echo leader done")),
        &p,
    )
    .await;
    assert_eq!(r.outcome.termination, Termination::Exited);
    assert_eq!(r.outcome.exit_code, Some(0));
    assert_eq!(r.stdout(), "leader done\n");
    assert_ended(read_pid(&p.root.join("bg.pid"))).await;
}

#[tokio::test]
async fn output_past_the_limit_is_counted_not_kept() {
    let p = project();
    let mut work = item(sh("yes 0123456789abcdef | head -c 102400"));
    work.limits.output_bytes_per_stream = 1024;
    let r = run(&work, &p).await;
    assert_eq!(r.outcome.exit_code, Some(0));
    assert_eq!(r.stdout.len(), 1024);
    assert_eq!(r.stdout(), "0123456789abcdef\n".repeat(61)[..1024]);
    assert_eq!(r.outcome.stdout_bytes, 102_400);
    assert!(r.outcome.stdout_truncated);
    assert!(!r.outcome.stderr_truncated);
}

#[tokio::test]
async fn both_streams_are_read_at_once_in_bounded_pieces() {
    let p = project();
    // stderr first: reading the streams one after the other would deadlock on a full pipe.
    let work = item(sh("head -c 300000 /dev/zero >&2; head -c 300000 /dev/zero"));
    let r = run(&work, &p).await;
    assert_eq!(r.outcome.exit_code, Some(0));
    assert_eq!((r.stdout.len(), r.stderr.len()), (300_000, 300_000));
    assert!(r.stdout.iter().chain(&r.stderr).all(|&b| b == 0));
    assert!(r.pieces >= 2 * 300_000 / MAX_CHUNK_BYTES, "{}", r.pieces);
    assert!(!r.outcome.stdout_truncated && !r.outcome.stderr_truncated);
}

#[tokio::test]
async fn work_runs_on_when_nobody_listens_to_its_output() {
    let p = project();
    let (tx, rx) = mpsc::channel(1);
    drop(rx);
    let (_stop, cancel) = watch::channel(false);
    let work = item(sh("head -c 102400 /dev/zero; echo tail >&2"));
    let outcome = execute(&work, &p.host, cancel, tx, &FAST).await;
    assert_eq!(outcome.termination, Termination::Exited);
    assert_eq!(outcome.exit_code, Some(0));
    assert_eq!((outcome.stdout_bytes, outcome.stderr_bytes), (102_400, 5));
}

#[test]
fn the_execution_future_can_move_between_threads() {
    fn assert_send<T: Send>(_: &T) {}
    let p = project();
    let work = item(argv(&["true"]));
    let (_stop, cancel) = watch::channel(false);
    let (tx, _rx) = mpsc::channel(1);
    let policy = StopPolicy::default();
    let future = execute(&work, &p.host, cancel, tx, &policy);
    assert_send(&future);
}

// ---------------------------------------------------------------------------------------------
// The sandbox and containment of detached processes

/// Host pids of live (not zombie) processes whose command line contains `marker`.
fn marked(marker: &str) -> Vec<Pid> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .map(Pid::from_raw)
        .filter(|&pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.windows(marker.len()).any(|w| w == marker.as_bytes()))
                && !ended(pid)
        })
        .collect()
}

/// A command that leaves two daemons carrying `marker` in their command lines: one that called
/// `setsid`, one double-forked (its parent exits at once), both ignoring SIGINT and SIGTERM.
/// Each ignores the signals before it execs the shell that carries the marker (ignored signals
/// stay ignored across exec), so a daemon found by its marker can only end by SIGKILL.
fn daemons(marker: &str) -> String {
    format!(
        "setsid sh -c 'trap \"\" INT TERM; exec sh -c \"while :; do sleep 0.1; done\" {marker}-setsid' & \
         sh -c \"(trap '' INT TERM; exec sh -c 'while :; do sleep 0.1; done' {marker}-forked) &\""
    )
}

async fn await_marked(marker: &str, count: usize) {
    let deadline = tokio::time::Instant::now() + HANG;
    while marked(marker).len() < count {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the daemons marked {marker} never started"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Waits until no daemon marked `marker` runs; they loop forever, so only a kill ends them.
async fn assert_none_marked(marker: &str) {
    let deadline = tokio::time::Instant::now() + HANG;
    while !marked(marker).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "daemons still run: {:?}",
            marked(marker)
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn detached_daemons_die_when_their_job_is_cancelled_in_both_modes() {
    for p in [project(), unsandboxed()] {
        let marker = format!("wc-daemon-{}", Uuid::new_v4().simple());
        let work = item(sh(&format!("{}; sleep 30", daemons(&marker))));
        let (stop, cancel) = watch::channel(false);
        let canceller = {
            let marker = marker.clone();
            tokio::spawn(async move {
                await_marked(&marker, 2).await;
                stop.send(true).unwrap();
            })
        };
        let r = run_with(&work, &p, cancel, &FAST).await;
        canceller.await.unwrap();
        assert_eq!(r.outcome.termination, Termination::Cancelled);
        assert_none_marked(&marker).await;
    }
}

#[tokio::test]
async fn detached_daemons_die_on_timeout_and_when_the_leader_exits_in_both_modes() {
    for p in [project(), unsandboxed()] {
        let marker = format!("wc-daemon-{}", Uuid::new_v4().simple());
        let mut work = item(sh(&format!("{}; sleep 30", daemons(&marker))));
        work.limits.timeout_ms = 1500;
        let r = run(&work, &p).await;
        assert_eq!(r.outcome.termination, Termination::TimedOut);
        assert_none_marked(&marker).await;

        // The leader ends on its own once both daemons run; they end with it.
        let marker = format!("wc-daemon-{}", Uuid::new_v4().simple());
        let wait = format!(
            "until [ $(grep -l {marker} /proc/[0-9]*/cmdline 2>/dev/null | wc -l) -ge 2 ]; do sleep 0.05; done"
        );
        let work = item(sh(&format!(
            "{}; {wait}; echo leader done",
            daemons(&marker)
        )));
        let r = run(&work, &p).await;
        assert_eq!(
            r.outcome.exit_code,
            Some(0),
            "{}",
            String::from_utf8_lossy(&r.stderr)
        );
        assert_eq!(r.stdout(), "leader done\n");
        assert_none_marked(&marker).await;
    }
}

/// The leader ignores SIGINT and SIGTERM and so lives until the SIGKILL: in the sandbox the
/// namespace (and every process in it) ends the moment the leader does.
#[tokio::test]
async fn a_graceful_stop_signals_detached_processes_before_the_kill() {
    for p in [project(), unsandboxed()] {
        let marker = format!("wc-term-{}", Uuid::new_v4().simple());
        // Each shell says it is ready once its traps are in place.
        let command = format!(
            "setsid sh -c 'trap \"echo term > term.txt; exit 0\" TERM; trap \"\" INT; \
             echo > daemon.ready; while :; do sleep 0.05; done' {marker} & \
             trap '' INT TERM; echo > leader.ready; while :; do sleep 0.05; done"
        );
        let (stop, cancel) = watch::channel(false);
        let canceller = {
            let ready = [p.root.join("daemon.ready"), p.root.join("leader.ready")];
            tokio::spawn(async move {
                while !ready.iter().all(|f| f.exists()) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                stop.send(true).unwrap();
            })
        };
        let r = run_with(&item(sh(&command)), &p, cancel, &FAST).await;
        canceller.await.unwrap();
        assert_eq!(r.outcome.termination, Termination::Cancelled);
        assert_eq!(
            std::fs::read_to_string(p.root.join("term.txt")).unwrap_or_default(),
            "term\n",
            "the detached process got SIGTERM ({:?})",
            p.host.sandbox.mode()
        );
        assert_none_marked(&marker).await;
    }
}

#[tokio::test]
async fn a_sandboxed_job_sees_its_own_processes_a_read_only_system_and_a_private_tmp() {
    let p = project();
    let host_tmp = tempfile::NamedTempFile::new_in("/tmp").unwrap();
    let command = &format!(
        "echo procs=$(ls -d /proc/[0-9]* | wc -l); \
         echo tmpdir=$TMPDIR; \
         echo hosttmp=$(ls {} 2>/dev/null | wc -l); {}",
        host_tmp.path().display(),
        concat!(
            "touch in-root && echo root=writable; ",
            "touch /tmp/x && echo tmp=writable; ",
            "touch /etc/wc-exec-probe 2>/dev/null || echo etc=read-only; ",
            "touch ../outside/x 2>/dev/null || echo outside=read-only; ",
            "mount -o remount,rw / 2>/dev/null || echo remount=refused; ",
            "grep CapEff /proc/self/status",
        )
    );
    let r = run(&item(sh(command)), &p).await;
    assert_eq!(
        r.outcome.exit_code,
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let out = r.stdout();
    let procs: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("procs="))
        .unwrap()
        .parse()
        .unwrap();
    assert!(procs <= 8, "the job sees {procs} processes: {out}");
    for line in [
        "tmpdir=/tmp",
        "hosttmp=0",
        "root=writable",
        "tmp=writable",
        "etc=read-only",
        "outside=read-only",
        "remount=refused",
        "CapEff:\t0000000000000000",
    ] {
        assert!(out.lines().any(|l| l == line), "{line} missing from {out}");
    }
    assert!(p.root.join("in-root").exists());
    assert!(!p.base.join("outside/x").exists());

    // The same command unsandboxed shows the host: the check above can fail.
    let r = run(&item(sh(command)), &unsandboxed()).await;
    let out = r.stdout();
    assert!(out.lines().any(|l| l == "hosttmp=1"), "{out}");
}

#[tokio::test]
async fn hidden_paths_read_empty_and_caches_and_git_metadata_are_writable() {
    let mut p = project();
    let secret_file = p.base.join("runner.token");
    let secret_dir = p.base.join("state");
    let cache = p.base.join("cache");
    let gitdir = p.base.join("main.git/worktrees/web");
    std::fs::write(&secret_file, "wcrk_secret_token").unwrap();
    std::fs::create_dir_all(&secret_dir).unwrap();
    std::fs::write(secret_dir.join("pg.conf"), "password").unwrap();
    std::fs::create_dir_all(&gitdir).unwrap();
    std::fs::write(gitdir.join("commondir"), "../..\n").unwrap();
    std::fs::write(
        p.root.join(".git"),
        format!("gitdir: {}\n", gitdir.display()),
    )
    .unwrap();
    let settings = SandboxSettings {
        writable: Some(vec![cache.display().to_string()]),
        hide: vec![secret_dir.display().to_string()],
        ..Default::default()
    };
    let mut sandbox = Sandbox::from_settings(&settings, [secret_file.clone()]).unwrap();
    sandbox.prepare();
    // The worktree's metadata is registered with the project, as the operator registers it.
    p.host = Host::register([("web".to_owned(), p.root.clone())], sandbox).unwrap();
    assert!(cache.is_dir(), "a missing cache is created");
    let command = format!(
        "echo token=[$(cat {t})]; echo state=[$(ls -A {s})]; \
         touch {c}/x && echo cache=writable; touch {g}/x && echo gitdir=writable; \
         touch {m}/y && echo common=writable; touch {s}/z 2>/dev/null || echo state=read-only",
        t = secret_file.display(),
        s = secret_dir.display(),
        c = cache.display(),
        g = gitdir.display(),
        m = p.base.join("main.git").display(),
    );
    let r = run(&item(sh(&command)), &p).await;
    let out = r.stdout();
    for line in [
        "token=[]",
        "state=[]",
        "cache=writable",
        "gitdir=writable",
        "common=writable",
        "state=read-only",
    ] {
        assert!(out.lines().any(|l| l == line), "{line} missing from {out}");
    }
    assert!(!out.contains("wcrk_secret_token"), "{out}");
    assert!(cache.join("x").exists() && gitdir.join("x").exists());
}
