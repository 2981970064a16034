//! `job_status`: the state of one job (or synchronous run) by id, without its output. It
//! answers an ended execution the way the run tools do: a success only when the run succeeded.

use wc_domain::WorkId;
use wc_macros::{tool, tool_args};

use crate::execution::{self, ExecOutput};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;

#[tool_args]
pub struct Args {
    /// The job id returned by run_job or a running run_* call.
    #[schemars(length(min = 1, max = 64))]
    pub job_id: WorkId,
}

/// State of a job: queued, running or how it ended (exit code, byte counts, expectation match); an
/// ended job that failed answers success false with error.kind. Its output: job_log.
#[tool(reads, Execution, "Job status")]
async fn job_status(ctx: ToolContext, args: Args) -> Result<ExecOutput, ToolError> {
    let row = execution::load_job(&ctx, args.job_id).await?;
    let out = execution::view(&ctx, &row, false).await?;
    execution::settle(out)
}
