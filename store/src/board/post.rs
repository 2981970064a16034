//! Posts, the busiest board change, and the one change that is written in batches.
//!
//! A post is one transaction sent whole in one round trip: `BEGIN`, the session row lock,
//! [`post_statement`], `COMMIT`. The session row serializes every change of its board, and its
//! lock is held until the commit's WAL flush has finished, so posts to one busy session would
//! each wait out the previous post's flush in turn. Instead, posts to one session that meet in
//! one process are written together ([`crate::batch`]): each batch (up to
//! [`MAX_POSTS_PER_WRITE`] posts) is one transaction, `BEGIN`, the lock, one
//! [`post_statement`] per post in arrival order, `COMMIT`, and each post's caller is answered
//! once it has committed.
//!
//! Within a batch each statement sees the ones before it (one transaction), so numbers,
//! observation revisions, ledger seqs and retention follow arrival order exactly as if the
//! posts had been sent one by one. A post whose statement refuses (its `reply_to` is not on
//! the board) writes nothing and the others go on. A statement error rolls the whole batch
//! back; every post of it is then written alone by its own caller, so one post's failure is
//! never another's. A commit whose outcome is unknown is unknown to every post of the batch.

use std::sync::LazyLock;

use deadpool_postgres::{Object, Pool};
use serde_json::json;
use tokio_postgres::Statement;
use tokio_postgres::types::ToSql;
use wc_domain::{EventKind, SessionId};

use super::{
    Actor, CHANNEL_BOARD, COLUMNS, MessageRow, NewMessage, Outcome, Refusal, from_row, removal,
};
use crate::StoreError;
use crate::batch::{Combiner, join_in_order};
use crate::change::{self, RETRY};
use crate::pipeline::PipelinedTx;
use crate::sessions::{self, EventColumns, NewEvent};

/// Posts written in one transaction at most.
pub const MAX_POSTS_PER_WRITE: usize = 16;

/// A post that landed.
#[derive(Debug, Clone)]
pub struct Posted {
    /// The message as stored.
    pub message: MessageRow,
}

/// Posts `message` to the board of `session_id` (see the module documentation): together with
/// the posts to the same session that this process is writing at the same time, answered once
/// committed. The lock's reply says why a post that changed nothing was refused.
pub async fn post(
    pool: &Pool,
    session_id: &SessionId,
    message: NewMessage,
    actor: Actor,
) -> Result<Outcome<Posted>, StoreError> {
    match POSTS.submit(pool, session_id, (message, actor)).await? {
        Answer::Done(result) => result,
        Answer::Alone(message, actor) => write(pool, session_id, &[(&message, &actor)])
            .await?
            .remove(0),
    }
}

/// One post's result.
type PostResult = Result<Outcome<Posted>, StoreError>;

/// What a queued post is told.
enum Answer {
    /// Its outcome.
    Done(PostResult),
    /// Its batch failed as a whole: write it alone.
    Alone(NewMessage, Actor),
}

static POSTS: Combiner<SessionId, (NewMessage, Actor), Answer> =
    Combiner::new(MAX_POSTS_PER_WRITE, |pool, session_id, batch| {
        Box::pin(async move { write_batch(&pool, &session_id, batch).await })
    });

/// Writes `batch` as one transaction; the answer of each post.
async fn write_batch(
    pool: &Pool,
    session_id: &SessionId,
    batch: Vec<(NewMessage, Actor)>,
) -> Vec<Answer> {
    let posts: Vec<(&NewMessage, &Actor)> = batch.iter().map(|(m, a)| (m, a)).collect();
    let result = write(pool, session_id, &posts).await;
    drop(posts);
    match result {
        Ok(results) => results.into_iter().map(Answer::Done).collect(),
        Err(StoreError::CommitUncertain(e)) => batch
            .iter()
            .map(|_| Answer::Done(Err(StoreError::CommitUncertain(e.clone()))))
            .collect(),
        Err(e) if batch.len() == 1 => vec![Answer::Done(Err(e))],
        Err(e) => {
            tracing::debug!(error = %e, posts = batch.len(), "batch of posts rolled back; each is written alone");
            batch
                .into_iter()
                .map(|(m, a)| Answer::Alone(m, a))
                .collect()
        }
    }
}

/// The ledger evidence of one post.
fn evidence(message: &NewMessage, actor: &Actor) -> Vec<NewEvent> {
    vec![actor.event(
        EventKind::MessagePosted,
        json!({
            "message_id": message.id,
            "kind": message.kind,
            "priority": message.priority,
            "ack_required": message.ack_required,
            "reply_to": message.reply_to,
            "author_session_id": message.author_session_id,
            "body_chars": message.body.chars().count(),
        }),
    )]
}

