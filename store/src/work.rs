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

mod shell_end;

use chrono::{DateTime, Utc};
use deadpool_postgres::{Client, GenericClient, Pool};
use serde_json::Value;
use tokio_postgres::Row;
use uuid::Uuid;
use wc_domain::{EndReason, Lifecycle, ProjectId, SessionId, WorkMode, WorkQueue, WorkState};

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
    /// The protocol `WorkItem`.
    pub item: Value,
    /// Server-side inputs: the classification of its outcome and the queuing invocation.
    pub expectation: Value,
    /// Where it is published.
    pub queue: QueueRoute,
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
    /// The protocol `WorkItem`.
    pub item: Value,
    /// Classification inputs and the queuing invocation.
    pub expectation: Value,
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
    /// The runner's outcome, when reported.
    pub outcome: Option<Value>,
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

fn from_row(r: &Row) -> WorkRow {
    WorkRow {
        id: r.get("id"),
        client_id: r.get("client_id"),
        project_id: r.get("project_id"),
        owner_authority_fingerprint: r.get("owner_authority_fingerprint"),
        session_id: r.get("session_id"),
        tool: r.get("tool"),
        mode: r.get("mode"),
        item: r.get("item"),
        expectation: r.get("expectation"),
        queue: r.get("queue"),
        state: r.get("state"),
        instance_id: r.get("instance_id"),
        lease_token: r.get("lease_token"),
        lease_expires_at: r.get("lease_expires_at"),
        cancel_requested_at: r.get("cancel_requested_at"),
        outcome: r.get("outcome"),
        end_reason: r.get("end_reason"),
        created_at: r.get("created_at"),
        leased_at: r.get("leased_at"),
        finished_at: r.get("finished_at"),
        version: r.get("version"),
    }
}

/// The `execution_finished` event of work that has just ended, given its row as written and
/// the runner's answer when it gave one, or `None` to append nothing. The caller prepares it (redaction included); the store appends it
/// to the work's session in the transaction that ends the work, so the evidence lands exactly
/// once, with the fact, whoever reads the work later.
pub type EvidenceOf<'a> = &'a (dyn Fn(&WorkRow, Option<&Value>) -> Option<NewEvent> + Send + Sync);

/// Appends the terminal evidence of each of `ended` (rows just moved to a terminal state in
/// the transaction of `tx`) to its session through the one ledger path. A session that is no
/// longer active (finished or closed) takes no events: its ledger is final, and the work
/// still ends.
pub(crate) async fn append_terminal_evidence(
    tx: &impl GenericClient,
    ended: &[WorkRow],
    answer: Option<&Value>,
    evidence: EvidenceOf<'_>,
) -> Result<(), StoreError> {
    for row in ended {
        let Some(session_id) = &row.session_id else {
            continue;
        };
        let Some(event) = evidence(row, answer) else {
            continue;
        };
        sessions::append(tx, session_id, std::slice::from_ref(&event), true).await?;
    }
    // After the sessions' evidence: locks are taken session first, shell second.
    shell_end::work_ended(tx, ended, answer).await
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
    /// The work is queued (and its evidence appended).
    Queued(Box<WorkRow>),
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
                Ok(row) => Enqueued::Queued(Box::new(row)),
                Err(over) => Enqueued::OverLimit(over),
            };
            return Ok(ChangeOutcome::Applied { value, attempts: 1 });
        };
        let tx = client.transaction().await?;
        let value = match insert(&tx, work, limits).await? {
            Ok(row) => {
                tasks::insert(&tx, &task).await?;
                tx.commit().await?;
                Enqueued::Queued(Box::new(row))
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
            if let Some(task) = &task {
                tasks::insert(&**tx, task).await?;
            }
            let change = sessions::SessionChange::default();
            sessions::write_back(&**tx, &session.id, &change, &[event]).await?;
            Ok(Enqueued::Queued(Box::new(row)))
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
                &work.item,
                &work.expectation,
                &queue,
                &limits.per_owner,
                &limits.per_project,
                &queue_url,
            ],
        )
        .await?;
    if row.get::<_, Option<Uuid>>("id").is_some() {
        return Ok(Ok(from_row(&row)));
    }
    let by_owner: i64 = row.get("by_owner");
    Ok(Err(if by_owner >= limits.per_owner {
        OverLimit::Owner(by_owner)
    } else {
        OverLimit::Project(row.get("by_project"))
    }))
}

