//! Wire types shared by the wc functions and the runner agent. No I/O lives here.
//!
//! Every message carries [`PROTOCOL_VERSION`]; a peer refuses versions it does not speak.
#![warn(missing_docs)]

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

mod bounds;
pub use bounds::*;
mod answer;
pub use answer::*;
mod explore;
pub use explore::*;
mod edit;
pub use edit::*;
mod git;
pub use git::*;
mod checkpoint;
pub use checkpoint::*;
mod restore;
pub use restore::*;
mod summary;
pub use summary::*;
mod validate;
pub use validate::*;
mod shell;
pub use shell::*;
mod workspace;
pub use workspace::*;

/// Version of the runner protocol spoken by this build.
pub const PROTOCOL_VERSION: u32 = 1;

pub use wc_domain::{RelativePath, WorkState};

/// A runner protocol message refused before any effect: what was wrong, in words a person can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProtocolError {}

fn refuse<T>(msg: impl Into<String>) -> Result<T, ProtocolError> {
    Err(ProtocolError(msg.into()))
}

/// The shell that runs raw shell text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Shell {
    /// POSIX `sh`.
    #[default]
    Sh,
    /// GNU `bash`.
    Bash,
}

impl Shell {
    /// The program name.
    pub fn program(self) -> &'static str {
        match self {
            Shell::Sh => "sh",
            Shell::Bash => "bash",
        }
    }
}

/// What to execute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum WorkSpec {
    /// A program and its arguments, started without a shell.
    Process {
        /// `argv[0]` is the program (looked up on `PATH` when it has no `/`).
        argv: Vec<String>,
    },
    /// Raw shell text run by `sh -c` or `bash -c`.
    Shell {
        /// The shell.
        shell: Shell,
        /// The text (≤ [`MAX_SHELL_TEXT_BYTES`] on the model-facing surface).
        command: String,
    },
    /// A script body written to a private temporary file and run by an interpreter.
    Script {
        /// Interpreter program, e.g. `sh`, `bash`, `python3`.
        interpreter: String,
        /// Script text.
        script: String,
        /// Arguments after the script path.
        #[serde(default)]
        args: Vec<String>,
    },
    /// A read-only question about the project's files, answered by the runner itself
    /// ([`WorkOutcome::answer`]); only runners that announce [`WorkKind::Explore`] receive it.
    Explore(ExploreOp),
    /// A change to the project's files, made by the runner itself ([`WorkOutcome::answer`]);
    /// only runners that announce [`WorkKind::Edit`] receive it.
    Edit(EditOp),
    /// A Git operation on the project's repository, answered by the runner
    /// ([`WorkOutcome::answer`]); only runners that announce [`WorkKind::Git`] receive it.
    Git(GitOp),
    /// A toolchain's checker or test runner, run as a job in `cwd` and answered with what its
    /// output says ([`WorkOutcome::answer`] whatever the exit status); only runners that
    /// announce [`WorkKind::Validate`] receive it.
    Validate(ValidateOp),
    /// An operation on a persistent shell of a Workflow Session, answered by the runner that
    /// owns it ([`WorkOutcome::answer`] whatever the command's exit status); only runners
    /// that announce [`WorkKind::PersistentShell`] receive it.
    PersistentShell(ShellOp),
    /// A project opened on this host, or a managed worktree made or removed, by the runner
    /// itself ([`WorkOutcome::answer`]); only runners that announce [`WorkKind::Workspace`]
    /// receive it.
    Workspace(WorkspaceOp),
}

impl WorkSpec {
    /// The kind of work this is.
    pub fn kind(&self) -> WorkKind {
        match self {
            WorkSpec::Process { .. } => WorkKind::Process,
            WorkSpec::Shell { .. } => WorkKind::Shell,
            WorkSpec::Script { .. } => WorkKind::Script,
            WorkSpec::Explore(_) => WorkKind::Explore,
            WorkSpec::Edit(_) => WorkKind::Edit,
            WorkSpec::Git(_) => WorkKind::Git,
            WorkSpec::Validate(_) => WorkKind::Validate,
            WorkSpec::PersistentShell(_) => WorkKind::PersistentShell,
            WorkSpec::Workspace(_) => WorkKind::Workspace,
        }
    }
}

/// Limits the runner enforces on one work item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkLimits {
    /// Wall-clock limit; the process group is stopped when it passes.
    pub timeout_ms: u64,
    /// Bytes kept per output stream; the rest is counted and flagged, never kept.
    pub output_bytes_per_stream: u64,
}

/// One unit of work as the runner receives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkItem {
    /// Protocol version of the sender.
    pub protocol_version: u32,
    /// Work id.
    pub work_id: Uuid,
    /// The runner-local project id (the `<project>` of `agent:<client_id>:<project>`).
    pub project: String,
    /// Working directory relative to the project root; `None` is the root.
    pub cwd: Option<RelativePath>,
    /// What to run.
    pub spec: WorkSpec,
    /// Standard input, written then closed; `None` gives the child an empty stdin.
    #[serde(default)]
    pub stdin: Option<String>,
    /// Environment additions (the runner's own secrets are never inherited).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Limits.
    pub limits: WorkLimits,
}

