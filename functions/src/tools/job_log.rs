//! `job_log`: a byte range of a job's kept stdout or stderr.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wc_domain::WorkId;
use wc_macros::{tool, tool_args};

use crate::execution;
use crate::kernel::context::ToolContext;
use crate::result::ToolError;

/// Default bytes returned by one call.
pub const DEFAULT_LIMIT: u64 = 16 * 1024;
/// Most bytes returned by one call.
pub const MAX_LIMIT: u64 = 64 * 1024;

/// Which stream.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    /// Standard output.
    #[default]
    Stdout,
    /// Standard error.
    Stderr,
}

#[tool_args]
pub struct Args {
    /// The job id.
    pub job_id: WorkId,
    /// `stdout` (default) or `stderr`.
    pub stream: Option<Stream>,
    /// Byte offset to start at (default 0; ignored with `tail`).
    #[schemars(range(min = 0, max = 8388608))]
    pub offset: Option<u64>,
    /// Bytes to return (default 16384, at most 65536).
    #[schemars(range(min = 1, max = 65536))]
    pub limit: Option<u64>,
    /// Return the last `limit` kept bytes instead of starting at `offset`.
    pub tail: Option<bool>,
}

/// Output of `job_log`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The job.
    pub job_id: WorkId,
    /// The stream read.
    pub stream: Stream,
    /// Offset of the first returned byte.
    pub offset: u64,
    /// The bytes as UTF-8 (invalid sequences replaced).
    pub data: String,
    /// Offset to continue from.
    pub next_offset: u64,
    /// Bytes kept so far for this stream.
    pub kept_bytes: u64,
    /// The job's state: `queued`, `running`, `succeeded`, `failed`, `timed_out`, `cancelled`,
    /// `rejected`, `spawn_failed` or `lost` (as in job_status).
    pub execution_state: execution::ExecState,
    /// Whether the stream is complete: the job ended and everything kept was read.
    pub complete: bool,
    /// The job wrote more than was kept (the rest is counted, not stored).
    pub truncated: bool,
}

/// Read a job's kept stdout or stderr by byte range (offset/limit) or its tail. Repeat with
/// next_offset until complete=true.
#[tool(reads, Execution, "Job log")]
async fn job_log(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let row = execution::load_job(&ctx, args.job_id).await?;
    let stream = args.stream.unwrap_or_default();
    let name = match stream {
        Stream::Stdout => "stdout",
        Stream::Stderr => "stderr",
    };
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let client = ctx.deps.client().await?;
    let mut offset = args.offset.unwrap_or(0);
    if args.tail == Some(true) {
        let (_, kept) = wc_store::work::read_output(&client, row.id, name, 0, 0).await?;
        offset = (kept as u64).saturating_sub(limit);
    }
    let (bytes, kept) = wc_store::work::read_output(
        &client,
        row.id,
        name,
        offset.min(i64::MAX as u64) as i64,
        limit as i64,
    )
    .await?;
    drop(client);
    let view = execution::view(&ctx, &row, false).await?;
    let next_offset = offset + bytes.len() as u64;
    let kept = kept as u64;
    Ok(Output {
        job_id: WorkId::from(row.id),
        stream,
        offset,
        data: String::from_utf8_lossy(&bytes).into_owned(),
        next_offset,
        kept_bytes: kept,
        complete: row.is_terminal() && next_offset >= kept,
        truncated: match stream {
            Stream::Stdout => view.stdout_truncated,
            Stream::Stderr => view.stderr_truncated,
        },
        execution_state: view.execution_state,
    })
}
