//! `apply_patch`: the advanced edit — a unified diff applied by the project's runner across
//! its files, all of them or none.

use serde_json::{Map, Value};
use wc_domain::Text;
use wc_macros::{tool, tool_args};
use wc_runner_protocol::{PatchAnswer, PatchOp};

use crate::execution::ProjectOrSession;
use crate::execution::operation::{self, InProject};
use crate::kernel::context::ToolContext;
use crate::kernel::spec::EditSurface;
use crate::result::ToolError;
use crate::workflow::evidence;

#[tool_args]
pub struct Args {
    #[serde(flatten)]
    pub at: ProjectOrSession,
    /// A unified diff as `git diff` or `diff -u` write it (`a/`, `b/` prefixes, `/dev/null`
    /// to create or delete), paths relative to the project root; at most 512 KiB and 64 files.
    pub patch: Text<1, 524288>,
}

/// Apply a unified diff across project files, all or nothing: every hunk must match the current
/// files exactly (no fuzz) before any file is written. Prefer apply_text_edits for ordinary edits.
#[tool(consequential, Files, "Apply patch", session = Works,
    with_ledger_facts(facts), with_edit_surface(EditSurface::Advanced),
    with_private_arguments(&["patch"]),
)]
async fn apply_patch(ctx: ToolContext, args: Args) -> Result<InProject<PatchAnswer>, ToolError> {
    operation::in_project(
        &ctx,
        &args.at,
        PatchOp {
            patch: args.patch.into_string(),
        },
    )
    .await
}

/// The change evidence of a patch: the files it added, changed or deleted.
fn facts(output: &Value) -> Map<String, Value> {
    let files = output["files"].as_array().into_iter().flatten();
    evidence::path_facts("changed_paths", files.map(|f| &f["path"]))
}
