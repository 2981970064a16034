//! The `runners` aggregate: build hosts, their token digests and their current instance.

use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Pool};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::StoreError;

/// A runner as operators and tools see it (never its secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runner {
    /// Stable client id.
    pub client_id: String,
    /// Operator label.
    pub label: Option<String>,
    /// Token creation (or rotation) time.
    pub created_at: DateTime<Utc>,
    /// Set when the token was revoked.
    pub revoked_at: Option<DateTime<Utc>>,
    /// The registered process, if any registered.
    pub instance_id: Option<Uuid>,
    /// When that process registered.
    pub instance_started_at: Option<DateTime<Utc>>,
    /// Last register, poll or heartbeat.
    pub last_seen_at: Option<DateTime<Utc>>,
    /// Agent build version.
    pub agent_version: Option<String>,
    /// `api_poll` or `sqs`.
    pub queue: Option<String>,
    /// Concurrency the instance announced.
    pub max_concurrency: Option<i32>,
    /// Runner-local project ids it announced.
    pub projects: Vec<String>,
    /// Kinds of work its instance announced (`process`, `explore`, …); `None` when it
    /// registered before instances announced them.
    pub work_kinds: Option<Vec<String>>,
    /// Work it holds leases on now: all of it, or only one owner's ([`list`]).
    pub work_in_flight: i64,
}

const COLUMNS: &str = "r.client_id, r.label, r.created_at, r.revoked_at, r.instance_id, \
     r.instance_started_at, r.last_seen_at, r.agent_version, r.queue, r.max_concurrency, r.projects, r.work_kinds, \
     (SELECT count(*) FROM runner_work w WHERE w.client_id = r.client_id AND w.state = 'leased') AS in_flight";

/// [`COLUMNS`] with the work in flight counted only for the owner fingerprint in `$3` (every
/// owner's when it is null).
const COLUMNS_FOR_OWNER: &str = "r.client_id, r.label, r.created_at, r.revoked_at, r.instance_id, \
     r.instance_started_at, r.last_seen_at, r.agent_version, r.queue, r.max_concurrency, r.projects, r.work_kinds, \
     CASE WHEN $3::text IS NULL \
       THEN (SELECT count(*) FROM runner_work w WHERE w.client_id = r.client_id AND w.state = 'leased') \
       ELSE (SELECT count(*) FROM runner_work w WHERE w.owner_authority_fingerprint = $3::text \
               AND w.client_id = r.client_id AND w.state = 'leased') END AS in_flight";

fn from_row(r: &Row) -> Runner {
    Runner {
        client_id: r.get("client_id"),
        label: r.get("label"),
        created_at: r.get("created_at"),
        revoked_at: r.get("revoked_at"),
        instance_id: r.get("instance_id"),
        instance_started_at: r.get("instance_started_at"),
        last_seen_at: r.get("last_seen_at"),
        agent_version: r.get("agent_version"),
        queue: r.get("queue"),
        max_concurrency: r.get("max_concurrency"),
        projects: r.get("projects"),
        work_kinds: r.get("work_kinds"),
        work_in_flight: r.get("in_flight"),
    }
}

/// Creates a runner with a token digest, or gives an existing one a new token when `rotate`
/// (the old token stops working at once). `Ok(None)`: it exists and `rotate` is false.
///
/// Rotation also starts the runner's instance lineage afresh: no process can speak for the
/// old token any more, so no instance is current and none is remembered, and the first
/// instance to register with the new token becomes current whatever was registered before.
pub async fn create(
    client: &impl GenericClient,
    client_id: &str,
    label: Option<&str>,
    secret_sha256: &[u8; 32],
    rotate: bool,
) -> Result<Option<Runner>, StoreError> {
    let digest: &[u8] = secret_sha256;
    let sql = if rotate {
        "WITH forgotten AS (DELETE FROM runner_instances WHERE client_id = $1) \
         INSERT INTO runners (client_id, label, secret_sha256) VALUES ($1, $2, $3) \
         ON CONFLICT (client_id) DO UPDATE SET secret_sha256 = EXCLUDED.secret_sha256, \
             label = coalesce(EXCLUDED.label, runners.label), created_at = now(), revoked_at = NULL, \
             instance_id = NULL, instance_started_at = NULL, version = runners.version + 1 \
         RETURNING client_id"
    } else {
        "INSERT INTO runners (client_id, label, secret_sha256) VALUES ($1, $2, $3) \
         ON CONFLICT (client_id) DO NOTHING RETURNING client_id"
    };
    let stmt = client.prepare_cached(sql).await?;
    if client
        .query_opt(&stmt, &[&client_id, &label, &digest])
        .await?
        .is_none()
    {
        return Ok(None);
    }
    get(client, client_id).await
}

