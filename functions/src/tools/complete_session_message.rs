//! `complete_session_message`: complete a todo with an answer, fenced by the assignment the
//! caller saw and idempotent per completion key.
//!
//! The fence proves the assignment snapshot (`get_session_assignment`); the completion key
//! correlates one intent across uncertain retries. The same key with the same todo and answer
//! returns the original result again with no new effect; the same key with anything else is
//! `completion_key_conflict`. A fence that no longer matches (the todo or its direct replies
//! changed) changes nothing and returns the current assignment with a fresh fence when it is
//! still completable.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::Serialize;
use sha2::{Digest, Sha256};
use wc_domain::{Key, MessageId, MessageKind, MessageStatus, Priority, SessionId, Text};
use wc_macros::{tool, tool_args};
use wc_store::StoreError;
use wc_store::board::{self, Completed, Completion, CompletionRequest, NewMessage};

use super::get_session_assignment;
use super::post_session_message::stored_body;
use crate::board::{self as b, AssignmentView};
use crate::kernel::context::ToolContext;
use crate::result::{ErrorKind, ToolError};

#[tool_args]
pub struct Args {
    /// The coordinator's session that holds the todo.
    pub session_id: SessionId,
    /// The todo.
    pub message_id: MessageId,
    /// The `assignment_fence` of the assignment this completion is based on.
    #[schemars(length(min = 1, max = 4096))]
    pub expected_assignment_fence: String,
    /// Caller-chosen key of this completion intent (1-128 of `A-Za-z0-9._:-`); reuse it only
    /// to retry the same completion.
    pub completion_key: Key<128>,
    /// The answer (1-4,000 characters; redacted before it is stored).
    pub answer: Text<1, 4000>,
}

/// Output of `complete_session_message`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The session.
    pub session_id: SessionId,
    /// The todo.
    pub message_id: MessageId,
    /// Whether the todo is completed by this completion (also true for a replay of it).
    pub state_changed: bool,
    /// The todo's status.
    pub status: MessageStatus,
    /// The answer posted with the completion.
    pub answer_message_id: Option<MessageId>,
    /// When the completion was accepted.
    pub completed_at: Option<DateTime<Utc>>,
    /// When nothing changed: the assignment as it is now.
    pub assignment: Option<AssignmentView>,
    /// When nothing changed and the todo is still completable: a fresh fence.
    pub assignment_fence: Option<String>,
}

/// Digest of what a completion asks for: the todo, the answer as given and the recording
/// session that would author it (another window reusing a key is another intent, a conflict).
fn fingerprint(message_id: &str, answer: &str, author: Option<&str>) -> String {
    let mut h = Sha256::new();
    for part in ["wc.completion.v2", message_id, answer, author.unwrap_or("")] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    hex::encode(h.finalize())
}

fn accepted(session_id: &SessionId, c: Completion) -> Output {
    Output {
        session_id: session_id.clone(),
        message_id: c.message_id,
        state_changed: true,
        status: c.status,
        answer_message_id: Some(c.answer_message_id),
        completed_at: Some(c.completed_at),
        assignment: None,
        assignment_fence: None,
    }
}

/// Complete a todo with an answer, given the assignment_fence from get_session_assignment and your
/// own completion_key. A stale fence changes nothing (state_changed false); retrying with the same
/// key is safe.
#[tool(consequential, Session, "Complete session todo", session = Changes)]
async fn complete_session_message(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let session = ctx.business_session(&args.session_id)?;
    let keys = b::keys(&ctx.deps).await?;
    let expected = keys
        .open_fence(
            b::binding(&session),
            &args.message_id,
            &args.expected_assignment_fence,
        )
        .map_err(|p| {
            b::bad_token(
                ErrorKind::InvalidAssignmentFence,
                "expected_assignment_fence",
                p,
            )
        })?;
    let (body, body_redacted) = stored_body(&args.answer)?;
    let request = CompletionRequest {
        todo_id: args.message_id.clone(),
        expected_assignment_revision: expected,
        completion_key: args.completion_key.to_string(),
        fingerprint: fingerprint(
            args.message_id.as_str(),
            &args.answer,
            ctx.recorder.as_ref().map(|r| r.id.as_str()),
        ),
        answer: NewMessage {
            id: MessageId::generate(),
            kind: MessageKind::Answer,
            priority: Priority::Normal,
            ack_required: false,
            reply_to: Some(args.message_id.clone()),
            body,
            body_redacted,
            author_session_id: ctx.recorder.as_ref().map(|r| r.id.clone()),
        },
    };
    let actor = ctx.board_actor("complete_session_message");
    let outcome = match board::complete(&ctx.deps.pool, &session.id, &request, actor).await {
        Ok(o) => o.map_err(b::refused)?,
        Err(StoreError::CommitUncertain(e)) => {
            tracing::warn!(error = %e, "completion commit outcome unknown");
            return Err(ToolError::new(
                ErrorKind::CompletionPersistenceUncertain,
                "the connection failed while the completion was committing; it may or may not be recorded. Retry with the same completion_key and answer: a recorded completion is returned again, an unrecorded one is applied once",
            )
            .with("field", "completion_key"));
        }
        Err(e) => return Err(e.into()),
    };
    match outcome {
        Completed::Applied(c) | Completed::Replayed(c) => Ok(accepted(&session.id, c)),
        Completed::Stale(todo) => {
            let (assignment, assignment_fence) =
                get_session_assignment::current(&ctx, &session.id, &todo.id).await?;
            Ok(Output {
                session_id: session.id.clone(),
                message_id: todo.id.clone(),
                state_changed: false,
                status: assignment.todo.status,
                answer_message_id: None,
                completed_at: None,
                assignment: Some(assignment),
                assignment_fence,
            })
        }
    }
}