impl WorkItem {
    /// Checks every bound and form the runner relies on. The runner calls this before anything
    /// starts; the functions call it before anything is queued.
    pub fn validate(&self) -> Result<(), ProtocolError> {
        if self.protocol_version != PROTOCOL_VERSION {
            return refuse(format!(
                "protocol version {} is not spoken here (this build speaks {PROTOCOL_VERSION})",
                self.protocol_version
            ));
        }
        if !valid_name(&self.project) {
            return refuse("project must be 1-64 of A-Z a-z 0-9 . _ -");
        }
        let mut wire = 0usize;
        match &self.spec {
            WorkSpec::Process { argv } => {
                if argv.is_empty() || argv[0].is_empty() {
                    return refuse("argv needs a program in argv[0]");
                }
                if argv.len() > MAX_ARGV_ITEMS {
                    return refuse(format!("argv has more than {MAX_ARGV_ITEMS} items"));
                }
                for (i, a) in argv.iter().enumerate() {
                    no_nul(&format!("argv[{i}]"), a)?;
                    wire += a.len();
                }
            }
            WorkSpec::Shell { command, .. } => {
                no_nul("command", command)?;
                if command
                    .chars()
                    .all(|c| matches!(c, ' ' | '\t' | '\n' | '\r' | '\u{b}' | '\u{c}'))
                {
                    return refuse("command is empty");
                }
                wire += command.len();
            }
            WorkSpec::Script {
                interpreter,
                script,
                args,
            } => {
                if !valid_interpreter(interpreter) {
                    return refuse(
                        "interpreter must be a program name (A-Z a-z 0-9 . _ - +, no path)",
                    );
                }
                no_nul("script", script)?;
                if script.len() > MAX_SCRIPT_BYTES {
                    return refuse(format!("script is over {MAX_SCRIPT_BYTES} bytes"));
                }
                if args.len() > MAX_ARGV_ITEMS {
                    return refuse(format!("args has more than {MAX_ARGV_ITEMS} items"));
                }
                for (i, a) in args.iter().enumerate() {
                    no_nul(&format!("args[{i}]"), a)?;
                }
            }
            WorkSpec::Explore(op) => {
                // Explore paths are relative to the root and nothing is started to read input.
                if self.cwd.is_some() || self.stdin.is_some() || !self.env.is_empty() {
                    return refuse("explore work takes no cwd, stdin or env");
                }
                op.validate()?;
            }
            WorkSpec::Edit(op) => {
                // Like explore work: paths from the root, nothing started to read input.
                if self.cwd.is_some() || self.stdin.is_some() || !self.env.is_empty() {
                    return refuse("edit work takes no cwd, stdin or env");
                }
                op.validate()?;
            }
            WorkSpec::Git(op) => {
                // Git work runs in the project root and takes its input from its op.
                if self.cwd.is_some() || self.stdin.is_some() || !self.env.is_empty() {
                    return refuse("git work takes no cwd, stdin or env");
                }
                op.validate()?;
            }
            WorkSpec::Validate(op) => {
                // The command line is built from the op; the caller adds no input to it.
                if self.stdin.is_some() || !self.env.is_empty() {
                    return refuse("validate work takes no stdin or env");
                }
                op.validate()?;
            }
            WorkSpec::PersistentShell(op) => {
                // Only an open starts somewhere, only an exec reads input; nothing adds to the
                // environment the shell was opened with.
                if !self.env.is_empty() {
                    return refuse("persistent shell work takes no env");
                }
                if self.cwd.is_some() && !matches!(op, ShellOp::ShellOpen(_)) {
                    return refuse("only a shell open takes a cwd");
                }
                if self.stdin.is_some() && !matches!(op, ShellOp::ShellExec(_)) {
                    return refuse("only a shell exec takes stdin");
                }
                op.validate()?;
                if let ShellOp::ShellExec(exec) = op {
                    wire += exec.command.len();
                }
            }
            WorkSpec::Workspace(op) => {
                // The runner decides where everything goes; the caller adds nothing.
                if self.cwd.is_some() || self.stdin.is_some() || !self.env.is_empty() {
                    return refuse("workspace work takes no cwd, stdin or env");
                }
                op.validate()?;
            }
        }
        // Scripts and edits are bounded by their own limits, not by the command envelope.
        if !matches!(self.spec, WorkSpec::Script { .. } | WorkSpec::Edit(_))
            && wire > MAX_WIRE_COMMAND_BYTES
        {
            return refuse(format!(
                "the command is over the {MAX_WIRE_COMMAND_BYTES}-byte wire envelope"
            ));
        }
        if let Some(stdin) = &self.stdin {
            no_nul("stdin", stdin)?;
            if stdin.len() > MAX_STDIN_BYTES {
                return refuse(format!("stdin is over {MAX_STDIN_BYTES} bytes"));
            }
        }
        if self.env.len() > MAX_ENV_VARS {
            return refuse(format!("more than {MAX_ENV_VARS} environment variables"));
        }
        for (k, v) in &self.env {
            if k.is_empty()
                || k.len() > 128
                || !k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                || k.as_bytes()[0].is_ascii_digit()
            {
                return refuse(format!("environment name {k:?} is not a shell name"));
            }
            no_nul(&format!("env {k}"), v)?;
            if v.len() > 4096 {
                return refuse(format!("environment value of {k} is over 4096 bytes"));
            }
        }
        if self.limits.timeout_ms == 0 || self.limits.timeout_ms > MAX_TIMEOUT_MS {
            return refuse(format!("timeout_ms must be 1-{MAX_TIMEOUT_MS}"));
        }
        if self.limits.output_bytes_per_stream == 0
            || self.limits.output_bytes_per_stream > MAX_OUTPUT_BYTES_PER_STREAM
        {
            return refuse(format!(
                "output_bytes_per_stream must be 1-{MAX_OUTPUT_BYTES_PER_STREAM}"
            ));
        }
        Ok(())
    }
}

