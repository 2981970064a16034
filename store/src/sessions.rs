//! The `workflow_sessions` aggregate and its bounded `session_events` ledger (its message
//! board is [`crate::board`]).
//!
//! Strategy: the session row's lock. Every change of a session is one transaction that locks
//! the session row first ([`change()`], or the row update of a single statement: [`append`],
//! a post), so writers of one session queue on that lock and each decides on the row its
//! predecessor committed: no version guard is needed, and nothing is retried but deadlocks and
//! serialization failures ([`crate::change`]). A busy session is exactly where the lock pays:
//! writers that lost a version race would each back off and try again, which on one hot row
//! kept the throughput but spread the tail (docs/BENCHMARKS.md, "Sessions and audit"). A write
//! appends its events at the next gap-free seqs and deletes the events beyond the retention
//! bound in the same statement.

use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Pool};
use serde_json::Value;
use tokio_postgres::Row;
use uuid::Uuid;

use wc_domain::{EventKind, EventRole, Lifecycle, Mode, ProjectId, SessionId};

use crate::StoreError;
use crate::change::{self, ChangeOutcome, StepFuture};
use crate::pipeline::PipelinedTx;

/// Events retained per session (the newest; older ones are deleted).
pub const RETAINED_EVENTS: i64 = 2000;
/// Most events one mutation may append.
pub const MAX_EVENTS_PER_WRITE: usize = 128;

/// A session row.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    /// The session's id.
    pub id: SessionId,
    /// Canonical project id.
    pub project: ProjectId,
    /// Fingerprint of the owning authority group.
    pub owner_authority_fingerprint: String,
    /// Mode.
    pub mode: Mode,
    /// Lifecycle.
    pub lifecycle: Lifecycle,
    /// Execution defaults.
    pub execution_context: Value,
    /// Root instruction excerpt (`{excerpt, truncated, …}`), if any.
    pub root_instruction: Option<Value>,
    /// Events ever appended.
    pub events_observed: i64,
    /// Lowest retained seq.
    pub retained_from_seq: i64,
    /// Message observation revision.
    pub message_observation_revision: i64,
    /// Messages ever posted to the board.
    pub messages_posted: i64,
    /// Messages retained on the board.
    pub messages_retained: i32,
    /// Open messages that require an acknowledgement.
    pub open_ack_required: i32,
    /// Newest observation revision of a message removed by retention.
    pub message_history_lost_through: i64,
    /// Every message numbered below it has been removed by retention.
    pub messages_low_number: i64,
    /// Retained events by kind: the counts of the retained ledger, equal to the counts of
    /// every event ever appended until retention first deletes events. Each write keeps it
    /// exact where retention prunes ([`ledger_advance_sql`]), so a reader never groups the
    /// ledger.
    pub kind_counts: Value,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// When it was finished.
    pub finished_at: Option<DateTime<Utc>>,
    /// When it was closed.
    pub closed_at: Option<DateTime<Utc>>,
    /// Bumped by every write (no write is guarded by it).
    pub version: i64,
}

impl SessionRow {
    /// Whether events older than the retained window were deleted.
    pub fn retention_truncated(&self) -> bool {
        self.retained_from_seq > 1
    }

    /// Whether the session accepts mutations.
    pub fn is_active(&self) -> bool {
        self.lifecycle.is_active()
    }
}

const COLUMNS: &str = "id, project, owner_authority_fingerprint, mode, lifecycle, execution_context, root_instruction, \
     events_observed, retained_from_seq, message_observation_revision, messages_posted, messages_retained, \
     open_ack_required, message_history_lost_through, messages_low_number, kind_counts, created_at, updated_at, finished_at, closed_at, version";

