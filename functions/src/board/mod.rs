//! The session message board in the functions: message ids, the token keys, the message and
//! assignment views the board tools return, the store's refusals as tool errors, ACK
//! observation and `session_attention` for recorded calls.
//!
//! The board itself lives in [`wc_store::board`]; the tools are `post_session_message`,
//! `list_session_messages`, `resolve_session_message`, `get_session_assignment`,
//! `complete_session_message` and `observe_session_messages`.

use chrono::{DateTime, Utc};
use rand::RngCore;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wc_domain::{MessageId, MessageKind, MessageStatus, Priority, SessionId};
use wc_store::board::{self, AssignmentSnapshot, MessageRow, Refusal};
use wc_store::sessions::SessionRow;

use crate::deps::Deps;
use crate::kernel::context::ToolContext;
use crate::kernel::ports::{AfterCall, CallFacts, PortFuture, Sessions};
use crate::result::{ErrorKind, ToolError, ToolResult};
use crate::tokens::{SessionBinding, TokenKeys, TokenProblem};

/// Longest message body, in Unicode characters.
pub const MAX_BODY_CHARS: usize = 4000;
/// Most messages `session_attention` re-projects on one result.
pub const MAX_ATTENTION_MESSAGES: i64 = 5;
/// Longest body excerpt in `session_attention`, in characters.
pub const ATTENTION_EXCERPT_CHARS: usize = 300;
/// Name of the database-kept secret used when `WC_TOKEN_SECRET` is not configured.
const SECRET_NAME: &str = "board_tokens";

/// The token keys of this deployment: from `WC_TOKEN_SECRET`, else from the secret kept in the
/// database (generated on first use). Derived once per process: the secret is configuration,
/// not session state.
pub async fn keys(deps: &Deps) -> Result<&TokenKeys, ToolError> {
    deps.token_keys
        .get_or_try_init(|| async {
            if let Some(secret) = &deps.config.token_secret {
                return Ok(TokenKeys::new(secret.expose()));
            }
            let client = deps.client().await?;
            let secret = board::server_secret(&client, SECRET_NAME, || {
                let mut s = vec![0u8; 32];
                rand::rng().fill_bytes(&mut s);
                s
            })
            .await?;
            Ok(TokenKeys::new(&secret))
        })
        .await
}

/// What a token is bound to for `session`.
pub fn binding(session: &SessionRow) -> SessionBinding<'_> {
    SessionBinding {
        id: &session.id,
        generation: session.created_at.timestamp_micros(),
    }
}

/// A refusal of the board as a tool error.
pub fn refused(r: Refusal) -> ToolError {
    match r {
        Refusal::SessionNotFound => ToolError::new(
            ErrorKind::UnknownSessionId,
            "session_id names no session this caller can use",
        )
        .with("field", "session_id"),
        Refusal::SessionClosed(lifecycle) => ToolError::new(
            ErrorKind::SessionClosed,
            format!("the session is {lifecycle}; its board accepts no changes"),
        )
        .with("field", "session_id")
        .with("lifecycle", lifecycle.as_str()),
        Refusal::UnknownMessage(field) => unknown_message(field),
        Refusal::NotATodo(kind) => not_a_todo(kind),
        Refusal::CompletionKeyConflict => ToolError::new(
            ErrorKind::CompletionKeyConflict,
            "completion_key was already used for a different completion; use a new key for a new intent",
        )
        .with("field", "completion_key"),
    }
}

/// `unknown_message` naming the argument.
pub fn unknown_message(field: &'static str) -> ToolError {
    ToolError::new(
        ErrorKind::UnknownMessage,
        format!("{field} names no message on this session's board"),
    )
    .with("field", field)
}

/// `not_a_todo` for a message of `kind`.
pub fn not_a_todo(kind: MessageKind) -> ToolError {
    ToolError::new(
        ErrorKind::NotATodo,
        format!("the message is a {kind}; only todos have assignments and completions"),
    )
    .with("field", "message_id")
    .with("message_kind", kind.as_str())
}

/// A refused observation token or fence as a tool error.
pub fn bad_token(kind: ErrorKind, field: &'static str, problem: TokenProblem) -> ToolError {
    let what = match problem {
        TokenProblem::Oversized => "is longer than any token this server issues",
        TokenProblem::Malformed => "is not one this server issued (malformed or altered)",
        TokenProblem::WrongSession => "was issued for another session",
        TokenProblem::WrongGeneration => "was issued for an earlier incarnation of this session",
        TokenProblem::FutureRevision => "claims a revision this session has not reached",
        TokenProblem::WrongMessage => "was issued for another message",
    };
    ToolError::new(kind, format!("{field} {what}"))
        .with("field", field)
        .with("reason", problem.as_str())
}

