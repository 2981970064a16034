//! The Action Audit aggregates: `action_sessions` and their `action_events`. Events are
//! appended by one statement that bumps the chosen session row's counters under a guard and
//! inserts at the sequence numbers it advanced over; a session takes only the events of the
//! caller that opened it.
//!
//! Strategy: the session row's lock, taken by one statement for the busiest write. An event
//! is recorded by one guarded statement whose row update takes the session row's lock (racing
//! events of one session queue on it), and a caller's events that meet in one process share
//! that statement ([`record`]). Closing a session is a read–decide–write change under the same
//! lock ([`crate::change`]). Nothing checks a version.

use std::time::Duration;

use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Object, Pool};
use serde_json::Value;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::StoreError;
use crate::batch::Combiner;
use crate::change::{self, ChangeOutcome, RETRY, StepFuture};

/// One audited request, ready to store.
#[derive(Debug, Clone)]
pub struct NewActionEvent {
    /// Route path (`/mcp`, `/api/actions/runtime_status`, …).
    pub endpoint: String,
    /// HTTP method.
    pub http_method: String,
    /// What was done (`toolsList`, a tool name, an MCP method).
    pub action_name: String,
    /// Operation class (`mcp_tools_list`, `mcp_tools_call`, `rest_tool_call`, …).
    pub operation: String,
    /// HTTP status answered.
    pub status_code: i32,
    /// Whether it succeeded.
    pub success: bool,
    /// Wall time.
    pub duration_ms: i64,
    /// Request id.
    pub request_id: Option<String>,
    /// Bounded metadata summary.
    pub summary: Value,
    /// Caller kind, snapshotted now.
    pub principal_kind: Option<String>,
    /// Stable user id, when the caller has one.
    pub principal_user_id: Option<String>,
    /// OAuth client id, for OAuth callers only.
    pub oauth_client_id: Option<String>,
}

/// Which audit session an event joins.
#[derive(Debug, Clone)]
pub enum Affinity {
    /// The caller named it (header or query); created if new. A session of that id that
    /// another caller opened takes none of this caller's events: they go where
    /// [`Affinity::Reuse`] with `idle` would put them.
    Explicit {
        /// The session id.
        id: String,
        /// The reuse window for events that named another caller's session.
        idle: Duration,
    },
    /// The caller's most recent open session active within `idle`, else a new one.
    Reuse {
        /// How long an open session stays eligible after its last event.
        idle: Duration,
    },
}

/// Where an event landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// Audit session id.
    pub session_id: String,
    /// Event id.
    pub event_id: Uuid,
    /// Position in the session.
    pub seq: i64,
    /// Whether this event created the session.
    pub created_session: bool,
}

/// A session row.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ActionSession {
    /// Id.
    pub session_id: String,
    /// `open` or `closed`.
    pub status: String,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Time of the latest event, to within a second (it moves when it is a second or more
    /// behind an event).
    pub last_event_at: DateTime<Utc>,
    /// Close time.
    pub closed_at: Option<DateTime<Utc>>,
    /// Events recorded.
    pub event_count: i64,
    /// Events that failed.
    pub error_count: i64,
    /// Sum of event durations.
    pub total_duration_ms: i64,
}

const SESSION_COLUMNS: &str = "session_id, status, created_at, last_event_at, closed_at, event_count, \
     error_count, total_duration_ms, version";

fn session_from_row(row: &Row) -> ActionSession {
    ActionSession {
        session_id: row.get("session_id"),
        status: row.get("status"),
        created_at: row.get("created_at"),
        last_event_at: row.get("last_event_at"),
        closed_at: row.get("closed_at"),
        event_count: row.get("event_count"),
        error_count: row.get("error_count"),
        total_duration_ms: row.get("total_duration_ms"),
    }
}

/// An event as operators see it, without caller attribution.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ActionEventView {
    /// Event id.
    pub id: Uuid,
    /// Position in the session.
    pub seq: i64,
    /// When.
    pub occurred_at: DateTime<Utc>,
    /// Route path.
    pub endpoint: String,
    /// HTTP method.
    pub http_method: String,
    /// Action name.
    pub action_name: String,
    /// Operation class.
    pub operation: String,
    /// HTTP status.
    pub status_code: i32,
    /// Success.
    pub success: bool,
    /// Duration.
    pub duration_ms: i64,
    /// Request id.
    pub request_id: Option<String>,
    /// Metadata summary.
    pub summary: Value,
}

