//! Execution of one work item on this host: confinement, spawn, output capture, limits and stop.
//!
//! [`execute`] runs a [`WorkItem`] to its end and always answers with a [`WorkOutcome`]; a
//! refusal or a failed start is an outcome too, never an error. Invariants:
//!
//! - nothing starts before [`WorkItem::validate`] and [`confine::resolve_cwd`] pass;
//! - the runner's own secrets never reach a child (the rule is `inherited`);
//! - each child leads its own process group, and every signal the runner sends goes to the
//!   whole group, so the background processes of a command end with it;
//! - at most `output_bytes_per_stream` bytes of each stream are kept (its head); the rest is read,
//!   counted and dropped, so a chatty child never blocks on a full pipe;
//! - when [`execute`] returns, the leader has been reaped and the rest of its group killed.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::{DirBuilder, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{mpsc, watch};
use tracing::Instrument as _;
use uuid::Uuid;
use wc_runner_protocol::{MAX_CHUNK_BYTES, Stream, Termination, WorkItem, WorkOutcome, WorkSpec};

use crate::confine;

/// Longest `error` text an outcome carries, in bytes.
const MAX_ERROR_BYTES: usize = 1000;

/// Kept output as the executor produces it: raw bytes at `offset` in `stream`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputPiece {
    /// Which stream.
    pub stream: Stream,
    /// Byte offset of `data[0]` in the stream.
    pub offset: u64,
    /// At most [`MAX_CHUNK_BYTES`] bytes.
    pub data: Vec<u8>,
}

/// Timing of the stop escalation and of the end of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopPolicy {
    /// How long the leader has to exit after SIGINT before SIGTERM follows.
    pub interrupt_grace: Duration,
    /// How long the leader has to exit after SIGTERM before SIGKILL follows.
    pub terminate_grace: Duration,
    /// How long the output pipes have to reach end-of-file once the leader has exited, before
    /// the rest of the group is killed.
    pub drain_after_exit: Duration,
}

impl Default for StopPolicy {
    fn default() -> Self {
        Self {
            interrupt_grace: Duration::from_secs(2),
            terminate_grace: Duration::from_secs(2),
            drain_after_exit: Duration::from_millis(500),
        }
    }
}

/// Executes one work item to its end.
///
/// `projects` maps runner-local project ids to their canonical roots. `cancel` turning `true`
/// stops the work (a dropped sender never does; `true` before the start means it never starts).
/// Kept output goes to `output` in order per stream; when the receiver is gone the work still
/// runs and the pieces are dropped. The receiver should be drained concurrently: a full channel
/// holds back reading, and output still unsent when the run ends may be lost.
///
/// Never panics on bad input and never fails: a refusal is [`Termination::Rejected`] and a
/// failed start [`Termination::SpawnFailed`], each with `error` naming the problem.
pub async fn execute(
    item: &WorkItem,
    projects: &BTreeMap<String, PathBuf>,
    cancel: watch::Receiver<bool>,
    output: mpsc::Sender<OutputPiece>,
    policy: &StopPolicy,
) -> WorkOutcome {
    let span = tracing::info_span!("execute", work_id = %item.work_id, project = %item.project);
    let outcome = run(item, projects, cancel, output, policy)
        .instrument(span.clone())
        .await;
    span.in_scope(|| {
        tracing::info!(
            termination = ?outcome.termination,
            exit_code = outcome.exit_code,
            signal = outcome.signal,
            error = outcome.error.as_deref(),
            duration_ms = outcome.duration_ms,
            "work ended"
        );
    });
    outcome
}