fn lease_interval(lease_ms: u64) -> f64 {
    lease_ms as f64 / 1000.0
}

/// How many of a runner's oldest queued items a claim weighs against each other. Fairness is
/// decided among these; it bounds the claim's cost however long the queue grows (the
/// per-owner and per-project open-work limits keep it short in practice).
pub const CLAIM_WINDOW: i64 = 512;

/// Claims up to `max` queued Postgres-queue work items of `client_id` for the current
/// instance `instance_id`, skipping rows other claimers hold, fairly between owners and
/// projects: each candidate is ranked by how many leases its owner would then hold on this
/// runner (its owner's current leases plus its place in the owner's queue), then the same for
/// its project, then by age. So the owner with the least leased work goes first, owners take
/// turns, and each owner's own items stay oldest first. An owner never holds more than the
/// runner's `max_concurrency` less `sharing.reserved` leases (at least one), so the reserved
/// slots always stay open to other owners. One statement.
pub async fn claim_queued(
    client: &impl GenericClient,
    client_id: &str,
    instance_id: Uuid,
    max: i64,
    lease_ms: u64,
    sharing: SlotSharing,
) -> Result<Vec<WorkRow>, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "WITH me AS ( \
               SELECT CASE WHEN $5::int > 0 THEN greatest(1, max_concurrency - $5::int) END AS cap \
               FROM runners \
               WHERE client_id = $1 AND instance_id = $2 AND revoked_at IS NULL), \
             held AS ( \
               SELECT owner_authority_fingerprint AS owner, project_id, count(*) AS n \
               FROM runner_work WHERE client_id = $1 AND state = 'leased' GROUP BY 1, 2), \
             by_owner AS (SELECT owner, sum(n) AS n FROM held GROUP BY owner), \
             by_project AS (SELECT project_id, sum(n) AS n FROM held GROUP BY project_id), \
             queued AS ( \
               SELECT id, owner_authority_fingerprint AS owner, project_id, created_at \
               FROM runner_work WHERE client_id = $1 AND state = 'queued' AND queue = 'postgres' \
               ORDER BY created_at LIMIT {CLAIM_WINDOW}), \
             ranked AS ( \
               SELECT q.id, q.created_at, \
                 coalesce(o.n, 0) + row_number() OVER (PARTITION BY q.owner ORDER BY q.created_at, q.id) AS owner_rank, \
                 coalesce(p.n, 0) + row_number() OVER (PARTITION BY q.project_id ORDER BY q.created_at, q.id) AS project_rank \
               FROM queued q LEFT JOIN by_owner o ON o.owner = q.owner \
                 LEFT JOIN by_project p ON p.project_id = q.project_id), \
             picked AS ( \
               SELECT w.id FROM runner_work w JOIN ranked r ON r.id = w.id CROSS JOIN me \
               WHERE w.state = 'queued' AND (me.cap IS NULL OR r.owner_rank <= me.cap) \
               ORDER BY r.owner_rank, r.project_rank, r.created_at, r.id \
               LIMIT $3 FOR UPDATE OF w SKIP LOCKED) \
             UPDATE runner_work w SET state = 'leased', instance_id = $2, \
                 lease_token = gen_random_uuid(), \
                 lease_expires_at = now() + make_interval(secs => $4), leased_at = now(), \
                 version = w.version + 1 \
             FROM picked WHERE w.id = picked.id RETURNING {}",
            prefixed("w")
        ))
        .await?;
    Ok(client
        .query(
            &stmt,
            &[
                &client_id,
                &instance_id,
                &max,
                &lease_interval(lease_ms),
                &sharing.reserved,
            ],
        )
        .await?
        .iter()
        .map(from_row)
        .collect())
}

