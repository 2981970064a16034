//! `apply_text_edits`: the canonical edit — exact-text replacements in one file, applied
//! all-or-nothing by the project's runner and written atomically.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use wc_domain::{ProjectId, RelativePath, SessionId};
use wc_runner_protocol::{EditOp, TextEdit, TextEditsAnswer, TextEditsOp, WorkAnswer, WorkSpec};

use crate::auth::Scope;
use crate::execution::{invalid, operation};
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, EditSurface, SessionUse, ToolMeta, ToolSpec};
use crate::result::ToolError;
use crate::workflow::evidence;

/// Arguments of `apply_text_edits`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("anyOf" = [
    {"required": ["project"], "properties": {"project": {"type": "string"}}},
    {"required": ["session_id"], "properties": {"session_id": {"type": "string"}}}
]))]
pub struct Args {
    /// Project id (`agent:<runner>:<name>`); default: the session's.
    pub project: Option<ProjectId>,
    /// The file, relative to the project root.
    pub path: RelativePath,
    /// The `sha256` read_files gave for the file: the edit is refused `sha256_mismatch` (with
    /// the current hash) if the file changed since.
    #[schemars(regex(pattern = r"^[0-9a-f]{64}$"))]
    pub expected_sha256: Option<String>,
    /// The replacements (1-64), each located in the file as it was before any of them;
    /// matched ranges must not overlap.
    #[schemars(length(min = 1, max = 64))]
    pub edits: Vec<EditArg>,
    /// Create a new file (default false): exactly one edit with an empty `old_text`, whose
    /// `new_text` is the content; parent directories are made. Refused `already_exists` if the
    /// file exists.
    pub create: Option<bool>,
    /// Workflow Session this edit belongs to (refused in a `read_only` session).
    pub session_id: Option<SessionId>,
}

/// One exact-text replacement.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArg {
    /// The text to replace, exactly as in the file (whitespace and line breaks included;
    /// `\n` also matches the `\r\n` of a CRLF file).
    #[schemars(regex(pattern = r"^[^\u0000]*$"))]
    pub old_text: String,
    /// What replaces it.
    #[schemars(regex(pattern = r"^[^\u0000]*$"))]
    pub new_text: String,
    /// Which match to replace (1-based) when `old_text` matches more than once; without it
    /// `old_text` must match exactly once.
    #[schemars(range(min = 1))]
    pub occurrence: Option<u32>,
}

/// What `apply_text_edits` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The project edited.
    pub project: ProjectId,
    /// The edit.
    #[serde(flatten)]
    pub edit: TextEditsAnswer,
}

/// The spec.
pub fn spec() -> ToolSpec {
    ToolSpec::new(
        ToolMeta {
            name: "apply_text_edits",
            title: "Apply text edits",
            description: "Edit one project file on the build host by exact-text replacement: each old_text must match exactly once (or name its occurrence); all edits apply together or none do. Pass the sha256 from read_files as expected_sha256 so a file changed meanwhile is refused (sha256_mismatch, with current_sha256). Conflicts are typed (multiple_matches, match_not_found, occurrence_out_of_range, overlapping_edits, sha256_mismatch) and name the edit. The write is atomic and keeps permissions and CRLF line endings; the result has the new sha256 and a unified diff. create: true makes a new file.",
            category: Category::Files,
            scopes: &[Scope::ProjectWrite],
            read_only: false,
            consequential: true,
            rest_operation: true,
        },
        run,
    )
    .with_session(SessionUse::Works)
    .with_ledger_facts(facts)
    .with_edit_surface(EditSurface::Canonical)
}

async fn run(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let (_, target) =
        operation::target(&ctx, args.project.as_ref(), args.session_id.as_ref()).await?;
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
        expected_sha256: args.expected_sha256,
        edits: args
            .edits
            .into_iter()
            .map(|e| TextEdit {
                old_text: e.old_text,
                new_text: e.new_text,
                occurrence: e.occurrence,
            })
            .collect(),
        create,
    };
    let spec = WorkSpec::Edit(EditOp::TextEdits(op));
    match operation::run(&ctx, &target, "apply_text_edits", spec).await? {
        WorkAnswer::TextEdits(edit) => Ok(Output {
            project: target.project_id,
            edit,
        }),
        other => Err(operation::mismatched(&other)),
    }
}

/// The change evidence of an edit: the file, when it changed.
fn facts(output: &Value) -> Map<String, Value> {
    let changed = (output["changed"] == true).then_some(&output["path"]);
    evidence::path_facts("changed_paths", changed.into_iter())
}
