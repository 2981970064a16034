//! The `runner_work` aggregate: units of work for runners, their leases, kept output and
//! results. With the Postgres queue the row itself is the queue; with SQS a staged outbox row
//! is written in the enqueuing transaction and sent after commit ([`crate::outbox`]).
//!
//! Strategy: every transition is one guarded statement, whose guard Postgres checks again on
//! the row it locks, so racing transitions of one item take turns on its row and none needs a
//! version check: `queued → leased` only from `queued` (claims use `FOR UPDATE SKIP LOCKED`),
//! reports only under the live lease of the current instance, and terminal states never change.
//! Enqueueing with evidence is a change of the evidence session ([`enqueue`]). Wake-ups go out
//! as `NOTIFY` hints (`wc_work` with the client id when work is queued, `wc_work_done` with the
//! work id when it ends); durable state stays the truth.

mod claim;
pub mod ending;
mod output;
mod shell_end;

pub use claim::{CLAIM_WINDOW, Claim, LeaseView, claim_one, claim_queued, heartbeat, lease_views};
pub use ending::{EndedWork, Ends, WorkEnding};
use output::chunk_arrays;
pub use output::{Chunk, Report, append_output, read_heads, read_output};

use chrono::{DateTime, Utc};
use deadpool_postgres::{Client, GenericClient, Pool};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_postgres::Row;
use tokio_postgres::types::Json;
use uuid::Uuid;
use wc_domain::{
    EndReason, Lifecycle, ProjectId, ResultExpectation, SessionId, WorkMode, WorkQueue, WorkState,
};
use wc_runner_protocol::{WorkItem, WorkOutcome};

use crate::StoreError;
use crate::change::{ChangeOutcome, RETRY};
use crate::sessions::{self, NewEvent};
use crate::tasks::{self, NewTask};

/// `NOTIFY` channel announcing queued work; the payload is the runner client id.
pub const CHANNEL_QUEUED: &str = "wc_work";
/// `NOTIFY` channel announcing work that reached a terminal state; the payload is its id.
pub const CHANNEL_DONE: &str = "wc_work_done";

/// How the work reaches its runner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueRoute {
    /// The row is the queue; runners long-poll the runner API.
    Postgres,
    /// A message with the work id goes to this SQS queue after commit.
    Sqs {
        /// The runner's queue.
        queue_url: String,
    },
}

/// Work to enqueue.
#[derive(Debug, Clone)]
pub struct NewWork {
    /// Fresh id.
    pub id: Uuid,
    /// The runner that must run it.
    pub client_id: String,
    /// Canonical project id.
    pub project_id: ProjectId,
    /// Fingerprint of the creating principal's authority group.
    pub owner_authority_fingerprint: String,
    /// The Workflow Session whose evidence it is part of.
    pub session_id: Option<SessionId>,
    /// Tool that created it.
    pub tool: String,
    /// Synchronous or a job.
    pub mode: WorkMode,
    /// What the runner runs.
    pub item: WorkItem,
    /// Server-side inputs: the classification of its outcome and the queuing invocation.
    pub expectation: Expectation,
    /// Where it is published.
    pub queue: QueueRoute,
}

/// What the queuing call declared about its work, stored with it (`expectation`, jsonb): how
/// its end is classified and which invocation its end belongs to. Every field may be absent
/// (a shell's work declares only its invocation).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Expectation {
    /// The result the caller expects.
    pub result_expectation: ResultExpectation,
    /// Exit codes that count as success besides 0.
    pub accepted_exit_codes: Vec<i32>,
    /// Why it runs, redacted.
    pub purpose: Option<String>,
    /// The invocation that queued it: its end is evidence of that call.
    pub invocation_id: Option<Uuid>,
    /// Fewest tests a validation's output must prove ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_tests: Option<u64>,
}

/// How much open (queued or leased) work may exist when a new item is queued. Checked in the
/// inserting statement; concurrent enqueues can each see the count below its limit, so a
/// limit may be passed by as many items as are being queued at that instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenLimits {
    /// Open items of the owner (the authority group), over all projects.
    pub per_owner: i64,
    /// Open items of the project, over all owners.
    pub per_project: i64,
    /// Open persistent shells of the owner, over all sessions (checked when one opens).
    pub shells_per_owner: i64,
}