pub(crate) fn from_row(r: &Row) -> SessionRow {
    SessionRow {
        id: r.get("id"),
        project: r.get("project"),
        owner_authority_fingerprint: r.get("owner_authority_fingerprint"),
        mode: r.get("mode"),
        lifecycle: r.get("lifecycle"),
        execution_context: r.get("execution_context"),
        root_instruction: r.get("root_instruction"),
        events_observed: r.get("events_observed"),
        retained_from_seq: r.get("retained_from_seq"),
        message_observation_revision: r.get("message_observation_revision"),
        messages_posted: r.get("messages_posted"),
        messages_retained: r.get("messages_retained"),
        open_ack_required: r.get("open_ack_required"),
        message_history_lost_through: r.get("message_history_lost_through"),
        messages_low_number: r.get("messages_low_number"),
        kind_counts: r.get("kind_counts"),
        created_at: r.get("created_at"),
        updated_at: r.get("updated_at"),
        finished_at: r.get("finished_at"),
        closed_at: r.get("closed_at"),
        version: r.get("version"),
    }
}

/// An event to append.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// Kind.
    pub kind: EventKind,
    /// Id of the call pair this event belongs to.
    pub call_id: Uuid,
    /// Id of the kernel invocation.
    pub invocation_id: Uuid,
    /// Recorder or business.
    pub role: EventRole,
    /// Tool name, when the event is about a tool call.
    pub tool_name: Option<String>,
    /// Bounded, already-redacted payload.
    pub payload: Value,
}

/// A stored event.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EventRow {
    /// Position in the session's ledger.
    pub seq: i64,
    /// Kind.
    pub kind: EventKind,
    /// When it was appended.
    pub occurred_at: DateTime<Utc>,
    /// Call pair id.
    pub call_id: Uuid,
    /// Invocation id.
    pub invocation_id: Uuid,
    /// Recorder or business.
    pub role: EventRole,
    /// Tool name.
    pub tool_name: Option<String>,
    /// Payload.
    pub payload: Value,
}

/// A session to create.
#[derive(Debug, Clone)]
pub struct NewSession {
    /// Id (already generated, ≥128 random bits).
    pub id: SessionId,
    /// Project.
    pub project: ProjectId,
    /// Owner fingerprint.
    pub owner_authority_fingerprint: String,
    /// Mode.
    pub mode: Mode,
    /// Root instruction excerpt.
    pub root_instruction: Option<Value>,
}

/// Creates a session with its first events in one transaction.
pub async fn create(
    pool: &Pool,
    new: &NewSession,
    events: &[NewEvent],
) -> Result<SessionRow, StoreError> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    tx.execute(
        "INSERT INTO workflow_sessions (id, project, owner_authority_fingerprint, mode, lifecycle, root_instruction) \
         VALUES ($1::text, $2::text, $3::text, $4::text, 'active', $5::jsonb)",
        &[&new.id, &new.project, &new.owner_authority_fingerprint, &new.mode, &new.root_instruction],
    )
    .await?;
    let session = write_back(&tx, (&new.id, 0), &SessionChange::default(), events).await?;
    tx.commit().await?;
    Ok(session)
}

/// The load of a session row that locks it (`FOR UPDATE`) until the end of the transaction:
/// the first statement of every change of a session.
static LOCK: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {COLUMNS} FROM workflow_sessions WHERE id = $1 FOR UPDATE"));

/// [`LOCK`], prepared (once per connection).
pub(crate) async fn lock_statement<C: GenericClient>(
    client: &C,
) -> Result<tokio_postgres::Statement, StoreError> {
    Ok(client.prepare_cached(&LOCK).await?)
}

/// The one read–decide–write change of a session ([`change::locked`]): a transaction that
/// locks session `id`'s row (`BEGIN` and the lock in one round trip), runs `step` on it
/// (`None` when there is no such session) and commits what `step` wrote; transient conflicts
/// are attempted again. [`mutate`], the board's changes and work that leaves evidence are
/// made through it.
pub(crate) async fn change<T, F>(
    pool: &Pool,
    id: &SessionId,
    step: F,
) -> Result<(T, u32), StoreError>
where
    F: for<'t> Fn(&'t PipelinedTx, Option<SessionRow>) -> StepFuture<'t, T>,
{
    change::locked(pool, &change::RETRY, &LOCK, &[id], |tx, row| {
        step(tx, row.as_ref().map(from_row))
    })
    .await
}

/// The session `id`, if it exists.
pub async fn get(
    client: &impl GenericClient,
    id: &SessionId,
) -> Result<Option<SessionRow>, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM workflow_sessions WHERE id = $1"
        ))
        .await?;
    Ok(client
        .query_opt(&stmt, &[&id])
        .await?
        .as_ref()
        .map(from_row))
}

