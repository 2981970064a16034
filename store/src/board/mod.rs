//! The session message board: `session_messages` rows and the board state on the session row.
//!
//! Strategy: the session row's lock, as for every change of a session. Every change is one
//! transaction that first locks the session row (`FOR UPDATE`: all board changes of one
//! session are serialized on it), then reads and changes message rows, which need no lock or
//! version guard of their own (nothing writes them without holding the session's lock), and
//! finally writes the session row with its ledger evidence through [`sessions::write_back`].
//! Resolutions, completions and observed ACKs are made through [`sessions::change`]. A post,
//! the busiest change, is the same transaction sent whole in one round trip: the lock and one
//! statement that does the rest, and posts to one session that meet in one process share that
//! transaction ([`post`]). The session's
//! `message_observation_revision` is bumped once per observable message change and stamped on
//! the changed message, so every retained message has a distinct revision and an observer can
//! page through changes in revision order.
//!
//! Retention keeps at most [`MAX_RETAINED_MESSAGES`] messages per session. To make room it
//! removes closed messages (resolved or completed) first, oldest first (so completed work
//! leaves holes out of posting order), and the oldest open message only when none is closed;
//! a post is never refused for room. The revision of a removed message raises the session's
//! history low-watermark.

use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Object, Pool};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_postgres::{Row, Statement};
use uuid::Uuid;

use wc_domain::{
    EventKind, EventRole, Lifecycle, MessageId, MessageKind, MessageStatus, Priority, SessionId,
};

use crate::StoreError;
use crate::change::{StepFuture, guarded};
use crate::pipeline::PipelinedTx;
use crate::sessions::{self, NewEvent, SessionChange, SessionRow};

mod post;
mod read;

pub use post::{MAX_POSTS_PER_WRITE, Posted, post};
pub use read::{
    AssignmentSnapshot, BoardCounts, Changes, ListFilter, assignment, attention, changes, counts,
    list,
};

/// Messages retained per session.
pub const MAX_RETAINED_MESSAGES: i32 = 500;
/// Direct replies an assignment shows; a todo with more is not completable.
pub const MAX_ASSIGNMENT_REPLIES: i64 = 50;
/// `NOTIFY` channel carrying the id of a session whose board changed.
pub const CHANNEL_BOARD: &str = "wc_board";

/// One stored message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageRow {
    /// The message's id.
    pub id: MessageId,
    /// Owning session.
    pub session_id: SessionId,
    /// Posting order within the session (1, 2, …).
    pub number: i64,
    /// Kind.
    pub kind: MessageKind,
    /// Priority.
    pub priority: Priority,
    /// Whether recorded calls keep re-projecting it until it is acknowledged or resolved.
    pub ack_required: bool,
    /// The message it replies to.
    pub reply_to: Option<MessageId>,
    /// Status.
    pub status: MessageStatus,
    /// Redacted body.
    pub body: String,
    /// Whether redaction changed the body.
    pub body_redacted: bool,
    /// The authorized recording session that posted it, if any.
    pub author_session_id: Option<SessionId>,
    /// Revision of its latest observable change.
    pub observation_revision: i64,
    /// Todos: revision of the assignment-local state.
    pub assignment_revision: i64,
    /// Todos: direct replies ever posted.
    pub reply_count: i32,
    /// Todos: whether retention removed a direct reply.
    pub replies_pruned: bool,
    /// Todos: the answer that completed it.
    pub answer_message_id: Option<MessageId>,
    /// First time an ACK of it was observed.
    pub first_ack_observed_at: Option<DateTime<Utc>>,
    /// Posted at.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// Resolved or completed at.
    pub closed_at: Option<DateTime<Utc>>,
    /// Bumped by every write (no write is guarded by it).
    pub version: i64,
}

impl MessageRow {
    /// Whether it is still open.
    pub fn is_open(&self) -> bool {
        self.status == MessageStatus::Open
    }
}

const COLUMNS: &str = "id, session_id, number, kind, priority, ack_required, reply_to, status, body, \
     body_redacted, author_session_id, observation_revision, assignment_revision, reply_count, replies_pruned, \
     answer_message_id, first_ack_observed_at, created_at, updated_at, closed_at, version";

