//! `get_session_assignment`: one consistent snapshot of a todo and its retained direct replies,
//! with the assignment fence a completion must present.

use schemars::JsonSchema;
use serde::Serialize;
use wc_domain::{MessageId, MessageKind, SessionId};
use wc_macros::tool;
use wc_store::board;

use crate::board::{self as b, AssignmentView};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;

/// Arguments: the message, in its session.
pub type Args = crate::board::OnMessage;

/// Output of `get_session_assignment`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The session.
    pub session_id: SessionId,
    /// The todo and its direct replies.
    pub assignment: AssignmentView,
    /// Opaque fence of this snapshot; pass it as `expected_assignment_fence` to
    /// `complete_session_message`. Null when the todo cannot be completed.
    pub assignment_fence: Option<String>,
}

/// The current assignment of `todo_id` and its fence.
pub async fn current(
    ctx: &ToolContext,
    session_id: &SessionId,
    todo_id: &MessageId,
) -> Result<(AssignmentView, Option<String>), ToolError> {
    let keys = b::keys(&ctx.deps).await?;
    let snapshot = board::assignment(&ctx.deps.pool, session_id, todo_id)
        .await?
        .ok_or_else(|| b::unknown_message("message_id"))?;
    if snapshot.todo.kind != MessageKind::Todo {
        return Err(b::not_a_todo(snapshot.todo.kind));
    }
    Ok(b::assignment_view(keys, &snapshot))
}

/// Read one todo of a Workflow Session's board with its direct replies in one consistent snapshot,
/// and the assignment_fence that complete_session_message requires.
#[tool(reads, Session, "Get session assignment", session = Reads)]
async fn get_session_assignment(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let session = ctx.business_session(&args.session_id)?;
    let (assignment, assignment_fence) = current(&ctx, &session.id, &args.message_id).await?;
    Ok(Output {
        session_id: session.id.clone(),
        assignment,
        assignment_fence,
    })
}