/// The message a board tool acts on, in the session that holds it: the arguments of
/// `get_session_assignment` and `resolve_session_message`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OnMessage {
    /// The session that holds the message.
    pub session_id: SessionId,
    /// The message (for an assignment: the todo).
    pub message_id: MessageId,
}

/// A message as the board tools return it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MessageView {
    /// The message's id.
    pub message_id: MessageId,
    /// Position in the session's posting order (1, 2, …).
    pub number: i64,
    /// Kind.
    pub kind: MessageKind,
    /// Priority.
    pub priority: Priority,
    /// Whether recorded calls re-project it until it is acknowledged or resolved.
    pub ack_required: bool,
    /// The message it replies to.
    pub reply_to: Option<MessageId>,
    /// Status.
    pub status: MessageStatus,
    /// The body (secrets redacted before storage).
    pub body: String,
    /// Whether redaction changed the body.
    pub body_redacted: bool,
    /// The recording session that posted it; absent when the post was not recorded.
    pub author_session_id: Option<SessionId>,
    /// When an ACK of it was first observed (bookkeeping only: not a read receipt).
    pub first_ack_observed_at: Option<DateTime<Utc>>,
    /// Todos: the answer that completed it.
    pub answer_message_id: Option<MessageId>,
    /// Todos: direct replies posted to it.
    pub reply_count: Option<i32>,
    /// Posted at.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// Resolved or completed at.
    pub closed_at: Option<DateTime<Utc>>,
}

impl From<&MessageRow> for MessageView {
    fn from(m: &MessageRow) -> Self {
        MessageView {
            message_id: m.id.clone(),
            number: m.number,
            kind: m.kind,
            priority: m.priority,
            ack_required: m.ack_required,
            reply_to: m.reply_to.clone(),
            status: m.status,
            body: m.body.clone(),
            body_redacted: m.body_redacted,
            author_session_id: m.author_session_id.clone(),
            first_ack_observed_at: m.first_ack_observed_at,
            answer_message_id: m.answer_message_id.clone(),
            reply_count: (m.kind == MessageKind::Todo).then_some(m.reply_count),
            created_at: m.created_at,
            updated_at: m.updated_at,
            closed_at: m.closed_at,
        }
    }
}

/// One assignment: a todo and its retained direct replies, as of one snapshot.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AssignmentView {
    /// The todo.
    pub todo: MessageView,
    /// Its direct replies in posting order (at most 50).
    pub replies: Vec<MessageView>,
    /// Direct replies ever posted to the todo.
    pub replies_total: i64,
    /// Whether some replies are not shown (more than 50, or removed by retention).
    pub replies_truncated: bool,
    /// Whether a completion can be proven against this snapshot.
    pub completable: bool,
    /// Why not, when it cannot: `todo_completed`, `todo_resolved`, `replies_lost_to_retention`
    /// or `too_many_replies`.
    pub non_completable_reason: Option<String>,
}

/// The assignment view of a snapshot and, when it is completable, its fence.
pub fn assignment_view(
    keys: &TokenKeys,
    snapshot: &AssignmentSnapshot,
) -> (AssignmentView, Option<String>) {
    let todo = &snapshot.todo;
    let oversized = snapshot.replies.len() as i64 > board::MAX_ASSIGNMENT_REPLIES
        || i64::from(todo.reply_count) > board::MAX_ASSIGNMENT_REPLIES;
    let reason = match () {
        _ if todo.status == MessageStatus::Completed => Some("todo_completed"),
        _ if todo.status == MessageStatus::Resolved => Some("todo_resolved"),
        _ if todo.replies_pruned => Some("replies_lost_to_retention"),
        _ if oversized => Some("too_many_replies"),
        _ => None,
    };
    let replies: Vec<MessageView> = snapshot
        .replies
        .iter()
        .take(board::MAX_ASSIGNMENT_REPLIES as usize)
        .map(MessageView::from)
        .collect();
    let fence = reason.is_none().then(|| {
        keys.fence(
            binding(&snapshot.session),
            &todo.id,
            todo.assignment_revision,
        )
    });
    (
        AssignmentView {
            todo: MessageView::from(todo),
            replies_truncated: todo.replies_pruned || oversized,
            replies_total: i64::from(todo.reply_count),
            replies,
            completable: reason.is_none(),
            non_completable_reason: reason.map(str::to_owned),
        },
        fence,
    )
}

