//! How a task's call ends: in the transaction that ends its work, from the ended work alone,
//! with the result the call would have given and the `finished` events its suspended recording
//! owes. Every instance and every retry decides the same.

use std::sync::Arc;

use wc_store::tasks::TaskRow;
use wc_store::work::EndedWork;

use super::Registry;
use super::ports::{Outcome, Recorder};
use super::telemetry::ExecutionState;
use crate::result::{ToolError, ToolResult};

/// How a task's call ended: its result and the `finished` events its recording owes.
#[derive(Debug)]
pub struct TaskEnd {
    /// The call's result, as the call would have answered had it waited.
    pub result: ToolResult,
    /// The call's `tool_call_finished` events, per session.
    pub events: Vec<(wc_domain::SessionId, Vec<wc_store::sessions::NewEvent>)>,
}

/// The ends of task calls: the registry whose tools finish them and the recorder that owes
/// their events.
#[derive(Clone)]
pub struct CallEnds {
    pub(super) registry: Arc<Registry>,
    pub(super) recorder: Arc<dyn Recorder>,
}

impl std::fmt::Debug for CallEnds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallEnds").finish_non_exhaustive()
    }
}

impl CallEnds {
    /// The end of `task`'s call, now that its work has ended as `work` says. An error only when
    /// this build cannot finish the task (its tool is unknown or takes no tasks).
    pub fn end(&self, task: &TaskRow, work: &EndedWork<'_>) -> Result<TaskEnd, ToolError> {
        let spec = self
            .registry
            .get(&task.tool)
            .ok_or_else(|| ToolError::internal(format!("task of unknown tool {}", task.tool)))?;
        let support = spec
            .task
            .ok_or_else(|| ToolError::internal(format!("{} takes no tasks", task.tool)))?;
        let result = match (support.finish)(work) {
            Ok(output) => ToolResult::ok(output),
            Err(e) => ToolResult::err(e),
        };
        let elapsed = chrono::Utc::now() - task.created_at;
        let outcome = Outcome {
            result: &result,
            execution: ExecutionState::Completed,
            duration_ms: elapsed.num_milliseconds().max(0) as u64,
        };
        let events = self
            .recorder
            .finished_events(&task.recording, spec, outcome);
        Ok(TaskEnd { result, events })
    }
}