impl OpenLimits {
    /// No limit (tests and tools that queue on the operator's behalf).
    pub const NONE: OpenLimits = OpenLimits {
        per_owner: i64::MAX,
        per_project: i64::MAX,
        shells_per_owner: i64::MAX,
    };
}

/// Which open-work limit refused an enqueue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverLimit {
    /// The owner already has this many open items (at or over its limit).
    Owner(i64),
    /// The project already has this many open items (at or over its limit).
    Project(i64),
}

/// How a runner's slots are shared by owners when it claims work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SlotSharing {
    /// Slots of the runner (its registered `max_concurrency`) that one owner cannot fill: an
    /// owner holds at most `max_concurrency - reserved` leases on it, and never fewer than one.
    /// Zero sets no per-owner bound (claims are still ordered fairly).
    pub reserved: i32,
}

/// A stored unit of work.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkRow {
    /// Id.
    pub id: Uuid,
    /// Runner client id.
    pub client_id: String,
    /// Canonical project id.
    pub project_id: ProjectId,
    /// Owner fingerprint.
    pub owner_authority_fingerprint: String,
    /// Session of its evidence.
    pub session_id: Option<SessionId>,
    /// Creating tool.
    pub tool: String,
    /// Synchronous or a job.
    pub mode: WorkMode,
    /// What the runner runs.
    pub item: WorkItem,
    /// Classification inputs and the queuing invocation.
    pub expectation: Expectation,
    /// Its queue.
    pub queue: WorkQueue,
    /// Its state.
    pub state: WorkState,
    /// Instance holding (or that last held) the lease.
    pub instance_id: Option<Uuid>,
    /// Current (or last) lease token.
    pub lease_token: Option<Uuid>,
    /// Lease expiry while leased.
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// When a stop was requested.
    pub cancel_requested_at: Option<DateTime<Utc>>,
    /// The runner's outcome, when reported (its answer is kept apart).
    pub outcome: Option<WorkOutcome>,
    /// Why it ended without a report.
    pub end_reason: Option<EndReason>,
    /// Enqueued at.
    pub created_at: DateTime<Utc>,
    /// Leased at.
    pub leased_at: Option<DateTime<Utc>>,
    /// Terminal at.
    pub finished_at: Option<DateTime<Utc>>,
    /// Bumped by every write (no write is guarded by it).
    pub version: i64,
}

impl WorkRow {
    /// Whether the state can no longer change.
    pub fn is_terminal(&self) -> bool {
        self.state.is_terminal()
    }
}

const COLUMNS: &str = "id, client_id, project_id, owner_authority_fingerprint, session_id, tool, mode, \
     item, expectation, queue, state, instance_id, lease_token, lease_expires_at, cancel_requested_at, \
     outcome, end_reason, created_at, leased_at, finished_at, version";

fn from_row(r: &Row) -> Result<WorkRow, StoreError> {
    let corrupt = |column: &str, e: tokio_postgres::Error| StoreError::CorruptRow {
        table: "runner_work",
        detail: format!("{column}: {e}"),
    };
    let Json(item) = r.try_get("item").map_err(|e| corrupt("item", e))?;
    let Json(expectation) = r
        .try_get("expectation")
        .map_err(|e| corrupt("expectation", e))?;
    let outcome: Option<Json<WorkOutcome>> =
        r.try_get("outcome").map_err(|e| corrupt("outcome", e))?;
    Ok(WorkRow {
        id: r.get("id"),
        client_id: r.get("client_id"),
        project_id: r.get("project_id"),
        owner_authority_fingerprint: r.get("owner_authority_fingerprint"),
        session_id: r.get("session_id"),
        tool: r.get("tool"),
        mode: r.get("mode"),
        item,
        expectation,
        queue: r.get("queue"),
        state: r.get("state"),
        instance_id: r.get("instance_id"),
        lease_token: r.get("lease_token"),
        lease_expires_at: r.get("lease_expires_at"),
        cancel_requested_at: r.get("cancel_requested_at"),
        outcome: outcome.map(|Json(o)| o),
        end_reason: r.get("end_reason"),
        created_at: r.get("created_at"),
        leased_at: r.get("leased_at"),
        finished_at: r.get("finished_at"),
        version: r.get("version"),
    })
}