fn no_nul(what: &str, s: &str) -> Result<(), ProtocolError> {
    if s.contains('\0') {
        return refuse(format!("{what} contains a NUL byte"));
    }
    Ok(())
}

/// Whether `s` is a runner-local id (client id or project name).
pub fn valid_name(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn valid_interpreter(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && !s.starts_with('-')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'+'))
}

/// `POST /runner/v1/register`: a runner process announces itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterRequest {
    /// Protocol version of the runner.
    pub protocol_version: u32,
    /// A UUIDv7 minted when this process started ([`RegisterRequest::check_instance_id`]).
    /// The server orders instances by their first registration: a newly registered one
    /// replaces the older ones.
    pub instance_id: Uuid,
    /// Runner-local project ids this host serves.
    pub projects: Vec<String>,
    /// Runner build version, for operators.
    pub agent_version: String,
    /// How this instance receives work.
    pub queue: QueueKind,
    /// Work items this instance runs at once.
    pub max_concurrency: u32,
    /// The kinds of work this instance executes. A registration without the field (a runner
    /// older than it) executes [`WorkKind::UNANNOUNCED`]; kinds this build does not know are
    /// dropped on arrival.
    #[serde(default = "explore::unannounced_kinds", deserialize_with = "explore::known_kinds")]
    pub work_kinds: Vec<WorkKind>,
}

impl RegisterRequest {
    /// Checks the instance id against the receiver's clock (`now_unix_ms`): it must be a
    /// UUIDv7 whose timestamp is at most [`MAX_INSTANCE_CLOCK_AHEAD_MS`] ahead. Instances are
    /// ordered by the server, so the id's time orders nothing; an id from the future is refused
    /// because it can only come from a forged request or a host whose clock is wrong.
    pub fn check_instance_id(&self, now_unix_ms: u64) -> Result<(), ProtocolError> {
        if self.instance_id.get_version_num() != 7 {
            return refuse("instance_id must be a UUIDv7 minted when the process started");
        }
        let (secs, nanos) = self
            .instance_id
            .get_timestamp()
            .map(|t| t.to_unix())
            .unwrap_or_default();
        let minted_ms = secs
            .saturating_mul(1000)
            .saturating_add(u64::from(nanos / 1_000_000));
        let ahead_ms = minted_ms.saturating_sub(now_unix_ms);
        if ahead_ms > MAX_INSTANCE_CLOCK_AHEAD_MS {
            return refuse(format!(
                "instance_id is from the future: its time is {} s ahead of the server's clock \
                 (at most {} s allowed); check the host's clock",
                ahead_ms / 1000,
                MAX_INSTANCE_CLOCK_AHEAD_MS / 1000
            ));
        }
        Ok(())
    }
}

/// How a runner instance receives work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueKind {
    /// Long-polling the runner API (Postgres queue).
    ApiPoll,
    /// Receiving from SQS and claiming through the runner API.
    Sqs,
}

/// Answer to [`RegisterRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterResponse {
    /// Protocol version of the server.
    pub protocol_version: u32,
    /// The runner's client id (from its token).
    pub client_id: String,
    /// Open work of older instances that this registration made `lost`.
    pub lost_work: u64,
    /// Lease length granted on claim and heartbeat.
    pub lease_ms: u64,
    /// How often to heartbeat (well inside the lease).
    pub heartbeat_interval_ms: u64,
}

/// `POST /runner/v1/poll`: wait for queued work and claim it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PollRequest {
    /// The polling instance.
    pub instance_id: Uuid,
    /// How long to wait for work (≤ [`MAX_POLL_WAIT_MS`]).
    pub wait_ms: u64,
    /// How many items to claim at most (1..=[`MAX_POLL_ITEMS`]).
    pub max_items: u32,
}

/// Work handed to one instance under a lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lease {
    /// The work.
    pub work: WorkItem,
    /// Proof of the lease; every later report must carry it.
    pub lease_token: Uuid,
    /// Lease length from now.
    pub lease_ms: u64,
}

/// Answer to [`PollRequest`]: empty when the wait ran out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PollResponse {
    /// Claimed work.
    pub leases: Vec<Lease>,
}

/// `POST /runner/v1/claim`: claim one work id delivered by a queue message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    /// The claiming instance.
    pub instance_id: Uuid,
    /// The work id from the message.
    pub work_id: Uuid,
}

/// Answer to [`ClaimRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum ClaimResponse {
    /// The work is now leased to the caller.
    Claimed {
        /// The lease.
        lease: Box<Lease>,
    },
    /// Someone already claimed it (or it finished, or it was cancelled): delete the message
    /// and do not run it.
    AlreadyClaimed {
        /// Its current state.
        state: WorkState,
    },
}

/// A message envelope on the SQS queue: only the work id, never the work itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueEnvelope {
    /// Protocol version.
    pub protocol_version: u32,
    /// The work to claim.
    pub work_id: Uuid,
}

impl QueueEnvelope {
    /// The envelope announcing `work_id` in this protocol version.
    pub fn new(work_id: Uuid) -> Self {
        QueueEnvelope {
            protocol_version: PROTOCOL_VERSION,
            work_id,
        }
    }

    /// The message body: compact JSON, far below [`MAX_ENVELOPE_BYTES`].
    pub fn to_body(&self) -> String {
        serde_json::to_string(self).expect("an envelope of plain fields serializes")
    }