fn from_row(r: &Row) -> MessageRow {
    MessageRow {
        id: r.get("id"),
        session_id: r.get("session_id"),
        number: r.get("number"),
        kind: r.get("kind"),
        priority: r.get("priority"),
        ack_required: r.get("ack_required"),
        reply_to: r.get("reply_to"),
        status: r.get("status"),
        body: r.get("body"),
        body_redacted: r.get("body_redacted"),
        author_session_id: r.get("author_session_id"),
        observation_revision: r.get("observation_revision"),
        assignment_revision: r.get("assignment_revision"),
        reply_count: r.get("reply_count"),
        replies_pruned: r.get("replies_pruned"),
        answer_message_id: r.get("answer_message_id"),
        first_ack_observed_at: r.get("first_ack_observed_at"),
        created_at: r.get("created_at"),
        updated_at: r.get("updated_at"),
        closed_at: r.get("closed_at"),
        version: r.get("version"),
    }
}

/// A message to post (already validated and redacted).
#[derive(Debug, Clone)]
pub struct NewMessage {
    /// Fresh id.
    pub id: MessageId,
    /// Kind.
    pub kind: MessageKind,
    /// Priority.
    pub priority: Priority,
    /// ACK required.
    pub ack_required: bool,
    /// Parent message.
    pub reply_to: Option<MessageId>,
    /// Redacted body.
    pub body: String,
    /// Whether redaction changed it.
    pub body_redacted: bool,
    /// Authorized recording session.
    pub author_session_id: Option<SessionId>,
}

/// Who is changing the board, for the ledger evidence.
#[derive(Debug, Clone)]
pub struct Actor {
    /// The kernel invocation.
    pub invocation_id: Uuid,
    /// The tool.
    pub tool_name: String,
}

impl Actor {
    /// The actor `tool_name` under invocation `invocation_id`.
    pub fn new(invocation_id: Uuid, tool_name: &str) -> Actor {
        Actor {
            invocation_id,
            tool_name: tool_name.to_owned(),
        }
    }

    fn event(&self, kind: EventKind, payload: Value) -> NewEvent {
        NewEvent {
            kind,
            call_id: Uuid::now_v7(),
            invocation_id: self.invocation_id,
            role: EventRole::Business,
            tool_name: Some(self.tool_name.clone()),
            payload,
        }
    }
}

/// Why a board change did not happen. Nothing was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No session has this id.
    SessionNotFound,
    /// The session is finished or closed (its lifecycle).
    SessionClosed(Lifecycle),
    /// The named message is not on this session's board (field name).
    UnknownMessage(&'static str),
    /// The message is not a todo (its kind).
    NotATodo(MessageKind),
    /// The completion key was used for a different completion.
    CompletionKeyConflict,
}

/// What a board change returned, or why it was refused.
pub type Outcome<T> = Result<T, Refusal>;

/// Message `id` of the board of `session_id`, whose row this transaction has locked.
async fn load_message(
    tx: &Object,
    session_id: &SessionId,
    id: &MessageId,
) -> Result<Option<MessageRow>, StoreError> {
    let stmt = tx
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM session_messages WHERE id = $1 AND session_id = $2"
        ))
        .await?;
    Ok(tx
        .query_opt(&stmt, &[&id, &session_id])
        .await?
        .as_ref()
        .map(from_row))
}

/// Runs one board change through [`sessions::change`]: `step` gets the locked session row when
/// the session exists and is active, and answers `Ok(value)` to commit what it wrote or
/// `Err(refusal)` having written nothing (a step refuses before its first write).
async fn change<T, F>(
    pool: &Pool,
    session_id: &SessionId,
    step: F,
) -> Result<Outcome<T>, StoreError>
where
    T: Send + 'static,
    F: for<'t> Fn(&'t PipelinedTx, SessionRow) -> StepFuture<'t, Outcome<T>>,
{
    let (outcome, _) = sessions::change(pool, session_id, |tx, session| match session {
        None => Box::pin(async { Ok(Err(Refusal::SessionNotFound)) }),
        Some(s) if !s.is_active() => {
            Box::pin(async move { Ok(Err(Refusal::SessionClosed(s.lifecycle))) })
        }
        Some(s) => step(tx, s),
    })
    .await?;
    Ok(outcome)
}