fn prefixed(alias: &str) -> String {
    COLUMNS
        .split(", ")
        .map(|c| format!("{alias}.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a claim of one delivered work id found.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// Leased to the caller now.
    Claimed(Box<WorkRow>),
    /// Not queued any more (claimed, finished, cancelled): its state.
    AlreadyClaimed(WorkState),
    /// No such work for this runner.
    NotFound,
    /// Still queued, but not claimable by this instance now: its owner holds as many leases
    /// on this runner as [`SlotSharing`] allows (or the instance is not the current one).
    Deferred,
}

/// Claims one work id (delivered by SQS) for the current instance: `queued → leased`, unless
/// its owner already holds as many leases on this runner as `sharing` allows (the message is
/// then left to be delivered again). One statement.
pub async fn claim_one(
    client: &impl GenericClient,
    client_id: &str,
    instance_id: Uuid,
    work_id: Uuid,
    lease_ms: u64,
    sharing: SlotSharing,
) -> Result<Claim, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "WITH me AS ( \
               SELECT CASE WHEN $5::int > 0 THEN greatest(1, max_concurrency - $5::int) END AS cap \
               FROM runners \
               WHERE client_id = $1 AND instance_id = $2 AND revoked_at IS NULL), \
             target AS ( \
               SELECT t.id FROM runner_work t CROSS JOIN me \
               WHERE t.id = $3 AND t.client_id = $1 AND t.state = 'queued' \
                 AND (SELECT count(*) FROM runner_work h WHERE h.client_id = $1 \
                        AND h.state = 'leased' \
                        AND h.owner_authority_fingerprint = t.owner_authority_fingerprint) \
                     < coalesce(me.cap, 2147483647)) \
             UPDATE runner_work w SET state = 'leased', instance_id = $2, \
                 lease_token = gen_random_uuid(), \
                 lease_expires_at = now() + make_interval(secs => $4), leased_at = now(), \
                 version = w.version + 1 \
             FROM target WHERE w.id = target.id AND w.state = 'queued' \
             RETURNING {}",
            prefixed("w")
        ))
        .await?;
    if let Some(row) = client
        .query_opt(
            &stmt,
            &[
                &client_id,
                &instance_id,
                &work_id,
                &lease_interval(lease_ms),
                &sharing.reserved,
            ],
        )
        .await?
    {
        return Ok(Claim::Claimed(Box::new(from_row(&row))));
    }
    let stmt = client
        .prepare_cached("SELECT state FROM runner_work WHERE id = $1 AND client_id = $2")
        .await?;
    Ok(
        match client.query_opt(&stmt, &[&work_id, &client_id]).await? {
            Some(row) => match row.try_get::<_, WorkState>(0)? {
                WorkState::Queued => Claim::Deferred,
                state => Claim::AlreadyClaimed(state),
            },
            None => Claim::NotFound,
        },
    )
}

/// The server's view of one lease named in a heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseView {
    /// Extended.
    Extended,
    /// Extended, and a stop was requested.
    CancelRequested,
    /// Not held any more.
    Lost,
}

/// Extends the live leases of `instance_id` among `leases` (`(work id, token)`), in order.
pub async fn heartbeat(
    client: &impl GenericClient,
    client_id: &str,
    instance_id: Uuid,
    leases: &[(Uuid, Uuid)],
    lease_ms: u64,
) -> Result<Vec<(Uuid, LeaseView)>, StoreError> {
    let ids: Vec<Uuid> = leases.iter().map(|l| l.0).collect();
    let tokens: Vec<Uuid> = leases.iter().map(|l| l.1).collect();
    let stmt = client
        .prepare_cached(
            "WITH held AS (SELECT * FROM unnest($3::uuid[], $4::uuid[]) WITH ORDINALITY AS h(id, token, n)), \
             upd AS (UPDATE runner_work w SET lease_expires_at = now() + make_interval(secs => $5), \
                         version = w.version + 1 \
                     FROM held WHERE w.id = held.id AND w.lease_token = held.token \
                       AND w.client_id = $1 AND w.instance_id = $2 AND w.state = 'leased' \
                       AND w.lease_expires_at > now() \
                     RETURNING w.id, w.cancel_requested_at IS NOT NULL AS cancel) \
             SELECT held.id, upd.cancel FROM held LEFT JOIN upd ON upd.id = held.id ORDER BY held.n",
        )
        .await?;
    let rows = client
        .query(
            &stmt,
            &[
                &client_id,
                &instance_id,
                &ids,
                &tokens,
                &lease_interval(lease_ms),
            ],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| {
            let view = match r.get::<_, Option<bool>>(1) {
                None => LeaseView::Lost,
                Some(true) => LeaseView::CancelRequested,
                Some(false) => LeaseView::Extended,
            };
            (r.get(0), view)
        })
        .collect())
}