    /// Parses a received message body, refusing oversized bodies, malformed JSON, unknown
    /// fields and protocol versions this build does not speak. The error says which.
    pub fn parse(body: &str) -> Result<QueueEnvelope, String> {
        if body.len() > MAX_ENVELOPE_BYTES {
            return Err(format!(
                "the message body is {} bytes; an envelope is at most {MAX_ENVELOPE_BYTES}",
                body.len()
            ));
        }
        let envelope: QueueEnvelope =
            serde_json::from_str(body).map_err(|e| format!("not a work envelope: {e}"))?;
        if envelope.protocol_version != PROTOCOL_VERSION {
            return Err(format!(
                "envelope protocol version {} is not spoken here (this build speaks {PROTOCOL_VERSION})",
                envelope.protocol_version
            ));
        }
        Ok(envelope)
    }
}

/// A lease held by an instance, as heartbeats and reports name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeldLease {
    /// Work id.
    pub work_id: Uuid,
    /// Lease token.
    pub lease_token: Uuid,
}

/// `POST /runner/v1/heartbeat`: extend leases and learn what to stop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatRequest {
    /// The instance.
    pub instance_id: Uuid,
    /// Leases it holds (at most [`MAX_HELD_LEASES`]).
    pub leases: Vec<HeldLease>,
    /// After extending, wait up to this long (≤ [`MAX_POLL_WAIT_MS`]) for a stop request or
    /// a lost lease before answering; 0 answers at once. A waiting heartbeat is how stop
    /// requests reach running work without delay.
    #[serde(default)]
    pub wait_ms: u64,
}

/// What the server says about one held lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaseStatus {
    /// Extended; keep running.
    Extended,
    /// A stop was requested: cancel the work and report `cancelled`.
    CancelRequested,
    /// The lease is gone (expired, replaced instance, or unknown): stop the work; its result will
    /// be refused.
    Lost,
}

/// Answer to [`HeartbeatRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatResponse {
    /// One entry per lease in the request, same order.
    pub leases: Vec<(Uuid, LeaseStatus)>,
    /// Lease length granted from now.
    pub lease_ms: u64,
}

/// An output stream of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// A piece of kept output. `data` is base64 of the raw bytes at `offset` in the stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputChunk {
    /// Which stream.
    pub stream: Stream,
    /// Byte offset of the first byte in the stream.
    pub offset: u64,
    /// Base64 (standard alphabet, padded) of at most [`MAX_CHUNK_BYTES`] bytes.
    pub data: String,
}

/// `POST /runner/v1/output`: kept output of running work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputRequest {
    /// The instance.
    pub instance_id: Uuid,
    /// The lease.
    pub lease: HeldLease,
    /// Chunks (≤ [`MAX_CHUNKS_PER_REQUEST`]).
    pub chunks: Vec<OutputChunk>,
}

/// How work ended on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Termination {
    /// The process exited on its own (any exit code).
    Exited,
    /// It ran past its wall-clock limit and was stopped.
    TimedOut,
    /// It was stopped on request.
    Cancelled,
    /// It never started: the runner refused it (bad cwd, path escape, unknown project, …).
    Rejected,
    /// It could not be started (program not found, not executable, …).
    SpawnFailed,
}

/// The terminal report of one work item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkOutcome {
    /// How it ended.
    pub termination: Termination,
    /// Exit code, when the process exited normally.
    pub exit_code: Option<i32>,
    /// Signal number, when it was killed by one.
    pub signal: Option<i32>,
    /// Why it was rejected or failed to start (≤ 1,000 bytes), naming the problem.
    pub error: Option<String>,
    /// Wall-clock time from start to end.
    pub duration_ms: u64,
    /// Total bytes the process wrote to stdout (kept or not).
    pub stdout_bytes: u64,
    /// Total bytes the process wrote to stderr (kept or not).
    pub stderr_bytes: u64,
    /// More stdout was written than kept.
    pub stdout_truncated: bool,
    /// More stderr was written than kept.
    pub stderr_truncated: bool,
    /// The answer of work the runner executes itself (explore, edit, Git) that succeeded
    /// (`exited`, exit code 0), or of validate work that `exited` with any code; its JSON is
    /// at most [`MAX_ANSWER_BYTES`]. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<WorkAnswer>,
    /// Why such work was `rejected`, as a stable kind; `error` says it in words. Absent for
    /// every other outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<OpErrorKind>,
    /// Facts about a `rejected` edit (which edit or hunk, the file's current SHA-256). Absent
    /// for every other outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict: Option<EditConflict>,
    /// What the runner left out of the work's reach, and why (at most
    /// [`MAX_NOTICES`]); absent when nothing was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notices: Vec<Notice>,
}

/// Most notices one outcome carries.
pub const MAX_NOTICES: usize = 4;

impl WorkOutcome {
    /// An outcome that ended by `termination` and says nothing else yet: no exit code,
    /// signal, error, answer or notices, no output, no time. Others are built over it
    /// (`WorkOutcome { exit_code: Some(0), ..WorkOutcome::ended(Termination::Exited) }`).
    pub fn ended(termination: Termination) -> Self {
        WorkOutcome {
            termination,
            exit_code: None,
            signal: None,
            error: None,
            duration_ms: 0,
            stdout_bytes: 0,
            stderr_bytes: 0,
            stdout_truncated: false,
            stderr_truncated: false,
            answer: None,
            error_kind: None,
            conflict: None,
            notices: Vec::new(),
        }
    }

