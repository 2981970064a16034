//! The answers of shell operations: the shell's state after the operation, and for an exec
//! what the command did ([`Reply::ran`]).

use std::time::Duration;

use wc_runner_protocol::{Notice, RelativePath, ShellAnswer, ShellExecResult, ShellState};

use super::live::{Finish, Ran, Stop};
use super::process::End;
use crate::exec;

/// Why a status is not proven, in words.
const UNPROVEN: &str = "the exit status cannot be proven: the shell runs with extdebug or \
     functrace on, refused POSIX mode, or keeps its builtins disabled, so something other than \
     the command may have reported it (turn those off, or use run_shell, whose status the \
     kernel reports)";

/// An answer before its action is named.
pub(super) struct Reply {
    pub(super) state: ShellState,
    pub(super) cwd: Option<RelativePath>,
    pub(super) exec: Option<ShellExecResult>,
    pub(super) detail: Option<String>,
    /// What the shell was started without, and why (an open only).
    pub(super) notices: Vec<Notice>,
}

impl Reply {
    /// The shell is in `state`; nothing more to say.
    pub(super) fn state(state: ShellState) -> Reply {
        Reply {
            state,
            cwd: None,
            exec: None,
            detail: None,
            notices: Vec::new(),
        }
    }

    /// The shell ended as `end` says.
    pub(super) fn ended(end: &End) -> Reply {
        Reply {
            detail: Some(end.detail.clone()),
            ..Reply::state(end.state)
        }
    }

    /// This runner instance does not hold the shell, for the reason `why`.
    pub(super) fn lost(why: &str) -> Reply {
        Reply {
            detail: Some(why.to_owned()),
            ..Reply::state(ShellState::Lost)
        }
    }

    /// The answer to an exec that ran as `ran`.
    pub(super) fn ran(ran: Ran) -> Reply {
        let proven = match &ran.finish {
            Finish::Completed(report) => report.proven,
            _ => false,
        };
        let (state, exit_code, stop, detail) = match ran.finish {
            Finish::Completed(report) => (
                ShellState::Ready,
                Some(i32::from(report.status)),
                None,
                (!report.proven).then(|| UNPROVEN.to_owned()),
            ),
            Finish::Recovered(stop, _) => (
                ShellState::Ready,
                None,
                Some(stop),
                Some(format!(
                    "{}; it was interrupted and the shell is ready",
                    stop.words()
                )),
            ),
            Finish::Ended(stop, end) => {
                let code = end.exit_code.filter(|_| end.state == ShellState::Exited);
                let detail = match stop {
                    Some(stop) => format!("{}; {}", stop.words(), end.detail),
                    None => end.detail,
                };
                (end.state, code, stop, Some(detail))
            }
        };
        let exec = ShellExecResult {
            exit_code,
            status_proven: proven,
            timed_out: stop == Some(Stop::TimedOut),
            recovered: stop.is_some() && state == ShellState::Ready,
            stdout: String::from_utf8_lossy(&ran.stdout.kept).into_owned(),
            stderr: String::from_utf8_lossy(&ran.stderr.kept).into_owned(),
            stdout_bytes: ran.stdout.total,
            stderr_bytes: ran.stderr.total,
            stdout_truncated: ran.stdout.truncated(),
            stderr_truncated: ran.stderr.truncated(),
            duration_ms: millis(ran.duration),
        };
        Reply {
            exec: Some(exec),
            detail,
            ..Reply::state(state)
        }
    }

    /// The answer to the operation `action`, its detail within the protocol's bound.
    pub(super) fn answer(&self, action: &str) -> ShellAnswer {
        ShellAnswer {
            action: action.to_owned(),
            state: self.state,
            cwd: self.cwd.clone(),
            exec: self.exec.clone(),
            detail: self.detail.clone().map(exec::bounded),
        }
    }
}

/// `d` in whole milliseconds, saturating.
pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