/// The current view of leases, without extending them (a waiting heartbeat re-checks with it).
pub async fn lease_views(
    client: &impl GenericClient,
    client_id: &str,
    instance_id: Uuid,
    leases: &[(Uuid, Uuid)],
) -> Result<Vec<(Uuid, LeaseView)>, StoreError> {
    let ids: Vec<Uuid> = leases.iter().map(|l| l.0).collect();
    let tokens: Vec<Uuid> = leases.iter().map(|l| l.1).collect();
    let stmt = client
        .prepare_cached(
            "SELECT h.id, w.cancel_requested_at IS NOT NULL \
             FROM unnest($3::uuid[], $4::uuid[]) WITH ORDINALITY AS h(id, token, n) \
             LEFT JOIN runner_work w ON w.id = h.id AND w.lease_token = h.token \
               AND w.client_id = $1 AND w.instance_id = $2 AND w.state = 'leased' \
               AND w.lease_expires_at > now() \
             ORDER BY h.n",
        )
        .await?;
    let rows = client
        .query(&stmt, &[&client_id, &instance_id, &ids, &tokens])
        .await?;
    Ok(rows
        .iter()
        .map(|r| {
            // The LEFT JOIN yields NULL for the cancel flag when the lease is not live.
            let view = match r.get::<_, Option<bool>>(1) {
                None => LeaseView::Lost,
                Some(true) => LeaseView::CancelRequested,
                Some(false) => LeaseView::Extended,
            };
            (r.get(0), view)
        })
        .collect())
}

/// A kept output chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// `stdout` or `stderr`.
    pub stream: &'static str,
    /// Byte offset in the stream.
    pub offset: i64,
    /// Bytes (1..=64 KiB).
    pub data: Vec<u8>,
}

/// What a report under a lease did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// Accepted; the work's state now.
    Accepted(WorkState),
    /// The lease is not held; nothing changed; the work's state now.
    LeaseLost(WorkState),
    /// A chunk lies beyond the work's output limit; nothing changed.
    BeyondLimit,
    /// No such work for this runner.
    NotFound,
}

fn chunk_arrays(chunks: &[Chunk]) -> (Vec<&str>, Vec<i64>, Vec<&[u8]>) {
    (
        chunks.iter().map(|c| c.stream).collect(),
        chunks.iter().map(|c| c.offset).collect(),
        chunks.iter().map(|c| c.data.as_slice()).collect(),
    )
}