/// Writes `posts` to the board of `session_id` in one transaction sent whole: `BEGIN`, the
/// session row lock, one [`post_statement`] per post, `COMMIT`. Transient conflicts are
/// retried as a whole. `Err` only when the transaction did not commit (or may not have);
/// once it committed, each post's own result.
async fn write(
    pool: &Pool,
    session_id: &SessionId,
    posts: &[(&NewMessage, &Actor)],
) -> Result<Vec<PostResult>, StoreError> {
    let events: Vec<Vec<NewEvent>> = posts.iter().map(|(m, a)| evidence(m, a)).collect();
    let columns = events
        .iter()
        .map(|e| EventColumns::of(e))
        .collect::<Result<Vec<_>, _>>()?;
    let params: Vec<Vec<&(dyn ToSql + Sync)>> = posts
        .iter()
        .zip(&columns)
        .map(|((m, _), c)| {
            let mut p: Vec<&(dyn ToSql + Sync)> = vec![
                &session_id,
                &m.id,
                &m.kind,
                &m.priority,
                &m.ack_required,
                &m.reply_to,
                &m.body,
                &m.body_redacted,
                &m.author_session_id,
            ];
            p.extend(c.params());
            p
        })
        .collect();
    let (results, _) = change::run(&RETRY, || async {
        let tx = PipelinedTx::new(pool.get().await?);
        let (lock, stmt) = tokio::try_join!(sessions::lock_statement(&*tx), post_statement(&tx))?;
        let (locked, stored) = tx
            .once_after(
                async { Ok(tx.query_opt(&lock, &[&session_id]).await?) },
                async {
                    // Sent in order on the first poll; the first error is the one that
                    // aborted the transaction (the later ones only report that).
                    let rows =
                        join_in_order(params.iter().map(|p| tx.query_opt(&stmt, p)).collect())
                            .await;
                    rows.into_iter()
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(StoreError::from)
                },
            )
            .await?;
        // Committed: from here every post has its own outcome, and an impossible one (a post
        // to an active session that wrote nothing) is that post's error alone, never the
        // batch's (which would send the committed posts again). The locked session row only
        // explains a refusal, so it is parsed only when there is one.
        let locked = if stored.iter().any(Option::is_none) {
            locked.as_ref().map(sessions::from_row)
        } else {
            None
        };
        Ok(stored
            .iter()
            .zip(posts)
            .map(|(row, (message, _))| match (row, &locked) {
                (Some(row), _) => Ok(Ok(Posted {
                    message: from_row(row),
                })),
                (None, None) => Ok(Err(Refusal::SessionNotFound)),
                (None, Some(s)) if !s.is_active() => Ok(Err(Refusal::SessionClosed(s.lifecycle))),
                // Active under the lock, so the one guard left is the message replied to.
                (None, Some(_)) if message.reply_to.is_some() => {
                    Ok(Err(Refusal::UnknownMessage("reply_to")))
                }
                (None, Some(_)) => Err(StoreError::CorruptRow {
                    table: "workflow_sessions",
                    detail: format!("a post to the active session {session_id} wrote nothing"),
                }),
            })
            .collect::<Vec<_>>())
    })
    .await?;
    Ok(results)
}

/// The statement of [`post`], prepared (once per connection). It runs right after the session
/// row was locked in the same transaction, so its snapshot shows the board as the lock holder
/// left it, and it does the whole post:
///
/// - `cur`: the session row, if it is active and the message it replies to (`$6`), if any, is
///   on its board; otherwise the statement changes nothing and returns no row.
/// - `victim`, `gone`, `parents`: on a full board, one message removed to make room, never the
///   one replied to ([`removal`]); the todo replied to gains a reply.
/// - `m`: the message, numbered and stamped with the session's next observation revision.
/// - `s`: the session row, written once: board counts and observation revision, the removal,
///   and the ledger advanced over the events (`$10`–`$15`), which `ev` inserts (the
///   `message_posted` event gets the message's number) and `old` trims to the retention
///   window.
/// - `n`: the `wc_board` notification, sent at commit.
///
/// When nothing could be removed from a full board, the `messages_retained` check constraint
/// refuses the write and the whole transaction rolls back.
async fn post_statement(tx: &Object) -> Result<Statement, StoreError> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "WITH cur AS (SELECT id, messages_posted, messages_retained, messages_low_number, \
               message_observation_revision FROM workflow_sessions \
             WHERE id = $1 AND lifecycle = 'active' AND ($6::text IS NULL \
               OR (SELECT r.session_id FROM session_messages r WHERE r.id = $6) = $1)), \
         {victim_and_gone}, \
         {parents}, \
         m AS (INSERT INTO session_messages (id, session_id, number, kind, priority, ack_required, \
               reply_to, status, body, body_redacted, author_session_id, observation_revision) \
             SELECT $2::text, cur.id, cur.messages_posted + 1, $3::text, $4::text, $5, $6, 'open', \
               $7::text, $8, $9::text, \
               cur.message_observation_revision + 1 FROM cur RETURNING {COLUMNS}), \
         s AS (UPDATE workflow_sessions SET \
               message_observation_revision = message_observation_revision + 1, \
               messages_posted = messages_posted + 1, \
               {counts}, \
               {advance}, updated_at = now(), version = version + 1 \
             WHERE id = $1 AND EXISTS (SELECT 1 FROM cur) RETURNING id, events_observed, retained_from_seq), \
         ev AS ({insert}), \
         old AS ({retention}), \
         n AS (SELECT pg_notify('{CHANNEL_BOARD}', $1::text) FROM s) \
         SELECT {COLUMNS} FROM m, n",
            victim_and_gone = removal::victim_and_gone("cur", "$6"),
            parents = removal::parents("$6"),
            counts = removal::session_counts("$6", "1", "$5::boolean::int"),
            advance = sessions::ledger_advance_sql(10),
            insert = sessions::ledger_insert_sql(
                "s",
                10,
                "CASE WHEN e.kind = 'message_posted' \
               THEN e.payload || jsonb_build_object('number', (SELECT messages_posted + 1 FROM cur)) \
               ELSE e.payload END"
            ),
            retention = sessions::ledger_retention_sql("$1", "s"),
        )
    });
    Ok(tx.prepare_cached(&SQL).await?)
}