    /// The terminal state this outcome puts the work in.
    pub fn state(&self) -> WorkState {
        match self.termination {
            Termination::Exited if self.exit_code == Some(0) => WorkState::Succeeded,
            Termination::Cancelled => WorkState::Cancelled,
            _ => WorkState::Failed,
        }
    }
}

/// `POST /runner/v1/result`: the terminal report, with any output not yet sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultRequest {
    /// The instance.
    pub instance_id: Uuid,
    /// The lease.
    pub lease: HeldLease,
    /// The outcome.
    pub outcome: WorkOutcome,
    /// Kept output not yet sent (≤ [`MAX_CHUNKS_PER_REQUEST`]).
    #[serde(default)]
    pub chunks: Vec<OutputChunk>,
}

/// Answer to [`ResultRequest`] and [`OutputRequest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum ReportResponse {
    /// Accepted (a repeated identical result is accepted again).
    Accepted {
        /// The work's state after the report.
        state: WorkState,
    },
    /// The lease is not held (expired, replaced, wrong token): the report changed nothing.
    LeaseLost {
        /// The work's current state.
        state: WorkState,
    },
}

/// `POST /runner/v1/inventory`: after a reconnect, the work this instance still runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InventoryRequest {
    /// The instance.
    pub instance_id: Uuid,
    /// Leases it still holds and runs.
    pub running: Vec<HeldLease>,
}

/// Answer to [`InventoryRequest`]: the same shape as a heartbeat.
pub type InventoryResponse = HeartbeatResponse;

/// A typed error body of the runner API: `{"error": {"kind", "message"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiErrorBody {
    /// The error.
    pub error: ApiError,
}