/// The newest `limit` retained events, newest first.
pub async fn recent_events(
    client: &impl GenericClient,
    id: &SessionId,
    limit: i64,
) -> Result<Vec<EventRow>, StoreError> {
    let stmt = client
        .prepare_cached(
            "SELECT seq, kind, occurred_at, call_id, invocation_id, role, tool_name, payload FROM session_events \
             WHERE session_id = $1 ORDER BY seq DESC LIMIT $2",
        )
        .await?;
    Ok(client
        .query(&stmt, &[&id, &limit])
        .await?
        .iter()
        .map(|r| EventRow {
            seq: r.get("seq"),
            kind: r.get("kind"),
            occurred_at: r.get("occurred_at"),
            call_id: r.get("call_id"),
            invocation_id: r.get("invocation_id"),
            role: r.get("role"),
            tool_name: r.get("tool_name"),
            payload: r.get("payload"),
        })
        .collect())
}

/// Field changes to a session row (unset fields stay as they are).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionChange {
    /// New lifecycle.
    pub lifecycle: Option<Lifecycle>,
    /// New mode.
    pub mode: Option<Mode>,
    /// New execution context.
    pub execution_context: Option<Value>,
    /// New root instruction (only ever set once).
    pub root_instruction: Option<Value>,
    /// Bump the message observation revision by this much.
    pub message_revision_bump: i64,
    /// Messages newly posted (numbering).
    pub messages_posted_bump: i64,
    /// Change of the retained message count.
    pub messages_retained_delta: i32,
    /// Change of the open ACK-required message count.
    pub open_ack_required_delta: i32,
    /// Raise the history-lost low-watermark to at least this revision.
    pub message_history_lost_through: Option<i64>,
}

/// What a mutation decided, given the current row.
// A decision lives for one attempt on the stack; boxing the larger variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Decision<T> {
    /// Write these changes and events, then return `T`.
    Write(SessionChange, Vec<NewEvent>, T),
    /// Change nothing and return `T` (a typed refusal, a no-op).
    Leave(T),
}

/// What a mutation of a missing session returns.
// Returned once per mutation and matched at once; the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, PartialEq)]
pub enum Mutated<T> {
    /// The session exists; the decision's value.
    Done(T, SessionRow),
    /// No session has this id.
    NotFound,
}

/// Events as one array per column, the parameters of an `unnest` insert.
pub(crate) struct EventColumns<'a> {
    kinds: Vec<&'a str>,
    call_ids: Vec<Uuid>,
    invocation_ids: Vec<Uuid>,
    roles: Vec<EventRole>,
    tools: Vec<Option<&'a str>>,
    payloads: Vec<&'a Value>,
}

impl<'a> EventColumns<'a> {
    /// The columns of `events`, at most [`MAX_EVENTS_PER_WRITE`] of them: the retention delete
    /// of the same statement cannot see the rows it inserts, so one write must stay far below
    /// the retention bound (callers append a handful of events at a time).
    pub(crate) fn of(events: &'a [NewEvent]) -> Result<Self, StoreError> {
        if events.len() > MAX_EVENTS_PER_WRITE {
            return Err(StoreError::CorruptRow {
                table: "session_events",
                detail: format!(
                    "{} events in one write; at most {MAX_EVENTS_PER_WRITE}",
                    events.len()
                ),
            });
        }
        Ok(Self {
            kinds: events.iter().map(|e| e.kind.as_str()).collect(),
            call_ids: events.iter().map(|e| e.call_id).collect(),
            invocation_ids: events.iter().map(|e| e.invocation_id).collect(),
            roles: events.iter().map(|e| e.role).collect(),
            tools: events.iter().map(|e| e.tool_name.as_deref()).collect(),
            payloads: events.iter().map(|e| &e.payload).collect(),
        })
    }

    /// The six array parameters, in the order [`ledger_insert_sql`] numbers them.
    pub(crate) fn params(&self) -> [&(dyn tokio_postgres::types::ToSql + Sync); 6] {
        [
            &self.kinds,
            &self.call_ids,
            &self.invocation_ids,
            &self.roles,
            &self.tools,
            &self.payloads,
        ]
    }
}

