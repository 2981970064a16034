//! `read_files`: line ranges of up to eight project files, read by the project's runner, with
//! sizes, line counts and SHA-256 of each whole file.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};
use wc_domain::RelativePath;
use wc_macros::{tool, tool_args};
use wc_runner_protocol::{FileRange, ReadFilesAnswer, ReadFilesOp};

use crate::execution::ProjectOrSession;
use crate::execution::operation::{self, InProject};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;
use crate::workflow::evidence;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
    /// The files, answered in this order (1-8).
    #[schemars(length(min = 1, max = 8))]
    pub files: Vec<FileArg>,
}

/// One file to read and the lines wanted (1-based, inclusive).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileArg {
    /// Path relative to the project root.
    pub path: RelativePath,
    /// First line (default 1).
    #[schemars(range(min = 1, max = 9007199254740991u64))]
    pub start_line: Option<u64>,
    /// Last line (default: the end of the file).
    #[schemars(range(min = 1, max = 9007199254740991u64))]
    pub end_line: Option<u64>,
}

/// Read line ranges of 1-8 project files, each with its size, line count and sha256 (for
/// apply_text_edits' expected_sha256). Text is cut at 64 KiB a file and 256 KiB a call (truncated;
/// go on with start_line).
#[tool(reads, Files, "Read files", session = Works, with_ledger_facts(facts))]
async fn read_files(ctx: ToolContext, args: Args) -> Result<InProject<ReadFilesAnswer>, ToolError> {
    let (_, target) = args.at.resolve(&ctx).await?;
    for (i, f) in args.files.iter().enumerate() {
        if let (Some(start), Some(end)) = (f.start_line, f.end_line)
            && end < start
        {
            return Err(crate::execution::invalid(
                &format!("/files/{i}/end_line"),
                "range",
                format!("files[{i}].end_line ({end}) is before start_line ({start})"),
            ));
        }
    }
    let files = args
        .files
        .into_iter()
        .map(|f| FileRange {
            path: f.path,
            start_line: f.start_line,
            end_line: f.end_line,
        })
        .collect();
    operation::answer(&ctx, target, ReadFilesOp { files }).await
}

/// The exploration evidence of a read: the paths whose text was returned.
fn facts(output: &Value) -> Map<String, Value> {
    let read = output["files"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["content"]["kind"] == "text");
    evidence::exploration_facts(read.map(|f| &f["path"]))
}