/// Stores kept output of running work under its live lease. Chunks already stored (a retried
/// request) are ignored.
pub async fn append_output(
    client: &impl GenericClient,
    client_id: &str,
    instance_id: Uuid,
    work_id: Uuid,
    lease_token: Uuid,
    chunks: &[Chunk],
) -> Result<Report, StoreError> {
    let (streams, offsets, data) = chunk_arrays(chunks);
    let stmt = client
        .prepare_cached(
            "WITH cur AS (SELECT state, (item->'limits'->>'output_bytes_per_stream')::bigint AS lim \
                          FROM runner_work WHERE id = $1 AND client_id = $2), \
             c AS (SELECT * FROM unnest($5::text[], $6::bigint[], $7::bytea[]) AS c(s, o, d)), \
             over AS (SELECT count(*) AS n FROM c, cur WHERE c.o + octet_length(c.d) > cur.lim), \
             ok AS (SELECT id FROM runner_work WHERE id = $1 AND client_id = $2 AND instance_id = $3 \
                      AND lease_token = $4 AND state = 'leased' AND lease_expires_at > now() \
                      AND (SELECT n FROM over) = 0 FOR SHARE), \
             ins AS (INSERT INTO runner_work_output (work_id, stream, byte_offset, data) \
                     SELECT ok.id, c.s, c.o, c.d FROM ok, c ON CONFLICT DO NOTHING RETURNING 1) \
             SELECT (SELECT state FROM cur), (SELECT count(*) FROM ok), (SELECT n FROM over)",
        )
        .await?;
    let row = client
        .query_one(
            &stmt,
            &[
                &work_id,
                &client_id,
                &instance_id,
                &lease_token,
                &streams,
                &offsets,
                &data,
            ],
        )
        .await?;
    let state: Option<WorkState> = row.get(0);
    let ok: i64 = row.get(1);
    let over: i64 = row.get(2);
    Ok(match (state, ok, over) {
        (None, _, _) => Report::NotFound,
        (Some(_), _, n) if n > 0 => Report::BeyondLimit,
        (Some(s), 1, _) => Report::Accepted(s),
        (Some(s), _, _) => Report::LeaseLost(s),
    })
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
    Ok(client
        .query_opt(&stmt, &[&id])
        .await?
        .map(|r| (as_read(&r), r.get("answer"))))
}

/// Ends leased work with the runner's outcome (`state` is the terminal state it implies) and
/// the answer of work the runner executes itself, stores its remaining chunks and appends the work's `execution_finished` (as `evidence`
/// makes it from the ended row) to its session, under the live lease, in one transaction.
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
    outcome: &Value,
    answer: Option<&Value>,
    chunks: &[Chunk],
    evidence: EvidenceOf<'_>,
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
                outcome,
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
        let ended = from_row(&row);
        append_terminal_evidence(&tx, std::slice::from_ref(&ended), answer, evidence).await?;
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
/// appends each ended work's `execution_finished` (as `evidence` makes it) to its session, in
/// one transaction. Returns the ids it ended.
pub async fn reap_expired(
    client: &mut Client,
    evidence: EvidenceOf<'_>,
) -> Result<Vec<Uuid>, StoreError> {
    let tx = client.transaction().await?;
    let stmt = tx
        .prepare_cached(&format!(
            "UPDATE runner_work SET state = 'lost', end_reason = 'lease_expired', \
                 lease_expires_at = NULL, finished_at = now(), version = version + 1 \
             WHERE state = 'leased' AND lease_expires_at <= now() \
             RETURNING {COLUMNS}, pg_notify('wc_work_done', id::text)"
        ))
        .await?;
    let ended: Vec<WorkRow> = tx.query(&stmt, &[]).await?.iter().map(from_row).collect();
    append_terminal_evidence(&tx, &ended, None, evidence).await?;
    tx.commit().await?;
    Ok(ended.iter().map(|w| w.id).collect())
}

/// Ends every lease of `client_id` held by an instance other than `current` as `lost`
/// (`instance_replaced`) and appends each ended work's `execution_finished` (as `evidence`
/// makes it), in the caller's transaction `tx` (runner registration). Returns the ended ids.
pub(crate) async fn lose_replaced(
    tx: &impl GenericClient,
    client_id: &str,
    current: Uuid,
    evidence: EvidenceOf<'_>,
) -> Result<Vec<Uuid>, StoreError> {
    let stmt = tx
        .prepare_cached(&format!(
            "UPDATE runner_work SET state = 'lost', end_reason = 'instance_replaced', \
                 lease_expires_at = NULL, finished_at = now(), version = version + 1 \
             WHERE client_id = $1 AND state = 'leased' AND instance_id IS DISTINCT FROM $2 \
             RETURNING {COLUMNS}, pg_notify('wc_work_done', id::text)"
        ))
        .await?;
    let ended: Vec<WorkRow> = tx
        .query(&stmt, &[&client_id, &current])
        .await?
        .iter()
        .map(from_row)
        .collect();
    append_terminal_evidence(tx, &ended, None, evidence).await?;
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
    Ok(client.query_opt(&stmt, &[&id]).await?.as_ref().map(as_read))
}

