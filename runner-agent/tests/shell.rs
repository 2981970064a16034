//! Black-box tests of persistent shells (`shell::Shells`) with real `sh` (dash) and `bash`
//! processes in temporary project roots, in a bubblewrap sandbox and unsandboxed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;
use tokio::sync::watch;
use uuid::Uuid;
use wc_runner_agent::exec::{Host, StopPolicy};
use wc_runner_agent::sandbox::{Sandbox, SandboxMode, SandboxSettings};
use wc_runner_agent::shell::Shells;
use wc_runner_protocol::{
    OpErrorKind, PROTOCOL_VERSION, RelativePath, Shell, ShellAnswer, ShellExecOp, ShellExecResult,
    ShellId, ShellOp, ShellOpenOp, ShellState, ShellTarget, Termination, WorkAnswer, WorkItem,
    WorkLimits, WorkOutcome, WorkSpec,
};

/// How long an operation or a wait may take before the test calls it a hang; far shorter than
/// the sleeps the tests leave running, so an operation that waited for one fails here.
const HANG: Duration = Duration::from_secs(60);

/// Both confinements: every behaviour must hold in each.
const MODES: [SandboxMode; 2] = [SandboxMode::Bubblewrap, SandboxMode::Off];

/// A project root in a fresh temporary directory (with a `sub` directory), served by a host in
/// `mode`, and the shells of one runner instance for it.
struct Runner {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    instance_id: Uuid,
    shells: Shells,
}

fn runner(mode: SandboxMode) -> Runner {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap().join("root");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    let settings = SandboxSettings {
        mode: Some(mode),
        ..Default::default()
    };
    let host = Host::register(
        BTreeMap::from([("web".to_owned(), root.clone())]),
        Sandbox::from_settings(&settings, []).unwrap(),
    )
    .unwrap();
    let instance_id = Uuid::now_v7();
    let shells = Shells::new(Arc::new(host), instance_id, StopPolicy::default());
    Runner {
        _tmp: tmp,
        root,
        instance_id,
        shells,
    }
}

fn item(spec: ShellOp) -> WorkItem {
    WorkItem {
        protocol_version: PROTOCOL_VERSION,
        work_id: Uuid::now_v7(),
        project: "web".into(),
        cwd: None,
        spec: WorkSpec::PersistentShell(spec),
        stdin: None,
        env: BTreeMap::new(),
        limits: WorkLimits {
            timeout_ms: 20_000,
            output_bytes_per_stream: 64 * 1024,
        },
    }
}

/// The shell answer of an outcome, which must be an answered one.
fn answered(outcome: WorkOutcome) -> ShellAnswer {
    assert_eq!(outcome.termination, Termination::Exited, "{outcome:?}");
    assert_eq!(outcome.exit_code, Some(0));
    match outcome.answer {
        Some(WorkAnswer::Shell(answer)) => answer,
        other => panic!("not a shell answer: {other:?}"),
    }
}

fn rejected(outcome: WorkOutcome) -> OpErrorKind {
    assert_eq!(outcome.termination, Termination::Rejected, "{outcome:?}");
    assert!(outcome.answer.is_none());
    outcome.error_kind.expect("a refusal names its kind")
}

impl Runner {
    fn target(&self, id: &ShellId) -> ShellTarget {
        ShellTarget {
            shell_id: id.clone(),
            instance_id: self.instance_id,
        }
    }

    async fn run(&self, work: &WorkItem) -> WorkOutcome {
        let (_keep, cancel) = watch::channel(false);
        self.run_with(work, cancel).await
    }

    async fn run_with(&self, work: &WorkItem, cancel: watch::Receiver<bool>) -> WorkOutcome {
        tokio::time::timeout(HANG, self.shells.execute(work, cancel))
            .await
            .expect("the operation hung")
    }

