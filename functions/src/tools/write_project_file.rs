//! `write_project_file`: the whole content of one project file, created or replaced by the
//! project's runner and written atomically.

use wc_domain::{RelativePath, Sha256Hex, Text};
use wc_macros::{tool, tool_args};
use wc_runner_protocol::{WriteFileAnswer, WriteFileOp};

use crate::execution::ProjectOrSession;
use crate::execution::operation::{self, InProject};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;
use crate::workflow::evidence;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
    /// The file, relative to the project root; missing parent directories are made.
    pub path: RelativePath,
    /// The file's whole new content (UTF-8 text, at most 256 KiB).
    pub content: Text<0, { wc_runner_protocol::MAX_EDIT_TEXT_BYTES }>,
    /// The `sha256` read_files gave for the file: the file must still have that content, else
    /// the write is refused `sha256_mismatch` (with the current hash), or `path_not_found`
    /// when it is gone. Leave it out to create a file or to overwrite whatever is there.
    pub expected_sha256: Option<Sha256Hex>,
}

/// Write a project file's whole content: create it (and its directories) or replace it,
/// keeping its mode. Pass read_files' sha256 as expected_sha256 to replace only what you read.
/// For changes inside a file prefer apply_text_edits.
#[tool(consequential, Files, "Write project file", session = Works,
    with_ledger_facts(evidence::changed_file_facts), with_private_arguments(&["content"]),
)]
async fn write_project_file(
    ctx: ToolContext,
    args: Args,
) -> Result<InProject<WriteFileAnswer>, ToolError> {
    let op = WriteFileOp {
        path: args.path,
        content: args.content.into_string(),
        expected_sha256: args.expected_sha256.map(String::from),
    };
    operation::in_project(&ctx, &args.at, op).await
}