/// Whether a new message needs room: the board holds [`MAX_RETAINED_MESSAGES`] already.
fn needs_room(session: &SessionRow) -> bool {
    session.messages_retained >= MAX_RETAINED_MESSAGES
}

/// SQL of a removal that makes room on a full board, as CTEs and `SET` entries shared by
/// [`post_statement`] and [`make_room_statement`]. `$1` is the session; `keep` is the SQL of
/// the message that must stay (the one replied to or completed, or `NULL`), already known to
/// be on this board.
///
/// Messages are found by id alone: ids are unique across sessions, and a message only ever
/// replies to one of its own session (a post checks it), so a session condition beside the id
/// would add nothing but a worse choice for the planner, which on young tables without
/// statistics may scan the session's whole board along `(session_id, …)` instead of taking
/// the primary key. For the same reason each lookup is one id at a time (a join over the ids,
/// a subquery per candidate), never an `id = ANY(…)` filter, which such a plan reads as a
/// scan of the whole table, and writes with nothing to do are cut off by a condition on their
/// parameters alone.
mod removal {
    use super::MAX_RETAINED_MESSAGES;

    /// `victim AS (…), gone AS (…)`: on a full board (`board`, a one-row relation with the
    /// session's `messages_retained` and `messages_low_number`) the one message removed. In
    /// order of preference, each branch an index scan that starts at the board's low-water
    /// number and stops at its first match, and later branches run only when earlier ones
    /// found nothing: the oldest closed message that is not a direct reply of an open todo,
    /// the oldest closed one, the oldest one. Never `keep`.
    pub(super) fn victim_and_gone(board: &str, keep: &str) -> String {
        let branch = |n: u8, extra: &str| {
            format!(
                "(SELECT m.id, {n} AS branch FROM session_messages m WHERE m.session_id = $1 \
                   AND m.number >= {board}.messages_low_number AND m.id IS DISTINCT FROM {keep} {extra} \
                   ORDER BY m.number LIMIT 1)"
            )
        };
        format!(
            "victim AS (SELECT v.id, v.branch FROM {board}, LATERAL ({b1} UNION ALL {b2} UNION ALL {b3} LIMIT 1) v \
               WHERE {board}.messages_retained >= {MAX_RETAINED_MESSAGES}), \
             gone AS (DELETE FROM session_messages m USING victim v WHERE m.id = v.id \
               RETURNING m.number, v.branch, m.observation_revision, m.reply_to, \
                 m.status = 'open' AND m.ack_required AS open_ack)",
            b1 = branch(
                1,
                "AND m.status <> 'open' AND (m.reply_to IS NULL OR NOT EXISTS (SELECT 1 FROM session_messages p \
                   WHERE p.id = m.reply_to AND p.kind = 'todo' AND p.status = 'open'))"
            ),
            b2 = branch(2, "AND m.status <> 'open'"),
            b3 = branch(3, ""),
        )
    }

    /// `parents AS (…)`: when the change goes ahead (`cur` has its row), the todo whose direct
    /// reply `gone` removed is marked as having lost one, and the todo `replied` (SQL of an
    /// id, or `NULL`) gains one; each is a new assignment-local state. One `UPDATE`, since one
    /// statement cannot update a row twice and both can be the same todo.
    pub(super) fn parents(replied: &str) -> String {
        format!(
            "parents AS (UPDATE session_messages p SET \
               reply_count = p.reply_count + CASE WHEN p.id = {replied} THEN 1 ELSE 0 END, \
               replies_pruned = p.replies_pruned OR p.id IS NOT DISTINCT FROM (SELECT reply_to FROM gone), \
               assignment_revision = p.assignment_revision + CASE WHEN p.id = {replied} THEN 1 ELSE 0 END \
                 + CASE WHEN p.id IS NOT DISTINCT FROM (SELECT reply_to FROM gone) THEN 1 ELSE 0 END, \
               updated_at = CASE WHEN p.id = {replied} THEN now() ELSE p.updated_at END, \
               version = p.version + 1 \
             FROM (VALUES ({replied}), ((SELECT reply_to FROM gone))) AS t(id) \
             WHERE p.id = t.id AND p.kind = 'todo' AND EXISTS (SELECT 1 FROM cur) \
               AND ({replied} IS NOT NULL OR EXISTS (SELECT 1 FROM gone WHERE reply_to IS NOT NULL)) \
             RETURNING 1)"
        )
    }