/// The ACK-required open messages re-projected on a recorded call's result.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SessionAttention {
    /// The recording session they belong to.
    pub session_id: SessionId,
    /// The oldest ones first, at most 5, bodies cut to 300 characters.
    pub messages: Vec<AttentionMessage>,
    /// How many there are (not counting those this request acknowledged).
    pub total: i64,
    /// Whether some are not shown.
    pub truncated: bool,
    /// Ids this request acknowledged whose first ACK it was.
    pub ack_observed: Vec<MessageId>,
}

/// One re-projected message.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AttentionMessage {
    /// Echo it in `ack_session_message_ids` to acknowledge it.
    pub message_id: MessageId,
    /// Kind.
    pub kind: MessageKind,
    /// Priority.
    pub priority: Priority,
    /// Body excerpt.
    pub body: String,
    /// Whether the excerpt is shorter than the body.
    pub body_truncated: bool,
    /// Author session, if recorded.
    pub author_session_id: Option<SessionId>,
}

impl From<&MessageRow> for AttentionMessage {
    fn from(m: &MessageRow) -> Self {
        let truncated = m.body.chars().count() > ATTENTION_EXCERPT_CHARS;
        AttentionMessage {
            message_id: m.id.clone(),
            kind: m.kind,
            priority: m.priority,
            body: if truncated {
                m.body.chars().take(ATTENTION_EXCERPT_CHARS).collect()
            } else {
                m.body.clone()
            },
            body_truncated: truncated,
            author_session_id: m.author_session_id.clone(),
        }
    }
}

/// The kernel's after-call projection of ACK attention: a call recorded in a session gets its
/// `session_attention` ([`project_attention`]).
#[derive(Debug, Default)]
pub struct AckAttention;

impl AfterCall for AckAttention {
    fn project<'a>(
        &'a self,
        ctx: &'a ToolContext,
        call: &'a CallFacts<'a>,
        sessions: &'a Sessions,
        result: &'a mut ToolResult,
    ) -> PortFuture<'a, ()> {
        Box::pin(async move {
            if let Some(recorder) = &sessions.recorder {
                result.session_attention = project_attention(
                    &ctx.deps.pool,
                    recorder,
                    &call.wrapper.ack_session_message_ids,
                    call.invocation_id,
                    call.spec.meta.name,
                )
                .await;
            }
        })
    }
}

/// ACK bookkeeping and the `session_attention` projection of a call recorded in `recorder`:
/// records the first observed ACK of each open ACK-required message `acks` names, then lists
/// the recorder's open ACK-required messages this request did not acknowledge. Never changes
/// the tool's result otherwise: a failure is logged and projects nothing.
async fn project_attention(
    pool: &wc_store::Pool,
    recorder: &SessionRow,
    acks: &[MessageId],
    invocation_id: uuid::Uuid,
    tool: &str,
) -> Option<serde_json::Value> {
    let actor = board::Actor::new(invocation_id, tool);
    let ack_observed = match board::observe_acks(pool, &recorder.id, acks, actor).await {
        Ok(Ok(ids)) => ids,
        // The session closed meanwhile: nothing to acknowledge in it.
        Ok(Err(_)) => Vec::new(),
        Err(e) => {
            tracing::warn!(error = %e, "could not record ACKs");
            Vec::new()
        }
    };
    if recorder.open_ack_required == 0 && ack_observed.is_empty() {
        return None;
    }
    let client = match pool.get().await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "could not read session attention");
            return None;
        }
    };
    match board::attention(&client, &recorder.id, acks, MAX_ATTENTION_MESSAGES).await {
        Ok((messages, total)) if total > 0 || !ack_observed.is_empty() => {
            let attention = SessionAttention {
                session_id: recorder.id.clone(),
                truncated: (messages.len() as i64) < total,
                messages: messages.iter().map(AttentionMessage::from).collect(),
                total,
                ack_observed,
            };
            serde_json::to_value(attention).ok()
        }
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(error = %e, "could not read session attention");
            None
        }
    }
}