/// A row read with its `expired` column (`state = 'leased' AND lease_expires_at <= now()`):
/// an expired lease reads as the `lost` the reaper will make it.
fn as_read(found: &Row) -> WorkRow {
    let mut row = from_row(found);
    if found.get::<_, bool>("expired") {
        row.state = WorkState::Lost;
        row.end_reason = Some(EndReason::LeaseExpired);
    }
    row
}

/// Requests a stop: queued work is cancelled at once, its `execution_finished` (as `evidence`
/// makes it) appended to its session in the same transaction; leased work is marked so the
/// runner's next heartbeat stops it. Returns the state after, `None` for unknown work.
pub async fn request_cancel(
    client: &mut Client,
    id: Uuid,
    evidence: EvidenceOf<'_>,
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
        let changed = from_row(&row);
        if changed.state == WorkState::Cancelled {
            append_terminal_evidence(&tx, std::slice::from_ref(&changed), None, evidence).await?;
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
    Ok(client
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
        .collect())
}

/// Kept output of one stream: up to `limit` bytes from `offset`, and how many bytes are kept
/// in all.
pub async fn read_output(
    client: &impl GenericClient,
    id: Uuid,
    stream: &str,
    offset: i64,
    limit: i64,
) -> Result<(Vec<u8>, i64), StoreError> {
    let stmt = client
        .prepare_cached(
            "SELECT byte_offset, data, \
                    (SELECT coalesce(max(byte_offset + octet_length(data)), 0) FROM runner_work_output \
                     WHERE work_id = $1 AND stream = $2) AS kept \
             FROM runner_work_output WHERE work_id = $1 AND stream = $2 \
               AND byte_offset + octet_length(data) > $3 AND byte_offset < $3 + $4 \
             ORDER BY byte_offset",
        )
        .await?;
    let rows = client
        .query(&stmt, &[&id, &stream, &offset, &limit])
        .await?;
    let mut kept = 0;
    if rows.is_empty() {
        let stmt = client
            .prepare_cached(
                "SELECT coalesce(max(byte_offset + octet_length(data)), 0) FROM runner_work_output \
                 WHERE work_id = $1 AND stream = $2",
            )
            .await?;
        kept = client.query_one(&stmt, &[&id, &stream]).await?.get(0);
    }
    let chunks: Vec<(i64, Vec<u8>)> = rows
        .iter()
        .map(|r| {
            kept = r.get("kept");
            (r.get("byte_offset"), r.get("data"))
        })
        .collect();
    Ok((assemble(&chunks, offset, limit), kept))
}

/// The contiguous bytes of `chunks` (ascending offsets) in `offset..offset + limit`, stopping
/// at the first gap (output still arriving).
fn assemble(chunks: &[(i64, Vec<u8>)], offset: i64, limit: i64) -> Vec<u8> {
    let end = offset + limit;
    let mut next = offset;
    let mut out = Vec::new();
    for (at, data) in chunks {
        if *at > next {
            break;
        }
        let from = (next - at) as usize;
        let to = ((end - at).max(0) as usize).min(data.len());
        if from < to {
            out.extend_from_slice(&data[from..to]);
            next = at + to as i64;
        }
    }
    out
}

/// The first `limit` kept bytes of stdout and of stderr, in one query.
pub async fn read_heads(
    client: &impl GenericClient,
    id: Uuid,
    limit: i64,
) -> Result<(Vec<u8>, Vec<u8>), StoreError> {
    let stmt = client
        .prepare_cached(
            "SELECT stream, byte_offset, data FROM runner_work_output \
             WHERE work_id = $1 AND byte_offset < $2 ORDER BY stream, byte_offset",
        )
        .await?;
    let rows = client.query(&stmt, &[&id, &limit]).await?;
    let mut out: Vec<(i64, Vec<u8>)> = Vec::new();
    let mut err: Vec<(i64, Vec<u8>)> = Vec::new();
    for r in rows {
        let chunk = (r.get::<_, i64>(1), r.get::<_, Vec<u8>>(2));
        match r.get::<_, &str>(0) {
            "stdout" => out.push(chunk),
            _ => err.push(chunk),
        }
    }
    Ok((assemble(&out, 0, limit), assemble(&err, 0, limit)))
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
