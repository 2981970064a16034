//! `list_session_messages`: a bounded, filtered view of a session's message board.

use schemars::JsonSchema;
use serde::Serialize;
use wc_domain::{MessageId, MessageKind, MessageStatus, SessionId};
use wc_macros::{tool, tool_args};
use wc_store::board::{self, ListFilter};

use crate::board::MessageView;
use crate::kernel::context::ToolContext;
use crate::result::ToolError;

#[tool_args]
pub struct Args {
    /// The session.
    pub session_id: SessionId,
    /// Only messages with this status.
    pub status: Option<MessageStatus>,
    /// Only messages of this kind.
    pub kind: Option<MessageKind>,
    /// Only direct replies of this message.
    pub reply_to: Option<MessageId>,
    /// Newest messages to return (default 50, at most 200).
    #[schemars(range(min = 1, max = 200))]
    pub limit: Option<u32>,
}

/// Output of `list_session_messages`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The session.
    pub session_id: SessionId,
    /// Matching retained messages, newest first.
    pub messages: Vec<MessageView>,
    /// How many were returned.
    pub returned: usize,
    /// How many retained messages match.
    pub total: i64,
    /// Whether some matching messages are not shown.
    pub truncated: bool,
    /// Counts of the whole retained board.
    pub counts: Counts,
    /// Messages retained per session at most.
    pub retained_limit: i32,
}

/// Counts of a retained board.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Counts {
    /// Retained messages.
    pub retained: i64,
    /// Open ones.
    pub open: i64,
    /// Open questions.
    pub open_questions: i64,
    /// Open todos.
    pub open_todos: i64,
    /// Open messages that require an ACK.
    pub open_ack_required: i64,
}

/// List a Workflow Session's message board, newest first (50 by default, at most 200), filtered by
/// status, kind or reply_to, with the board's counts.
#[tool(reads, Session, "List session messages", session = Reads)]
async fn list_session_messages(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let session = ctx.business_session(&args.session_id)?;
    let filter = ListFilter {
        status: args.status,
        kind: args.kind,
        reply_to: args.reply_to,
    };
    let limit = i64::from(args.limit.unwrap_or(50).clamp(1, 200));
    let (messages, total, counts) =
        board::list(&ctx.deps.pool, &session.id, &filter, limit).await?;
    let messages: Vec<MessageView> = messages.iter().map(MessageView::from).collect();
    Ok(Output {
        session_id: session.id.clone(),
        returned: messages.len(),
        truncated: (messages.len() as i64) < total,
        messages,
        total,
        counts: Counts {
            retained: counts.retained,
            open: counts.open,
            open_questions: counts.open_questions,
            open_todos: counts.open_todos,
            open_ack_required: counts.open_ack_required,
        },
        retained_limit: board::MAX_RETAINED_MESSAGES,
    })
}
