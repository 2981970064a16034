//! Claims and leases: queued work taken fairly by the current instance of its runner, and
//! leases kept alive by heartbeats.

use deadpool_postgres::GenericClient;
use uuid::Uuid;
use wc_domain::WorkState;

use super::{SlotSharing, WorkRow, from_row, prefixed};
use crate::StoreError;

/// Seconds of a lease of `lease_ms`, as SQL intervals take them.
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
    client
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
        .collect()
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
        return Ok(Claim::Claimed(Box::new(from_row(&row)?)));
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