/// Writes `change` and `events` to session `id`, whose row this transaction has locked; the
/// row as written. One statement: the row update, which advances the ledger over the events
/// ([`ledger_advance_sql`]), the event inserts at the seqs it advanced over and the retention
/// delete go to the server together, so the write costs one round trip.
pub(crate) async fn write_back<C: GenericClient>(
    tx: &C,
    read: (&SessionId, i64),
    change: &SessionChange,
    events: &[NewEvent],
) -> Result<SessionRow, StoreError> {
    let (id, read_version) = read;
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "WITH s AS (UPDATE workflow_sessions SET \
               lifecycle = coalesce($2::text, lifecycle), \
               mode = coalesce($3::text, mode), \
               execution_context = coalesce($4::jsonb, execution_context), \
               root_instruction = coalesce(root_instruction, $5::jsonb), \
               message_observation_revision = message_observation_revision + $6, \
               messages_posted = messages_posted + $7, \
               messages_retained = messages_retained + $8, \
               open_ack_required = open_ack_required + $9, \
               message_history_lost_through = greatest(message_history_lost_through, coalesce($10::bigint, 0)), \
               {advance}, updated_at = now(), \
               finished_at = CASE WHEN $2 = 'finished' AND finished_at IS NULL THEN now() ELSE finished_at END, \
               closed_at = CASE WHEN $2 = 'closed' AND closed_at IS NULL THEN now() ELSE closed_at END, \
               version = version + 1 \
             WHERE id = $1 AND version = $17 RETURNING {COLUMNS}), \
             ev AS ({insert}), \
             gone AS ({retention}) \
             SELECT {COLUMNS} FROM s",
            advance = ledger_advance_sql(11),
            insert = ledger_insert_sql("s", 11, "e.payload"),
            retention = ledger_retention_sql("$1", "s"),
        )
    });
    let columns = EventColumns::of(events)?;
    let stmt = tx.prepare_cached(&SQL).await?;
    let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![
        id,
        &change.lifecycle,
        &change.mode,
        &change.execution_context,
        &change.root_instruction,
        &change.message_revision_bump,
        &change.messages_posted_bump,
        &change.messages_retained_delta,
        &change.open_ack_required_delta,
        &change.message_history_lost_through,
    ];
    params.extend(columns.params());
    params.push(&read_version);
    match tx.query_opt(&stmt, &params).await? {
        Some(row) => Ok(from_row(&row)),
        None => Err(StoreError::Stale {
            table: "workflow_sessions",
        }),
    }
}

/// SQL: the `SET` list entries of a `workflow_sessions` update that advance its ledger by the
/// events whose kinds are the `text[]` parameter `$kinds`: `events_observed` (cumulative), the
/// retention window's `retained_from_seq`, and the retained per-kind counts `kind_counts`, which
/// gain the appended kinds and lose the kinds of the events that leave the window, the very
/// rows [`ledger_retention_sql`] deletes in the same statement (a kind that drops to zero is
/// removed). Until the ledger first reaches the retention bound no event leaves it and the
/// pruned-kinds subquery is not run at all (its gate is a one-time filter on the locked row);
/// afterwards it reads the few rows the delete removes, by the same index range. Every column
/// reference is the row's value before the update (the locked row's, in an `UPDATE`).
pub(crate) fn ledger_advance_sql(kinds: usize) -> String {
    let appended = format!("cardinality(${kinds}::text[])");
    // The lowest seq retained after this write (when above the current one).
    let bound = format!("workflow_sessions.events_observed + {appended} - {RETAINED_EVENTS} + 1");
    format!(
        "events_observed = events_observed + {appended}, \
         retained_from_seq = greatest(retained_from_seq, {bound}), \
         kind_counts = jsonb_strip_nulls(kind_counts || (SELECT coalesce(jsonb_object_agg(k, \
             nullif(coalesce((kind_counts->>k)::bigint, 0) + n, 0)), '{{}}'::jsonb) \
           FROM (SELECT k, sum(d) AS n FROM ( \
               SELECT k, 1 AS d FROM unnest(${kinds}::text[]) AS k \
               UNION ALL \
               SELECT e.kind, -1 FROM session_events e \
               WHERE {bound} > workflow_sessions.retained_from_seq \
                 AND e.session_id = workflow_sessions.id \
                 AND e.seq >= workflow_sessions.retained_from_seq AND e.seq < {bound}) d \
             GROUP BY k) c))"
    )
}