    /// The `SET` entries of the session row's update that add `added` retained messages, of
    /// which `added_ack` are open and ACK-required, and take `gone` off its counts: one fewer
    /// retained (and open ACK-required) message, the history low-watermark raised to the
    /// removed message's revision and, when the oldest message of all went, the low-water
    /// number raised past it (up to `keep`, which stays, at most). Nothing removed leaves
    /// the last three as they are.
    pub(super) fn session_counts(keep: &str, added: &str, added_ack: &str) -> String {
        format!(
            "messages_retained = messages_retained + {added} - (SELECT count(*) FROM gone)::int, \
             open_ack_required = open_ack_required + {added_ack} \
               - coalesce((SELECT open_ack::int FROM gone), 0), \
             message_history_lost_through = greatest(message_history_lost_through, \
               coalesce((SELECT observation_revision FROM gone), 0)), \
             messages_low_number = coalesce((SELECT greatest(messages_low_number, \
                 least(g.number + 1, coalesce((SELECT k.number FROM session_messages k \
                   WHERE k.id = {keep}), g.number + 1))) \
               FROM gone g WHERE g.branch = 3), messages_low_number)"
        )
    }
}

/// The statement of [`make_room`], prepared (once per connection): the [`removal`] of one
/// message of a full board in a change that goes on to add one. The session row's counts are
/// updated here; its version is left to the change's own write-back, whose relative updates
/// compose with these.
async fn make_room_statement(tx: &Object) -> Result<Statement, StoreError> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "WITH cur AS (SELECT messages_retained, messages_low_number FROM workflow_sessions WHERE id = $1), \
         {victim_and_gone}, \
         {parents}, \
         counts AS (UPDATE workflow_sessions SET {counts} \
           WHERE id = $1 AND EXISTS (SELECT 1 FROM gone) RETURNING 1) \
         SELECT count(*) FROM counts",
            victim_and_gone = removal::victim_and_gone("cur", "$2::text"),
            parents = removal::parents("NULL::text"),
            counts = removal::session_counts("$2::text", "0", "0"),
        )
    });
    Ok(tx.prepare_cached(&SQL).await?)
}

/// Removes one message of the locked, full board of `session_id` to make room for another,
/// never `keep` (see [`make_room_statement`]).
async fn make_room(
    tx: &Object,
    session_id: &SessionId,
    keep: Option<&MessageId>,
) -> Result<(), StoreError> {
    let stmt = make_room_statement(tx).await?;
    tx.query_one(&stmt, &[&session_id, &keep]).await?;
    Ok(())
}

/// Inserts message `m` as number `number` at observation revision `revision`.
async fn insert(
    tx: &Object,
    session_id: &SessionId,
    number: i64,
    revision: i64,
    m: &NewMessage,
) -> Result<MessageRow, StoreError> {
    let stmt = tx
        .prepare_cached(&format!(
            "INSERT INTO session_messages (id, session_id, number, kind, priority, ack_required, reply_to, \
               status, body, body_redacted, author_session_id, observation_revision) \
             VALUES ($1::text, $2, $3::bigint, $4::text, $5::text, $6, $7::text, 'open', $8::text, $9, \
               $10::text, $11::bigint) \
             RETURNING {COLUMNS}"
        ))
        .await?;
    let row = tx
        .query_one(
            &stmt,
            &[
                &m.id,
                &session_id,
                &number,
                &m.kind,
                &m.priority,
                &m.ack_required,
                &m.reply_to,
                &m.body,
                &m.body_redacted,
                &m.author_session_id,
                &revision,
            ],
        )
        .await?;
    Ok(from_row(&row))
}

/// The statement of [`notify`], prepared (once per connection).
async fn notify_statement(tx: &Object) -> Result<Statement, StoreError> {
    Ok(tx
        .prepare_cached(&format!("SELECT pg_notify('{CHANNEL_BOARD}', $1::text)"))
        .await?)
}

