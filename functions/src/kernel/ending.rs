//! How a task's call ends: once its work has ended, from durable state alone, with the result
//! the call would have given and the `finished` events its suspended recording owes.

use super::ToolRuntime;
use super::ports::Outcome;
use super::telemetry::ExecutionState;
use crate::deps::Deps;
use crate::result::{ErrorKind, ToolError, ToolResult};

/// How a task's call ended: its result and the `finished` events its recording owes.
#[derive(Debug)]
pub struct TaskEnd {
    /// The call's result, as the call would have answered had it waited.
    pub result: ToolResult,
    /// The call's `tool_call_finished` events, per session.
    pub events: Vec<(wc_domain::SessionId, Vec<wc_store::sessions::NewEvent>)>,
    /// How the work ended.
    pub work_state: wc_domain::WorkState,
}

impl ToolRuntime {
    /// The end of `task`'s call, once its work has ended (while it runs: the work). The same
    /// answer on every instance and every attempt: it is read from durable state alone.
    pub async fn end_task(
        &self,
        deps: &Deps,
        task: &wc_store::tasks::TaskRow,
    ) -> Result<Result<TaskEnd, wc_store::work::WorkRow>, ToolError> {
        let spec = self
            .get(&task.tool)
            .ok_or_else(|| ToolError::internal(format!("task of unknown tool {}", task.tool)))?;
        let (Some(support), Some(work_id)) = (spec.task, task.work_id) else {
            return Err(ToolError::internal(format!(
                "task of {} has no work to wait for",
                task.tool
            )));
        };
        let (work, answer) = {
            let client = deps.client().await?;
            wc_store::work::get_answered(&client, work_id).await?
        }
        .ok_or_else(|| ToolError::internal("the task's work vanished"))?;
        if !work.is_terminal() {
            return Ok(Err(work));
        }
        let work_state = work.state;
        let result = match (support.finish)(deps, work, answer).await {
            Ok(output) => ToolResult::ok(output),
            // A failure to read the result says nothing of the call: the task stays open
            // and the next poll (or upkeep pass) reads it again.
            Err(e) if matches!(e.kind, ErrorKind::Unavailable | ErrorKind::Internal) => {
                return Err(e);
            }
            Err(e) => ToolResult::err(e),
        };
        let elapsed = chrono::Utc::now() - task.created_at;
        let outcome = Outcome {
            result: &result,
            execution: ExecutionState::Completed,
            duration_ms: elapsed.num_milliseconds().max(0) as u64,
        };
        let events = self
            .ports
            .recorder
            .finished_events(&task.recording, spec, outcome);
        Ok(Ok(TaskEnd {
            result,
            events,
            work_state,
        }))
    }
}
