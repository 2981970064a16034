//! What the end of work writes beside it, in the transaction that ends it: every terminal path
//! of `work` (a runner's report, the lease reaper, a replaced instance, a stop of queued work)
//! comes through [`ended`], so each of these facts lands exactly once, with the end, whoever
//! reads the work later:
//!
//! 1. the work's `execution_finished` event, in its Workflow Session;
//! 2. the end of the persistent shell it served ([`super::shell_end`]);
//! 3. the end of the MCP task that waits for it, with the call's result and the
//!    `tool_call_finished` events its suspended recording owes.
//!
//! The store does not know tools: what each fact says is decided by a [`WorkEnding`] given by
//! the layer that does, from the ended row alone. Locks are taken as everywhere else: task
//! row first, then sessions, then shell.

use serde_json::Value;
use uuid::Uuid;

use super::WorkRow;
use crate::sessions::{self, NewEvent};
use crate::tasks::{self, Ending, TaskRow};
use crate::{GenericClient, StoreError};

/// Work that has just ended, as a task's end reads it: its row as written, the runner's
/// answer when it gave one, and the head of each kept output stream.
#[derive(Debug)]
pub struct EndedWork<'a> {
    /// The row as the ending wrote it.
    pub row: &'a WorkRow,
    /// The runner's answer, for work it executed itself.
    pub answer: Option<&'a Value>,
    /// The first [`WorkEnding::head_bytes`] of standard output.
    pub stdout: Vec<u8>,
    /// The first [`WorkEnding::head_bytes`] of standard error.
    pub stderr: Vec<u8>,
}

/// What ending work says beside it, decided by the layer that knows the tools. Both answers
/// come from the ended work alone, so every instance and every retry decides the same.
pub trait WorkEnding: Send + Sync {
    /// The `execution_finished` event of `row` for its session, prepared (redacted) by the
    /// caller, or `None` to append nothing. `answer` is the runner's, when it gave one.
    fn evidence(&self, row: &WorkRow, answer: Option<&Value>) -> Option<NewEvent>;

    /// How many bytes of each output stream's head a task's end reads.
    fn head_bytes(&self) -> i64;

    /// How `task`, open and waiting for `work`, ends now that the work has.
    fn task_end(&self, task: &TaskRow, work: &EndedWork<'_>) -> Ending;
}

/// The ending a caller gives every terminal path of `work`.
pub type Ends<'a> = &'a dyn WorkEnding;

/// Writes what the end of each of `ended` (rows just moved to a terminal state in the
/// transaction of `tx`) says beside it. A session that is no longer active takes no events:
/// its ledger is final, and the work still ends.
pub(crate) async fn ended(
    tx: &impl GenericClient,
    ended: &[WorkRow],
    answer: Option<&Value>,
    ends: Ends<'_>,
) -> Result<(), StoreError> {
    let ids: Vec<Uuid> = ended.iter().map(|w| w.id).collect();
    let waiting = tasks::lock_open_on(tx, &ids).await?;
    for row in ended {
        let Some(session_id) = &row.session_id else {
            continue;
        };
        let Some(event) = ends.evidence(row, answer) else {
            continue;
        };
        sessions::append(tx, session_id, std::slice::from_ref(&event), true).await?;
    }
    super::shell_end::work_ended(tx, ended, answer).await?;
    for task in waiting {
        let Some(row) = ended.iter().find(|w| Some(w.id) == task.work_id) else {
            continue;
        };
        let (stdout, stderr) = super::read_heads(tx, row.id, ends.head_bytes()).await?;
        let work = EndedWork {
            row,
            // The runner's answer belongs to the one row it reported.
            answer: answer.filter(|_| ended.len() == 1),
            stdout,
            stderr,
        };
        let ending = ends.task_end(&task, &work);
        tasks::end(tx, &task, ending).await?;
    }
    Ok(())
}
