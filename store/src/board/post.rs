//! Posts, the busiest board change, and the one change that is written in batches.
//!
//! A post is one transaction sent whole in one round trip: `BEGIN`, the session row lock,
//! [`post_statement`], `COMMIT`. The session row serializes every change of its board, and its
//! lock is held until the commit's WAL flush has finished, so posts to one busy session would
//! each wait out the previous post's flush in turn. Instead, posts to one session that meet in
//! one process are written together: the first starts a writer task for that session, posts
//! arriving while it writes queue up, and the writer sends each queue it takes (up to
//! [`MAX_POSTS_PER_WRITE`]) as one transaction: `BEGIN`, the lock, one [`post_statement`] per
//! post in arrival order, `COMMIT`. Each post's caller is answered only once that transaction
//! has committed, so an acknowledged post is as durable as one written alone; a quiet session
//! gets batches of one.
//!
//! Within a batch each statement sees the ones before it (one transaction), so numbers,
//! observation revisions, ledger seqs and retention follow arrival order exactly as if the
//! posts had been sent one by one. A post whose statement refuses (its `reply_to` is not on
//! the board) writes nothing and the others go on. A statement error rolls the whole batch
//! back; every post of it is then written alone by its own caller, so one post's failure is
//! never another's. A commit whose outcome is unknown is unknown to every post of the batch.
//!
//! The writer is a spawned task, not one of the callers: a caller that goes away (its request
//! was cancelled) never strands the posts queued behind it.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::future::Future;
use std::pin::Pin;
use std::sync::{LazyLock, Mutex, PoisonError};
use std::task::Poll;

use deadpool_postgres::{Object, Pool};
use serde_json::json;
use tokio::sync::oneshot;
use tokio_postgres::Statement;
use tokio_postgres::types::ToSql;

use super::{
    Actor, CHANNEL_BOARD, COLUMNS, MessageRow, NewMessage, Outcome, Refusal, from_row, removal,
};
use crate::StoreError;
use crate::cas::{CasPolicy, retry_transient};
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
    session_id: &str,
    message: NewMessage,
    actor: Actor,
) -> Result<Outcome<Posted>, StoreError> {
    let key = WriterKey {
        pool: std::ptr::from_ref(pool.manager()) as usize,
        session_id: session_id.to_owned(),
    };
    let (reply, answer) = oneshot::channel();
    let queued = Queued {
        message,
        actor,
        reply,
    };
    let start = {
        let mut writers = WRITERS.lock().unwrap_or_else(PoisonError::into_inner);
        match writers.entry(key.clone()) {
            Entry::Occupied(mut e) => {
                e.get_mut().push(queued);
                false
            }
            Entry::Vacant(e) => {
                e.insert(vec![queued]);
                true
            }
        }
    };
    if start {
        tokio::spawn(write_session(pool.clone(), key));
    }
    match answer.await {
        Ok(Answer::Done(result)) => result,
        Ok(Answer::Alone(message, actor)) => write(pool, session_id, &[(&message, &actor)])
            .await
            .map(|mut one| one.remove(0)),
        Err(_) => Err(StoreError::WriterLost),
    }
}

/// Which writer a post queues for: a session, on one pool (one database).
#[derive(Clone, PartialEq, Eq, Hash)]
struct WriterKey {
    pool: usize,
    session_id: String,
}

/// A post waiting for its session's writer.
struct Queued {
    message: NewMessage,
    actor: Actor,
    reply: oneshot::Sender<Answer>,
}

/// What the writer tells a queued post.
enum Answer {
    /// Its outcome.
    Done(Result<Outcome<Posted>, StoreError>),
    /// Its batch failed as a whole: write it alone.
    Alone(NewMessage, Actor),
}

/// The queues of the sessions being written; a session has an entry while its writer runs.
static WRITERS: LazyLock<Mutex<HashMap<WriterKey, Vec<Queued>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Removes the writer's entry if the writer ends without doing so itself (a panic), so that
/// the session's next post starts a new writer; the posts queued in it are dropped, and their
/// callers get [`StoreError::WriterLost`].
struct EntryGuard(Option<WriterKey>);

impl Drop for EntryGuard {
    fn drop(&mut self) {
        if let Some(key) = self.0.take() {
            WRITERS
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&key);
        }
    }
}

