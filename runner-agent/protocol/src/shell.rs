//! Persistent shells: one long-lived `sh`/`bash` process per Workflow Session, owned by the
//! runner instance that opened it. Each operation is a work item like any other; the runner
//! answers it itself ([`crate::WorkOutcome::answer`]), whatever the command's exit status.
//!
//! A shell is addressed by its [`ShellId`] and the instance that owns it: an instance never
//! answers for a shell it did not open (a restarted runner has none), so work for a shell of
//! an older instance is answered [`ShellState::Lost`].

use serde::{Deserialize, Serialize};
use uuid::Uuid;
pub use wc_domain::{ShellId, ShellState};

use crate::{MAX_SHELL_TEXT_BYTES, ProtocolError, RelativePath, Shell, refuse};

/// One persistent-shell operation, tagged by `op` inside the work spec:
/// `{"kind": "persistent_shell", "op": "shell_exec", "shell_id": "wc_shell_…", …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum ShellOp {
    /// Start the shell in the work item's `cwd` (the project root when `None`).
    ShellOpen(ShellOpenOp),
    /// Run one command in the open shell; the work item's `stdin` is its standard input (an
    /// empty one when `None`) and its `limits` bound the command.
    ShellExec(ShellExecOp),
    /// Whether the shell's process is still there and in step.
    ShellStatus(ShellTarget),
    /// End the shell: its whole process group and its pipes. Closing a shell this instance
    /// does not hold answers its state all the same.
    ShellClose(ShellTarget),
}

impl ShellOp {
    /// The name of the operation (the tag its answer's `action` repeats).
    pub fn name(&self) -> &'static str {
        match self {
            ShellOp::ShellOpen(_) => "shell_open",
            ShellOp::ShellExec(_) => "shell_exec",
            ShellOp::ShellStatus(_) => "shell_status",
            ShellOp::ShellClose(_) => "shell_close",
        }
    }

    /// The shell addressed.
    pub fn target(&self) -> &ShellTarget {
        match self {
            ShellOp::ShellOpen(op) => &op.target,
            ShellOp::ShellExec(op) => &op.target,
            ShellOp::ShellStatus(t) | ShellOp::ShellClose(t) => t,
        }
    }

    /// Checks the op's own bounds (the work item checks the rest).
    pub fn validate(&self) -> Result<(), ProtocolError> {
        if let ShellOp::ShellExec(op) = self {
            if op.command.contains('\0') {
                return refuse("command contains a NUL byte");
            }
            if op.command.trim().is_empty() {
                return refuse("command is empty");
            }
            if op.command.len() > MAX_SHELL_TEXT_BYTES {
                return refuse(format!("command is over {MAX_SHELL_TEXT_BYTES} bytes"));
            }
        }
        Ok(())
    }
}

/// Which shell: its id and the runner instance that owns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShellTarget {
    /// The shell.
    pub shell_id: ShellId,
    /// The instance that opened it (for [`ShellOp::ShellOpen`]: the one asked to).
    pub instance_id: Uuid,
}

/// [`ShellOp::ShellOpen`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShellOpenOp {
    /// The shell to open.
    #[serde(flatten)]
    pub target: ShellTarget,
    /// Its dialect.
    pub shell: Shell,
}

/// [`ShellOp::ShellExec`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShellExecOp {
    /// The shell.
    #[serde(flatten)]
    pub target: ShellTarget,
    /// Shell text, run by the shell itself (`eval`), so what it changes stays
    /// (≤ [`MAX_SHELL_TEXT_BYTES`]).
    pub command: String,
}

/// The answer to every [`ShellOp`]: the shell's state after it, and for an exec what the
/// command did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShellAnswer {
    /// The operation answered ([`ShellOp::name`]).
    pub action: String,
    /// The shell's state once the operation ended.
    pub state: ShellState,
    /// For an open: the directory it started in, relative to the project root (`""` is the
    /// root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<RelativePath>,
    /// For an exec: what the command did. Absent when it never started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ShellExecResult>,
    /// In words, when the state is not what the operation wanted (≤ 1,000 bytes): why the
    /// shell exited, what broke its framing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// What one command in a persistent shell did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ShellExecResult {
    /// The command's exit status (as `$?` reads it), when it completed; `None` when it timed
    /// out or the shell ended under it.
    pub exit_code: Option<i32>,
    /// Whether the status is the command's beyond doubt: nothing the shell's own code set up
    /// (functions, traps, options) could have run between the command and its report. `false`
    /// with a status means the status is what the shell reported, unproven.
    #[serde(default)]
    pub status_proven: bool,
    /// It ran past its time limit.
    pub timed_out: bool,
    /// After a timeout: the foreground command was interrupted and the shell proved in step
    /// again (it stays `ready`); `false` with `timed_out` means it was reset (`poisoned`).
    pub recovered: bool,
    /// Kept standard output (its head, lossy UTF-8).
    pub stdout: String,
    /// Kept standard error (its head, lossy UTF-8).
    pub stderr: String,
    /// Bytes the command wrote to stdout, kept or not.
    pub stdout_bytes: u64,
    /// Bytes the command wrote to stderr, kept or not.
    pub stderr_bytes: u64,
    /// More stdout was written than kept.
    pub stdout_truncated: bool,
    /// More stderr was written than kept.
    pub stderr_truncated: bool,
    /// Wall-clock time of the command.
    pub duration_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> ShellTarget {
        ShellTarget {
            shell_id: ShellId::generate(),
            instance_id: Uuid::now_v7(),
        }
    }

    #[test]
    fn ops_are_tagged_and_flat_on_the_wire() {
        let t = target();
        let op = ShellOp::ShellExec(ShellExecOp {
            target: t.clone(),
            command: "cd src".into(),
        });
        let v = serde_json::to_value(&op).unwrap();
        assert_eq!(v["op"], "shell_exec");
        assert_eq!(v["shell_id"], t.shell_id.as_str());
        assert_eq!(serde_json::from_value::<ShellOp>(v).unwrap(), op);
    }

    #[test]
    fn exec_commands_are_bounded_and_not_empty() {
        let exec = |command: String| {
            ShellOp::ShellExec(ShellExecOp {
                target: target(),
                command,
            })
            .validate()
        };
        assert!(exec("true".into()).is_ok());
        assert!(exec(" \n".into()).unwrap_err().0.contains("empty"));
        assert!(exec("a\0b".into()).unwrap_err().0.contains("NUL"));
        let over = "x".repeat(MAX_SHELL_TEXT_BYTES + 1);
        assert!(exec(over).unwrap_err().0.contains("16000"));
    }
}