async fn run(
    item: &WorkItem,
    projects: &BTreeMap<String, PathBuf>,
    mut cancel: watch::Receiver<bool>,
    output: mpsc::Sender<OutputPiece>,
    policy: &StopPolicy,
) -> WorkOutcome {
    let started = Instant::now();
    if let Err(e) = item.validate() {
        return not_started(started, Termination::Rejected, Some(e.to_string()));
    }
    let cwd = match confine::resolve_cwd(projects, &item.project, item.cwd.as_deref()) {
        Ok(cwd) => cwd,
        Err(e) => return not_started(started, Termination::Rejected, Some(e.to_string())),
    };
    if *cancel.borrow() {
        return not_started(started, Termination::Cancelled, None);
    }

    // Held until the end of the run: `sh` and friends read a script while running it.
    let mut script_file = None;
    // The child's PATH: the work's own, else the runner's (PATH is never held back).
    let search_path = item
        .env
        .get("PATH")
        .map(OsString::from)
        .or_else(|| std::env::var_os("PATH"));
    let find = |name: &str| program_path(name, &cwd, search_path.as_deref());
    let (name, program, args): (&str, OsString, Vec<OsString>) = match &item.spec {
        WorkSpec::Process { argv } => (
            &argv[0],
            find(&argv[0]),
            argv[1..].iter().map(OsString::from).collect(),
        ),
        WorkSpec::Shell { shell, command } => (
            shell.program(),
            find(shell.program()),
            vec!["-c".into(), command.into()],
        ),
        WorkSpec::Script {
            interpreter,
            script,
            args,
        } => {
            let file = match ScriptFile::write(script) {
                Ok(file) => file,
                Err(e) => {
                    return not_started(
                        started,
                        Termination::SpawnFailed,
                        Some(format!("cannot write the script file: {e}")),
                    );
                }
            };
            let mut all = vec![file.path.clone().into_os_string()];
            all.extend(args.iter().map(OsString::from));
            script_file = Some(file);
            (interpreter, find(interpreter), all)
        }
    };

    let mut command = Command::new(&program);
    command
        // The child sees the name it was given, not the resolved path.
        .arg0(name)
        .args(&args)
        .current_dir(&cwd)
        .env_clear()
        .envs(std::env::vars_os().filter(|(k, _)| inherited(&k.to_string_lossy())))
        .envs(&item.env)
        .stdin(if item.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            return not_started(
                started,
                Termination::SpawnFailed,
                Some(format!("cannot start `{name}`: {e}")),
            );
        }
    };
    let Some(mut group) = ProcessGroup::of(&child) else {
        // Only a child already reaped has no id, and nothing has waited for this one yet.
        return not_started(
            started,
            Termination::SpawnFailed,
            Some(format!("`{name}` started without a process id")),
        );
    };
    tracing::debug!(pid = group.pgid.as_raw(), cwd = %cwd.display(), "work started");

    let feeder = tokio::spawn(feed(child.stdin.take(), item.stdin.clone()));
    let limit = item.limits.output_bytes_per_stream;
    let mut out = Capture::new(Stream::Stdout, limit, Some(output.clone()));
    let mut err = Capture::new(Stream::Stderr, limit, Some(output));
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let timeout = Duration::from_millis(item.limits.timeout_ms);

    let (termination, status) = {
        let mut pumps = pin!(async {
            tokio::join!(out.pump(stdout), err.pump(stderr));
        });
        let mut pumps_done = false;
        let ended = {
            let mut supervised = pin!(supervise(&mut child, &group, timeout, &mut cancel, policy));
            loop {
                tokio::select! {
                    ended = &mut supervised => break ended,
                    () = &mut pumps, if !pumps_done => pumps_done = true,
                }
            }
        };
        // The leader is reaped. Its pipes reach end-of-file once every process holding them
        // has gone, which a background process may never do on its own. Signalling the group
        // after the reap is sound: its id stays reserved while any member lives, and once none
        // does, the kernel hands the id out again only after the pid space wraps around.
        if !pumps_done {
            pumps_done = tokio::time::timeout(policy.drain_after_exit, &mut pumps)
                .await
                .is_ok();
        }
        group.kill();
        if !pumps_done
            && tokio::time::timeout(policy.drain_after_exit, &mut pumps)
                .await
                .is_err()
        {
            tracing::warn!(
                "output pipes stayed open after the process group was killed; a process left \
                 the group holding them, and its output is abandoned"
            );
        }
        ended
    };
    feeder.abort();
    drop(script_file);

    let (exit_code, signal, error) = match status {
        Ok(status) => (status.code(), status.signal(), None),
        Err(e) => (
            None,
            None,
            Some(bounded(format!("cannot wait for the process: {e}"))),
        ),
    };
    WorkOutcome {
        termination,
        exit_code,
        signal,
        error,
        duration_ms: millis(started.elapsed()),
        stdout_bytes: out.total,
        stderr_bytes: err.total,
        stdout_truncated: out.truncated(),
        stderr_truncated: err.truncated(),
    }
}