/// The writer of one session: takes its queue until it is empty, then removes the entry
/// (under the same lock, so a post either joins a queue this writer will take or starts a new
/// writer).
async fn write_session(pool: Pool, key: WriterKey) {
    let mut guard = EntryGuard(Some(key.clone()));
    loop {
        let batch: Vec<Queued> = {
            let mut writers = WRITERS.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(queue) = writers.get_mut(&key) else {
                guard.0 = None;
                return;
            };
            if queue.is_empty() {
                writers.remove(&key);
                guard.0 = None;
                return;
            }
            let n = queue.len().min(MAX_POSTS_PER_WRITE);
            queue.drain(..n).collect()
        };
        write_batch(&pool, &key.session_id, batch).await;
    }
}

/// Writes `batch` as one transaction and answers each post.
async fn write_batch(pool: &Pool, session_id: &str, batch: Vec<Queued>) {
    let posts: Vec<(&NewMessage, &Actor)> = batch.iter().map(|q| (&q.message, &q.actor)).collect();
    let result = write(pool, session_id, &posts).await;
    drop(posts);
    match result {
        Ok(outcomes) => {
            for (q, outcome) in batch.into_iter().zip(outcomes) {
                // A caller that went away takes no answer; its post stands.
                let _ = q.reply.send(Answer::Done(Ok(outcome)));
            }
        }
        Err(StoreError::CommitUncertain(e)) => {
            for q in batch {
                let _ = q
                    .reply
                    .send(Answer::Done(Err(StoreError::CommitUncertain(e.clone()))));
            }
        }
        Err(e) if batch.len() == 1 => {
            let q = batch.into_iter().next().expect("one post");
            let _ = q.reply.send(Answer::Done(Err(e)));
        }
        Err(e) => {
            tracing::debug!(error = %e, posts = batch.len(), "batch of posts rolled back; each is written alone");
            for q in batch {
                let _ = q.reply.send(Answer::Alone(q.message, q.actor));
            }
        }
    }
}

/// The ledger evidence of one post.
fn evidence(message: &NewMessage, actor: &Actor) -> Vec<NewEvent> {
    actor.evidence(actor.event(
        "message_posted",
        json!({
            "message_id": message.id,
            "kind": message.kind,
            "priority": message.priority,
            "ack_required": message.ack_required,
            "reply_to": message.reply_to,
            "author_session_id": message.author_session_id,
            "body_chars": message.body.chars().count(),
        }),
    ))
}

/// Writes `posts` to the board of `session_id` in one transaction sent whole: `BEGIN`, the
/// session row lock, one [`post_statement`] per post, `COMMIT`. Transient conflicts are
/// retried as a whole.
async fn write(
    pool: &Pool,
    session_id: &str,
    posts: &[(&NewMessage, &Actor)],
) -> Result<Vec<Outcome<Posted>>, StoreError> {
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
    retry_transient(&CasPolicy::default(), || async {
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
        let locked = locked.as_ref().map(sessions::from_row);
        stored
            .iter()
            .zip(posts)
            .map(|(row, (message, _))| match (row, &locked) {
                (Some(row), _) => Ok(Ok(Posted {
                    message: from_row(row),
                })),
                (None, None) => Ok(Err(Refusal::SessionNotFound)),
                (None, Some(s)) if !s.is_active() => {
                    Ok(Err(Refusal::SessionClosed(s.lifecycle.clone())))
                }
                // Active under the lock, so the one guard left is the message replied to.
                (None, Some(_)) if message.reply_to.is_some() => {
                    Ok(Err(Refusal::UnknownMessage("reply_to")))
                }
                (None, Some(_)) => Err(StoreError::CorruptRow {
                    table: "workflow_sessions",
                    detail: format!("a post to the active session {session_id} wrote nothing"),
                }),
            })
            .collect()
    })
    .await
}

/// Awaits `futures` together, polling them in their order every time, so that each one's
/// first poll (which sends its request) comes before the next one's; their outputs in order.
async fn join_in_order<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(v) => *output = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|o| o.expect("every future finished"))
        .collect()
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
             SELECT $2, cur.id, cur.messages_posted + 1, $3, $4, $5, $6, 'open', $7, $8, $9, \
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
