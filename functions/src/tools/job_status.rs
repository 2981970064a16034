//! `job_status`: the state of one job (or synchronous run) by id, without its output. It
//! answers an ended execution the way the run tools do: a success only when the run succeeded.

use schemars::JsonSchema;
use serde::Deserialize;
use wc_domain::WorkId;

use crate::execution::{self, ExecOutput};
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, ToolMeta, ToolSpec};
use crate::result::ToolError;

/// The spec.
pub fn spec() -> ToolSpec {
    let meta = ToolMeta::reads(Category::Execution, "job_status", "Job status")
        .about("State of a job: queued, running or how it ended (exit code, byte counts, expectation match); an ended job that failed answers success false with error.kind. Its output: job_log.");
    ToolSpec::new(meta, run)
}

/// Arguments of `job_status`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The job id returned by run_job or a running run_* call.
    #[schemars(length(min = 1, max = 64))]
    pub job_id: WorkId,
}

async fn run(ctx: ToolContext, args: Args) -> Result<ExecOutput, ToolError> {
    let row = execution::load_job(&ctx, args.job_id).await?;
    let out = execution::view(&ctx, &row, false).await?;
    execution::settle(out)
}