/// Whether the runner passes its environment variable `name` on to the work it runs.
///
/// Names starting with `WC_` (the runner's own settings, its token among them) or `AWS_`, and
/// names that look like they hold a secret (containing `TOKEN`, `SECRET`, `PASSWORD`,
/// `CREDENTIAL` or `PRIVATE_KEY`, or ending in `_KEY`) stay with the runner. The test is on the
/// upper-cased name, so `github_token` is held back like `GITHUB_TOKEN`. The work item's own
/// `env` additions are not subject to this rule: they were asked for.
fn inherited(name: &str) -> bool {
    const SECRET_WORDS: [&str; 5] = ["TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "PRIVATE_KEY"];
    let upper = name.to_ascii_uppercase();
    !(upper.starts_with("WC_")
        || upper.starts_with("AWS_")
        || upper.ends_with("_KEY")
        || SECRET_WORDS.iter().any(|word| upper.contains(word)))
}

/// The program to start for `argv[0]`: a relative path with a `/` is taken relative to the
/// work's cwd (where the work would find it), a bare name is looked up on the child's `PATH`
/// (`search_path`), and anything not found is left as given (starting it then fails with the
/// system's error). Handing the spawn an absolute path also lets the standard library start the
/// child with `posix_spawn` instead of copying this process with `fork`, which costs
/// milliseconds in a large process.
fn program_path(argv0: &str, cwd: &Path, search_path: Option<&std::ffi::OsStr>) -> OsString {
    let path = Path::new(argv0);
    if argv0.contains('/') {
        return if path.is_relative() {
            cwd.join(path).into_os_string()
        } else {
            argv0.into()
        };
    }
    search_path
        .into_iter()
        .flat_map(std::env::split_paths)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(argv0))
        .find(|candidate| is_executable_file(candidate))
        .map_or_else(|| argv0.into(), PathBuf::into_os_string)
}

fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// An outcome for work that never ran.
fn not_started(started: Instant, termination: Termination, error: Option<String>) -> WorkOutcome {
    WorkOutcome {
        termination,
        exit_code: None,
        signal: None,
        error: error.map(bounded),
        duration_ms: millis(started.elapsed()),
        stdout_bytes: 0,
        stderr_bytes: 0,
        stdout_truncated: false,
        stderr_truncated: false,
    }
}

