//! `close_session`: close a Workflow Session (active or finished). Idempotent.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use wc_domain::{EventKind, EventRole, Lifecycle, SessionId};
use wc_store::sessions::{Decision, NewEvent, SessionChange};

use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, SessionUse, ToolMeta, ToolSpec};
use crate::result::ToolError;
use crate::workflow::mutation;

/// The spec.
pub fn spec() -> ToolSpec {
    let meta = ToolMeta::consequential(Category::Session, "close_session", "Close session")
        .about("Close a Workflow Session; a closed session refuses every further change. Closing a closed session changes nothing.");
    ToolSpec::new(meta, run).with_session(SessionUse::Manages)
}

/// Arguments of `close_session`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
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

async fn run(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
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
