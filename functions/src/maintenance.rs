//! Periodic upkeep of durable state, one pass at a time: expired runner leases end as `lost`,
//! due SQS outbox messages are sent, and finished work older than a week is pruned (bounded per
//! pass); [`end_shells`] closes idle persistent shells and those of ended sessions;
//! [`prune_tasks`] deletes MCP tasks past their TTL (a task ends with its work, not here).
//! [`upkeep`] is the whole pass: `wc-local` runs one every quarter lease; in the cloud the
//! `wc-scheduled` function runs one per scheduled invocation. Every step is safe to run from several places at once:
//! each is a guarded statement or claims its rows with `FOR UPDATE SKIP LOCKED`.

use std::time::Duration;

use serde::Serialize;
use wc_store::StoreError;
use wc_store::outbox::QueuePublisher;

/// Finished work kept at least this long before pruning.
pub const KEEP_FINISHED: Duration = Duration::from_secs(7 * 24 * 3600);
/// Most finished work rows pruned per pass.
pub const PRUNE_LIMIT: i64 = 10_000;
/// Most outbox messages sent per pass.
pub const DRAIN_LIMIT: usize = 100;

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Work whose lease had expired, now `lost`.
    pub lost: usize,
    /// Outbox messages sent.
    pub outbox_sent: usize,
    /// Outbox sends that failed (kept, retried later with backoff).
    pub outbox_failed: usize,
    /// Outbox rows discarded because their work is no longer queued.
    pub outbox_discarded: usize,
    /// Finished work rows pruned (`None` when pruning was not part of this pass).
    pub pruned: Option<u64>,
}

/// One pass: reap (each lost work ending as `ends` says), drain (when a publisher is
/// configured), and prune when `prune` is set. Each step runs even if an earlier one failed;
/// the first failure is returned after all ran.
pub async fn run_once(
    pool: &wc_store::Pool,
    publisher: Option<&dyn QueuePublisher>,
    ends: wc_store::work::Ends<'_>,
    prune: bool,
) -> Result<Report, StoreError> {
    let mut report = Report::default();
    let mut first_error = None;
    let mut client = pool.get().await?;
    match wc_store::work::reap_expired(&mut client, ends).await {
        Ok(lost) => {
            if !lost.is_empty() {
                tracing::warn!(count = lost.len(), "work lost: runner leases expired");
            }
            report.lost = lost.len();
        }
        Err(e) => {
            tracing::warn!(error = %e, "lease reaper failed");
            first_error.get_or_insert(e);
        }
    }
    if let Some(publisher) = publisher {
        match wc_store::outbox::drain_outbox(pool, publisher, DRAIN_LIMIT).await {
            Ok(stats) => {
                report.outbox_sent = stats.sent;
                report.outbox_failed = stats.failed;
                report.outbox_discarded = stats.discarded;
            }
            Err(e) => {
                tracing::warn!(error = %e, "draining the SQS outbox failed");
                first_error.get_or_insert(e);
            }
        }
    }
    if prune {
        let before = chrono::Utc::now()
            - chrono::Duration::from_std(KEEP_FINISHED).expect("a week fits a chrono duration");
        match wc_store::work::prune_finished(&client, before, PRUNE_LIMIT).await {
            Ok(n) => report.pruned = Some(n),
            Err(e) => {
                tracing::warn!(error = %e, "pruning finished work failed");
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

/// Most persistent shells ended per pass.
pub const SHELL_LIMIT: i64 = 500;

/// Ends every persistent shell unused for `config.shell_idle`, every one whose session is no
/// longer active and every one whose runner has not been seen for a lease (at most
/// [`SHELL_LIMIT`]), tells each runner to release its process, and prunes shells that ended
/// more than [`KEEP_FINISHED`] ago. Returns how many it ended.
pub async fn end_shells(deps: &crate::deps::Deps) -> Result<usize, StoreError> {
    let client = deps.client().await?;
    let ended = wc_store::shells::end_idle_and_orphaned(
        &client,
        deps.config.shell_idle,
        deps.config.runner_lease,
        SHELL_LIMIT,
    )
    .await?;
    for shell in &ended {
        crate::execution::shell::release(deps, shell).await;
    }
    if !ended.is_empty() {
        tracing::info!(
            count = ended.len(),
            "persistent shells closed: idle or their session ended"
        );
    }
    wc_store::shells::prune_ended(&client, KEEP_FINISHED).await?;
    Ok(ended.len())
}

/// Most expired MCP tasks deleted per pass.
pub const TASK_LIMIT: i64 = 500;

/// Deletes MCP tasks past their TTL (at most [`TASK_LIMIT`]); returns how many.
pub async fn prune_tasks(deps: &crate::deps::Deps) -> Result<u64, StoreError> {
    let client = deps.client().await?;
    wc_store::tasks::prune_expired(&client, TASK_LIMIT).await
}

/// What one whole upkeep pass did; a part that failed is `None` (its failure was logged).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Upkeep {
    /// Leases reaped, outbox drained, finished work pruned ([`run_once`]).
    pub work: Option<Report>,
    /// Persistent shells ended ([`end_shells`]).
    pub shells: Option<usize>,
    /// MCP tasks past their TTL, deleted ([`prune_tasks`]).
    pub tasks: Option<u64>,
}

/// One whole upkeep pass, as every host runs it (`wc-local` every quarter lease,
/// `wc-scheduled` once per invocation): [`run_once`] (pruning when `prune`), [`end_shells`],
/// [`prune_tasks`]. Each part runs even if an earlier one failed; the report says what each did,
/// and the first failure comes back with it.
pub async fn upkeep(state: &crate::AppState, prune: bool) -> (Upkeep, Option<StoreError>) {
    let deps = &state.deps;
    let mut first_error = None;
    let mut note = |part: &str, e: StoreError| {
        tracing::warn!(error = %e, part, "an upkeep part failed; the next pass tries again");
        first_error.get_or_insert(e);
    };
    let work = run_once(
        &deps.pool,
        deps.publisher.as_deref(),
        &*deps.work_ends,
        prune,
    )
    .await
    .map_err(|e| note("work", e))
    .ok();
    let shells = end_shells(deps)
        .await
        .map_err(|e| note("persistent shells", e))
        .ok();
    let tasks = prune_tasks(deps)
        .await
        .map_err(|e| note("MCP tasks", e))
        .ok();
    (
        Upkeep {
            work,
            shells,
            tasks,
        },
        first_error,
    )
}