/// Cuts an error text to [`MAX_ERROR_BYTES`] on a character boundary, marking the cut with `…`.
fn bounded(mut msg: String) -> String {
    if msg.len() > MAX_ERROR_BYTES {
        let mut end = MAX_ERROR_BYTES - '…'.len_utf8();
        while !msg.is_char_boundary(end) {
            end -= 1;
        }
        msg.truncate(end);
        msg.push('…');
    }
    msg
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Waits for the leader to exit, stopping its group when the time runs out or a stop is asked.
async fn supervise(
    child: &mut Child,
    group: &ProcessGroup,
    timeout: Duration,
    cancel: &mut watch::Receiver<bool>,
    policy: &StopPolicy,
) -> (Termination, io::Result<ExitStatus>) {
    let stop = tokio::select! {
        // An exit that races the deadline counts as an exit.
        biased;
        status = child.wait() => return (Termination::Exited, status),
        () = tokio::time::sleep(timeout) => Termination::TimedOut,
        () = stop_requested(cancel) => Termination::Cancelled,
    };
    tracing::info!(reason = ?stop, "stopping the process group");
    (stop, escalate(child, group, policy).await)
}

/// Resolves when `cancel` turns `true`; never, once its sender is gone without asking.
async fn stop_requested(cancel: &mut watch::Receiver<bool>) {
    if cancel.wait_for(|stop| *stop).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// SIGINT, then SIGTERM, then SIGKILL to the whole group, each after the leader failed to exit
/// within its grace period; answers the leader's exit status.
async fn escalate(
    child: &mut Child,
    group: &ProcessGroup,
    policy: &StopPolicy,
) -> io::Result<ExitStatus> {
    for (signal, grace) in [
        (Signal::SIGINT, policy.interrupt_grace),
        (Signal::SIGTERM, policy.terminate_grace),
    ] {
        group.signal(signal);
        if let Ok(status) = tokio::time::timeout(grace, child.wait()).await {
            return status;
        }
    }
    group.signal(Signal::SIGKILL);
    child.wait().await
}

/// The process group a child leads. Dropping it unfinished kills the group, so work whose
/// [`execute`] future is abandoned mid-run leaves nothing running.
struct ProcessGroup {
    pgid: Pid,
    armed: bool,
}

impl ProcessGroup {
    fn of(child: &Child) -> Option<Self> {
        let pid = i32::try_from(child.id()?).ok()?;
        Some(Self {
            pgid: Pid::from_raw(pid),
            armed: true,
        })
    }

    fn signal(&self, signal: Signal) {
        match killpg(self.pgid, signal) {
            // The group is already empty.
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => {
                tracing::warn!(pgid = self.pgid.as_raw(), %signal, error = %e, "cannot signal the process group")
            }
        }
    }

    /// Kills what is left of the group; the group is finished afterwards.
    fn kill(&mut self) {
        self.signal(Signal::SIGKILL);
        self.armed = false;
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if self.armed {
            self.signal(Signal::SIGKILL);
        }
    }
}

/// Writes the work's stdin and closes it. A child that exits without reading everything is not
/// an error: its stdin was offered.
async fn feed(stdin: Option<ChildStdin>, text: Option<String>) {
    let (Some(mut pipe), Some(text)) = (stdin, text) else {
        return;
    };
    match pipe.write_all(text.as_bytes()).await {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
        Err(e) => tracing::warn!(error = %e, "cannot write stdin"),
    }
}

/// The capture of one output stream: its head up to `limit` goes to `output`, all of it is
/// counted.
struct Capture {
    stream: Stream,
    limit: u64,
    total: u64,
    output: Option<mpsc::Sender<OutputPiece>>,
}

impl Capture {
    fn new(stream: Stream, limit: u64, output: Option<mpsc::Sender<OutputPiece>>) -> Self {
        Self {
            stream,
            limit,
            total: 0,
            output,
        }
    }

    fn truncated(&self) -> bool {
        self.total > self.limit
    }

    /// Reads `pipe` to its end.
    async fn pump(&mut self, pipe: Option<impl AsyncRead + Unpin>) {
        let Some(mut pipe) = pipe else {
            return;
        };
        // Reads of at most one chunk keep every piece within MAX_CHUNK_BYTES.
        let mut buf = vec![0; MAX_CHUNK_BYTES];
        loop {
            match pipe.read(&mut buf).await {
                Ok(0) => return,
                Ok(n) => self.take(&buf[..n]).await,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!(stream = ?self.stream, error = %e, "cannot read output");
                    return;
                }
            }
        }
    }

    async fn take(&mut self, bytes: &[u8]) {
        let offset = self.total;
        self.total += bytes.len() as u64;
        let room = usize::try_from(self.limit.saturating_sub(offset)).unwrap_or(usize::MAX);
        let kept = &bytes[..bytes.len().min(room)];
        if kept.is_empty() {
            return;
        }
        if let Some(output) = &self.output {
            let piece = OutputPiece {
                stream: self.stream,
                offset,
                data: kept.to_vec(),
            };
            if output.send(piece).await.is_err() {
                // Nobody listens any more; the work still runs to its end.
                self.output = None;
            }
        }
    }
}

/// A script body in a private file (0600 in a fresh 0700 directory under the system temporary
/// directory), removed with its directory when dropped.
struct ScriptFile {
    dir: PathBuf,
    path: PathBuf,
}

impl ScriptFile {
    fn write(body: &str) -> io::Result<Self> {
        let dir = std::env::temp_dir().join(format!("wc-script-{}", Uuid::new_v4()));
        // `create`, not `create_all`: a directory that already exists is someone else's.
        DirBuilder::new().mode(0o700).create(&dir)?;
        let file = Self {
            path: dir.join("script"),
            dir,
        };
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&file.path)?
            .write_all(body.as_bytes())?;
        Ok(file)
    }
}

