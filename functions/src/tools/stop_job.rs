//! `stop_job`: stop a job. Queued work is cancelled at once; running work is stopped by its
//! runner (SIGINT, then SIGTERM, then SIGKILL on the whole process group) at its next
//! heartbeat. Stopping an ended job changes nothing.

use schemars::JsonSchema;
use serde::Serialize;
use wc_domain::WorkId;
use wc_macros::{tool, tool_args};

use crate::execution::{self, ExecOutput};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;

#[tool_args]
pub struct Args {
    /// The job id.
    pub job_id: WorkId,
}

/// Output of `stop_job`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// Whether a stop is now requested or done (false: it had already ended).
    pub stop_requested: bool,
    /// The job as it stands after the request.
    pub job: ExecOutput,
}

/// Stop a job: a queued one is cancelled at once, a running one interrupted (its whole process
/// group) within a heartbeat; an ended one is left as it is.
#[tool(consequential, Execution, "Stop job")]
async fn stop_job(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let row = execution::load_job(&ctx, args.job_id).await?;
    let stop_requested = !row.is_terminal();
    if stop_requested {
        let mut client = ctx.deps.client().await?;
        wc_store::work::request_cancel(&mut client, row.id, &*ctx.deps.work_ends).await?;
    }
    let row = execution::load_job(&ctx, args.job_id).await?;
    let job = execution::view(&ctx, &row, false).await?;
    Ok(Output {
        stop_requested,
        job,
    })
}