/// [`COLUMNS`] qualified by `alias`, for statements that return a row they join or update.
fn prefixed(alias: &str) -> String {
    COLUMNS
        .split(", ")
        .map(|c| format!("{alias}.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Evidence appended to a Workflow Session in the enqueuing transaction.
#[derive(Debug, Clone)]
pub struct Evidence {
    /// The session (must be active).
    pub session_id: SessionId,
    /// The event.
    pub event: NewEvent,
}

/// What [`enqueue`] did.
#[derive(Debug, Clone)]
pub enum Enqueued {
    /// The work is queued (and its evidence appended), with the task that waits for it when
    /// one was asked for ([`enqueue_with`]).
    Queued(Box<WorkRow>, Option<Box<tasks::TaskRow>>),
    /// The evidence session no longer exists; nothing was written.
    SessionNotFound,
    /// The evidence session is no longer active (its lifecycle); nothing was written.
    SessionInactive(Lifecycle),
    /// An open-work limit was reached; nothing was written.
    OverLimit(OverLimit),
}

/// Inserts the work unless an open-work limit is reached, appends `evidence` to its session
/// and publishes the work, in one transaction. With SQS the publication is an outbox row; the
/// caller sends it after commit.
///
/// With evidence this is a change of the evidence session ([`sessions::change`]): its row is
/// locked and checked first, and the work inserted (or refused, having written nothing) and
/// the evidence written under that lock. Without, it is one guarded statement.
pub async fn enqueue(
    pool: &Pool,
    work: &NewWork,
    evidence: Option<&Evidence>,
    limits: OpenLimits,
) -> Result<ChangeOutcome<Enqueued>, StoreError> {
    enqueue_with(pool, work, evidence, None, limits).await
}

/// [`enqueue`], with the MCP task that waits for the work written in the same transaction
/// (its `work_id` is the work's): the task exists exactly when the work does.
pub async fn enqueue_with(
    pool: &Pool,
    work: &NewWork,
    evidence: Option<&Evidence>,
    task: Option<&NewTask>,
    limits: OpenLimits,
) -> Result<ChangeOutcome<Enqueued>, StoreError> {
    let task = task.map(|t| NewTask {
        work_id: Some(work.id),
        ..t.clone()
    });
    let Some(evidence) = evidence else {
        let mut client = pool.get().await?;
        let Some(task) = task else {
            let value = match insert(&client, work, limits).await? {
                Ok(row) => Enqueued::Queued(Box::new(row), None),
                Err(over) => Enqueued::OverLimit(over),
            };
            return Ok(ChangeOutcome::Applied { value, attempts: 1 });
        };
        let tx = client.transaction().await?;
        let value = match insert(&tx, work, limits).await? {
            Ok(row) => {
                let task = tasks::insert(&tx, &task).await?;
                tx.commit().await?;
                Enqueued::Queued(Box::new(row), Some(Box::new(task)))
            }
            Err(over) => Enqueued::OverLimit(over),
        };
        return Ok(ChangeOutcome::Applied { value, attempts: 1 });
    };
    let ran = sessions::change(pool, &evidence.session_id, |tx, session| {
        let work = work.clone();
        let event = evidence.event.clone();
        let task = task.clone();
        Box::pin(async move {
            let Some(session) = session else {
                return Ok(Enqueued::SessionNotFound);
            };
            if !session.is_active() {
                return Ok(Enqueued::SessionInactive(session.lifecycle));
            }
            let row = match insert(&**tx, &work, limits).await? {
                Ok(row) => row,
                Err(over) => return Ok(Enqueued::OverLimit(over)),
            };
            let task = match &task {
                Some(task) => Some(Box::new(tasks::insert(&**tx, task).await?)),
                None => None,
            };
            let change = sessions::SessionChange::default();
            sessions::write_back(&**tx, (&session.id, session.version), &change, &[event]).await?;
            Ok(Enqueued::Queued(Box::new(row), task))
        })
    })
    .await;
    ChangeOutcome::of(ran, &RETRY)
}

/// Inserts the work row unless its owner or its project already has as much open work as
/// `limits` allow, and publishes it in the same statement: Postgres-queue work sends its
/// `wc_work` hint (delivered at commit), SQS work gets its outbox row. The counts read the
/// partial indexes over open work.
pub(crate) async fn insert(
    client: &impl GenericClient,
    work: &NewWork,
    limits: OpenLimits,
) -> Result<Result<WorkRow, OverLimit>, StoreError> {
    let (queue, queue_url) = match &work.queue {
        QueueRoute::Postgres => ("postgres", None),
        QueueRoute::Sqs { queue_url } => ("sqs", Some(queue_url.as_str())),
    };
    let stmt = client
        .prepare_cached(&format!(
            "WITH open AS (SELECT \
                 (SELECT count(*) FROM runner_work WHERE owner_authority_fingerprint = $4::text \
                    AND state IN ('queued', 'leased')) AS by_owner, \
                 (SELECT count(*) FROM runner_work WHERE project_id = $3::text \
                    AND state IN ('queued', 'leased')) AS by_project), \
             ins AS (INSERT INTO runner_work (id, client_id, project_id, \
                 owner_authority_fingerprint, session_id, tool, mode, item, expectation, queue) \
               SELECT $1, $2::text, $3::text, $4::text, $5, $6::text, $7::text, $8::jsonb, $9::jsonb, \
                 $10::text FROM open WHERE open.by_owner < $11 AND open.by_project < $12 \
               RETURNING {COLUMNS}), \
             outbox AS (INSERT INTO runner_outbox (work_id, queue_url) \
               SELECT ins.id, $13::text FROM ins WHERE $13::text IS NOT NULL) \
             SELECT ins.*, CASE WHEN ins.queue = 'postgres' \
                 THEN pg_notify('wc_work', ins.client_id) END AS hint, \
                 open.by_owner, open.by_project FROM open LEFT JOIN ins ON true"
        ))
        .await?;
    let row = client
        .query_one(
            &stmt,
            &[
                &work.id,
                &work.client_id,
                &work.project_id,
                &work.owner_authority_fingerprint,
                &work.session_id,
                &work.tool,
                &work.mode,
                &Json(&work.item),
                &Json(&work.expectation),
                &queue,
                &limits.per_owner,
                &limits.per_project,
                &queue_url,
            ],
        )
        .await?;
    if row.get::<_, Option<Uuid>>("id").is_some() {
        return Ok(Ok(from_row(&row)?));
    }
    let by_owner: i64 = row.get("by_owner");
    Ok(Err(if by_owner >= limits.per_owner {
        OverLimit::Owner(by_owner)
    } else {
        OverLimit::Project(row.get("by_project"))
    }))
}

/// A Workflow Session's open work as of now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenWork {
    /// Queued or running.
    pub active: i64,
    /// Running with an expired lease: the runner stopped reporting (the reaper ends it `lost`).
    pub recovering: i64,
    /// Asked to stop and not ended yet.
    pub stopping: i64,
}

/// The open work of `session`: every one of its queued and running items (at most the
/// open-work limits), counted.
pub async fn open_in_session(
    client: &impl GenericClient,
    session: &SessionId,
) -> Result<OpenWork, StoreError> {
    let stmt = client
        .prepare_cached(
            "SELECT count(*) AS active, \
                    count(*) FILTER (WHERE state = 'leased' AND lease_expires_at <= now()) AS recovering, \
                    count(*) FILTER (WHERE cancel_requested_at IS NOT NULL) AS stopping \
             FROM runner_work WHERE session_id = $1 AND state IN ('queued', 'leased')",
        )
        .await?;
    let row = client.query_one(&stmt, &[session]).await?;
    Ok(OpenWork {
        active: row.get("active"),
        recovering: row.get("recovering"),
        stopping: row.get("stopping"),
    })
}

/// The work and, once it has ended, the answer the runner gave (work it executes itself
/// answers; every other work has none). Read only by the call that waits for the answer.
pub async fn get_answered(
    client: &impl GenericClient,
    id: Uuid,
) -> Result<Option<(WorkRow, Option<Value>)>, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS}, answer, \
                 coalesce(state = 'leased' AND lease_expires_at <= now(), false) AS expired \
             FROM runner_work WHERE id = $1"
        ))
        .await?;
    match client.query_opt(&stmt, &[&id]).await? {
        Some(r) => Ok(Some((as_read(&r)?, r.get("answer")))),
        None => Ok(None),
    }
}

