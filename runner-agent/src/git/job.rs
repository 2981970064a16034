//! Running the `git` binary for work the runner answers itself: always as a job
//! ([`exec::execute`]), never in the runner's own process. A repository's configuration and
//! hooks can name programs for Git to run (`core.fsmonitor`, `core.pager`, diff drivers,
//! hooks); as a job they run in the sandbox, with the allow-list environment, within the
//! work's time left, and stop with it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use tokio::sync::{mpsc, watch};
use wc_runner_protocol::{
    OpErrorKind, PROTOCOL_VERSION, Stream, Termination, WorkItem, WorkLimits, WorkSpec,
};

use crate::answer::{Ended, Refusal};
use crate::exec::{self, Host, OutputPiece, StopPolicy};

/// Git's error text kept for a message or a classification.
const GIT_STDERR_BYTES: usize = 4096;

/// Options before every Git command: take no optional lock (a read never writes the index),
/// and never start a file-system monitor (a program the repository's configuration could
/// name). Paths reach Git only through [`GitJobs::pathspecs`].
const GLOBAL_OPTIONS: [&str; 3] = ["--no-optional-locks", "-c", "core.fsmonitor=false"];

/// The files an edit killed mid-write may leave beside its target ([`crate::beneath::TEMP_PREFIX`]),
/// and a checkpoint's temporary index with its lock: never staged.
const EDIT_LEFTOVERS: [&str; 2] = [".wc-edit-*.tmp", ".wc-edit-*.tmp.lock"];

/// Where and for how long Git commands of one work item run.
pub(crate) struct GitJobs<'a> {
    /// The work they are part of (its id and project).
    pub(crate) item: &'a WorkItem,
    /// The host, its projects and sandbox.
    pub(crate) host: &'a Host,
    /// How a stop escalates.
    pub(crate) policy: &'a StopPolicy,
    /// Turns `true` when the work is to stop.
    pub(crate) cancel: watch::Receiver<bool>,
    /// When the work's time runs out.
    pub(crate) deadline: Instant,
    /// The paths hidden from the project, relative to its root: Git never shows, stages or
    /// commits them.
    pub(crate) hidden: &'a [PathBuf],
}

/// One Git command: its arguments after the global options, its standard input and its
/// environment additions (the job's allow-list environment holds no other `GIT_*` variable).
#[derive(Default)]
pub(crate) struct Command<'a> {
    pub(crate) args: Vec<&'a str>,
    pub(crate) stdin: Option<String>,
    pub(crate) env: Vec<(&'static str, String)>,
    /// Bytes of standard output kept; the rest is counted and flagged.
    pub(crate) stdout_bytes: u64,
}

impl<'a> Command<'a> {
    /// `git <args>`, keeping `stdout_bytes` of its output.
    pub(crate) fn new(args: &[&'a str], stdout_bytes: u64) -> Self {
        Command {
            args: args.to_vec(),
            stdout_bytes,
            ..Command::default()
        }
    }
}

/// What a Git command that ran printed, and how it exited.
pub(crate) struct Finished {
    /// Its exit code (`None` when a signal ended it).
    pub(crate) exit_code: Option<i32>,
    /// Kept standard output.
    pub(crate) stdout: Vec<u8>,
    /// More standard output was printed than kept.
    pub(crate) stdout_truncated: bool,
    /// The beginning of its standard error.
    pub(crate) stderr: String,
}

impl Finished {
    /// Whether it exited with 0.
    pub(crate) fn succeeded(&self) -> bool {
        self.exit_code == Some(0)
    }

    /// What it said on either stream, for a message (stderr first).
    pub(crate) fn said(&self) -> String {
        let out = String::from_utf8_lossy(&self.stdout);
        let mut said = self.stderr.trim().to_owned();
        let out = out.trim();
        if !out.is_empty() {
            if !said.is_empty() {
                said.push('\n');
            }
            said.push_str(out);
        }
        said
    }

    /// The error this failed command stands for: outside a work tree, or Git's own words.
    pub(crate) fn error(&self) -> GitError {
        if self
            .stderr
            .to_ascii_lowercase()
            .contains("not a git repository")
        {
            return GitError::NotARepository;
        }
        GitError::Unavailable(format!(
            "git exited with {}: {}",
            self.exit_code
                .map_or("a signal".to_owned(), |c| c.to_string()),
            self.stderr.trim()
        ))
    }
}

/// Why a Git command gave no answer.
pub(crate) enum GitError {
    /// The work's time ran out, or it was asked to stop.
    Interrupted(Ended),
    /// The project root is not inside a Git work tree.
    NotARepository,
    /// Git cannot run here, or failed; the words say which.
    Unavailable(String),
}

impl From<GitError> for Ended {
    fn from(e: GitError) -> Self {
        match e {
            GitError::Interrupted(ended) => ended,
            GitError::NotARepository => Ended::Refused(Refusal::new(
                OpErrorKind::NotARepository,
                "the project root is not inside a Git work tree",
            )),
            GitError::Unavailable(why) => {
                Ended::Refused(Refusal::new(OpErrorKind::GitUnavailable, why))
            }
        }
    }
}

impl From<Refusal> for GitError {
    fn from(r: Refusal) -> Self {
        GitError::Interrupted(Ended::Refused(r))
    }
}

impl GitJobs<'_> {
    /// `--` and the pathspecs of the project paths `paths` (`""` is the root): each read as a
    /// literal path (no glob or magic in a file name is expanded), then every path hidden from
    /// the project excluded.
    pub(crate) fn pathspecs(&self, paths: &[&str]) -> Vec<String> {
        let mut specs = vec!["--".to_owned()];
        specs.extend(paths.iter().map(|p| {
            let p = if p.is_empty() { "." } else { p };
            format!(":(literal){p}")
        }));
        specs.extend(
            self.hidden
                .iter()
                .filter_map(|h| h.to_str())
                .map(|h| format!(":(exclude,literal){h}")),
        );
        specs
    }

