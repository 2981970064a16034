//! `apply_text_edits`: the canonical edit — exact-text replacements in one file, applied
//! all-or-nothing by the project's runner and written atomically.

use schemars::JsonSchema;
use serde::Deserialize;

use wc_domain::{RelativePath, Sha256Hex, Text};
use wc_macros::{tool, tool_args};
use wc_runner_protocol::{TextEdit, TextEditsAnswer, TextEditsOp};

use crate::execution::operation::{self, InProject};
use crate::execution::{ProjectOrSession, invalid};
use crate::kernel::context::ToolContext;
use crate::kernel::spec::EditSurface;
use crate::result::ToolError;
use crate::workflow::evidence;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
    /// The file, relative to the project root.
    pub path: RelativePath,
    /// The `sha256` read_files gave for the file: the edit is refused `sha256_mismatch` (with
    /// the current hash) if the file changed since.
    pub expected_sha256: Option<Sha256Hex>,
    /// The replacements (1-64), each located in the file as it was before any of them;
    /// matched ranges must not overlap.
    #[schemars(length(min = 1, max = 64))]
    pub edits: Vec<EditArg>,
    /// Create a new file (default false): exactly one edit with an empty `old_text`, whose
    /// `new_text` is the content; parent directories are made. Refused `already_exists` if the
    /// file exists.
    pub create: Option<bool>,
}

/// An edit's `old_text` or `new_text`: all of them together are bounded by the runner
/// ([`wc_runner_protocol::MAX_EDIT_TEXT_BYTES`] bytes), so one is never longer.
type EditText = Text<0, { wc_runner_protocol::MAX_EDIT_TEXT_BYTES }>;

/// One exact-text replacement.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArg {
    /// The text to replace, exactly as in the file (whitespace and line breaks included;
    /// `\n` also matches the `\r\n` of a CRLF file).
    pub old_text: EditText,
    /// What replaces it.
    pub new_text: EditText,
    /// Which match to replace (1-based) when `old_text` matches more than once; without it
    /// `old_text` must match exactly once.
    #[schemars(range(min = 1))]
    pub occurrence: Option<u32>,
}

/// Edit one project file by exact-text replacement: each old_text must match exactly once (or name
/// its occurrence); all edits apply or none. Pass read_files' sha256 as expected_sha256 so a file
/// changed meanwhile is refused.
#[tool(consequential, Files, "Apply text edits", session = Works,
    with_ledger_facts(evidence::changed_file_facts), with_edit_surface(EditSurface::Canonical),
    with_private_arguments(&["edits"]),
)]
async fn apply_text_edits(
    ctx: ToolContext,
    args: Args,
) -> Result<InProject<TextEditsAnswer>, ToolError> {
    let (_, target) = args.at.resolve(&ctx).await?;
    let create = args.create.unwrap_or(false);
    if let Some(i) = args.edits.iter().position(|e| e.old_text.is_empty())
        && !create
    {
        return Err(invalid(
            &format!("/edits/{i}/old_text"),
            "minLength",
            format!(
                "edits[{i}].old_text is empty; give the exact text to replace (or create: true to make a new file)"
            ),
        ));
    }
    let op = TextEditsOp {
        path: args.path,
        expected_sha256: args.expected_sha256.map(String::from),
        edits: args
            .edits
            .into_iter()
            .map(|e| TextEdit {
                old_text: e.old_text.into_string(),
                new_text: e.new_text.into_string(),
                occurrence: e.occurrence,
            })
            .collect(),
        create,
    };
    operation::answer(&ctx, target, op).await
}