/// Queues the `wc_board` notification of `session_id` (sent at commit), with
/// [`notify_statement`]: the request is sent on the first poll.
async fn notify(tx: &Object, stmt: &Statement, session_id: &SessionId) -> Result<(), StoreError> {
    tx.execute(stmt, &[&session_id]).await?;
    Ok(())
}

/// Bumps a todo's assignment revision because one of its direct replies changed.
async fn touch_parent_assignment(
    tx: &Object,
    session_id: &SessionId,
    parent: &MessageId,
    new_reply: bool,
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE session_messages SET assignment_revision = assignment_revision + 1, \
         reply_count = reply_count + $3, version = version + 1, updated_at = now() \
         WHERE id = $1 AND session_id = $2 AND kind = 'todo'",
        &[&parent, &session_id, &i32::from(new_reply)],
    )
    .await?;
    Ok(())
}

/// Writes the session row's side of a board change with its ledger `events`, and queues the
/// `wc_board` notification when the change is observable.
async fn finish(
    tx: &Object,
    session: &SessionRow,
    change: SessionChange,
    events: Vec<NewEvent>,
) -> Result<(), StoreError> {
    sessions::write_back(tx, (&session.id, session.version), &change, &events).await?;
    if change.message_revision_bump > 0 {
        notify(tx, &notify_statement(tx).await?, &session.id).await?;
    }
    Ok(())
}

/// The result of a resolve.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The message after the call.
    pub message: MessageRow,
    /// Whether this call changed it (false: it was already resolved or completed).
    pub changed: bool,
}

/// Marks an open message resolved; an already closed message is left as it is.
pub async fn resolve(
    pool: &Pool,
    session_id: &SessionId,
    message_id: &MessageId,
    actor: Actor,
) -> Result<Outcome<Resolved>, StoreError> {
    let message_id = message_id.to_owned();
    change(pool, session_id, move |tx, session| -> StepFuture<'_, Outcome<Resolved>> {
        let actor = actor.clone();
        let message_id = message_id.clone();
        Box::pin(async move {
            let Some(message) = load_message(tx, &session.id, &message_id).await? else {
                return Ok(Err(Refusal::UnknownMessage("message_id")));
            };
            if !message.is_open() {
                return Ok(Ok(Resolved {
                    message,
                    changed: false,
                }));
            }
            let revision = session.message_observation_revision + 1;
            let row = tx
                .query_opt(
                    &format!(
                        "UPDATE session_messages SET status = 'resolved', observation_revision = $2::bigint, \
                         assignment_revision = assignment_revision + CASE WHEN kind = 'todo' THEN 1 ELSE 0 END, \
                         closed_at = now(), updated_at = now(), version = version + 1 \
                         WHERE id = $1 AND version = $3 RETURNING {COLUMNS}"
                    ),
                    &[&message.id, &revision, &message.version],
                )
                .await?;
            let updated = from_row(&guarded(row, "session_messages")?);
            if let Some(parent) = &message.reply_to {
                touch_parent_assignment(tx, &session.id, parent, false).await?;
            }
            let change = SessionChange {
                message_revision_bump: 1,
                open_ack_required_delta: -i32::from(message.ack_required),
                ..Default::default()
            };
            let event = actor.event(
                EventKind::MessageResolved,
                json!({ "message_id": message.id, "kind": message.kind }),
            );
            finish(tx, &session, change, vec![event]).await?;
            Ok(Ok(Resolved {
                message: updated,
                changed: true,
            }))
        })
    })
    .await
}

/// What a completion asks for.
#[derive(Debug, Clone)]
pub struct CompletionRequest {
    /// The todo.
    pub todo_id: MessageId,
    /// Assignment revision the caller's fence proves.
    pub expected_assignment_revision: i64,
    /// The caller's idempotency key.
    pub completion_key: String,
    /// Digest of everything the completion asks for (todo, answer).
    pub fingerprint: String,
    /// The answer to post.
    pub answer: NewMessage,
}

/// The durable result of an accepted completion; a replay returns exactly this again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Completion {
    /// The todo.
    pub message_id: MessageId,
    /// The answer posted with it.
    pub answer_message_id: MessageId,
    /// The todo's status afterwards (`completed`).
    pub status: MessageStatus,
    /// The observation revision of the change.
    pub observation_revision: i64,
    /// When it was accepted.
    pub completed_at: DateTime<Utc>,
}

