//! `close_session`: close a Workflow Session (active or finished). Idempotent.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;
use wc_domain::{EventKind, EventRole, Lifecycle, SessionId};
use wc_macros::{tool, tool_args};
use wc_store::sessions::{Decision, NewEvent, SessionChange};

use crate::kernel::context::ToolContext;
use crate::result::ToolError;
use crate::workflow::mutation;

#[tool_args]
pub struct Args {
    /// The session.
    pub session_id: SessionId,
}

/// Output of `close_session`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The session.
    pub session_id: SessionId,
    /// Now `closed`.
    pub lifecycle: Lifecycle,
    /// False when it was already closed (nothing changed).
    pub changed: bool,
}

/// Close a Workflow Session; a closed session refuses every further change. Closing a closed
/// session changes nothing.
#[tool(consequential, Session, "Close session", session = Manages)]
async fn close_session(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let invocation_id = ctx.invocation_id;
    let (changed, _) = mutation::mutate(&ctx.deps.pool, &args.session_id, move |row| {
        if row.lifecycle == Lifecycle::Closed {
            return Decision::Leave(Ok(false));
        }
        let event = NewEvent {
            kind: EventKind::SessionClosed,
            call_id: uuid::Uuid::now_v7(),
            invocation_id,
            role: EventRole::Business,
            tool_name: Some("close_session".into()),
            payload: json!({ "from": row.lifecycle }),
        };
        Decision::Write(
            SessionChange {
                lifecycle: Some(Lifecycle::Closed),
                ..Default::default()
            },
            vec![event],
            Ok(true),
        )
    })
    .await?;
    crate::execution::shell::release_for_session(&ctx, &args.session_id).await;
    Ok(Output {
        session_id: args.session_id,
        lifecycle: Lifecycle::Closed,
        changed,
    })
}