/// Records `event` for the caller `caller_fingerprint`: choose the session, insert the event at
/// the next seq and bump the session's counters, all in one transaction.
///
/// An event joining a session that exists is one statement, its own transaction committed
/// asynchronously, in one round trip. The statement bumps the counters of
/// the chosen session row (`UPDATE … RETURNING`, which holds the row lock, so racing events of
/// one session queue and each reads the counter its predecessor wrote: seqs stay gap-free) and
/// inserts the events at the seqs it advanced over. The lock is held only while the server
/// runs that statement and the commit, never across a round trip. A caller's events that meet
/// in one process are written by that statement together ([`crate::batch`]; at most
/// [`MAX_EVENTS_PER_WRITE`], in arrival order), so a busy caller's requests do not each queue
/// on its session row. When no session takes the events (a new caller, an idle or closed
/// session, a new explicit id), the session is created first and the events are sent again.
/// A batch the database refused (an event breaking a constraint) is written again event by
/// event, so one event's failure is never another's.
pub async fn record(
    pool: &Pool,
    caller_fingerprint: &str,
    affinity: &Affinity,
    event: NewActionEvent,
) -> Result<ChangeOutcome<Recorded>, StoreError> {
    let key = match affinity {
        Affinity::Explicit { id, .. } => format!("{caller_fingerprint} explicit {id}"),
        Affinity::Reuse { idle } => format!("{caller_fingerprint} reuse {}", idle.as_millis()),
    };
    let queued = Queued {
        caller_fingerprint: caller_fingerprint.to_owned(),
        affinity: affinity.clone(),
        event,
    };
    match EVENTS.submit(pool, &key, queued).await? {
        Answer::Done(result) => result,
        Answer::Alone(q) => {
            match record_all(pool, &q.caller_fingerprint, &q.affinity, &[&q.event]).await? {
                ChangeOutcome::Applied {
                    mut value,
                    attempts,
                } => value
                    .remove(0)
                    .map(|value| ChangeOutcome::Applied { value, attempts }),
                ChangeOutcome::Conflict { attempts } => Ok(ChangeOutcome::Conflict { attempts }),
            }
        }
    }
}

/// Events recorded by one statement at most.
pub const MAX_EVENTS_PER_WRITE: usize = 32;

/// An event waiting for its caller's writer.
struct Queued {
    caller_fingerprint: String,
    affinity: Affinity,
    event: NewActionEvent,
}

/// What a queued event is told.
enum Answer {
    /// Its outcome.
    Done(Result<ChangeOutcome<Recorded>, StoreError>),
    /// Its batch was refused as a whole: record it alone.
    Alone(Box<Queued>),
}

static EVENTS: Combiner<String, Queued, Answer> =
    Combiner::new(MAX_EVENTS_PER_WRITE, |pool, _, batch| {
        Box::pin(async move { record_batch(&pool, batch).await })
    });

/// Records `batch` (one caller and affinity) with one statement; the answer of each event.
async fn record_batch(pool: &Pool, batch: Vec<Queued>) -> Vec<Answer> {
    let events: Vec<&NewActionEvent> = batch.iter().map(|q| &q.event).collect();
    let result = record_all(
        pool,
        &batch[0].caller_fingerprint,
        &batch[0].affinity,
        &events,
    )
    .await;
    drop(events);
    match result {
        Ok(ChangeOutcome::Applied { value, attempts }) => value
            .into_iter()
            .map(|r| Answer::Done(r.map(|value| ChangeOutcome::Applied { value, attempts })))
            .collect(),
        Ok(ChangeOutcome::Conflict { attempts }) => batch
            .iter()
            .map(|_| Answer::Done(Ok(ChangeOutcome::Conflict { attempts })))
            .collect(),
        Err(e) if batch.len() == 1 => vec![Answer::Done(Err(e))],
        // The connection failed with the statement sent: it may have been committed.
        Err(StoreError::CommitUncertain(e)) => batch
            .iter()
            .map(|_| Answer::Done(Err(StoreError::CommitUncertain(e.clone()))))
            .collect(),
        Err(e) => {
            tracing::debug!(error = %e, events = batch.len(), "batch of audit events refused; each is recorded alone");
            batch
                .into_iter()
                .map(|q| Answer::Alone(Box::new(q)))
                .collect()
        }
    }
}