impl Drop for ScriptFile {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.dir)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %self.dir.display(), error = %e, "cannot remove the script directory");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_and_runner_settings_are_not_inherited() {
        let held_back = [
            "WC_RUNNER_TOKEN",
            "WC_ANYTHING",
            "wc_lower",
            "AWS_REGION",
            "AWS_SECRET_ACCESS_KEY",
            "GITHUB_TOKEN",
            "github_token",
            "TOKENIZER_PATH",
            "MY_SECRET",
            "DB_PASSWORD",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "SSH_PRIVATE_KEY_PATH",
            "STRIPE_API_KEY",
            "api_key",
        ];
        for name in held_back {
            assert!(!inherited(name), "{name} must be held back");
        }
        let passed_on = [
            "PATH",
            "HOME",
            "LANG",
            "TERM",
            "KEYBOARD",
            "KEY",
            "MONKEY",
            "CARGO_HOME",
            "SWC_MODE",
            "XAWS_THING",
        ];
        for name in passed_on {
            assert!(inherited(name), "{name} must be passed on");
        }
    }

    #[test]
    fn long_errors_are_cut_on_a_character_boundary() {
        assert_eq!(bounded("short".into()), "short");
        let cut = bounded("é".repeat(800));
        assert!(cut.len() <= MAX_ERROR_BYTES, "{}", cut.len());
        assert!(cut.ends_with('…'));
        assert!(cut.starts_with("éé"));
    }

    #[test]
    fn relative_program_paths_are_taken_from_the_cwd_and_names_from_the_path() {
        let cwd = Path::new("/srv/web");
        assert_eq!(program_path("./build.sh", cwd, None), "/srv/web/./build.sh");
        assert_eq!(program_path("bin/tool", cwd, None), "/srv/web/bin/tool");
        assert_eq!(program_path("/usr/bin/env", cwd, None), "/usr/bin/env");
        let sh = program_path(
            "sh",
            cwd,
            Some("relative/dir:/nonexistent:/bin:/usr/bin".as_ref()),
        );
        assert!(
            Path::new(&sh).is_absolute() && Path::new(&sh).ends_with("sh"),
            "{sh:?}"
        );
        assert_eq!(
            program_path("no-such-program-here", cwd, Some("/bin:/usr/bin".as_ref())),
            "no-such-program-here",
            "left as given: starting it fails with the system's error"
        );
    }

    #[test]
    fn script_files_are_private_and_removed_on_drop() {
        use std::os::unix::fs::PermissionsExt as _;
        let file = ScriptFile::write("echo hi\n").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&file.dir), 0o700);
        assert_eq!(mode(&file.path), 0o600);
        assert_eq!(std::fs::read_to_string(&file.path).unwrap(), "echo hi\n");
        let dir = file.dir.clone();
        drop(file);
        assert!(!dir.exists());
    }
}
