//! The context sidecar: materials a stateless MCP request asks for with `context_request`
//! (`{"materials": [name, …]}`), projected into the result's `context_materials` after the
//! tool ran — an after-call port of the kernel.
//!
//! A static registry authorizes each name before its provider is read:
//! - `webcodex.workflow` — public: how to work with wc (the guidance `work_on_project` gives);
//! - `project.instructions` — the call's explicit `project` argument, visible to the caller,
//!   and `project:read`: the instruction files read on the build host
//!   ([`crate::execution::instructions`]);
//! - `skills.catalog`, `plugins.catalog`, `memory.bootstrap` — capabilities this server does
//!   not offer: `unavailable`.
//!
//! A denial or an unknown name is a bounded `unavailable` material, never a failure of the call.
//! Nothing is inferred from a session, a connection or a credential: a project comes only from
//! the call's own `project` argument.

use serde_json::{Map, Value, json};

use crate::auth::Scope;
use crate::kernel::context::ToolContext;
use crate::kernel::ports::{AfterCall, CallFacts, PortFuture, Sessions};
use crate::result::ToolResult;

/// How to work with wc, as `work_on_project` and the `webcodex.workflow` material give it.
pub const WORKFLOW_GUIDANCE: &str = "Pass the session_id as recording_session_id on every later call so the work is recorded. \
Call session_handoff_summary(session_id) when you need to recover context, and finish_coding_task(session_id) when the task is done. \
Every tool returns {success, output, error}; error.kind is stable and says what to do.";

/// The workflow guidance material.
pub fn workflow_guidance() -> Value {
    json!({ "version": 1, "text": WORKFLOW_GUIDANCE })
}

/// The after-call port projecting requested materials.
#[derive(Debug, Default)]
pub struct ContextSidecar;

impl AfterCall for ContextSidecar {
    fn project<'a>(
        &'a self,
        ctx: &'a ToolContext,
        call: &'a CallFacts<'a>,
        _: &'a Sessions,
        result: &'a mut ToolResult,
    ) -> PortFuture<'a, ()> {
        Box::pin(async move {
            let names = &call.wrapper.context_materials;
            if names.is_empty() {
                return;
            }
            let mut materials = Map::new();
            for name in names {
                if materials.contains_key(name) {
                    continue;
                }
                let material = provide(ctx, call, name).await;
                materials.insert(name.clone(), material);
            }
            result.context_materials = Some(materials);
        })
    }
}

/// One material, or why it is not given.
async fn provide(ctx: &ToolContext, call: &CallFacts<'_>, name: &str) -> Value {
    match name {
        "webcodex.workflow" => {
            let mut m = workflow_guidance();
            m["status"] = json!("available");
            m
        }
        "project.instructions" => {
            let Some(project) = &call.project else {
                return unavailable("project_required");
            };
            if !ctx.principal.scopes.contains(Scope::ProjectRead) {
                return unavailable("scope_denied");
            }
            crate::execution::instructions::read(ctx, project).await
        }
        "skills.catalog" | "plugins.catalog" | "memory.bootstrap" => unavailable("not_offered"),
        _ => unavailable("unknown_material"),
    }
}

fn unavailable(reason: &str) -> Value {
    json!({ "status": "unavailable", "reason_code": reason })
}