    /// Opens a shell of `dialect` in `cwd` and answers its id.
    async fn open_in(&self, dialect: Shell, cwd: Option<&str>) -> (ShellId, ShellAnswer) {
        let id = ShellId::generate();
        let mut work = item(ShellOp::ShellOpen(ShellOpenOp {
            target: self.target(&id),
            shell: dialect,
        }));
        work.cwd = cwd.map(|c| RelativePath::parse(c).unwrap());
        let answer = answered(self.run(&work).await);
        (id, answer)
    }

    async fn open(&self, dialect: Shell) -> ShellId {
        let (id, answer) = self.open_in(dialect, None).await;
        assert_eq!(answer.state, ShellState::Ready, "{answer:?}");
        assert_eq!(answer.action, "shell_open");
        id
    }

    fn exec_item(&self, id: &ShellId, command: &str) -> WorkItem {
        item(ShellOp::ShellExec(ShellExecOp {
            target: self.target(id),
            command: command.into(),
        }))
    }

    /// Runs `command` and answers the whole answer.
    async fn exec_answer(&self, id: &ShellId, command: &str) -> ShellAnswer {
        answered(self.run(&self.exec_item(id, command)).await)
    }

    /// Runs `command`, which must leave the shell ready, and answers what it did.
    async fn exec(&self, id: &ShellId, command: &str) -> ShellExecResult {
        let answer = self.exec_answer(id, command).await;
        assert_eq!(answer.state, ShellState::Ready, "{command}: {answer:?}");
        answer.exec.expect("an exec answers what the command did")
    }

    /// Runs `command` and answers its stdout, checking that it exited 0 and wrote no stderr.
    async fn stdout(&self, id: &ShellId, command: &str) -> String {
        let r = self.exec(id, command).await;
        assert_eq!(r.exit_code, Some(0), "{command}: {r:?}");
        assert_eq!(r.stderr, "", "{command}");
        r.stdout
    }

    async fn status(&self, id: &ShellId) -> ShellAnswer {
        answered(self.run(&item(ShellOp::ShellStatus(self.target(id)))).await)
    }

    async fn close(&self, id: &ShellId) -> ShellAnswer {
        answered(self.run(&item(ShellOp::ShellClose(self.target(id)))).await)
    }

    /// Live processes started in the project (their cwd lies in the root): the shell, bwrap,
    /// and whatever the commands started there.
    fn processes(&self) -> Vec<Pid> {
        processes_under(&self.root)
    }
}

fn processes_under(root: &Path) -> Vec<Pid> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .map(Pid::from_raw)
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(root))
                && !ended(*pid)
        })
        .collect()
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

