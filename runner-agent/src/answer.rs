//! How work the runner answers itself (explore, edit and Git operations) ends: `exited` with exit
//! code 0 and a typed [`WorkAnswer`], `rejected` with an [`OpErrorKind`] and words naming the
//! problem ([`Refusal`]), or `timed_out`, `cancelled`, or failed without an answer ([`Ended`]).
//!
//! Invariant: an answer that breaks the protocol's bound never reaches the wire
//! ([`outcome`] checks it), and every answer is built to stay within it ([`Budget`]).

use std::future::Future;
use std::io;
use std::time::Instant;

use serde::Serialize;
use wc_runner_protocol::{
    EditConflict, MAX_ANSWER_BYTES, OpErrorKind, RelativePath, Termination, WorkAnswer, WorkItem,
    WorkOutcome,
};

use tracing::Instrument as _;

use crate::exec;

/// Why an operation was refused: a stable kind and words naming the problem, and for an edit
/// the facts of the conflict.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub(crate) kind: OpErrorKind,
    pub(crate) message: String,
    pub(crate) conflict: Option<Box<EditConflict>>,
}

impl Refusal {
    /// A refusal of `kind` saying `message`.
    pub(crate) fn new(kind: OpErrorKind, message: impl Into<String>) -> Refusal {
        Refusal {
            kind,
            message: message.into(),
            conflict: None,
        }
    }

    /// A refusal about the path `rel`: "`src/x` does not exist".
    pub(crate) fn at(kind: OpErrorKind, rel: &RelativePath, what: &str) -> Refusal {
        let name = if rel.is_root() {
            "the project root".to_owned()
        } else {
            format!("`{rel}`")
        };
        Refusal::new(kind, format!("{name} {what}"))
    }
}

/// How an operation ended without an answer.
pub(crate) enum Ended {
    Refused(Refusal),
    TimedOut,
    Cancelled,
    /// The runner failed (a panic in an operation): reported, never hidden.
    Failed(String),
}

impl From<Refusal> for Ended {
    fn from(r: Refusal) -> Self {
        Ended::Refused(r)
    }
}

/// Runs `work`, the answering of one `kind` work item, in a span naming the item, and logs how
/// it ended: the one log line of every operation the runner answers itself.
pub(crate) async fn traced(
    kind: &'static str,
    item: &WorkItem,
    work: impl Future<Output = WorkOutcome>,
) -> WorkOutcome {
    let span =
        tracing::info_span!("operation", kind, work_id = %item.work_id, project = %item.project);
    let outcome = work.instrument(span.clone()).await;
    span.in_scope(|| {
        tracing::info!(
            termination = ?outcome.termination,
            error_kind = outcome.error_kind.map(OpErrorKind::as_str),
            error = outcome.error.as_deref(),
            duration_ms = outcome.duration_ms,
            "{kind} work ended"
        );
    });
    outcome
}

/// The outcome of an operation that started at `started` and ended as `ended`.
pub(crate) fn outcome(started: Instant, ended: Result<WorkAnswer, Ended>) -> WorkOutcome {
    match ended {
        Ok(answer) => answered(started, answer),
        Err(Ended::Refused(refusal)) => rejected(started, refusal),
        Err(Ended::TimedOut) => exec::not_started(started, Termination::TimedOut, None),
        Err(Ended::Cancelled) => exec::not_started(started, Termination::Cancelled, None),
        Err(Ended::Failed(e)) => exec::not_started(started, Termination::SpawnFailed, Some(e)),
    }
}

pub(crate) fn answered(started: Instant, answer: WorkAnswer) -> WorkOutcome {
    // Every answer is built within the bound; a bug that breaks it must not reach the wire.
    if let Err(e) = answer.validate() {
        return exec::not_started(started, Termination::SpawnFailed, Some(e.to_string()));
    }
    WorkOutcome {
        exit_code: Some(0),
        answer: Some(answer),
        ..exec::not_started(started, Termination::Exited, None)
    }
}

/// The outcome of an operation refused before or while it ran.
/// The op of `item` once the item keeps every bound of the protocol: `pick` takes it out of
/// the spec. An item that breaks a bound, or is another kind of work, is refused
/// `invalid_request`, naming why.
pub(crate) fn op_of<'a, T>(
    item: &'a WorkItem,
    kind: &str,
    pick: impl FnOnce(&'a wc_runner_protocol::WorkSpec) -> Option<&'a T>,
) -> Result<&'a T, Refusal> {
    item.validate()
        .map_err(|e| Refusal::new(OpErrorKind::InvalidRequest, e.to_string()))?;
    pick(&item.spec)
        .ok_or_else(|| Refusal::new(OpErrorKind::InvalidRequest, format!("not {kind} work")))
}

pub(crate) fn rejected(started: Instant, refusal: Refusal) -> WorkOutcome {
    WorkOutcome {
        error_kind: Some(refusal.kind),
        conflict: refusal.conflict.map(|c| *c),
        ..exec::not_started(started, Termination::Rejected, Some(refusal.message))
    }
}

/// Room left in an answer's JSON. What a page does not fit ends it (with a cursor or a
/// truncation flag) instead.
pub(crate) struct Budget {
    left: usize,
}

/// Bytes of an answer kept for its fixed fields and cursor (a cursor is at most
/// [`wc_runner_protocol::MAX_CURSOR_BYTES`]).
const ANSWER_SLACK: usize = 16 * 1024;

impl Budget {
    /// The room of a whole answer.
    pub(crate) fn new() -> Budget {
        Budget {
            left: MAX_ANSWER_BYTES - ANSWER_SLACK,
        }
    }

    /// Takes room for `value` (and its separator), if there is enough.
    pub(crate) fn take<T: Serialize>(&mut self, value: &T) -> bool {
        let mut counter = Counter(1);
        if serde_json::to_writer(&mut counter, value).is_err() || counter.0 > self.left {
            return false;
        }
        self.left -= counter.0;
        true
    }
}

struct Counter(usize);

impl io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
