//! `resolve_session_message`: mark a message processed. The durable processed-state
//! transition of the board; resolving an already closed message changes nothing.

use schemars::JsonSchema;
use serde::Serialize;
use wc_domain::{MessageId, MessageStatus, SessionId};
use wc_macros::tool;
use wc_store::board;

use crate::board::{self as b, MessageView};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;

/// Arguments: the message, in its session.
pub type Args = crate::board::OnMessage;

/// Output of `resolve_session_message`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The session.
    pub session_id: SessionId,
    /// The message.
    pub message_id: MessageId,
    /// Its status now (`resolved`, or `completed` for a completed todo).
    pub status: MessageStatus,
    /// Whether this call changed it (false: it was already closed).
    pub state_changed: bool,
    /// The message now.
    pub message: MessageView,
}

/// Mark a message on a Workflow Session's board as processed (resolved). Resolving a closed message
/// changes nothing. A resolved todo can no longer be completed.
#[tool(changes, Session, "Resolve session message", session = Changes)]
async fn resolve_session_message(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let session = ctx.business_session(&args.session_id)?;
    let actor = ctx.board_actor("resolve_session_message");
    let resolved = board::resolve(&ctx.deps.pool, &session.id, &args.message_id, actor)
        .await?
        .map_err(b::refused)?;
    Ok(Output {
        session_id: session.id.clone(),
        message_id: resolved.message.id.clone(),
        status: resolved.message.status,
        state_changed: resolved.changed,
        message: MessageView::from(&resolved.message),
    })
}