/// What a completion did.
#[derive(Debug, Clone)]
pub enum Completed {
    /// This call completed the todo.
    Applied(Completion),
    /// The same key and request were accepted before; nothing new happened.
    Replayed(Completion),
    /// The fence no longer matches the todo (or it is no longer completable): nothing
    /// changed. The todo as it is now.
    Stale(Box<MessageRow>),
}

/// Completes a todo if the caller's fence still matches, idempotently per completion key.
pub async fn complete(
    pool: &Pool,
    session_id: &SessionId,
    request: &CompletionRequest,
    actor: Actor,
) -> Result<Outcome<Completed>, StoreError> {
    let request = request.clone();
    change(pool, session_id, move |tx, session| -> StepFuture<'_, Outcome<Completed>> {
        let actor = actor.clone();
        let request = request.clone();
        Box::pin(async move {
            // The key first: a replay must answer the same whatever happened since.
            let earlier = tx
                .query_opt(
                    "SELECT fingerprint, result FROM session_completions \
                     WHERE session_id = $1 AND completion_key = $2",
                    &[&session.id, &request.completion_key],
                )
                .await?;
            if let Some(earlier) = earlier {
                let fingerprint: String = earlier.get(0);
                if fingerprint != request.fingerprint {
                    return Ok(Err(Refusal::CompletionKeyConflict));
                }
                let result: Value = earlier.get(1);
                let completion: Completion =
                    serde_json::from_value(result).map_err(|e| StoreError::CorruptRow {
                        table: "session_completions",
                        detail: e.to_string(),
                    })?;
                return Ok(Ok(Completed::Replayed(completion)));
            }
            let Some(todo) = load_message(tx, &session.id, &request.todo_id).await? else {
                return Ok(Err(Refusal::UnknownMessage("message_id")));
            };
            if todo.kind != MessageKind::Todo {
                return Ok(Err(Refusal::NotATodo(todo.kind)));
            }
            if !todo.is_open()
                || todo.assignment_revision != request.expected_assignment_revision
                || !completable(&todo)
            {
                return Ok(Ok(Completed::Stale(Box::new(todo))));
            }
            if needs_room(&session) {
                make_room(tx, &session.id, Some(&todo.id)).await?;
            }
            let todo_revision = session.message_observation_revision + 1;
            let answer_revision = todo_revision + 1;
            let answer = insert(
                tx,
                &session.id,
                session.messages_posted + 1,
                answer_revision,
                &request.answer,
            )
            .await?;
            let updated = tx
                .query_opt(
                    "UPDATE session_messages SET status = 'completed', observation_revision = $2::bigint, \
                     assignment_revision = assignment_revision + 1, reply_count = reply_count + 1, \
                     answer_message_id = $3, closed_at = now(), updated_at = now(), version = version + 1 \
                     WHERE id = $1 AND version = $4 RETURNING closed_at",
                    &[&todo.id, &todo_revision, &answer.id, &todo.version],
                )
                .await?;
            let updated = guarded(updated, "session_messages")?;
            // A todo that is itself a direct reply changes its parent's assignment.
            if let Some(parent) = &todo.reply_to {
                touch_parent_assignment(tx, &session.id, parent, false).await?;
            }
            let completion = Completion {
                message_id: todo.id.clone(),
                answer_message_id: answer.id.clone(),
                status: MessageStatus::Completed,
                observation_revision: answer_revision,
                completed_at: updated.get(0),
            };
            tx.execute(
                "INSERT INTO session_completions (session_id, completion_key, todo_id, fingerprint, result) \
                 VALUES ($1, $2, $3, $4, $5)",
                &[
                    &session.id,
                    &request.completion_key,
                    &todo.id,
                    &request.fingerprint,
                    &serde_json::to_value(&completion).expect("completions serialize"),
                ],
            )
            .await?;
            let change = SessionChange {
                message_revision_bump: 2,
                messages_posted_bump: 1,
                messages_retained_delta: 1,
                open_ack_required_delta: i32::from(request.answer.ack_required)
                    - i32::from(todo.ack_required),
                ..Default::default()
            };
            let event = actor.event(
                EventKind::MessageCompleted,
                json!({
                    "message_id": todo.id,
                    "answer_message_id": answer.id,
                    "author_session_id": answer.author_session_id,
                    "body_chars": answer.body.chars().count(),
                }),
            );
            finish(tx, &session, change, vec![event]).await?;
            Ok(Ok(Completed::Applied(completion)))
        })
    })
    .await
}