/// Records `events` (in order) for the caller into one session with one statement, creating
/// the session first when none takes them. `Err` only when nothing was recorded (or the
/// outcome is unknown: [`StoreError::CommitUncertain`]); once recorded, each event's own
/// result.
async fn record_all(
    pool: &Pool,
    caller_fingerprint: &str,
    affinity: &Affinity,
    events: &[&NewActionEvent],
) -> Result<ChangeOutcome<Vec<Result<Recorded, StoreError>>>, StoreError> {
    let client = pool.get().await?;
    let mut created: Option<String> = None;
    let mut affinity = affinity.clone();
    // A session created here can be closed by an operator before the events land in it; a
    // caller that keeps losing that race gets the typed, retryable conflict.
    for attempt in 1..=3 {
        if let Some(mut recorded) = append(&client, caller_fingerprint, &affinity, events).await? {
            // The session was created for the first of them.
            if let Some(Ok(first)) = recorded.first_mut() {
                first.created_session = created.as_deref() == Some(first.session_id.as_str());
            }
            return Ok(ChangeOutcome::Applied {
                value: recorded,
                attempts: attempt,
            });
        }
        let id = match &affinity {
            Affinity::Explicit { id, .. } => id.clone(),
            Affinity::Reuse { .. } => Uuid::new_v4().to_string(),
        };
        let insert = client
            .prepare_cached(
                "INSERT INTO action_sessions (session_id, caller_fingerprint) VALUES ($1::text, $2::text) \
                 ON CONFLICT (session_id) DO NOTHING",
            )
            .await?;
        if client.execute(&insert, &[&id, &caller_fingerprint]).await? == 1 {
            created = Some(id);
        } else if let Affinity::Explicit { idle, .. } = affinity {
            // The named session exists and did not take the events, so another caller opened
            // it (an explicit session takes its opener's events whatever its status). Naming
            // it attaches nothing to it: the events go to this caller's own session.
            affinity = Affinity::Reuse { idle };
        }
    }
    Ok(ChangeOutcome::Conflict { attempts: 3 })
}

