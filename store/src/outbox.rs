//! The SQS outbox: publication of runner work staged in the enqueuing transaction
//! ([`crate::work::enqueue`] writes a `runner_outbox` row) and sent after commit.
//!
//! A drainer claims due rows with `FOR UPDATE SKIP LOCKED` in one short statement that also
//! pushes their `next_attempt_at` out by [`SEND_LEASE`], so no transaction is open while a
//! message is on the network and concurrent drainers never pick the same row. It then sends
//! each message through a [`QueuePublisher`] and deletes the row on success, or records the
//! attempt, the error and a capped exponential backoff on failure. Delivery is at least once:
//! a send whose answer was lost, or a lease that ran out mid-send, publishes the same envelope
//! twice, and the runner's claim answers the duplicate "already claimed".

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use deadpool_postgres::{GenericClient, Pool};
use tokio_postgres::Row;
use uuid::Uuid;
use wc_retry::{Backoff, Jitter};
use wc_runner_protocol::{MAX_ENVELOPE_BYTES, QueueEnvelope};

use crate::StoreError;

/// How long a claimed row is reserved for its drainer: longer than [`SEND_TIMEOUT`] times
/// [`CLAIM_BATCH`], so a row is sent again only when its drainer died.
pub const SEND_LEASE: Duration = Duration::from_secs(120);
/// Longest time one send may take, retries included (the publisher's operation timeout).
pub const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// Rows claimed per statement.
const CLAIM_BATCH: i64 = 10;
/// First retry delay after a failed send; it doubles per attempt.
const BACKOFF_BASE: Duration = Duration::from_secs(1);
/// Longest retry delay.
pub const BACKOFF_CAP: Duration = Duration::from_secs(300);
/// When a failed send is tried again: doubling from [`BACKOFF_BASE`] up to [`BACKOFF_CAP`],
/// less up to a fifth of jitter so retries of many rows spread out; the attempts are counted
/// in the row, not limited.
const SEND_RETRY: Backoff =
    Backoff::new(BACKOFF_BASE, BACKOFF_CAP).with_jitter(Jitter::UpToOneIn(5));
/// Longest stored `last_error` (the column's bound).
const MAX_ERROR_CHARS: usize = 1000;

/// A boxed send in flight.
pub type SendFuture<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;

/// Where outbox messages go: SQS in production ([`SqsPublisher`]), a test double in tests.
pub trait QueuePublisher: Send + Sync {
    /// Sends one message with `body` to `queue_url`; the error text says why it failed.
    fn send<'a>(&'a self, queue_url: &'a str, body: &'a str) -> SendFuture<'a>;
}

/// Where to reach SQS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqsSettings {
    /// AWS region of the queues.
    pub region: String,
    /// Endpoint override (a local moto server); `None` for AWS itself.
    pub endpoint_url: Option<String>,
}

/// [`QueuePublisher`] over the AWS SDK.
#[derive(Debug, Clone)]
pub struct SqsPublisher {
    client: tokio::sync::OnceCell<aws_sdk_sqs::Client>,
    /// Where the client comes from when it is first needed (`None`: built already).
    lazy: Option<SqsSettings>,
}

fn timeouts() -> aws_sdk_sqs::config::timeout::TimeoutConfig {
    aws_sdk_sqs::config::timeout::TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(3))
        .operation_attempt_timeout(Duration::from_secs(4))
        .operation_timeout(SEND_TIMEOUT)
        .build()
}

impl SqsPublisher {
    /// A publisher using the default AWS credential chain (environment, profile, web
    /// identity, container or instance role). Built once per process; the AWS configuration
    /// (credentials, HTTPS client) loads on the first send, not at start-up, so a cold start
    /// that sends nothing never pays for it.
    pub fn from_env(settings: &SqsSettings) -> SqsPublisher {
        SqsPublisher {
            client: tokio::sync::OnceCell::new(),
            lazy: Some(settings.clone()),
        }
    }

    async fn client(&self) -> &aws_sdk_sqs::Client {
        self.client
            .get_or_init(|| async {
                let settings = self
                    .lazy
                    .as_ref()
                    .expect("a publisher without a client has its settings");
                let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
                    .region(aws_config::Region::new(settings.region.clone()))
                    .timeout_config(timeouts());
                if let Some(url) = &settings.endpoint_url {
                    loader = loader.endpoint_url(url);
                }
                aws_sdk_sqs::Client::new(&loader.load().await)
            })
            .await
    }