/// Whether a todo's assignment can be proven complete from a snapshot: all its direct replies
/// are retained and fit in one assignment.
pub fn completable(todo: &MessageRow) -> bool {
    todo.kind == MessageKind::Todo
        && todo.is_open()
        && !todo.replies_pruned
        && i64::from(todo.reply_count) <= MAX_ASSIGNMENT_REPLIES
}

/// Records the first observed ACK of each open ACK-required message named in `ids` (others,
/// and echoes of already observed ACKs, are left alone). Returns the ids whose first ACK this
/// was; when there are none nothing is written.
pub async fn observe_acks(
    pool: &Pool,
    session_id: &SessionId,
    ids: &[MessageId],
    actor: Actor,
) -> Result<Outcome<Vec<MessageId>>, StoreError> {
    if ids.is_empty() {
        return Ok(Ok(Vec::new()));
    }
    // Most requests echo ACKs already observed: find that out without taking the row lock.
    {
        let client = pool.get().await?;
        let stmt = client
            .prepare_cached(
                "SELECT count(*) FROM session_messages WHERE session_id = $1 AND id = ANY($2) \
                 AND ack_required AND status = 'open' AND first_ack_observed_at IS NULL",
            )
            .await?;
        let n: i64 = client.query_one(&stmt, &[&session_id, &ids]).await?.get(0);
        if n == 0 {
            return Ok(Ok(Vec::new()));
        }
    }
    let ids = ids.to_vec();
    change(pool, session_id, move |tx, session| -> StepFuture<'_, Outcome<Vec<MessageId>>> {
        let actor = actor.clone();
        let ids = ids.clone();
        Box::pin(async move {
            let rows = tx
                .query(
                    "SELECT id, version FROM session_messages WHERE session_id = $1 AND id = ANY($2) \
                     AND ack_required AND status = 'open' AND first_ack_observed_at IS NULL \
                     ORDER BY number",
                    &[&session.id, &ids],
                )
                .await?;
            if rows.is_empty() {
                return Ok(Ok(Vec::new()));
            }
            let mut acked = Vec::new();
            for (i, r) in rows.iter().enumerate() {
                let (id, read_version): (MessageId, i64) = (r.get(0), r.get(1));
                let revision = session.message_observation_revision + 1 + i as i64;
                let written = tx
                    .query_opt(
                        "UPDATE session_messages SET first_ack_observed_at = now(), observation_revision = $2::bigint, \
                         updated_at = now(), version = version + 1 WHERE id = $1 AND version = $3 \
                         RETURNING 1",
                        &[&id, &revision, &read_version],
                    )
                    .await?;
                guarded(written, "session_messages")?;
                acked.push(id);
            }
            let change = SessionChange {
                message_revision_bump: acked.len() as i64,
                ..Default::default()
            };
            // Evidence of the recording session's bookkeeping, not of a business target.
            let event = NewEvent {
                role: EventRole::Recorder,
                ..actor.event(EventKind::MessageAckObserved, json!({ "message_ids": acked }))
            };
            finish(tx, &session, change, vec![event]).await?;
            Ok(Ok(acked))
        })
    })
    .await
}

/// The secret named `name`: created with `generate` on first use, the stored one afterwards
/// (racing creators agree on the first).
pub async fn server_secret(
    client: &impl GenericClient,
    name: &str,
    generate: impl FnOnce() -> Vec<u8>,
) -> Result<Vec<u8>, StoreError> {
    let stmt = client
        .prepare_cached("SELECT secret FROM server_secrets WHERE name = $1")
        .await?;
    if let Some(r) = client.query_opt(&stmt, &[&name]).await? {
        return Ok(r.get(0));
    }
    client
        .execute(
            "INSERT INTO server_secrets (name, secret) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
            &[&name, &generate()],
        )
        .await?;
    Ok(client.query_one(&stmt, &[&name]).await?.get(0))
}