/// Ends leased work with the runner's outcome (`state` is the terminal state it implies) and
/// the answer of work the runner executes itself, stores its remaining chunks and writes what
/// the end says beside it ([`ending`], as `ends` decides), under the live lease, in one
/// transaction.
/// When the runner has queued work, the freed slot is announced (`wc_work`): an owner held
/// back by [`SlotSharing`] may now claim. A repeated identical report of the same lease is
/// accepted again without another effect (and without another event).
#[allow(clippy::too_many_arguments)]
pub async fn finish(
    client: &mut Client,
    client_id: &str,
    instance_id: Uuid,
    work_id: Uuid,
    lease_token: Uuid,
    state: WorkState,
    outcome: &WorkOutcome,
    answer: Option<&Value>,
    chunks: &[Chunk],
    ends: Ends<'_>,
) -> Result<Report, StoreError> {
    let (streams, offsets, data) = chunk_arrays(chunks);
    let tx = client.transaction().await?;
    let stmt = tx
        .prepare_cached(&format!(
            "WITH cur AS (SELECT state, lease_token, outcome, answer, \
                             (item->'limits'->>'output_bytes_per_stream')::bigint AS lim \
                          FROM runner_work WHERE id = $1 AND client_id = $2), \
             c AS (SELECT * FROM unnest($7::text[], $8::bigint[], $9::bytea[]) AS c(s, o, d)), \
             over AS (SELECT count(*) AS n FROM c, cur WHERE c.o + octet_length(c.d) > cur.lim), \
             upd AS (UPDATE runner_work SET state = $5::text, outcome = $6::jsonb, answer = $10::jsonb, \
                         finished_at = now(), \
                         lease_expires_at = NULL, version = version + 1 \
                     WHERE id = $1 AND client_id = $2 AND instance_id = $3 AND lease_token = $4 \
                       AND state = 'leased' AND lease_expires_at > now() \
                       AND (SELECT n FROM over) = 0 \
                     RETURNING {COLUMNS}, pg_notify('wc_work_done', id::text) AS done, \
                         CASE WHEN EXISTS (SELECT 1 FROM runner_work q WHERE q.client_id = $2 \
                                             AND q.state = 'queued' AND q.queue = 'postgres') \
                           THEN pg_notify('wc_work', $2) END AS freed), \
             ins AS (INSERT INTO runner_work_output (work_id, stream, byte_offset, data) \
                     SELECT upd.id, c.s, c.o, c.d FROM upd, c ON CONFLICT DO NOTHING RETURNING 1) \
             SELECT {written}, (SELECT state FROM cur) AS current_state, \
                    (SELECT lease_token = $4 AND outcome = $6 \
                            AND answer IS NOT DISTINCT FROM $10::jsonb FROM cur) AS replay, \
                    (SELECT n FROM over) AS over \
             FROM (SELECT 1) AS one LEFT JOIN upd ON true",
            written = prefixed("upd"),
        ))
        .await?;
    let row = tx
        .query_one(
            &stmt,
            &[
                &work_id,
                &client_id,
                &instance_id,
                &lease_token,
                &state.as_str(),
                &Json(outcome),
                &streams,
                &offsets,
                &data,
                &answer,
            ],
        )
        .await?;
    let current: Option<WorkState> = row.get("current_state");
    let replay: Option<bool> = row.get("replay");
    let over: i64 = row.get("over");
    let report = if row.get::<_, Option<Uuid>>("id").is_some() {
        let ended = from_row(&row)?;
        ending::ended(&tx, std::slice::from_ref(&ended), answer, ends).await?;
        Report::Accepted(ended.state)
    } else {
        match current {
            None => Report::NotFound,
            Some(_) if over > 0 => Report::BeyondLimit,
            Some(s) if replay == Some(true) && s == state => Report::Accepted(s),
            Some(s) => Report::LeaseLost(s),
        }
    };
    tx.commit().await?;
    Ok(report)
}