    /// A publisher with fixed `credentials` (a local SQS server, which accepts any).
    pub fn with_credentials(
        settings: &SqsSettings,
        credentials: aws_sdk_sqs::config::Credentials,
    ) -> SqsPublisher {
        let mut config = aws_sdk_sqs::Config::builder()
            .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
            .region(aws_sdk_sqs::config::Region::new(settings.region.clone()))
            .credentials_provider(credentials)
            .timeout_config(timeouts());
        if let Some(url) = &settings.endpoint_url {
            config = config.endpoint_url(url);
        }
        SqsPublisher {
            client: tokio::sync::OnceCell::new_with(Some(aws_sdk_sqs::Client::from_conf(
                config.build(),
            ))),
            lazy: None,
        }
    }
}

impl QueuePublisher for SqsPublisher {
    fn send<'a>(&'a self, queue_url: &'a str, body: &'a str) -> SendFuture<'a> {
        Box::pin(async move {
            self.client()
                .await
                .send_message()
                .queue_url(queue_url)
                .message_body(body)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| aws_sdk_sqs::error::DisplayErrorContext(&e).to_string())
        })
    }
}

/// What one drain did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DrainStats {
    /// Messages sent (their rows deleted).
    pub sent: usize,
    /// Sends that failed (their rows kept with a backoff).
    pub failed: usize,
    /// Rows deleted unsent because their work is no longer queued (stopped, or already
    /// claimed through an earlier copy of the message).
    pub discarded: usize,
    /// Rows left claimed unsent because a send to the same queue failed in this drain; they
    /// fall due again when their claim runs out.
    pub deferred: usize,
}

impl std::ops::AddAssign for DrainStats {
    fn add_assign(&mut self, o: DrainStats) {
        self.sent += o.sent;
        self.failed += o.failed;
        self.discarded += o.discarded;
        self.deferred += o.deferred;
    }
}

/// A claimed outbox row.
#[derive(Debug, Clone)]
struct Due {
    id: i64,
    work_id: Uuid,
    queue_url: String,
    attempts: i32,
    /// The work's state; `None` when it was deleted meanwhile.
    work_state: Option<String>,
}

fn due_from(r: &Row) -> Due {
    Due {
        id: r.get(0),
        work_id: r.get(1),
        queue_url: r.get(2),
        attempts: r.get(3),
        work_state: r.get(4),
    }
}

/// Claims up to `limit` due rows (all work, or only `work_id`'s), oldest first, and reserves
/// them for [`SEND_LEASE`]. One autocommit statement: the row locks last only as long as it runs.
async fn claim_due(
    client: &impl GenericClient,
    work_id: Option<Uuid>,
    limit: i64,
) -> Result<Vec<Due>, StoreError> {
    let stmt = client
        .prepare_cached(
            "WITH due AS (SELECT id FROM runner_outbox \
                          WHERE next_attempt_at <= now() AND ($3::uuid IS NULL OR work_id = $3) \
                          ORDER BY next_attempt_at, id LIMIT $1 FOR UPDATE SKIP LOCKED) \
             UPDATE runner_outbox o SET next_attempt_at = now() + make_interval(secs => $2) \
             FROM due WHERE o.id = due.id \
             RETURNING o.id, o.work_id, o.queue_url, o.attempts, \
                       (SELECT state FROM runner_work w WHERE w.id = o.work_id)",
        )
        .await?;
    let mut rows: Vec<Due> = client
        .query(&stmt, &[&limit, &SEND_LEASE.as_secs_f64(), &work_id])
        .await?
        .iter()
        .map(due_from)
        .collect();
    // RETURNING has no order: send oldest first.
    rows.sort_by_key(|r| r.id);
    Ok(rows)
}

async fn delete_row(client: &impl GenericClient, id: i64) -> Result<(), StoreError> {
    let stmt = client
        .prepare_cached("DELETE FROM runner_outbox WHERE id = $1")
        .await?;
    client.execute(&stmt, &[&id]).await?;
    Ok(())
}

/// Delay before attempt `attempts + 1`, after `attempts` failures (≥ 1): [`SEND_RETRY`]'s.
/// The row stores it (`next_attempt_at`); no drainer sleeps on it.
pub fn backoff(attempts: i32) -> Duration {
    SEND_RETRY.delay(u32::try_from(attempts).unwrap_or(0))
}

async fn record_failure(
    client: &impl GenericClient,
    row: &Due,
    error: &str,
) -> Result<(), StoreError> {
    let attempts = row.attempts.saturating_add(1);
    let error: String = error.chars().take(MAX_ERROR_CHARS).collect();
    let stmt = client
        .prepare_cached(
            "UPDATE runner_outbox SET attempts = $2, last_error = $3, \
                 next_attempt_at = now() + make_interval(secs => $4) \
             WHERE id = $1",
        )
        .await?;
    client
        .execute(
            &stmt,
            &[&row.id, &attempts, &error, &backoff(attempts).as_secs_f64()],
        )
        .await?;
    Ok(())
}