/// Revokes a runner's token; true when it was active.
pub async fn revoke(client: &impl GenericClient, client_id: &str) -> Result<bool, StoreError> {
    let stmt = client
        .prepare_cached(
            "UPDATE runners SET revoked_at = now(), version = version + 1 \
             WHERE client_id = $1 AND revoked_at IS NULL",
        )
        .await?;
    Ok(client.execute(&stmt, &[&client_id]).await? == 1)
}

/// The client id of the unrevoked runner whose token has this digest.
pub async fn find_active_by_digest(
    client: &impl GenericClient,
    secret_sha256: &[u8; 32],
) -> Result<Option<String>, StoreError> {
    let digest: &[u8] = secret_sha256;
    let stmt = client
        .prepare_cached(
            "SELECT client_id FROM runners WHERE secret_sha256 = $1 AND revoked_at IS NULL",
        )
        .await?;
    Ok(client.query_opt(&stmt, &[&digest]).await?.map(|r| r.get(0)))
}

/// One runner.
pub async fn get(
    client: &impl GenericClient,
    client_id: &str,
) -> Result<Option<Runner>, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM runners r WHERE r.client_id = $1"
        ))
        .await?;
    Ok(client
        .query_opt(&stmt, &[&client_id])
        .await?
        .as_ref()
        .map(from_row))
}

/// Runners by client id (only those in `only`, when given), up to `limit`, with the work in
/// flight of `owner` (an owner fingerprint) on each, or of every owner when `None`.
pub async fn list(
    client: &impl GenericClient,
    only: Option<&[String]>,
    owner: Option<&str>,
    limit: i64,
) -> Result<Vec<Runner>, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS_FOR_OWNER} FROM runners r \
             WHERE ($1::text[] IS NULL OR r.client_id = ANY($1)) \
             ORDER BY r.client_id LIMIT $2"
        ))
        .await?;
    Ok(client
        .query(&stmt, &[&only, &limit, &owner])
        .await?
        .iter()
        .map(from_row)
        .collect())
}

/// What a registering instance announces.
#[derive(Debug, Clone)]
pub struct Registration<'a> {
    /// The runner.
    pub client_id: &'a str,
    /// Its fresh instance id.
    pub instance_id: Uuid,
    /// Agent version.
    pub agent_version: &'a str,
    /// `api_poll` or `sqs`.
    pub queue: &'a str,
    /// Concurrency.
    pub max_concurrency: i32,
    /// Runner-local project ids (registered as `agent:<client_id>:<id>`).
    pub projects: &'a [String],
    /// Kinds of work the instance executes.
    pub work_kinds: &'a [String],
}

/// What registration did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registered {
    /// The instance is now current; `lost_work` leases of older instances were ended as lost.
    Current {
        /// Work made lost.
        lost_work: u64,
    },
    /// This instance registered before and another one registered after it (instances are
    /// ordered by when the server first registered them) — or the runner was revoked
    /// meanwhile: the caller must stop.
    Superseded,
}

/// Instance ids kept per runner to recognise a replaced instance that registers again.
///
/// An agent registers once, when it starts (retrying only that call); older lineage matters
/// only while such a retry may still arrive.
pub const KEPT_INSTANCES: i64 = 32;