/// Ends every expired lease as `lost` (never requeued: a started command is not replayed) and
/// writes what each end says beside it ([`ending`]), in one transaction. Returns the ids it
/// ended.
pub async fn reap_expired(client: &mut Client, ends: Ends<'_>) -> Result<Vec<Uuid>, StoreError> {
    let tx = client.transaction().await?;
    let stmt = tx
        .prepare_cached(&format!(
            "UPDATE runner_work SET state = 'lost', end_reason = 'lease_expired', \
                 lease_expires_at = NULL, finished_at = now(), version = version + 1 \
             WHERE state = 'leased' AND lease_expires_at <= now() \
             RETURNING {COLUMNS}, pg_notify('wc_work_done', id::text)"
        ))
        .await?;
    let ended = tx
        .query(&stmt, &[])
        .await?
        .iter()
        .map(from_row)
        .collect::<Result<Vec<_>, _>>()?;
    ending::ended(&tx, &ended, None, ends).await?;
    tx.commit().await?;
    Ok(ended.iter().map(|w| w.id).collect())
}

/// Ends every lease of `client_id` held by an instance other than `current` as `lost`
/// (`instance_replaced`) and writes what each end says beside it ([`ending`]), in the
/// caller's transaction `tx` (runner registration). Returns the ended ids.
pub(crate) async fn lose_replaced(
    tx: &impl GenericClient,
    client_id: &str,
    current: Uuid,
    ends: Ends<'_>,
) -> Result<Vec<Uuid>, StoreError> {
    let stmt = tx
        .prepare_cached(&format!(
            "UPDATE runner_work SET state = 'lost', end_reason = 'instance_replaced', \
                 lease_expires_at = NULL, finished_at = now(), version = version + 1 \
             WHERE client_id = $1 AND state = 'leased' AND instance_id IS DISTINCT FROM $2 \
             RETURNING {COLUMNS}, pg_notify('wc_work_done', id::text)"
        ))
        .await?;
    let ended = tx
        .query(&stmt, &[&client_id, &current])
        .await?
        .iter()
        .map(from_row)
        .collect::<Result<Vec<_>, _>>()?;
    ending::ended(tx, &ended, None, ends).await?;
    Ok(ended.iter().map(|w| w.id).collect())
}