/// SQL: an `INSERT` of the events given as the six array parameters from `$first` (kinds, call
/// ids, invocation ids, roles, tool names, payloads: [`EventColumns`]) into the ledger of the
/// session row `written` returned (a CTE over `workflow_sessions … RETURNING`, whose
/// `events_observed` already counts them), at the seqs that row advanced over. Each stored
/// payload is the expression `payload` over `e.kind` and `e.payload`.
pub(crate) fn ledger_insert_sql(written: &str, first: usize, payload: &str) -> String {
    let p = |i: usize| first + i;
    format!(
        "INSERT INTO session_events (session_id, seq, kind, call_id, invocation_id, role, tool_name, payload) \
         SELECT {written}.id, {written}.events_observed - cardinality(${k}::text[]) + e.ord, e.kind, e.call_id, \
                e.invocation_id, e.role, e.tool_name, {payload} \
         FROM {written}, unnest(${k}::text[], ${c}::uuid[], ${i}::uuid[], ${r}::text[], ${t}::text[], ${j}::jsonb[]) \
           WITH ORDINALITY AS e(kind, call_id, invocation_id, role, tool_name, payload, ord)",
        k = p(0),
        c = p(1),
        i = p(2),
        r = p(3),
        t = p(4),
        j = p(5),
    )
}

/// SQL: the retention `DELETE` of the events of session `id` (an SQL expression) that leave
/// the window now that the update returned by `written` moved it. It deletes only the seqs from
/// the window's lower bound as of the statement's snapshot (that bound only ever rises, so a
/// snapshot value is at or below the written row's) up to the new one, so the range scan stays
/// a handful of rows: a plain `seq < bound` would walk every deleted-but-not-yet-vacuumed row
/// below it, each time.
pub(crate) fn ledger_retention_sql(id: &str, written: &str) -> String {
    format!(
        "DELETE FROM session_events WHERE session_id = {id} \
           AND seq >= (SELECT retained_from_seq FROM workflow_sessions WHERE id = {id}) \
           AND seq < (SELECT retained_from_seq FROM {written})"
    )
}

/// What [`append`] did.
// Returned once per append and matched at once; the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, PartialEq)]
pub enum Appended {
    /// The events were appended; the session as written.
    Done(SessionRow),
    /// The session is not active and the append required it to be; nothing was written.
    Inactive(SessionRow),
    /// No session has this id.
    NotFound,
}

/// Appends `events` to session `id` in one statement, without reading the row first: the
/// guarded `UPDATE … RETURNING` of the session row takes the row lock, advances
/// `events_observed` (and the retention window and the per-kind counts) from the values on the
/// locked row, and the events are inserted at the seqs it returned, with the retention delete,
/// in the same statement. Racing appends to one session queue on the row lock and each
/// continues from the row its predecessor wrote, so seqs stay gap-free and ordered with no
/// retries, and the lock is held only while the server runs the statement and its commit.
/// With `require_active` the row's lifecycle is part of the guard: a session that is no longer
/// active takes nothing. On a client outside a transaction the statement commits by itself.
pub async fn append(
    client: &impl GenericClient,
    id: &SessionId,
    events: &[NewEvent],
    require_active: bool,
) -> Result<Appended, StoreError> {
    if events.is_empty() {
        return Err(StoreError::CorruptRow {
            table: "session_events",
            detail: "an append of no events".into(),
        });
    }
    let columns = EventColumns::of(events)?;
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "WITH s AS ( \
               UPDATE workflow_sessions SET {advance}, updated_at = now(), version = version + 1 \
               WHERE id = $1 AND (NOT $8::boolean OR lifecycle = 'active') \
               RETURNING {COLUMNS}), \
             ev AS ({insert}), \
             gone AS ({retention}) \
             SELECT {COLUMNS} FROM s",
            advance = ledger_advance_sql(2),
            insert = ledger_insert_sql("s", 2, "e.payload"),
            retention = ledger_retention_sql("$1", "s"),
        )
    });
    let stmt = client.prepare_cached(&SQL).await?;
    let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![&id];
    params.extend(columns.params());
    params.push(&require_active);
    // A miss is a missing or inactive session; a miss on an active row (it cannot become
    // active again) would be a broken invariant, retried once before it is reported.
    for _ in 0..2 {
        let written = client.query_opt(&stmt, &params).await?;
        if let Some(row) = written {
            return Ok(Appended::Done(from_row(&row)));
        }
        match get(client, id).await? {
            None => return Ok(Appended::NotFound),
            Some(row) if require_active && !row.is_active() => return Ok(Appended::Inactive(row)),
            Some(_) => continue,
        }
    }
    Err(StoreError::CorruptRow {
        table: "workflow_sessions",
        detail: format!("an append to {id} matched no row although the session is active"),
    })
}