/// The error inside [`ApiErrorBody`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiError {
    /// Stable kind, e.g. `invalid_request`, `instance_replaced`, `unauthorized`.
    pub kind: String,
    /// What was wrong.
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::WorkState::{self, *};

    const ALL: &[WorkState] = WorkState::ALL;

    #[test]
    fn state_strings_are_the_serde_strings_and_parse_back() {
        for &s in ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
            assert_eq!(WorkState::parse(s.as_str()), Ok(s));
        }
        assert!(WorkState::parse("running").is_err());
        assert!(WorkState::parse("Lost").is_err());
    }

    #[test]
    fn envelopes_round_trip_and_bad_bodies_say_why() {
        let id = uuid::Uuid::now_v7();
        let body = super::QueueEnvelope::new(id).to_body();
        assert_eq!(
            body,
            format!(
                "{{\"protocol_version\":{},\"work_id\":\"{id}\"}}",
                super::PROTOCOL_VERSION
            )
        );
        assert_eq!(super::QueueEnvelope::parse(&body).unwrap().work_id, id);
        for (bad, why) in [
            ("not json".to_owned(), "not a work envelope"),
            ("{\"protocol_version\":1}".to_owned(), "not a work envelope"),
            (
                format!("{{\"protocol_version\":1,\"work_id\":\"{id}\",\"x\":1}}"),
                "unknown field",
            ),
            (
                format!("{{\"protocol_version\":99,\"work_id\":\"{id}\"}}"),
                "version 99",
            ),
            (" ".repeat(super::MAX_ENVELOPE_BYTES + 1), "at most"),
        ] {
            let err = super::QueueEnvelope::parse(&bad).unwrap_err();
            assert!(err.contains(why), "{bad:.40}: {err}");
        }
    }

    #[test]
    fn terminal_states_never_change_and_leased_work_never_requeues() {
        for &from in ALL {
            for &to in ALL {
                if from.is_terminal() || to == Queued {
                    assert!(!from.can_become(to), "{from:?} -> {to:?}");
                }
            }
        }
        assert!(Queued.can_become(Leased));
        assert!(Leased.can_become(Lost));
        assert!(!Queued.can_become(Succeeded), "a result needs a lease");
    }

    use super::*;

    fn item(spec: WorkSpec) -> WorkItem {
        WorkItem {
            protocol_version: PROTOCOL_VERSION,
            work_id: Uuid::nil(),
            project: "web".into(),
            cwd: None,
            spec,
            stdin: None,
            env: BTreeMap::new(),
            limits: WorkLimits {
                timeout_ms: 1000,
                output_bytes_per_stream: 1024,
            },
        }
    }

    #[test]
    fn valid_items_pass_and_each_bad_form_names_its_field() {
        let ok = item(WorkSpec::Process {
            argv: vec!["echo".into(), "hi".into()],
        });
        ok.validate().unwrap();
        let cases: Vec<(WorkItem, &str)> = vec![
            (item(WorkSpec::Process { argv: vec![] }), "argv"),
            (
                item(WorkSpec::Process {
                    argv: vec!["a\0b".into()],
                }),
                "NUL",
            ),
            (
                item(WorkSpec::Shell {
                    shell: Shell::Sh,
                    command: "x".repeat(MAX_WIRE_COMMAND_BYTES + 1),
                }),
                "wire envelope",
            ),
            (
                item(WorkSpec::Script {
                    interpreter: "/bin/sh".into(),
                    script: "true".into(),
                    args: vec![],
                }),
                "interpreter",
            ),
            (
                WorkItem {
                    protocol_version: 99,
                    ..ok.clone()
                },
                "protocol version",
            ),
            (
                WorkItem {
                    env: BTreeMap::from([("A=B".into(), "x".into())]),
                    ..ok.clone()
                },
                "environment name",
            ),
            (
                WorkItem {
                    limits: WorkLimits {
                        timeout_ms: 0,
                        output_bytes_per_stream: 1,
                    },
                    ..ok.clone()
                },
                "timeout_ms",
            ),
        ];
        for (bad, expect) in cases {
            let err = bad.validate().unwrap_err().to_string();
            assert!(err.contains(expect), "{bad:?}: {err}");
        }
    }

    #[test]
    fn a_bad_cwd_is_refused_on_arrival_naming_the_rule() {
        let ok = serde_json::to_value(item(WorkSpec::Process {
            argv: vec!["true".into()],
        }))
        .unwrap();
        for (cwd, why) in [("../up", "`..`"), ("/etc", "absolute"), ("file:x", "URI")] {
            let mut bad = ok.clone();
            bad["cwd"] = cwd.into();
            let err = serde_json::from_value::<WorkItem>(bad)
                .unwrap_err()
                .to_string();
            assert!(err.contains(why), "{cwd}: {err}");
        }
        let mut sub = ok;
        sub["cwd"] = "./src//".into();
        let item: WorkItem = serde_json::from_value(sub).unwrap();
        assert_eq!(item.cwd.unwrap().as_str(), "src");
    }

    #[test]
    fn outcomes_map_to_terminal_states() {
        let mut o = outcome();
        assert_eq!(o.state(), Succeeded);
        o.exit_code = Some(3);
        assert_eq!(o.state(), Failed);
        o.termination = Termination::Cancelled;
        assert_eq!(o.state(), Cancelled);
        o.termination = Termination::TimedOut;
        assert_eq!(o.state(), Failed);
    }

    #[test]
    fn wire_shapes_are_tagged_and_strict() {
        let spec: WorkSpec =
            serde_json::from_str(r#"{"kind":"shell","shell":"bash","command":"ls"}"#).unwrap();
        assert_eq!(
            spec,
            WorkSpec::Shell {
                shell: Shell::Bash,
                command: "ls".into()
            }
        );
        assert!(
            serde_json::from_str::<WorkSpec>(r#"{"kind":"shell","shell":"zsh","command":"ls"}"#)
                .is_err()
        );
        assert!(
            serde_json::from_str::<PollRequest>(
                r#"{"instance_id":"00000000-0000-0000-0000-000000000000","wait_ms":1,"max_items":1,"x":1}"#
            )
            .is_err(),
            "unknown fields are refused"
        );
        let claim = serde_json::to_value(ClaimResponse::AlreadyClaimed { state: Leased }).unwrap();
        assert_eq!(
            claim,
            serde_json::json!({"status": "already_claimed", "state": "leased"})
        );
    }

    fn registration(instance_id: Uuid) -> RegisterRequest {
        RegisterRequest {
            protocol_version: PROTOCOL_VERSION,
            instance_id,
            projects: Vec::new(),
            agent_version: "test".into(),
            queue: QueueKind::ApiPoll,
            max_concurrency: 1,
            work_kinds: WorkKind::ALL.to_vec(),
        }
    }

    fn v7_at(unix_ms: u64) -> Uuid {
        let ts = uuid::Timestamp::from_unix(
            uuid::NoContext,
            unix_ms / 1000,
            (unix_ms % 1000) as u32 * 1_000_000,
        );
        Uuid::new_v7(ts)
    }

    #[test]
    fn instance_ids_from_the_future_or_of_another_version_are_refused() {
        let now = 1_800_000_000_000;
        for ok in [now, now - 86_400_000, now + MAX_INSTANCE_CLOCK_AHEAD_MS] {
            assert_eq!(
                registration(v7_at(ok)).check_instance_id(now),
                Ok(()),
                "{ok}"
            );
        }
        let err = registration(v7_at(now + MAX_INSTANCE_CLOCK_AHEAD_MS + 1_000))
            .check_instance_id(now)
            .unwrap_err();
        assert!(err.0.contains("from the future"), "{err}");
        // The far future a forger would pick, and ids that carry no time at all.
        for bad in [
            v7_at(now + 100 * 365 * 86_400_000),
            Uuid::max(),
            Uuid::nil(),
            Uuid::new_v4(),
        ] {
            assert!(registration(bad).check_instance_id(now).is_err(), "{bad}");
        }
    }

    fn explore(op: ExploreOp) -> WorkItem {
        item(WorkSpec::Explore(op))
    }

    fn search(pattern: &str) -> SearchOp {
        SearchOp::new(pattern)
    }

    fn path(p: &str) -> RelativePath {
        RelativePath::parse(p).unwrap()
    }

    #[test]
    fn explore_specs_are_tagged_by_kind_then_op_and_take_defaults() {
        let spec: WorkSpec = serde_json::from_value(serde_json::json!({
            "kind": "explore", "op": "read_files",
            "files": [{"path": "./src//lib.rs", "start_line": 3}]
        }))
        .unwrap();
        assert_eq!(
            spec,
            WorkSpec::Explore(ExploreOp::ReadFiles(ReadFilesOp {
                files: vec![FileRange {
                    path: path("src/lib.rs"),
                    start_line: Some(3),
                    end_line: None
                }]
            }))
        );
        assert_eq!(spec.kind(), WorkKind::Explore);
        let spec: WorkSpec =
            serde_json::from_str(r#"{"kind":"explore","op":"search","pattern":"fn main"}"#)
                .unwrap();
        assert_eq!(
            spec,
            WorkSpec::Explore(ExploreOp::Search(search("fn main")))
        );
        let spec: WorkSpec = serde_json::from_str(r#"{"kind":"explore","op":"overview"}"#).unwrap();
        assert_eq!(spec, WorkSpec::Explore(ExploreOp::Overview(OverviewOp {})));
        let listed: WorkSpec =
            serde_json::from_str(r#"{"kind":"explore","op":"list_files","path":"src"}"#).unwrap();
        assert_eq!(
            listed,
            WorkSpec::Explore(ExploreOp::ListFiles(ListFilesOp {
                path: Some(path("src")),
                glob: None,
                hidden: false,
                limit: DEFAULT_LIST_FILES,
                cursor: None
            }))
        );
        for (bad, why) in [
            (
                r#"{"kind":"explore","op":"overview","x":1}"#,
                "unknown field",
            ),
            (
                r#"{"kind":"explore","op":"grep","pattern":"x"}"#,
                "unknown variant",
            ),
            (
                r#"{"kind":"explore","op":"list_files","path":"../up"}"#,
                "`..`",
            ),
            (
                r#"{"kind":"explore","op":"read_files","files":[{"path":"/etc/passwd"}]}"#,
                "absolute",
            ),
        ] {
            let err = serde_json::from_str::<WorkSpec>(bad)
                .unwrap_err()
                .to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn every_explore_op_round_trips() {
        let ops = [
            ExploreOp::Overview(OverviewOp {}),
            ExploreOp::ListFiles(ListFilesOp {
                path: Some(path("src")),
                glob: Some("*.rs".into()),
                hidden: true,
                limit: 7,
                cursor: Some("abc_-9".into()),
            }),
            ExploreOp::TrackedFiles(TrackedFilesOp {
                path: None,
                limit: MAX_LIST_FILES,
                cursor: None,
            }),
            ExploreOp::ReadFiles(ReadFilesOp {
                files: vec![FileRange {
                    path: path("a/b.txt"),
                    start_line: Some(2),
                    end_line: Some(9),
                }],
            }),
            ExploreOp::Search(SearchOp {
                literal: true,
                case_sensitive: false,
                glob: Some("!*.md".into()),
                path: Some(path("src/main.rs")),
                hidden: true,
                context_lines: MAX_CONTEXT_LINES,
                limit: MAX_SEARCH_MATCHES,
                cursor: Some("x".into()),
                ..search("a.b")
            }),
        ];
        for op in ops {
            let work = explore(op.clone());
            work.validate().unwrap();
            let json = serde_json::to_value(&work).unwrap();
            assert_eq!(json["spec"]["kind"], "explore");
            assert_eq!(json["spec"]["op"], op.name());
            assert_eq!(serde_json::from_value::<WorkItem>(json).unwrap(), work);
        }
    }

    #[test]
    fn each_explore_bound_is_checked_naming_its_field() {
        let too_many = (0..=MAX_READ_FILES)
            .map(|i| FileRange {
                path: path(&format!("f{i}")),
                start_line: None,
                end_line: None,
            })
            .collect();
        let read = |files| ExploreOp::ReadFiles(ReadFilesOp { files });
        let range = |start, end| {
            read(vec![FileRange {
                path: path("f"),
                start_line: start,
                end_line: end,
            }])
        };
        let list = |glob: Option<&str>, limit, cursor: Option<&str>| {
            ExploreOp::ListFiles(ListFilesOp {
                path: None,
                glob: glob.map(Into::into),
                hidden: false,
                limit,
                cursor: cursor.map(Into::into),
            })
        };
        let find = |op| ExploreOp::Search(op);
        let cases: Vec<(ExploreOp, &str)> = vec![
            (read(vec![]), "1-8 files"),
            (read(too_many), "1-8 files"),
            (range(Some(0), None), "start_line"),
            (range(Some(5), Some(4)), "end_line"),
            (find(search("")), "pattern"),
            (find(search(&"x".repeat(MAX_PATTERN_BYTES + 1))), "pattern"),
            (find(search("a\0b")), "NUL"),
            (
                find(SearchOp {
                    context_lines: MAX_CONTEXT_LINES + 1,
                    ..search("x")
                }),
                "context_lines",
            ),
            (
                find(SearchOp {
                    limit: MAX_SEARCH_MATCHES + 1,
                    ..search("x")
                }),
                "limit",
            ),
            (list(None, 0, None), "limit"),
            (list(None, MAX_LIST_FILES + 1, None), "limit"),
            (list(Some(&"*".repeat(MAX_GLOB_BYTES + 1)), 1, None), "glob"),
            (list(Some("a\nb"), 1, None), "glob"),
            (list(None, 1, Some("a/b")), "cursor"),
            (list(None, 1, Some("")), "cursor"),
            (
                ExploreOp::TrackedFiles(TrackedFilesOp {
                    path: None,
                    limit: 1,
                    cursor: Some("x".repeat(MAX_CURSOR_BYTES + 1)),
                }),
                "cursor",
            ),
        ];
        for (op, expect) in cases {
            let err = explore(op.clone()).validate().unwrap_err().to_string();
            assert!(err.contains(expect), "{op:?}: {err}");
        }
        let with_cwd = WorkItem {
            cwd: Some(path("src")),
            ..explore(ExploreOp::Overview(OverviewOp {}))
        };
        assert!(with_cwd.validate().unwrap_err().0.contains("no cwd"));
    }

    fn outcome() -> WorkOutcome {
        WorkOutcome {
            exit_code: Some(0),
            duration_ms: 2,
            ..WorkOutcome::ended(Termination::Exited)
        }
    }

    #[test]
    fn a_process_outcome_keeps_its_wire_shape_and_explore_answers_round_trip() {
        assert_eq!(
            serde_json::to_value(outcome()).unwrap(),
            serde_json::json!({"termination": "exited", "exit_code": 0, "signal": null,
                "error": null, "duration_ms": 2, "stdout_bytes": 0, "stderr_bytes": 0,
                "stdout_truncated": false, "stderr_truncated": false})
        );
        let line = |n, t: &str| SearchLine {
            number: n,
            text: t.into(),
            truncated: false,
        };
        let answers = [
            WorkAnswer::Overview(OverviewAnswer {
                root_name: "web".into(),
                languages: vec![LanguageCount {
                    language: "Rust".into(),
                    files: 3,
                }],
                manifests: vec![Manifest {
                    path: path("Cargo.toml"),
                    ecosystem: "cargo".into(),
                }],
                instruction_files: vec![path("AGENTS.md")],
                tree: vec![TreeEntry {
                    path: path("src"),
                    kind: EntryKind::Directory,
                }],
                tree_truncated: false,
                scan_truncated: true,
                git: GitSummary::Repository {
                    branch: Some("main".into()),
                    head: Some("ab".repeat(20)),
                    dirty: true,
                },
            }),
            WorkAnswer::ListFiles(FileListAnswer {
                files: vec![ListedFile {
                    path: path("src/a.rs"),
                    kind: EntryKind::Symlink,
                    size: 4,
                }],
                next_cursor: Some("c".into()),
                unlisted: 1,
            }),
            WorkAnswer::TrackedFiles(TrackedFilesAnswer {
                files: vec![path("a")],
                next_cursor: None,
                unlisted: 0,
                truncated: false,
            }),
            WorkAnswer::ReadFiles(ReadFilesAnswer {
                files: vec![
                    FileRead {
                        path: path("a"),
                        size: 3,
                        sha256: "0".repeat(64),
                        lines: 1,
                        content: FileContent::Text {
                            start_line: 1,
                            end_line: 1,
                            text: "hi\n".into(),
                            truncated: false,
                        },
                    },
                    FileRead {
                        path: path("b"),
                        size: 3,
                        sha256: "1".repeat(64),
                        lines: 0,
                        content: FileContent::Binary,
                    },
                ],
            }),
            WorkAnswer::Search(SearchAnswer {
                matches: vec![SearchMatch {
                    path: path("a"),
                    line: line(2, "x"),
                    before: vec![line(1, "w")],
                    after: vec![],
                }],
                files_searched: 1,
                files_skipped: 0,
                next_cursor: None,
            }),
        ];
        for answer in answers {
            answer.validate().unwrap();
            let o = WorkOutcome {
                answer: Some(answer.clone()),
                ..outcome()
            };
            let json = serde_json::to_value(&o).unwrap();
            assert_eq!(json["answer"]["op"], answer.op());
            assert_eq!(serde_json::from_value::<WorkOutcome>(json).unwrap(), o);
        }
        let refused = WorkOutcome {
            termination: Termination::Rejected,
            exit_code: None,
            error: Some("`out`: the path leads outside the project root".into()),
            error_kind: Some(OpErrorKind::PathOutsideRoot),
            ..outcome()
        };
        let json = serde_json::to_value(&refused).unwrap();
        assert_eq!(json["error_kind"], "path_outside_root");
        assert_eq!(json["error_kind"], OpErrorKind::PathOutsideRoot.as_str());
        assert_eq!(
            serde_json::from_value::<WorkOutcome>(json).unwrap(),
            refused
        );
        assert_eq!(refused.state(), Failed);
    }

    #[test]
    fn an_answer_over_its_bound_is_refused() {
        let big = WorkAnswer::TrackedFiles(TrackedFilesAnswer {
            files: vec![path(&"a".repeat(1000)); MAX_ANSWER_BYTES / 1000],
            next_cursor: None,
            unlisted: 0,
            truncated: false,
        });
        assert!(big.validate().unwrap_err().0.contains("answer is over"));
    }

    #[test]
    fn a_registration_without_work_kinds_is_an_older_runners_and_unknown_kinds_are_dropped() {
        let mut json = serde_json::to_value(registration(Uuid::now_v7())).unwrap();
        assert_eq!(
            json["work_kinds"],
            serde_json::json!([
                "process",
                "shell",
                "script",
                "explore",
                "edit",
                "git",
                "validate",
                "persistent_shell",
                "workspace"
            ])
        );
        json.as_object_mut().unwrap().remove("work_kinds");
        let older: RegisterRequest = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(older.work_kinds, WorkKind::UNANNOUNCED);
        json["work_kinds"] = serde_json::json!(["explore", "teleport", "process", "explore"]);
        let newer: RegisterRequest = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(newer.work_kinds, [WorkKind::Process, WorkKind::Explore]);
        json["work_kinds"] = serde_json::json!(vec!["x"; MAX_WORK_KINDS + 1]);
        let err = serde_json::from_value::<RegisterRequest>(json).unwrap_err();
        assert!(err.to_string().contains("more than"), "{err}");
        for kind in WorkKind::ALL {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        }
    }

    #[test]
    fn states_use_snake_case_on_the_wire() {
        assert_eq!(serde_json::to_string(&Lost).unwrap(), "\"lost\"");
        assert_eq!(
            serde_json::from_str::<WorkState>("\"leased\"").unwrap(),
            Leased
        );
    }
}