/// One work item, as of now. Reading writes nothing: a lease that has expired but has not been
/// reaped yet reads as the `lost` (`lease_expired`) the reaper will make it. Reads never
/// report a dead lease as running, and an expired lease takes no report and no heartbeat, so
/// nothing else can become of it.
pub async fn get(client: &impl GenericClient, id: Uuid) -> Result<Option<WorkRow>, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS}, coalesce(state = 'leased' AND lease_expires_at <= now(), false) AS expired \
             FROM runner_work WHERE id = $1"
        ))
        .await?;
    client
        .query_opt(&stmt, &[&id])
        .await?
        .as_ref()
        .map(as_read)
        .transpose()
}

/// A row read with its `expired` column (`state = 'leased' AND lease_expires_at <= now()`):
/// an expired lease reads as the `lost` the reaper will make it.
fn as_read(found: &Row) -> Result<WorkRow, StoreError> {
    let mut row = from_row(found)?;
    if found.get::<_, bool>("expired") {
        row.state = WorkState::Lost;
        row.end_reason = Some(EndReason::LeaseExpired);
    }
    Ok(row)
}

/// Requests a stop: queued work is cancelled at once, what its end says written beside it
/// ([`ending`]) in the same transaction; leased work is marked so the
/// runner's next heartbeat stops it. Returns the state after, `None` for unknown work.
pub async fn request_cancel(
    client: &mut Client,
    id: Uuid,
    ends: Ends<'_>,
) -> Result<Option<WorkState>, StoreError> {
    let tx = client.transaction().await?;
    let stmt = tx
        .prepare_cached(&format!(
            "WITH upd AS (UPDATE runner_work SET \
                 state = CASE WHEN state = 'queued' THEN 'cancelled' ELSE state END, \
                 end_reason = CASE WHEN state = 'queued' THEN 'stopped_while_queued' ELSE end_reason END, \
                 finished_at = CASE WHEN state = 'queued' THEN now() ELSE finished_at END, \
                 cancel_requested_at = coalesce(cancel_requested_at, now()), \
                 version = version + 1 \
               WHERE id = $1 AND state IN ('queued', 'leased') \
               RETURNING {COLUMNS}, CASE WHEN state = 'cancelled' \
                   THEN pg_notify('wc_work_done', id::text) \
                   ELSE pg_notify('wc_work', client_id) END AS hint) \
             SELECT {written}, (SELECT state FROM runner_work WHERE id = $1) AS before \
             FROM (SELECT 1) AS one LEFT JOIN upd ON true",
            written = prefixed("upd"),
        ))
        .await?;
    let row = tx.query_one(&stmt, &[&id]).await?;
    let after = if row.get::<_, Option<Uuid>>("id").is_some() {
        let changed = from_row(&row)?;
        if changed.state == WorkState::Cancelled {
            ending::ended(&tx, std::slice::from_ref(&changed), None, ends).await?;
        }
        Some(changed.state)
    } else {
        row.get::<_, Option<WorkState>>("before")
    };
    tx.commit().await?;
    Ok(after)
}