/// Makes `reg.instance_id` the runner's current instance, ends every lease of other instances
/// as `lost` (a started command is never replayed) with what each end says beside it
/// ([`crate::work::ending`]), and registers the announced projects — all in one transaction.
///
/// The server orders instances, never the ids runners choose: an id registering for the first
/// time takes the next number of `runner_instances`' sequence and becomes current, whatever its
/// value; the current instance registering again (a retried call) stays current; an id that
/// registered before and was replaced is [`Registered::Superseded`]. Registrations of one
/// runner serialize on its row lock.
pub async fn register(
    pool: &Pool,
    reg: &Registration<'_>,
    ends: crate::work::Ends<'_>,
) -> Result<Registered, StoreError> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let Some(row) = tx
        .query_opt(
            "SELECT instance_id, EXISTS (SELECT 1 FROM runner_instances i \
                 WHERE i.client_id = r.client_id AND i.instance_id = $2) AS known \
             FROM runners r WHERE r.client_id = $1 AND r.revoked_at IS NULL FOR UPDATE",
            &[&reg.client_id, &reg.instance_id],
        )
        .await?
    else {
        tx.rollback().await?;
        return Ok(Registered::Superseded);
    };
    let current: Option<Uuid> = row.get("instance_id");
    let known: bool = row.get("known");
    if known && current != Some(reg.instance_id) {
        tx.rollback().await?;
        return Ok(Registered::Superseded);
    }
    if !known {
        tx.execute(
            // The delete's snapshot does not hold the new row: it keeps the newest others.
            "WITH added AS (INSERT INTO runner_instances (client_id, instance_id) VALUES ($1, $2)) \
             DELETE FROM runner_instances WHERE client_id = $1 AND seq NOT IN \
                 (SELECT seq FROM runner_instances WHERE client_id = $1 ORDER BY seq DESC LIMIT $3)",
            &[&reg.client_id, &reg.instance_id, &(KEPT_INSTANCES - 1)],
        )
        .await?;
    }
    tx.execute(
        "UPDATE runners SET instance_id = $2, \
             instance_started_at = CASE WHEN instance_id = $2 THEN instance_started_at ELSE now() END, \
             last_seen_at = now(), agent_version = $3, queue = $4, max_concurrency = $5, \
             projects = $6, work_kinds = $7::text[], version = version + 1 \
         WHERE client_id = $1",
        &[
            &reg.client_id,
            &reg.instance_id,
            &reg.agent_version,
            &reg.queue,
            &reg.max_concurrency,
            &reg.projects,
            &reg.work_kinds,
        ],
    )
    .await?;
    let lost = crate::work::lose_replaced(&tx, reg.client_id, reg.instance_id, ends).await?;
    crate::shells::lose_replaced(&tx, reg.client_id, reg.instance_id).await?;
    for project in reg.projects {
        crate::projects::register(
            &tx,
            &format!("agent:{}:{project}", reg.client_id),
            project,
            reg.client_id,
        )
        .await?;
    }
    tx.commit().await?;
    Ok(Registered::Current {
        lost_work: lost.len() as u64,
    })
}

/// Whether `instance_id` is the runner's current instance; refreshes `last_seen_at` when it is
/// older than `every` (a busy poll loop must not turn into a write per request).
pub async fn touch(
    client: &impl GenericClient,
    client_id: &str,
    instance_id: Uuid,
    every: std::time::Duration,
) -> Result<bool, StoreError> {
    let stmt = client
        .prepare_cached(
            "WITH cur AS (SELECT client_id, last_seen_at FROM runners \
                          WHERE client_id = $1 AND instance_id = $2 AND revoked_at IS NULL), \
             upd AS (UPDATE runners r SET last_seen_at = now() FROM cur \
                     WHERE r.client_id = cur.client_id \
                       AND (cur.last_seen_at IS NULL \
                            OR cur.last_seen_at < now() - make_interval(secs => $3)) \
                     RETURNING 1) \
             SELECT count(*) FROM cur",
        )
        .await?;
    let secs = every.as_secs_f64();
    let n: i64 = client
        .query_one(&stmt, &[&client_id, &instance_id, &secs])
        .await?
        .get(0);
    Ok(n == 1)
}