/// Waits until every process in `pids` has ended; fails only after [`HANG`].
async fn assert_all_ended(pids: &[Pid]) {
    let deadline = tokio::time::Instant::now() + HANG;
    while let Some(pid) = pids.iter().find(|&&p| !ended(p)) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "process {pid} is still running"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `count` processes of the program `comm` run in `r`'s project.
async fn await_program(r: &Runner, comm: &str, count: usize) {
    let deadline = tokio::time::Instant::now() + HANG;
    let runs = |pid: &&Pid| {
        std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm)
    };
    while r.processes().iter().filter(runs).count() < count {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{count} {comm} never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// State and results

#[tokio::test]
async fn what_a_command_changes_stays_for_the_next_in_both_dialects_and_modes() {
    for mode in MODES {
        for dialect in [Shell::Sh, Shell::Bash] {
            let r = runner(mode);
            let id = r.open(dialect).await;
            let sub = r.root.join("sub");
            for setup in [
                "cd sub",
                "export WC_KEPT=exported",
                "export WC_GONE=1",
                "unset WC_GONE",
                "umask 027",
                "greet() { echo \"hello $1\"; }",
                "plain=42",
            ] {
                assert_eq!(
                    r.stdout(&id, setup).await,
                    "",
                    "{mode:?} {dialect:?}: {setup}"
                );
            }
            let context = format!("{mode:?} {dialect:?}");
            assert_eq!(
                r.stdout(&id, "pwd").await,
                format!("{}\n", sub.display()),
                "{context}"
            );
            assert_eq!(
                r.stdout(&id, "sh -c 'echo $WC_KEPT'").await,
                "exported\n",
                "{context}: an export reaches child processes"
            );
            assert_eq!(r.stdout(&id, "echo ${WC_GONE-unset}").await, "unset\n");
            assert_eq!(r.stdout(&id, "umask").await, "0027\n", "{context}");
            assert_eq!(r.stdout(&id, "greet world").await, "hello world\n");
            assert_eq!(r.stdout(&id, "echo $plain").await, "42\n");
            // `$?` is the previous command's status, as at a prompt.
            assert_eq!(r.exec(&id, "false").await.exit_code, Some(1));
            assert_eq!(r.stdout(&id, "echo $?").await, "1\n", "{context}");
            // A syntax error is the command's failure, not the shell's end.
            let broken = r.exec(&id, "if then").await;
            assert_eq!(broken.exit_code, Some(2), "{context}: {broken:?}");
            assert_eq!(r.stdout(&id, "echo alive").await, "alive\n", "{context}");
            if dialect == Shell::Bash {
                // Top-level semantics: `declare` makes globals, `local` has no function.
                assert_eq!(r.stdout(&id, "declare -a list=(a b c)").await, "");
                assert_eq!(r.stdout(&id, "echo ${list[1]} ${#list[@]}").await, "b 3\n");
                let local = r.exec(&id, "local x=1").await;
                assert_eq!(local.exit_code, Some(1), "{local:?}");
                assert!(local.stderr.contains("function"), "{local:?}");
            }
            // The dialect asked for: bash, or a POSIX sh that is not bash (dash here).
            let bash = r.stdout(&id, "echo ${BASH_VERSION:+bash}").await;
            assert_eq!(bash == "bash\n", dialect == Shell::Bash, "{context}");
            assert_eq!(r.close(&id).await.state, ShellState::Closed);
        }
    }
}

#[tokio::test]
async fn the_result_is_the_commands_exit_status_not_the_shells() {
    for mode in MODES {
        let r = runner(mode);
        let id = r.open(Shell::Sh).await;
        for (command, status) in [
            ("true", 0),
            ("false", 1),
            ("sh -c 'exit 7'", 7),
            ("(exit 42)", 42),
            ("nonexistent-command-wc", 127),
        ] {
            let result = r.exec(&id, command).await;
            assert_eq!(
                result.exit_code,
                Some(status),
                "{mode:?} {command}: {result:?}"
            );
            assert!(!result.timed_out && !result.recovered);
        }
        assert_eq!(r.status(&id).await.state, ShellState::Ready);
    }
}

#[tokio::test]
async fn output_that_imitates_a_report_and_writes_to_the_control_descriptor_changes_nothing() {
    for mode in MODES {
        for dialect in [Shell::Sh, Shell::Bash] {
            let r = runner(mode);
            let id = r.open(dialect).await;
            let fake = "0123456789abcdef0123456789abcdef 0";
            let result = r
                .exec(
                    &id,
                    &format!(
                        "echo '{fake}'; echo '{fake}' >&2; printf '%s 0\\n' \
                         $(od -An -N16 -tx1 /dev/urandom | tr -d ' \\n'); \
                         echo '{fake}' >&9; echo done"
                    ),
                )
                .await;
            let context = format!("{mode:?} {dialect:?}: {result:?}");
            // The write to descriptor 9 fails: the command does not have it.
            assert_eq!(result.exit_code, Some(0), "{context}");
            assert!(result.stdout.starts_with(&format!("{fake}\n")), "{context}");
            assert!(result.stdout.ends_with("done\n"), "{context}");
            assert!(result.stderr.starts_with(&format!("{fake}\n")), "{context}");
            assert!(result.stderr.lines().count() == 2, "{context}");
            // What a command's processes inherit: the standard streams (and the sandbox's
            // gate and status descriptors), never the control or the program pipe.
            let fds = r.stdout(&id, "ls /proc/self/fd").await;
            let fds: Vec<&str> = fds.lines().collect();
            assert!(!fds.contains(&"9"), "{mode:?} {dialect:?}: {fds:?}");
            let stdin = r.stdout(&id, "readlink /proc/self/fd/0").await;
            assert_eq!(stdin, "/dev/null\n");
            assert_eq!(r.stdout(&id, "echo still in step").await, "still in step\n");
        }
    }
}

#[tokio::test]
async fn stdout_and_stderr_are_bounded_independently() {
    for mode in MODES {
        let r = runner(mode);
        let id = r.open(Shell::Bash).await;
        let mut work = r.exec_item(&id, "head -c 1000 /dev/zero | tr '\\0' a; echo err >&2");
        work.limits.output_bytes_per_stream = 100;
        let answer = answered(r.run(&work).await);
        let result = answer.exec.unwrap();
        assert_eq!(result.stdout, "a".repeat(100));
        assert_eq!(result.stdout_bytes, 1000);
        assert!(result.stdout_truncated);
        assert_eq!(result.stderr, "err\n");
        assert_eq!(result.stderr_bytes, 4);
        assert!(!result.stderr_truncated);

        // Ten megabytes, kept in part, counted whole, and the shell goes on.
        let mut work = r.exec_item(&id, "head -c 10000000 /dev/zero");
        work.limits.output_bytes_per_stream = 1024;
        let result = answered(r.run(&work).await).exec.unwrap();
        assert_eq!(result.exit_code, Some(0));
        assert_eq!(result.stdout_bytes, 10_000_000);
        assert_eq!(result.stdout.len(), 1024);
        assert!(result.stdout_truncated);
        assert_eq!(r.stdout(&id, "echo after").await, "after\n");
    }
}

#[tokio::test]
async fn stdin_is_empty_without_text_and_the_given_text_exactly_with_it() {
    for mode in MODES {
        let r = runner(mode);
        let id = r.open(Shell::Sh).await;
        // No text: a reader gets end-of-file at once.
        assert_eq!(r.stdout(&id, "cat").await, "");
        let mut work = r.exec_item(&id, "cat; echo; cat");
        let text = "first line\nit's the last, no newline";
        work.stdin = Some(text.into());
        let result = answered(r.run(&work).await).exec.unwrap();
        assert_eq!(result.stdout, format!("{text}\n"), "{mode:?}");
        // The next command's stdin is empty again, and the text's file is gone.
        assert_eq!(r.stdout(&id, "cat").await, "");
        assert_eq!(r.stdout(&id, "read line; echo \"[$line]\"").await, "[]\n");
    }
}

// ---------------------------------------------------------------------------------------------
// Timeouts, cancels, resets

#[tokio::test]
async fn a_timed_out_command_is_interrupted_and_the_shell_keeps_its_state() {
    for mode in MODES {
        for dialect in [Shell::Sh, Shell::Bash] {
            let r = runner(mode);
            let id = r.open(dialect).await;
            assert_eq!(r.stdout(&id, "cd sub; kept=yes").await, "");
            let mut work = r.exec_item(&id, "echo before; sleep 100");
            // Time enough for the sleep to start, so the interrupt finds it.
            work.limits.timeout_ms = 1000;
            let answer = answered(r.run(&work).await);
            let context = format!("{mode:?} {dialect:?}: {answer:?}");
            assert_eq!(answer.state, ShellState::Ready, "{context}");
            let result = answer.exec.unwrap();
            assert!(result.timed_out && result.recovered, "{context}");
            assert_eq!(result.exit_code, None);
            assert_eq!(result.stdout, "before\n");
            assert_eq!(
                r.stdout(&id, "echo $kept; pwd").await,
                format!("yes\n{}\n", r.root.join("sub").display()),
                "{context}"
            );
        }
    }
}

#[tokio::test]
async fn a_cancelled_command_is_interrupted_and_the_shell_stays_ready() {
    for mode in MODES {
        let r = runner(mode);
        let id = r.open(Shell::Bash).await;
        let (stop, cancel) = watch::channel(false);
        let work = r.exec_item(&id, "sleep 100");
        let (outcome, ()) = tokio::join!(r.run_with(&work, cancel), async {
            await_program(&r, "sleep", 1).await;
            stop.send(true).unwrap();
        });
        let answer = answered(outcome);
        assert_eq!(answer.state, ShellState::Ready, "{mode:?}: {answer:?}");
        let result = answer.exec.unwrap();
        assert!(!result.timed_out && result.recovered, "{result:?}");
        assert_eq!(r.stdout(&id, "echo next").await, "next\n");
    }
}

#[tokio::test]
async fn a_command_that_outlives_its_interrupt_poisons_the_shell_and_ends_every_process() {
    for mode in MODES {
        for command in ["trap '' INT; sleep 100", "while :; do :; done"] {
            let r = runner(mode);
            let id = r.open(Shell::Sh).await;
            let mut work = r.exec_item(&id, command);
            work.limits.timeout_ms = 500;
            let (outcome, pids) = tokio::join!(r.run(&work), async {
                // The shell's processes while the command runs, to be looked for afterwards.
                tokio::time::sleep(Duration::from_millis(200)).await;
                r.processes()
            });
            let answer = answered(outcome);
            let context = format!("{mode:?} {command}: {answer:?}");
            assert_eq!(answer.state, ShellState::Poisoned, "{context}");
            let result = answer.exec.unwrap();
            assert!(result.timed_out && !result.recovered, "{context}");
            assert!(!pids.is_empty(), "{context}");
            assert_all_ended(&pids).await;
            assert!(r.processes().is_empty(), "{context}");
            // Never written to again.
            let later = r.exec_answer(&id, "echo again").await;
            assert_eq!(later.state, ShellState::Poisoned);
            assert!(later.exec.is_none());
            assert_eq!(r.status(&id).await.state, ShellState::Poisoned);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The shell's own end

#[tokio::test]
async fn a_shell_that_exits_or_execs_another_program_has_exited() {
    for mode in MODES {
        for (command, status) in [("echo bye; exit 3", 3), ("exec true", 0)] {
            let r = runner(mode);
            let id = r.open(Shell::Bash).await;
            let answer = r.exec_answer(&id, command).await;
            let context = format!("{mode:?} {command}: {answer:?}");
            assert_eq!(answer.state, ShellState::Exited, "{context}");
            assert!(
                answer.detail.as_deref().unwrap().contains("exited"),
                "{context}"
            );
            let result = answer.exec.unwrap();
            assert_eq!(result.exit_code, Some(status), "{context}");
            if status == 3 {
                assert_eq!(result.stdout, "bye\n");
            }
            assert_eq!(r.status(&id).await.state, ShellState::Exited);
            assert_eq!(r.exec_answer(&id, "true").await.state, ShellState::Exited);
            assert_all_ended(&r.processes()).await;
        }
    }
}

#[tokio::test]
async fn a_shell_killed_between_commands_is_exited_on_its_next_status() {
    for mode in MODES {
        let r = runner(mode);
        let id = r.open(Shell::Sh).await;
        // The shell kills itself after the command has reported.
        assert_eq!(r.stdout(&id, "(sleep 0.2; kill -9 $$) &").await, "");
        let deadline = tokio::time::Instant::now() + HANG;
        loop {
            let status = r.status(&id).await;
            if status.state == ShellState::Exited {
                assert!(status.detail.unwrap().contains("signal 9"));
                break;
            }
            assert_eq!(status.state, ShellState::Ready, "{mode:?}");
            assert!(
                tokio::time::Instant::now() < deadline,
                "the shell never died"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test]
async fn daemons_holding_the_output_pipes_neither_hang_a_command_nor_the_next() {
    for mode in MODES {
        let r = runner(mode);
        let id = r.open(Shell::Bash).await;
        assert_eq!(r.stdout(&id, "(sleep 100 &) ; echo hi").await, "hi\n");
        assert_eq!(r.stdout(&id, "nohup sleep 100 >/dev/null 2>&1 &").await, "");
        // A daemon that keeps writing, also between commands: what it writes while a command
        // runs is that command's output, the rest is dropped, and nobody blocks.
        let noisy = "(while :; do echo noise; sleep 0.01; done &)";
        assert_eq!(r.exec(&id, noisy).await.exit_code, Some(0));
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let result = r.exec(&id, "echo next").await;
            assert_eq!(result.exit_code, Some(0));
            let mut lines: Vec<&str> = result.stdout.lines().collect();
            lines.retain(|l| *l != "noise");
            assert_eq!(lines, ["next"], "{mode:?}: {result:?}");
            assert!(result.stdout_bytes < 1000, "{mode:?}: {result:?}");
        }
        let pids = r.processes();
        assert_eq!(r.close(&id).await.state, ShellState::Closed);
        assert_all_ended(&pids).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Open, status, close, concurrency

#[tokio::test]
async fn open_starts_in_the_cwd_and_refuses_directories_it_cannot_use() {
    for mode in MODES {
        let r = runner(mode);
        let (id, answer) = r.open_in(Shell::Sh, Some("sub")).await;
        assert_eq!(answer.state, ShellState::Ready);
        assert_eq!(answer.cwd.as_ref().map(RelativePath::as_str), Some("sub"));
        assert_eq!(
            r.stdout(&id, "pwd").await,
            format!("{}\n", r.root.join("sub").display())
        );
        // Opening the same id again answers the shell as it is.
        let again = item(ShellOp::ShellOpen(ShellOpenOp {
            target: r.target(&id),
            shell: Shell::Sh,
        }));
        let answer = answered(r.run(&again).await);
        assert_eq!(answer.state, ShellState::Ready);
        assert_eq!(answer.cwd.as_ref().map(RelativePath::as_str), Some("sub"));

        std::os::unix::fs::symlink("/", r.root.join("out")).unwrap();
        for (cwd, kind) in [
            ("missing", OpErrorKind::NotFound),
            ("out", OpErrorKind::PathOutsideRoot),
        ] {
            let mut work = item(ShellOp::ShellOpen(ShellOpenOp {
                target: r.target(&ShellId::generate()),
                shell: Shell::Sh,
            }));
            work.cwd = Some(RelativePath::parse(cwd).unwrap());
            assert_eq!(rejected(r.run(&work).await), kind, "{cwd}");
        }
        let mut elsewhere = item(ShellOp::ShellOpen(ShellOpenOp {
            target: r.target(&ShellId::generate()),
            shell: Shell::Sh,
        }));
        elsewhere.project = "api".into();
        assert_eq!(
            rejected(r.run(&elsewhere).await),
            OpErrorKind::ProjectUnavailable
        );
    }
}

#[tokio::test]
async fn work_for_a_shell_this_instance_does_not_hold_is_answered_lost() {
    let r = runner(SandboxMode::Off);
    let unknown = ShellId::generate();
    assert_eq!(
        r.exec_answer(&unknown, "true").await.state,
        ShellState::Lost
    );
    assert_eq!(r.status(&unknown).await.state, ShellState::Lost);
    assert_eq!(r.close(&unknown).await.state, ShellState::Closed);

    let id = r.open(Shell::Sh).await;
    let other_instance = ShellTarget {
        shell_id: id.clone(),
        instance_id: Uuid::now_v7(),
    };
    let work = item(ShellOp::ShellExec(ShellExecOp {
        target: other_instance.clone(),
        command: "true".into(),
    }));
    assert_eq!(answered(r.run(&work).await).state, ShellState::Lost);
    let status = item(ShellOp::ShellStatus(other_instance));
    assert_eq!(answered(r.run(&status).await).state, ShellState::Lost);
    // The shell itself is untouched.
    assert_eq!(r.stdout(&id, "echo mine").await, "mine\n");

    // Work for a project this host does not serve is refused before any shell is touched.
    let mut elsewhere = r.exec_item(&id, "true");
    elsewhere.project = "api".into();
    assert_eq!(
        rejected(r.run(&elsewhere).await),
        OpErrorKind::ProjectUnavailable
    );
}

#[tokio::test]
async fn a_second_command_is_refused_busy_and_a_close_ends_the_running_one() {
    for mode in MODES {
        let r = runner(mode);
        let id = r.open(Shell::Bash).await;
        let running = r.exec_item(&id, "sleep 100");
        let (first, ()) = tokio::join!(r.run(&running), async {
            await_program(&r, "sleep", 1).await;
            assert_eq!(r.status(&id).await.state, ShellState::Busy);
            let second = r.run(&r.exec_item(&id, "echo two")).await;
            assert_eq!(rejected(second), OpErrorKind::ShellBusy);
            let pids = r.processes();
            assert_eq!(r.close(&id).await.state, ShellState::Closed);
            assert_all_ended(&pids).await;
        });
        let first = answered(first);
        assert_eq!(first.state, ShellState::Closed, "{mode:?}: {first:?}");
        assert_eq!(first.exec.unwrap().exit_code, None);
        // Closing is idempotent; a closed shell takes no more commands.
        assert_eq!(r.close(&id).await.state, ShellState::Closed);
        assert_eq!(r.exec_answer(&id, "true").await.state, ShellState::Closed);
    }
}

#[tokio::test]
async fn closing_and_releasing_shells_kill_every_process_they_started() {
    for mode in MODES {
        let r = runner(mode);
        let id = r.open(Shell::Sh).await;
        assert_eq!(
            r.stdout(&id, "sleep 1000 & setsid sleep 1000 & (sleep 1000 &)")
                .await,
            ""
        );
        await_program(&r, "sleep", 3).await;
        let pids = r.processes();
        assert_eq!(r.close(&id).await.state, ShellState::Closed);
        assert_all_ended(&pids).await;

        // Every shell of a runner that stops, and every shell of a dropped registry.
        let a = r.open(Shell::Sh).await;
        let b = r.open(Shell::Bash).await;
        for id in [&a, &b] {
            assert_eq!(r.stdout(id, "sleep 1000 &").await, "");
        }
        let pids = r.processes();
        r.shells.close_all();
        assert_eq!(r.status(&a).await.state, ShellState::Closed);
        assert_all_ended(&pids).await;
        let (late, answer) = r.open_in(Shell::Sh, None).await;
        assert_eq!(
            answer.state,
            ShellState::Closed,
            "{late}: no shell opens any more"
        );

        let r = runner(mode);
        let id = r.open(Shell::Bash).await;
        assert_eq!(r.stdout(&id, "sleep 1000 &").await, "");
        let pids = r.processes();
        let root = r.root.clone();
        drop(r.shells);
        assert_all_ended(&pids).await;
        assert!(processes_under(&root).is_empty());
    }
}

/// What the shell's own code may set up to make a failing command look successful: every
/// builtin the framing could lean on redefined, traps, options, redirections, aliases, a
/// poisoned `PATH`, disabled builtins, reading ahead of the program. After each, a failing
/// command is never reported a proven success: it reports its real status, or says its status
/// is unproven, or the shell is reset.
#[tokio::test]
async fn nothing_a_shell_defines_makes_a_failing_command_report_a_proven_success() {
    // (dialects it applies to, the set-up, which statuses may stay proven).
    let both = &[Shell::Sh, Shell::Bash][..];
    let bash = &[Shell::Bash][..];
    let attacks: &[(&[Shell], &str)] = &[
        (both, "command() { return 0; }"),
        // Passes the report through, fakes everything else.
        (
            both,
            "command() { if [ \"$1\" = printf ]; then shift; printf \"$@\"; else return 0; fi; }",
        ),
        (
            bash,
            "printf() { if [ \"$1\" = '%s %d %s\\n' ]; then builtin printf '%s 0 proven\\n' \"$2\"; else builtin printf \"$@\"; fi; }",
        ),
        (both, "printf() { :; }; echo() { :; }"),
        (both, "false() { return 0; }; unset -f false"),
        (bash, "builtin() { return 0; }"),
        (
            bash,
            "eval() { return 0; }; trap() { :; }; unset() { :; }; set() { :; }",
        ),
        (bash, "exit() { :; }; enable() { :; }; shopt() { :; }"),
        (bash, "function /usr/bin/printf { :; }"),
        (
            bash,
            "alias command=true eval=true printf=true; shopt -s expand_aliases",
        ),
        (bash, "enable -n command printf echo eval"),
        (bash, "enable -n enable"),
        (
            bash,
            "trap 'printf \"%s 0 proven\\n\" x >&9 2>/dev/null' DEBUG RETURN ERR",
        ),
        (bash, "set -T; trap ':' DEBUG"),
        (bash, "shopt -s extdebug; trap 'return 1' DEBUG"),
        (bash, "PROMPT_COMMAND='printf ok >&9'"),
        (bash, "readonly POSIXLY_CORRECT"),
        (
            bash,
            "mkdir -p /tmp/evil && printf '#!/bin/sh\\necho fake 0 proven\\n' > /tmp/evil/printf && chmod +x /tmp/evil/printf && PATH=/tmp/evil:$PATH && hash -p /tmp/evil/printf printf",
        ),
        (bash, "set -o history"),
        (both, "set -v"),
        (both, "set -x"),
        (both, "set -u"),
        (
            both,
            "trap 'printf \"%s 0 proven\\n\" x >&9' INT TERM USR1 EXIT",
        ),
        (both, "exec 9>/dev/null"),
        (both, "exec 9>&1"),
        (
            both,
            "for fd in 10 11 12 13 14 15 16 17 18 19; do eval \"exec $fd>&-\"; done",
        ),
        // Reading ahead of the program (the rest of a frame) from every descriptor the shell
        // may keep it on.
        (
            both,
            "for fd in 0 3 4 5 6 7 8 10 11 12 13 14 15; do eval \"dd bs=1 count=300 <&$fd 2>/dev/null\"; done >/dev/null",
        ),
    ];
    for (dialects, setup) in attacks {
        for &dialect in *dialects {
            let r = runner(SandboxMode::Bubblewrap);
            let id = r.open(dialect).await;
            // A set-up that waits on the program pipe waits until its time runs out.
            let mut work = r.exec_item(&id, setup);
            work.limits.timeout_ms = 2000;
            let _ = r.run(&work).await;
            // Programs no set-up redefines: their real status is never 0.
            for probe in ["/bin/false", "/bin/sh -c 'exit 3'"] {
                let answer = r.exec_answer(&id, probe).await;
                let ran = answer.exec.as_ref();
                let forged = ran.is_some_and(|e| e.exit_code == Some(0) && e.status_proven);
                assert!(
                    !forged,
                    "{dialect:?} after {setup:?}: {probe} reported a proven success: {answer:?}"
                );
                if let Some(e) = ran
                    && e.status_proven
                    && answer.state == ShellState::Ready
                {
                    assert_ne!(e.exit_code, Some(0), "{dialect:?} {setup:?} {probe}");
                }
                if answer.state != ShellState::Ready {
                    break;
                }
            }
        }
    }
}

#[tokio::test]
async fn an_ordinary_shell_proves_its_statuses_in_both_dialects() {
    let r = runner(SandboxMode::Bubblewrap);
    for dialect in [Shell::Sh, Shell::Bash] {
        let id = r.open(dialect).await;
        for (command, code) in [
            ("true", 0),
            ("false", 1),
            ("(exit 7)", 7),
            ("f() { return 4; }; f", 4),
        ] {
            let e = r.exec(&id, command).await;
            assert_eq!(
                (e.exit_code, e.status_proven),
                (Some(code), true),
                "{dialect:?} {command}"
            );
        }
        // $? carries over, and a frame's own variables do not stay behind it.
        let e = r.exec(&id, "false").await;
        assert_eq!(e.exit_code, Some(1));
        assert_eq!(r.stdout(&id, "echo \"$?\"").await, "1\n");
        let names = "set | grep -o '^_wc_[a-z0-9]*' || true";
        let first = r.stdout(&id, names).await;
        let second = r.stdout(&id, names).await;
        assert!(
            first.lines().all(|n| !second.lines().any(|m| m == n)),
            "{dialect:?}: {first} stayed: {second}"
        );
        r.close(&id).await;
    }
}