/// The events joining an existing session, as one statement (its own transaction), in order;
/// `None` (nothing written) when no session takes them. A connection that fails once the
/// statement may have been sent leaves the outcome unknown: [`StoreError::CommitUncertain`].
async fn append(
    client: &Object,
    caller_fingerprint: &str,
    affinity: &Affinity,
    events: &[&NewActionEvent],
) -> Result<Option<Vec<Result<Recorded, StoreError>>>, StoreError> {
    // Which session: the explicit id, or the caller's open one whose last event is the newest
    // and within the idle window (an uncorrelated subquery, evaluated once; the status guard
    // is re-checked on the locked row, so a session closed meanwhile takes no event).
    // `last_event_at` trails the last event by up to a second (below), so it only narrows the
    // candidates, through the index; the exact time is the newest event's (or, for a session
    // without events yet, its creation's).
    // An explicit id is bound to the caller that opened the session: the row is fetched by its
    // key either way, so the binding costs one comparison on it and no round trip.
    let chooser = match affinity {
        Affinity::Explicit { .. } => "session_id = $2 AND caller_fingerprint = $17::text",
        Affinity::Reuse { .. } => {
            "session_id = (SELECT c.session_id FROM action_sessions c, LATERAL (SELECT coalesce( \
                 (SELECT e.occurred_at FROM action_events e WHERE e.session_id = c.session_id \
                    ORDER BY e.seq DESC LIMIT 1), c.created_at) AS at) last \
               WHERE c.caller_fingerprint = $2 AND c.status = 'open' \
                 AND c.last_event_at > now() - make_interval(secs => $17) - interval '1 second' \
                 AND last.at > now() - make_interval(secs => $17) \
               ORDER BY last.at DESC LIMIT 1) AND status = 'open'"
        }
    };
    // An audit row is an observation, not an effect: it need not wait for its own WAL flush
    // (the worst case on a database crash is the loss of the last fraction of a second of
    // audit rows; effects are committed synchronously elsewhere, and any later synchronous
    // commit flushes these too). `set_config(…, true)` lasts only for this statement's own
    // transaction, and the commit reads it.
    //
    // `last_event_at` moves only when it is a second or more behind: every secondary index of
    // the table holds it, so rewriting it on each event would make each of a busy caller's
    // events an index insert in all of them, where an update that leaves indexed columns
    // alone is rewritten in place on its page (a HOT update).
    //
    // The events are one array per column; each takes the seq its position gives it among
    // the seqs the session's counter advanced over.
    let stmt = client
        .prepare_cached(&format!(
            "WITH cfg AS (SELECT set_config('synchronous_commit', 'off', true)), \
             s AS ( \
               UPDATE action_sessions SET event_count = event_count + cardinality($1::uuid[]), \
                 error_count = error_count + $15, total_duration_ms = total_duration_ms + $16, \
                 last_event_at = CASE WHEN last_event_at > now() - interval '1 second' \
                   THEN last_event_at ELSE now() END, \
                 version = version + 1 \
               WHERE {chooser} RETURNING session_id, event_count) \
             INSERT INTO action_events (id, session_id, seq, endpoint, http_method, action_name, \
               operation, status_code, success, duration_ms, request_id, summary, principal_kind, \
               principal_user_id, oauth_client_id) \
             SELECT e.id, s.session_id, s.event_count - cardinality($1::uuid[]) + e.n, \
               e.endpoint, e.http_method, e.action_name, e.operation, e.status_code, e.success, \
               e.duration_ms, e.request_id, e.summary, e.principal_kind, e.principal_user_id, \
               e.oauth_client_id \
             FROM s, cfg, unnest($1::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], \
               $7::int[], $8::boolean[], $9::bigint[], $10::text[], $11::jsonb[], $12::text[], \
               $13::text[], $14::text[]) WITH ORDINALITY AS e(id, endpoint, http_method, \
               action_name, operation, status_code, success, duration_ms, request_id, summary, \
               principal_kind, principal_user_id, oauth_client_id, n) \
             RETURNING id, session_id, seq"
        ))
        .await?;
    let ids: Vec<Uuid> = events.iter().map(|_| Uuid::now_v7()).collect();
    let endpoints: Vec<&str> = events.iter().map(|e| e.endpoint.as_str()).collect();
    let methods: Vec<&str> = events.iter().map(|e| e.http_method.as_str()).collect();
    let actions: Vec<&str> = events.iter().map(|e| e.action_name.as_str()).collect();
    let operations: Vec<&str> = events.iter().map(|e| e.operation.as_str()).collect();
    let statuses: Vec<i32> = events.iter().map(|e| e.status_code).collect();
    let successes: Vec<bool> = events.iter().map(|e| e.success).collect();
    let durations: Vec<i64> = events.iter().map(|e| e.duration_ms).collect();
    let request_ids: Vec<Option<&str>> = events.iter().map(|e| e.request_id.as_deref()).collect();
    let summaries: Vec<&Value> = events.iter().map(|e| &e.summary).collect();
    let kinds: Vec<Option<&str>> = events.iter().map(|e| e.principal_kind.as_deref()).collect();
    let users: Vec<Option<&str>> = events
        .iter()
        .map(|e| e.principal_user_id.as_deref())
        .collect();
    let clients: Vec<Option<&str>> = events
        .iter()
        .map(|e| e.oauth_client_id.as_deref())
        .collect();
    let errors = events.iter().filter(|e| !e.success).count() as i64;
    let duration: i64 = events.iter().map(|e| e.duration_ms.max(0)).sum();
    let idle_secs;
    let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![
        &ids,
        match affinity {
            Affinity::Explicit { id, .. } => id,
            Affinity::Reuse { .. } => &caller_fingerprint,
        },
        &endpoints,
        &methods,
        &actions,
        &operations,
        &statuses,
        &successes,
        &durations,
        &request_ids,
        &summaries,
        &kinds,
        &users,
        &clients,
        &errors,
        &duration,
    ];
    match affinity {
        Affinity::Explicit { .. } => params.push(&caller_fingerprint),
        Affinity::Reuse { idle } => {
            idle_secs = idle.as_secs_f64();
            params.push(&idle_secs);
        }
    }
    let rows = client
        .query(&stmt, &params)
        .await
        .map_err(|e| match e.code() {
            None => StoreError::CommitUncertain(std::sync::Arc::new(e)),
            Some(_) => StoreError::Database(e),
        })?;
    if rows.is_empty() {
        return Ok(None);
    }
    // Committed: each event has its own result from here.
    Ok(Some(
        ids.iter()
            .map(|id| {
                let row = rows
                    .iter()
                    .find(|r| r.get::<_, Uuid>("id") == *id)
                    .ok_or_else(|| StoreError::CorruptRow {
                        table: "action_events",
                        detail: format!("event {id} of a recorded batch was not inserted"),
                    })?;
                Ok(Recorded {
                    session_id: row.get("session_id"),
                    event_id: *id,
                    seq: row.get("seq"),
                    created_session: false,
                })
            })
            .collect(),
    ))
}

