//! Calls that become durable tasks: a surface that can hand out a task (MCP, when the request
//! declares the tasks extension) offers one with the call ([`TaskOffer`]); a tool that
//! supports tasks ([`TaskSupport`]) takes the offer where it queues its runner work, which
//! writes the task row in the same transaction. The call then answers at once, its recording
//! suspended in the row, and the task ends in the transaction that ends its work, from the
//! ended work alone ([`super::CallEnds`]).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::Value;
use wc_domain::TaskId;
use wc_store::tasks::TaskRow;
use wc_store::work::EndedWork;

use crate::result::ToolError;

/// How a task-supporting tool turns its ended work into its final output: the same answer
/// the call would have given had it waited for the end, from the ended work alone.
pub type FinishTask = fn(&EndedWork<'_>) -> Result<Value, ToolError>;

/// A tool's task support.
#[derive(Clone, Copy)]
pub struct TaskSupport {
    /// Its final output from the ended work.
    pub finish: FinishTask,
    /// When it takes a task: always (a job), or only for a call whose explicit `timeout_ms`
    /// is above the server's threshold.
    pub when: TaskWhen,
}

impl std::fmt::Debug for TaskSupport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskSupport")
            .field("when", &self.when)
            .finish_non_exhaustive()
    }
}

/// When a task-supporting tool's call becomes a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskWhen {
    /// Every call that queues background work (a job).
    Background,
    /// Background work, and a call whose explicit `timeout_ms` exceeds the threshold.
    BackgroundOrLong,
}

impl TaskWhen {
    /// How docs/TOOLS.md names it.
    pub fn describe(self) -> &'static str {
        match self {
            TaskWhen::Background => "every call becomes a task (the task is the job)",
            TaskWhen::BackgroundOrLong => {
                "a call becomes a task when it runs in the background (`background: true`, where the tool takes it) or its `timeout_ms` (default 600000) exceeds `WC_TASK_THRESHOLD_MS` (default 20000)"
            }
        }
    }
}

/// The task a call may become, offered by the surface.
#[derive(Debug)]
pub struct TaskOffer {
    /// The id the task gets if the call takes the offer.
    pub id: TaskId,
    /// Time to live from creation.
    pub ttl: Duration,
    /// Suggested polling interval.
    pub poll_interval: Duration,
    /// A call with an explicit `timeout_ms` above this is long.
    pub threshold: Duration,
    /// The task row, set once, by the tool, when it queued its work as this task.
    taken: OnceLock<TaskRow>,
    /// The call's suspended recording, set by the kernel before dispatch.
    recording: OnceLock<Value>,
}

impl TaskOffer {
    /// An offer of a fresh task.
    pub fn new(ttl: Duration, poll_interval: Duration, threshold: Duration) -> Arc<TaskOffer> {
        Arc::new(TaskOffer {
            id: TaskId::generate(),
            ttl,
            poll_interval,
            threshold,
            taken: OnceLock::new(),
            recording: OnceLock::new(),
        })
    }

    /// Whether the call became this task.
    pub fn is_taken(&self) -> bool {
        self.taken.get().is_some()
    }

    pub(super) fn suspend(&self, recording: Value) {
        let _ = self.recording.set(recording);
    }

    /// The suspended recording the task row keeps.
    pub fn recording(&self) -> Value {
        self.recording.get().cloned().unwrap_or(Value::Null)
    }

    /// Marks the offer taken: `row`, the task row, is committed with the work.
    pub fn take(&self, row: TaskRow) {
        let _ = self.taken.set(row);
    }

    /// The task row the call became, once taken.
    pub fn taken(&self) -> Option<&TaskRow> {
        self.taken.get()
    }
}