/// Changes session `id` as `decide` decides on its row, locked ([`change()`]): its changes and
/// events are written, or nothing is, in one transaction. `decide` may run more than once
/// (once per attempt) and must be a pure function of the row.
pub async fn mutate<T, F>(
    pool: &Pool,
    id: &SessionId,
    decide: F,
) -> Result<ChangeOutcome<Mutated<T>>, StoreError>
where
    T: Send + 'static,
    F: Fn(&SessionRow) -> Decision<T> + Send + Sync + 'static,
{
    let ran = change(pool, id, |tx, session| {
        let Some(session) = session else {
            return Box::pin(async { Ok(Mutated::NotFound) });
        };
        let decision = decide(&session);
        Box::pin(async move {
            Ok(match decision {
                Decision::Leave(value) => Mutated::Done(value, session),
                Decision::Write(fields, events, value) => {
                    let written =
                        write_back(&**tx, (&session.id, session.version), &fields, &events).await?;
                    Mutated::Done(value, written)
                }
            })
        })
    })
    .await;
    ChangeOutcome::of(ran, &change::RETRY)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use wc_domain::EventKind;

    use super::*;
    use crate::testing::{TestDatabase, event};

    #[tokio::test]
    async fn a_write_decided_on_a_version_that_moved_is_refused_and_the_change_decides_again() {
        let db = TestDatabase::new().await;
        let id = db.new_session(event(EventKind::TaskInstruction)).await;
        let attempts = AtomicU32::new(0);
        let ran = change(db.pool(), &id, |tx, session| {
            let attempt = attempts.fetch_add(1, Ordering::SeqCst) + 1;
            let id = id.clone();
            Box::pin(async move {
                let session = session.expect("the session exists");
                if attempt == 1 {
                    // A writer that did not take the lock changes the row after the read.
                    tx.execute(
                        "UPDATE workflow_sessions SET version = version + 1 WHERE id = $1",
                        &[&id],
                    )
                    .await?;
                }
                let events = [event(EventKind::ToolCallStarted)];
                write_back(
                    &**tx,
                    (&id, session.version),
                    &SessionChange::default(),
                    &events,
                )
                .await
            })
        })
        .await;
        let (written, tries) = ran.expect("the second attempt applies");
        assert_eq!(tries, 2, "the stale write was retried once");
        assert_eq!(attempts.load(Ordering::SeqCst), 2);
        // The first attempt wrote nothing: one appended event, and one version bump (the
        // interloper's was rolled back with the refused attempt).
        assert_eq!(written.events_observed, 2);
        let client = db.pool().get().await.unwrap();
        let now = get(&client, &id).await.unwrap().unwrap();
        assert_eq!(now.version, written.version);
        let created = 1; // the create's own write
        assert_eq!(now.version, created + 1);
        // A write that names an older version than the row's is refused outright.
        let stale = write_back(
            &client,
            (&id, now.version - 1),
            &SessionChange::default(),
            &[event(EventKind::ToolCallStarted)],
        )
        .await;
        assert!(
            matches!(
                stale,
                Err(StoreError::Stale {
                    table: "workflow_sessions"
                })
            ),
            "{stale:?}"
        );
        assert!(stale.unwrap_err().is_transient_conflict());
    }
}