/// Whose audit sessions a reader sees, and may close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility<'a> {
    /// Every session (operators).
    All,
    /// Only the sessions the caller with this fingerprint opened; any other looks unknown.
    OpenedBy(&'a str),
}

impl<'a> Visibility<'a> {
    /// The opener the rows must have, if any (the SQL's `$n::text IS NULL OR …` parameter).
    fn opener(self) -> Option<&'a str> {
        match self {
            Visibility::All => None,
            Visibility::OpenedBy(fingerprint) => Some(fingerprint),
        }
    }
}

/// A page of the sessions `visible` to the reader, newest activity first.
pub async fn list_sessions(
    client: &impl GenericClient,
    visible: Visibility<'_>,
    status: Option<&str>,
    before: Option<(DateTime<Utc>, String)>,
    limit: i64,
) -> Result<Vec<ActionSession>, StoreError> {
    let (before_at, before_id) = match before {
        Some((at, id)) => (Some(at), Some(id)),
        None => (None, None),
    };
    // Unnamed statements are planned with their parameters, so the opener's test folds away
    // and a caller's page is read through `idx_action_sessions_caller`.
    let rows = client
        .query(
            &format!(
                "SELECT {SESSION_COLUMNS} FROM action_sessions \
                 WHERE ($1::text IS NULL OR status = $1) \
                   AND ($2::timestamptz IS NULL OR (last_event_at, session_id) < ($2, $3::text)) \
                   AND ($5::text IS NULL OR caller_fingerprint = $5::text) \
                 ORDER BY last_event_at DESC, session_id DESC LIMIT $4"
            ),
            &[&status, &before_at, &before_id, &limit, &visible.opener()],
        )
        .await?;
    Ok(rows.iter().map(session_from_row).collect())
}

/// The session `$1` when the reader may see it: every session when `$2` is null, else only
/// one opened by the caller fingerprinted `$2` ([`Visibility::opener`]).
fn visible_session_query() -> String {
    format!(
        "SELECT {SESSION_COLUMNS} FROM action_sessions WHERE session_id = $1 \
         AND ($2::text IS NULL OR caller_fingerprint = $2::text)"
    )
}

/// One session, when it is `visible` to the reader.
pub async fn get_session(
    client: &impl GenericClient,
    visible: Visibility<'_>,
    id: &str,
) -> Result<Option<ActionSession>, StoreError> {
    let row = client
        .query_opt(&visible_session_query(), &[&id, &visible.opener()])
        .await?;
    Ok(row.as_ref().map(session_from_row))
}

/// Events of a session with seq above `after`, in order.
pub async fn list_events(
    client: &impl GenericClient,
    session_id: &str,
    after: i64,
    limit: i64,
) -> Result<Vec<ActionEventView>, StoreError> {
    let rows = client
        .query(
            "SELECT id, seq, occurred_at, endpoint, http_method, action_name, operation, status_code, success, \
               duration_ms, request_id, summary FROM action_events \
             WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
            &[&session_id, &after, &limit],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| ActionEventView {
            id: r.get("id"),
            seq: r.get("seq"),
            occurred_at: r.get("occurred_at"),
            endpoint: r.get("endpoint"),
            http_method: r.get("http_method"),
            action_name: r.get("action_name"),
            operation: r.get("operation"),
            status_code: r.get("status_code"),
            success: r.get("success"),
            duration_ms: r.get("duration_ms"),
            request_id: r.get("request_id"),
            summary: r.get("summary"),
        })
        .collect())
}

/// What closing did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Closing {
    /// Closed now.
    Closed(ActionSession),
    /// Was already closed.
    AlreadyClosed(ActionSession),
    /// No such session.
    NotFound,
}