/// Filters of [`list`].
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Only this owner.
    pub owner_authority_fingerprint: String,
    /// Only these projects (`None`: any).
    pub projects: Option<Vec<ProjectId>>,
    /// Only this project.
    pub project_id: Option<ProjectId>,
    /// Only this session.
    pub session_id: Option<SessionId>,
    /// Only this mode.
    pub mode: Option<WorkMode>,
}

/// Newest first, up to `limit`; expired leases read as [`get`] reads them.
pub async fn list(
    client: &impl GenericClient,
    filter: &ListFilter,
    limit: i64,
) -> Result<Vec<WorkRow>, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS}, coalesce(state = 'leased' AND lease_expires_at <= now(), false) AS expired \
             FROM runner_work WHERE owner_authority_fingerprint = $1 \
               AND ($2::text[] IS NULL OR project_id = ANY($2)) \
               AND ($3::text IS NULL OR project_id = $3) \
               AND ($4::text IS NULL OR session_id = $4) \
               AND ($5::text IS NULL OR mode = $5) \
             ORDER BY created_at DESC, id LIMIT $6"
        ))
        .await?;
    client
        .query(
            &stmt,
            &[
                &filter.owner_authority_fingerprint,
                &filter.projects,
                &filter.project_id,
                &filter.session_id,
                &filter.mode,
                &limit,
            ],
        )
        .await?
        .iter()
        .map(as_read)
        .collect()
}

/// Deletes terminal work (and its output) that finished before `before`.
pub async fn prune_finished(
    client: &impl GenericClient,
    before: DateTime<Utc>,
    limit: i64,
) -> Result<u64, StoreError> {
    let stmt = client
        .prepare_cached(
            "DELETE FROM runner_work WHERE id IN (SELECT id FROM runner_work \
               WHERE finished_at IS NOT NULL AND finished_at < $1 ORDER BY finished_at LIMIT $2)",
        )
        .await?;
    Ok(client.execute(&stmt, &[&before, &limit]).await?)
}

/// A result of [`enqueue`] flattened for callers that treat a conflict as an error.
pub fn applied(outcome: ChangeOutcome<Enqueued>) -> Option<Enqueued> {
    outcome.applied()
}
