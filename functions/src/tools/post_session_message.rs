//! `post_session_message`: post a note, question, todo or answer to a session's message board.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wc_domain::{MessageId, MessageKind, Priority, SessionId, Text};
use wc_macros::tool;
use wc_store::board::{self, NewMessage};

use crate::board::{self as b, MessageView};
use crate::kernel::context::ToolContext;
use crate::redaction::redact;
use crate::result::{ErrorKind, ToolError};

fn answer_needs_reply_to(schema: &mut schemars::Schema) {
    schema.insert(
        "if".into(),
        serde_json::json!({"properties": {"kind": {"const": "answer"}}, "required": ["kind"]}),
    );
    schema.insert("then".into(), serde_json::json!({"required": ["reply_to"]}));
}

/// Arguments of `post_session_message`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = answer_needs_reply_to)]
pub struct Args {
    /// The session whose board to post to.
    pub session_id: SessionId,
    /// `note`, `question`, `todo` or `answer` (an answer needs `reply_to`).
    pub kind: MessageKind,
    /// The message (1-4,000 characters; secrets are redacted before it is stored).
    pub body: Text<1, 4000>,
    /// Keep re-projecting it on calls recorded in this session until it is acknowledged
    /// (`ack_session_message_ids`) or resolved. Default false.
    pub ack_required: Option<bool>,
    /// The message this one replies to (same session).
    pub reply_to: Option<MessageId>,
    /// `low`, `normal` (default) or `high`.
    pub priority: Option<Priority>,
}

/// Output of `post_session_message`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The session.
    pub session_id: SessionId,
    /// The new message's id.
    pub message_id: MessageId,
    /// The message as stored.
    pub message: MessageView,
}

/// A body as stored: redacted, with whether redaction changed it.
pub fn stored_body(raw: &str) -> Result<(String, bool), ToolError> {
    if raw.chars().count() > b::MAX_BODY_CHARS || raw.is_empty() || raw.contains('\0') {
        return Err(ToolError::new(
            ErrorKind::InvalidArguments,
            format!(
                "a message body is 1-{} characters without NUL",
                b::MAX_BODY_CHARS
            ),
        ));
    }
    let redacted = redact(raw);
    let changed = redacted != raw;
    Ok((redacted.into_owned(), changed))
}

/// Post a note, question, todo or answer to a Workflow Session's message board (redacted). Pass
/// your own session as recording_session_id to be named as the author.
#[tool(changes, Session, "Post session message", session = Changes)]
async fn post_session_message(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let session = ctx.business_session(&args.session_id)?;
    if args.kind == MessageKind::Answer && args.reply_to.is_none() {
        return Err(ToolError::new(
            ErrorKind::InvalidArguments,
            "an answer replies to a message: reply_to is required",
        )
        .with("field", "reply_to"));
    }
    let (body, body_redacted) = stored_body(&args.body)?;
    let message = NewMessage {
        id: MessageId::generate(),
        kind: args.kind,
        priority: args.priority.unwrap_or(Priority::Normal),
        ack_required: args.ack_required.unwrap_or(false),
        reply_to: args.reply_to,
        body,
        body_redacted,
        author_session_id: ctx.recorder.as_ref().map(|r| r.id.clone()),
    };
    let actor = ctx.board_actor("post_session_message");
    let posted = board::post(&ctx.deps.pool, &session.id, message, actor)
        .await?
        .map_err(b::refused)?;
    Ok(Output {
        session_id: session.id.clone(),
        message_id: posted.message.id.clone(),
        message: MessageView::from(&posted.message),
    })
}