/// Closes a session `visible` to the closer, decided on its locked row ([`change::locked`]);
/// any other is [`Closing::NotFound`].
pub async fn close_session(
    pool: &Pool,
    visible: Visibility<'_>,
    id: &str,
) -> Result<ChangeOutcome<Closing>, StoreError> {
    let load = format!("{} FOR UPDATE", visible_session_query());
    let ran = change::locked(
        pool,
        &RETRY,
        &load,
        &[&id, &visible.opener()],
        |tx, row| -> StepFuture<'_, Closing> {
            let id = id.to_owned();
            Box::pin(async move {
                let Some(row) = row else {
                    return Ok(Closing::NotFound);
                };
                let current = session_from_row(&row);
                if current.status == "closed" {
                    return Ok(Closing::AlreadyClosed(current));
                }
                let stmt = tx
                    .prepare_cached(&format!(
                        "UPDATE action_sessions SET status = 'closed', closed_at = now(), version = version + 1 \
                         WHERE session_id = $1 AND status <> 'closed' RETURNING {SESSION_COLUMNS}"
                    ))
                    .await?;
                let written = tx.query_opt(&stmt, &[&id]).await?;
                Ok(Closing::Closed(session_from_row(&change::guarded(
                    written,
                    "action_sessions",
                )?)))
            })
        },
    )
    .await;
    ChangeOutcome::of(ran, &RETRY)
}

/// Aggregates over the newest events in a window.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AuditStats {
    /// Events in the window.
    pub available: i64,
    /// Events actually aggregated (the newest, up to the scan bound).
    pub scanned: i64,
    /// Whether every available event was aggregated.
    pub complete: bool,
    /// Sessions touched by the scanned events.
    pub sessions: i64,
    /// Scanned events that succeeded.
    pub succeeded: i64,
    /// Scanned events that failed.
    pub failed: i64,
    /// Event counts by caller kind (`unknown` for rows without attribution).
    pub by_principal_kind: Vec<(String, i64)>,
    /// Event counts by OAuth client, for OAuth callers.
    pub by_oauth_client: Vec<(String, i64)>,
    /// Event counts by operation.
    pub by_operation: Vec<(String, i64)>,
}

/// Computes [`AuditStats`] over the events since `since` of the sessions `visible` to the
/// reader, scanning at most `max_scan` of the newest. Read errors propagate: a partial
/// aggregate is never presented as complete.
pub async fn stats(
    client: &impl GenericClient,
    visible: Visibility<'_>,
    since: DateTime<Utc>,
    max_scan: i64,
) -> Result<AuditStats, StoreError> {
    let opener = visible.opener();
    // The events in the window, of the reader's sessions when it is not an operator; `opener`
    // names the parameter holding the opener.
    let events = |opener: &str| {
        format!(
            "FROM action_events WHERE occurred_at >= $1 AND ({opener}::text IS NULL OR session_id IN \
             (SELECT session_id FROM action_sessions WHERE caller_fingerprint = {opener}::text))"
        )
    };
    let available: i64 = client
        .query_one(
            &format!("SELECT count(*) {}", events("$2")),
            &[&since, &opener],
        )
        .await?
        .get(0);
    let scan = format!(
        "WITH scanned AS (SELECT * {} ORDER BY occurred_at DESC LIMIT $2)",
        events("$3")
    );
    let totals = client
        .query_one(
            &format!(
                "{scan} SELECT count(*), count(DISTINCT session_id), count(*) FILTER (WHERE success), \
                 count(*) FILTER (WHERE NOT success) FROM scanned"
            ),
            &[&since, &max_scan, &opener],
        )
        .await?;
    let grouped = |column: &'static str, only_present: bool| {
        let filter = if only_present {
            format!("WHERE {column} IS NOT NULL")
        } else {
            String::new()
        };
        format!(
            "{scan} SELECT coalesce({column}, 'unknown') AS k, count(*) FROM scanned {filter} \
             GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 100"
        )
    };
    let pairs = |rows: Vec<Row>| {
        rows.iter()
            .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1)))
            .collect::<Vec<_>>()
    };
    let by_kind = client
        .query(
            &grouped("principal_kind", false),
            &[&since, &max_scan, &opener],
        )
        .await?;
    let by_client = client
        .query(
            &grouped("oauth_client_id", true),
            &[&since, &max_scan, &opener],
        )
        .await?;
    let by_op = client
        .query(&grouped("operation", false), &[&since, &max_scan, &opener])
        .await?;
    let scanned: i64 = totals.get(0);
    Ok(AuditStats {
        available,
        scanned,
        complete: scanned >= available,
        sessions: totals.get(1),
        succeeded: totals.get(2),
        failed: totals.get(3),
        by_principal_kind: pairs(by_kind),
        by_oauth_client: pairs(by_client),
        by_operation: pairs(by_op),
    })
}
