//! `apply_patch`: the advanced edit — a unified diff applied by the project's runner across
//! its files, all of them or none.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use wc_domain::{ProjectId, SessionId};
use wc_runner_protocol::{EditOp, PatchAnswer, PatchOp, WorkAnswer, WorkSpec};

use crate::auth::Scope;
use crate::execution::operation;
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, EditSurface, SessionUse, ToolMeta, ToolSpec};
use crate::result::ToolError;
use crate::workflow::evidence;

/// Arguments of `apply_patch`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("anyOf" = [
    {"required": ["project"], "properties": {"project": {"type": "string"}}},
    {"required": ["session_id"], "properties": {"session_id": {"type": "string"}}}
]))]
pub struct Args {
    /// Project id (`agent:<runner>:<name>`); default: the session's.
    pub project: Option<ProjectId>,
    /// A unified diff as `git diff` or `diff -u` write it (`a/`, `b/` prefixes, `/dev/null`
    /// to create or delete), paths relative to the project root; at most 512 KiB and 64 files.
    #[schemars(length(min = 1, max = 524288), regex(pattern = r"^[^\u0000]*$"))]
    pub patch: String,
    /// Workflow Session this edit belongs to (refused in a `read_only` session).
    pub session_id: Option<SessionId>,
}

/// What `apply_patch` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The project patched.
    pub project: ProjectId,
    /// The change.
    #[serde(flatten)]
    pub patch: PatchAnswer,
}

/// The spec.
pub fn spec() -> ToolSpec {
    ToolSpec::new(
        ToolMeta {
            name: "apply_patch",
            title: "Apply patch",
            description: "Apply a unified diff to the project on the build host, across its files, all or nothing: every hunk is checked against the current files (exact context, no fuzz; a hunk may have moved up to 200 lines) before any file is written. A hunk that does not match is patch_does_not_apply naming the file and hunk; unreadable input is invalid_arguments naming the line. Prefer apply_text_edits for ordinary edits.",
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
    .with_edit_surface(EditSurface::Advanced)
}

async fn run(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let (_, target) =
        operation::target(&ctx, args.project.as_ref(), args.session_id.as_ref()).await?;
    let spec = WorkSpec::Edit(EditOp::Patch(PatchOp { patch: args.patch }));
    match operation::run(&ctx, &target, "apply_patch", spec).await? {
        WorkAnswer::Patch(patch) => Ok(Output {
            project: target.project_id,
            patch,
        }),
        other => Err(operation::mismatched(&other)),
    }
}

/// The change evidence of a patch: the files it added, changed or deleted.
fn facts(output: &Value) -> Map<String, Value> {
    let files = output["files"].as_array().into_iter().flatten();
    evidence::path_facts("changed_paths", files.map(|f| &f["path"]))
}