    /// [`Self::pathspecs`] of what may be staged: also never an edit's leftover file.
    pub(crate) fn stageable(&self, paths: &[&str]) -> Vec<String> {
        let mut specs = self.pathspecs(paths);
        specs.extend(
            EDIT_LEFTOVERS
                .iter()
                .map(|glob| format!(":(exclude,glob)**/{glob}")),
        );
        specs
    }

    /// `--` and the pathspecs of everything that must never be staged: the hidden paths and
    /// the edits' leftovers, as positive pathspecs (for `git reset`).
    pub(crate) fn never_staged(&self) -> Vec<String> {
        let mut specs = vec!["--".to_owned()];
        specs.extend(
            self.hidden
                .iter()
                .filter_map(|h| h.to_str())
                .map(|h| format!(":(literal){h}")),
        );
        specs.extend(
            EDIT_LEFTOVERS
                .iter()
                .map(|glob| format!(":(glob)**/{glob}")),
        );
        specs
    }

    /// Runs `git <args>` and keeps `stdout_bytes` of its output; a non-zero exit is an error.
    pub(crate) async fn output(
        &self,
        args: &[&str],
        stdout_bytes: u64,
    ) -> Result<Finished, GitError> {
        let finished = self.run(Command::new(args, stdout_bytes)).await?;
        if !finished.succeeded() {
            return Err(finished.error());
        }
        Ok(finished)
    }

    /// Runs one Git command in the project root as a job. The C locale keeps Git's messages
    /// the ones matched here. Any exit is [`Finished`]; only a command that could not run or
    /// was stopped is an error.
    pub(crate) async fn run(&self, command: Command<'_>) -> Result<Finished, GitError> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        let timeout_ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX);
        if timeout_ms == 0 {
            return Err(GitError::Interrupted(Ended::TimedOut));
        }
        let argv: Vec<String> = std::iter::once("git")
            .chain(GLOBAL_OPTIONS)
            .chain(command.args.iter().copied())
            .map(str::to_owned)
            .collect();
        let mut env = BTreeMap::from([
            ("LC_ALL".to_owned(), "C".to_owned()),
            // A credential or passphrase prompt would wait for a terminal no job has.
            ("GIT_TERMINAL_PROMPT".to_owned(), "0".to_owned()),
        ]);
        env.extend(command.env.into_iter().map(|(k, v)| (k.to_owned(), v)));
        let job = WorkItem {
            protocol_version: PROTOCOL_VERSION,
            work_id: self.item.work_id,
            project: self.item.project.clone(),
            cwd: None,
            spec: WorkSpec::Process { argv },
            stdin: command.stdin,
            env,
            limits: WorkLimits {
                timeout_ms,
                output_bytes_per_stream: command.stdout_bytes.max(1),
            },
        };
        let (tx, mut rx) = mpsc::channel::<OutputPiece>(64);
        let collect = async {
            let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
            while let Some(piece) = rx.recv().await {
                match piece.stream {
                    Stream::Stdout => stdout.extend_from_slice(&piece.data),
                    Stream::Stderr if stderr.len() < GIT_STDERR_BYTES => {
                        stderr.extend_from_slice(&piece.data)
                    }
                    Stream::Stderr => {}
                }
            }
            (stdout, stderr)
        };
        let (outcome, (stdout, stderr)) = tokio::join!(
            exec::execute(&job, self.host, self.cancel.clone(), tx, self.policy),
            collect
        );
        let stderr =
            String::from_utf8_lossy(&stderr[..stderr.len().min(GIT_STDERR_BYTES)]).into_owned();
        match outcome.termination {
            Termination::Exited => Ok(Finished {
                exit_code: outcome.exit_code,
                stdout,
                stdout_truncated: outcome.stdout_truncated,
                stderr,
            }),
            Termination::TimedOut => Err(GitError::Interrupted(Ended::TimedOut)),
            Termination::Cancelled => Err(GitError::Interrupted(Ended::Cancelled)),
            Termination::Rejected | Termination::SpawnFailed => {
                Err(GitError::Unavailable(format!(
                    "git cannot be run here: {}",
                    outcome.error.unwrap_or_default()
                )))
            }
        }
    }

    /// The project root's place in its work tree (`sub/dir/`, empty at the top), which Git's
    /// repository-relative paths start with. Refuses a root outside any work tree.
    pub(crate) async fn prefix(&self) -> Result<String, GitError> {
        let out = self
            .output(&["rev-parse", "--show-prefix"], 64 * 1024)
            .await?;
        let prefix = String::from_utf8_lossy(&out.stdout);
        Ok(prefix.trim_end_matches('\n').to_owned())
    }
}

/// `text` cut to at most `max` bytes on a character boundary.
pub(crate) fn bounded(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}