/// The message body announcing `work_id`.
pub fn envelope_body(work_id: Uuid) -> String {
    let body = QueueEnvelope::new(work_id).to_body();
    debug_assert!(body.len() <= MAX_ENVELOPE_BYTES);
    body
}

/// Sends the claimed rows one by one; no transaction is open meanwhile.
async fn send_claimed(
    pool: &Pool,
    publisher: &dyn QueuePublisher,
    rows: Vec<Due>,
    down: &mut HashSet<String>,
) -> Result<DrainStats, StoreError> {
    let mut stats = DrainStats::default();
    let client = pool.get().await?;
    for row in rows {
        if row.work_state.as_deref() != Some("queued") {
            delete_row(&client, row.id).await?;
            stats.discarded += 1;
            continue;
        }
        if down.contains(&row.queue_url) {
            stats.deferred += 1;
            continue;
        }
        match publisher
            .send(&row.queue_url, &envelope_body(row.work_id))
            .await
        {
            Ok(()) => {
                delete_row(&client, row.id).await?;
                stats.sent += 1;
            }
            Err(e) => {
                tracing::warn!(
                    work_id = %row.work_id, attempts = row.attempts + 1, error = %e,
                    "sending the work message failed; it will be retried"
                );
                record_failure(&client, &row, &e).await?;
                down.insert(row.queue_url);
                stats.failed += 1;
            }
        }
    }
    Ok(stats)
}

/// Sends up to `limit` due outbox messages (the periodic drain), in claims of ten.
#[tracing::instrument(skip(pool, publisher))]
pub async fn drain_outbox(
    pool: &Pool,
    publisher: &dyn QueuePublisher,
    limit: usize,
) -> Result<DrainStats, StoreError> {
    let mut stats = DrainStats::default();
    let mut down = HashSet::new();
    let mut left = limit as i64;
    while left > 0 {
        let rows = {
            let client = pool.get().await?;
            claim_due(&client, None, left.min(CLAIM_BATCH)).await?
        };
        if rows.is_empty() {
            break;
        }
        left -= rows.len() as i64;
        stats += send_claimed(pool, publisher, rows, &mut down).await?;
    }
    Ok(stats)
}

/// Sends the outbox message of `work_id` if it is due and no other drainer holds it: called
/// right after the enqueuing transaction committed, so work starts without waiting for the
/// periodic drain. A failed send stays for that drain.
#[tracing::instrument(skip(pool, publisher))]
pub async fn drain_one(
    pool: &Pool,
    publisher: &dyn QueuePublisher,
    work_id: Uuid,
) -> Result<DrainStats, StoreError> {
    let rows = {
        let client = pool.get().await?;
        claim_due(&client, Some(work_id), CLAIM_BATCH).await?
    };
    send_claimed(pool, publisher, rows, &mut HashSet::new()).await
}

/// An outbox row as stored, for operators and tests.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxRow {
    /// Row id.
    pub id: i64,
    /// The work it announces.
    pub work_id: Uuid,
    /// Target queue.
    pub queue_url: String,
    /// Failed sends so far.
    pub attempts: i32,
    /// When it is next due.
    pub next_attempt_at: chrono::DateTime<chrono::Utc>,
    /// The last send error.
    pub last_error: Option<String>,
}

/// Every pending outbox row, oldest first.
pub async fn pending(client: &impl GenericClient) -> Result<Vec<OutboxRow>, StoreError> {
    let stmt = client
        .prepare_cached(
            "SELECT id, work_id, queue_url, attempts, next_attempt_at, last_error \
             FROM runner_outbox ORDER BY id",
        )
        .await?;
    Ok(client
        .query(&stmt, &[])
        .await?
        .iter()
        .map(|r| OutboxRow {
            id: r.get(0),
            work_id: r.get(1),
            queue_url: r.get(2),
            attempts: r.get(3),
            next_attempt_at: r.get(4),
            last_error: r.get(5),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        for attempts in 1..=40 {
            let d = backoff(attempts);
            let full = BACKOFF_BASE
                .saturating_mul(1 << (attempts - 1).min(20))
                .min(BACKOFF_CAP);
            assert!(d <= full && d >= full * 4 / 5, "{attempts}: {d:?}");
        }
        assert!(backoff(i32::MAX) <= BACKOFF_CAP);
        assert!(backoff(0) <= BACKOFF_BASE);
    }

    #[test]
    fn the_body_is_the_protocol_envelope() {
        let id = Uuid::now_v7();
        let parsed = QueueEnvelope::parse(&envelope_body(id)).unwrap();
        assert_eq!(parsed, QueueEnvelope::new(id));
    }
}
