//! Reads of the board: an assignment, changes since a revision, listings and counts, and the
//! ACK attention of a session, each from one consistent snapshot or one statement.

use deadpool_postgres::{GenericClient, Pool, Transaction};
use serde::Serialize;
use wc_domain::{MessageId, MessageKind, MessageStatus, SessionId};

use super::{COLUMNS, MAX_ASSIGNMENT_REPLIES, MessageRow, from_row};
use crate::StoreError;
use crate::sessions::{self, SessionRow};

/// A read-only transaction at repeatable read: one snapshot for every statement in it.
async fn read_only_snapshot<'c>(
    client: &'c mut deadpool_postgres::Client,
) -> Result<Transaction<'c>, StoreError> {
    Ok(client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?)
}

/// One consistent view of an assignment.
#[derive(Debug, Clone)]
pub struct AssignmentSnapshot {
    /// The session when the snapshot was taken.
    pub session: SessionRow,
    /// The message asked for.
    pub todo: MessageRow,
    /// Its retained direct replies in posting order, at most [`MAX_ASSIGNMENT_REPLIES`] + 1
    /// (one more than fits, to tell an oversized set).
    pub replies: Vec<MessageRow>,
}

/// The message `message_id` of `session_id` and its retained direct replies, read in one
/// snapshot; `None` when the session or the message does not exist.
pub async fn assignment(
    pool: &Pool,
    session_id: &SessionId,
    message_id: &MessageId,
) -> Result<Option<AssignmentSnapshot>, StoreError> {
    let mut client = pool.get().await?;
    let tx = read_only_snapshot(&mut client).await?;
    let Some(session) = sessions::get(&tx, session_id).await? else {
        return Ok(None);
    };
    let stmt = tx
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM session_messages WHERE id = $1 AND session_id = $2"
        ))
        .await?;
    let Some(todo) = tx
        .query_opt(&stmt, &[&message_id, &session_id])
        .await?
        .as_ref()
        .map(from_row)
    else {
        return Ok(None);
    };
    let stmt = tx
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM session_messages WHERE session_id = $1 AND reply_to = $2 \
             ORDER BY number LIMIT $3"
        ))
        .await?;
    let replies = tx
        .query(
            &stmt,
            &[&session_id, &message_id, &(MAX_ASSIGNMENT_REPLIES + 1)],
        )
        .await?
        .iter()
        .map(from_row)
        .collect();
    tx.commit().await?;
    Ok(Some(AssignmentSnapshot {
        session,
        todo,
        replies,
    }))
}

/// Retained messages changed after revision `after`, oldest change first.
#[derive(Debug, Clone)]
pub struct Changes {
    /// The session when the snapshot was taken.
    pub session: SessionRow,
    /// At most `limit` messages.
    pub messages: Vec<MessageRow>,
    /// Whether more changed messages follow the last one returned.
    pub has_more: bool,
}

/// The session and its messages whose latest change is after `after`, in one snapshot.
pub async fn changes(
    pool: &Pool,
    session_id: &SessionId,
    after: i64,
    limit: i64,
) -> Result<Option<Changes>, StoreError> {
    let mut client = pool.get().await?;
    let tx = read_only_snapshot(&mut client).await?;
    let Some(session) = sessions::get(&tx, session_id).await? else {
        return Ok(None);
    };
    let mut messages = Vec::new();
    if session.message_observation_revision > after {
        let stmt = tx
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM session_messages WHERE session_id = $1 AND observation_revision > $2 \
                 ORDER BY observation_revision LIMIT $3"
            ))
            .await?;
        messages = tx
            .query(&stmt, &[&session_id, &after, &(limit + 1)])
            .await?
            .iter()
            .map(from_row)
            .collect();
    }
    tx.commit().await?;
    let has_more = messages.len() as i64 > limit;
    messages.truncate(limit as usize);
    Ok(Some(Changes {
        session,
        messages,
        has_more,
    }))
}

/// Filters of a listing.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Only this status.
    pub status: Option<MessageStatus>,
    /// Only this kind.
    pub kind: Option<MessageKind>,
    /// Only direct replies of this message.
    pub reply_to: Option<MessageId>,
}

/// Counts of the retained board.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BoardCounts {
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

/// The newest `limit` retained messages matching `filter` (newest first), how many match in
/// all, and the board's counts; one snapshot.
pub async fn list(
    pool: &Pool,
    session_id: &SessionId,
    filter: &ListFilter,
    limit: i64,
) -> Result<(Vec<MessageRow>, i64, BoardCounts), StoreError> {
    let mut client = pool.get().await?;
    let tx = read_only_snapshot(&mut client).await?;
    let stmt = tx
        .prepare_cached(&format!(
            "SELECT {COLUMNS}, count(*) OVER () AS total FROM session_messages WHERE session_id = $1 \
             AND ($2::text IS NULL OR status = $2) AND ($3::text IS NULL OR kind = $3) \
             AND ($4::text IS NULL OR reply_to = $4) ORDER BY number DESC LIMIT $5"
        ))
        .await?;
    let rows = tx
        .query(
            &stmt,
            &[
                &session_id,
                &filter.status,
                &filter.kind,
                &filter.reply_to,
                &limit,
            ],
        )
        .await?;
    let total = rows.first().map_or(0, |r| r.get::<_, i64>("total"));
    let messages = rows.iter().map(from_row).collect();
    let counts = counts(&tx, session_id).await?;
    tx.commit().await?;
    Ok((messages, total, counts))
}

/// The board's counts.
pub async fn counts(
    client: &impl GenericClient,
    session_id: &SessionId,
) -> Result<BoardCounts, StoreError> {
    let stmt = client
        .prepare_cached(
            "SELECT count(*), count(*) FILTER (WHERE status = 'open'), \
             count(*) FILTER (WHERE status = 'open' AND kind = 'question'), \
             count(*) FILTER (WHERE status = 'open' AND kind = 'todo'), \
             count(*) FILTER (WHERE status = 'open' AND ack_required) \
             FROM session_messages WHERE session_id = $1",
        )
        .await?;
    let r = client.query_one(&stmt, &[&session_id]).await?;
    Ok(BoardCounts {
        retained: r.get(0),
        open: r.get(1),
        open_questions: r.get(2),
        open_todos: r.get(3),
        open_ack_required: r.get(4),
    })
}

/// Open ACK-required messages of `session_id` other than `except`, oldest first: at most
/// `limit`, and how many there are in all.
pub async fn attention(
    client: &impl GenericClient,
    session_id: &SessionId,
    except: &[MessageId],
    limit: i64,
) -> Result<(Vec<MessageRow>, i64), StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS}, count(*) OVER () AS total FROM session_messages \
             WHERE session_id = $1 AND ack_required AND status = 'open' AND NOT (id = ANY($2)) \
             ORDER BY number LIMIT $3"
        ))
        .await?;
    let rows = client.query(&stmt, &[&session_id, &except, &limit]).await?;
    let total = rows.first().map_or(0, |r| r.get::<_, i64>("total"));
    Ok((rows.iter().map(from_row).collect(), total))
}
