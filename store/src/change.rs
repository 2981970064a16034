//! How a change to an aggregate is made: under the lock of its root row, attempted again only
//! when it lost to a transient conflict.
//!
//! A read–decide–write change ([`locked`]) is one short transaction that begins by loading the
//! aggregate's root row `FOR UPDATE` (`BEGIN` and the load in one round trip), lets the caller
//! decide on the locked row and write, and commits. Writers of one aggregate queue on that lock
//! and each decides on the row its predecessor committed. The lock is the strategy; the guard
//! is the check: a write decided on a row it read names what it read (`AND version = $read`,
//! or the very state it decided on, such as `AND revoked_at IS NULL`) and a write that matches
//! nothing is [`StoreError::Stale`] ([`guarded`]), so a decision can never land on a row that
//! moved, whichever strategy runs. What can fail a transaction that did nothing wrong is a
//! stale guard, a deadlock (SQLSTATE 40P01) or a serialization failure (40001), at any
//! statement or at the commit: [`run`] then runs the whole transaction again on a fresh one
//! after a jittered, growing delay ([`RETRY`], a `wc-retry` policy). Once the policy's attempts
//! are used up the change answers [`ChangeOutcome::Conflict`], a typed, retryable answer. Any other error ends
//! the change at once, and a connection that breaks while `COMMIT` is in flight leaves the
//! outcome unknown ([`StoreError::CommitUncertain`]), which is never retried.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use deadpool_postgres::Pool;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;
use wc_retry::{Backoff, Jitter};

use crate::StoreError;
use crate::pipeline::PipelinedTx;

/// The row a version-guarded write returned (`… WHERE id = $1 AND version = $read
/// RETURNING …`), or [`StoreError::Stale`] when the guard matched none: the row was changed
/// after this change read it.
pub(crate) fn guarded(row: Option<Row>, table: &'static str) -> Result<Row, StoreError> {
    row.ok_or(StoreError::Stale { table })
}

/// The typed result of a change that retries transient conflicts.
#[derive(Debug, PartialEq, Eq)]
pub enum ChangeOutcome<T> {
    /// The change committed (or decided to write nothing).
    Applied {
        /// What the change returned.
        value: T,
        /// Attempts used, at least 1. `attempts - 1` is the number of retries.
        attempts: u32,
    },
    /// Every attempt lost to a transient conflict; nothing was written. Retryable.
    Conflict {
        /// Attempts used.
        attempts: u32,
    },
}

impl<T> ChangeOutcome<T> {
    /// Attempts used either way.
    pub fn attempts(&self) -> u32 {
        match self {
            ChangeOutcome::Applied { attempts, .. } | ChangeOutcome::Conflict { attempts } => {
                *attempts
            }
        }
    }

    /// The committed value, if the change applied.
    pub fn applied(self) -> Option<T> {
        match self {
            ChangeOutcome::Applied { value, .. } => Some(value),
            ChangeOutcome::Conflict { .. } => None,
        }
    }

    /// What a change [`run`] under `policy` answered: a transient conflict that outlasted the
    /// policy is [`ChangeOutcome::Conflict`], any other error stays an error.
    pub(crate) fn of(
        ran: Result<(T, u32), StoreError>,
        policy: &Backoff,
    ) -> Result<Self, StoreError> {
        match ran {
            Ok((value, attempts)) => Ok(ChangeOutcome::Applied { value, attempts }),
            Err(e) if e.is_transient_conflict() => Ok(ChangeOutcome::Conflict {
                attempts: policy.max_attempts().unwrap_or(u32::MAX),
            }),
            Err(e) => Err(e),
        }
    }
}

/// How hard a change tries before answering [`ChangeOutcome::Conflict`]: 24 attempts, each
/// retry after a random delay (full jitter) whose bound doubles from 2 ms up to 100 ms. A
/// losing attempt costs one short transaction; delays grow fast enough that transactions that
/// deadlocked on each other do not meet again on every retry.
pub(crate) const RETRY: Backoff =
    Backoff::new(Duration::from_millis(2), Duration::from_millis(100))
        .with_jitter(Jitter::UpToOneIn(1))
        .with_max_attempts(24);

/// A boxed, sendable future borrowing a change's transaction for `'t`.
pub(crate) type StepFuture<'t, T> =
    Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 't>>;

/// Runs `attempt`, a whole transaction, until it succeeds or fails for good. An attempt that
/// lost to a transient conflict is run again after the policy's delay, up to the policy's
/// attempts, after which the last conflict is returned. On success, the value and the
/// attempts used.
pub(crate) async fn run<T, F, Fut>(policy: &Backoff, mut attempt: F) -> Result<(T, u32), StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    let mut attempts = 0;
    let conflict = |e: &StoreError| {
        let transient = e.is_transient_conflict();
        if transient {
            tracing::debug!(error = %e, "transient conflict");
        }
        transient
    };
    let value = wc_retry::retry(policy, conflict, || {
        attempts += 1;
        attempt()
    })
    .await?;
    Ok((value, attempts))
}

/// The read–decide–write change (see the module documentation): per attempt, a transaction
/// that begins with `load` (a `SELECT … FOR UPDATE` of the aggregate's root row by `params`;
/// `BEGIN` and the load in one round trip), runs `step` on the locked row (`None` when there
/// is none), and commits. `step` decides and writes; it runs once per attempt, so it decides
/// from what it reads in the transaction alone. Transient conflicts are retried under `policy`.
pub(crate) async fn locked<T, F>(
    pool: &Pool,
    policy: &Backoff,
    load: &str,
    params: &[&(dyn ToSql + Sync)],
    step: F,
) -> Result<(T, u32), StoreError>
where
    F: for<'t> Fn(&'t PipelinedTx, Option<Row>) -> StepFuture<'t, T>,
{
    run(policy, || async {
        let tx = PipelinedTx::new(pool.get().await?);
        let load = tx.prepare_cached(load).await?;
        let row = tx
            .begin_with(async { Ok(tx.query_opt(&load, params).await?) })
            .await?;
        let value = step(&tx, row).await?;
        tx.commit().await?;
        Ok(value)
    })
    .await
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::testing::TestDatabase;

    /// The smallest aggregate: counters `1..=rows` at zero.
    async fn counters(db: &TestDatabase, rows: i64) {
        let client = db.pool().get().await.unwrap();
        client
            .batch_execute(
                "CREATE TABLE counter (id bigint PRIMARY KEY, value bigint NOT NULL DEFAULT 0)",
            )
            .await
            .unwrap();
        client
            .execute(
                "INSERT INTO counter (id) SELECT generate_series(1, $1::bigint)",
                &[&rows],
            )
            .await
            .unwrap();
    }

    async fn value(db: &TestDatabase, id: i64) -> i64 {
        let client = db.pool().get().await.unwrap();
        client
            .query_one("SELECT value FROM counter WHERE id = $1", &[&id])
            .await
            .unwrap()
            .get(0)
    }

    /// Adds one to counter `id` through [`locked`]; the value written. Each attempt is counted
    /// in `attempts`; while it is at most `failing`, the attempt fails with SQLSTATE `code`
    /// raised by the server after its write.
    async fn increment(
        pool: &Pool,
        policy: &Backoff,
        id: i64,
        attempts: &AtomicU32,
        (code, failing): (&'static str, u32),
    ) -> Result<ChangeOutcome<i64>, StoreError> {
        let load = "SELECT value FROM counter WHERE id = $1 FOR UPDATE";
        let ran = locked(
            pool,
            policy,
            load,
            &[&id],
            |tx, row| -> StepFuture<'_, i64> {
                let fail = attempts.fetch_add(1, Ordering::SeqCst) < failing;
                Box::pin(async move {
                    let next = row.expect("the counter exists").get::<_, i64>(0) + 1;
                    tx.execute("UPDATE counter SET value = $2 WHERE id = $1", &[&id, &next])
                        .await?;
                    if fail {
                        tx.batch_execute(&format!(
                        "DO $$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = '{code}'; END $$"
                    ))
                    .await?;
                    }
                    Ok(next)
                })
            },
        )
        .await;
        ChangeOutcome::of(ran, policy)
    }

    const NEVER: (&str, u32) = ("", 0);

    #[test]
    fn delays_grow_and_stay_capped() {
        for retry in 1..40 {
            let d = RETRY.delay(retry);
            assert!(d <= Duration::from_millis(100), "retry {retry}: {d:?}");
            let bound = Duration::from_millis(2) * (1 << (retry - 1).min(16));
            assert!(d <= bound, "retry {retry}: {d:?} above {bound:?}");
        }
        assert_eq!(RETRY.max_attempts(), Some(24));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn writers_of_one_row_take_turns_on_its_lock_and_every_change_lands_once() {
        const TASKS: usize = 64;
        const INCREMENTS: usize = 50;
        let db = TestDatabase::new().await;
        counters(&db, 1).await;
        // Two pools: two instances of the functions.
        let pools = [db.pool().clone(), db.new_pool()];
        let mut tasks = tokio::task::JoinSet::new();
        for t in 0..TASKS {
            let pool = pools[t % 2].clone();
            tasks.spawn(async move {
                let mut written = Vec::new();
                for _ in 0..INCREMENTS {
                    let attempts = AtomicU32::new(0);
                    match increment(&pool, &RETRY, 1, &attempts, NEVER).await.unwrap() {
                        // Queued on the lock, never beaten to it: nothing to retry.
                        ChangeOutcome::Applied { value, attempts: 1 } => written.push(value),
                        other => panic!("{other:?}"),
                    }
                }
                written
            });
        }
        let mut written = BTreeSet::new();
        while let Some(values) = tasks.join_next().await {
            for v in values.unwrap() {
                assert!(written.insert(v), "{v} written twice");
            }
        }
        let total = (TASKS * INCREMENTS) as i64;
        assert_eq!(written, (1..=total).collect::<BTreeSet<_>>());
        assert_eq!(value(&db, 1).await, total);
    }

    #[tokio::test]
    async fn writers_of_distinct_rows_never_wait_for_each_other_to_retry() {
        let db = TestDatabase::new().await;
        counters(&db, 32).await;
        let mut tasks = tokio::task::JoinSet::new();
        for id in 1..=32i64 {
            let pool = db.pool().clone();
            tasks.spawn(async move {
                for n in 1..=10 {
                    let attempts = AtomicU32::new(0);
                    let out = increment(&pool, &RETRY, id, &attempts, NEVER)
                        .await
                        .unwrap();
                    assert_eq!(
                        out,
                        ChangeOutcome::Applied {
                            value: n,
                            attempts: 1
                        }
                    );
                }
            });
        }
        while let Some(done) = tasks.join_next().await {
            done.unwrap();
        }
        for id in 1..=32 {
            assert_eq!(value(&db, id).await, 10);
        }
    }

    #[tokio::test]
    async fn serialization_failures_and_deadlocks_are_attempted_again_from_the_start() {
        let db = TestDatabase::new().await;
        counters(&db, 1).await;
        for (i, code) in ["40001", "40P01"].into_iter().enumerate() {
            let attempts = AtomicU32::new(0);
            let out = increment(db.pool(), &RETRY, 1, &attempts, (code, 1))
                .await
                .expect("attempted again, not failed");
            // The failed attempt's write was rolled back: the second one wrote the next value.
            let next = i as i64 + 1;
            assert_eq!(
                out,
                ChangeOutcome::Applied {
                    value: next,
                    attempts: 2
                },
                "{code}"
            );
            assert_eq!(attempts.load(Ordering::SeqCst), 2);
            assert_eq!(value(&db, 1).await, next);
        }
    }

    #[tokio::test]
    async fn other_errors_end_the_change_at_once_and_write_nothing() {
        let db = TestDatabase::new().await;
        counters(&db, 1).await;
        // 23505 (unique violation) is a real error, not contention.
        let attempts = AtomicU32::new(0);
        let err = increment(db.pool(), &RETRY, 1, &attempts, ("23505", u32::MAX))
            .await
            .expect_err("must surface");
        assert!(err.is_unique_violation(), "{err}");
        assert_eq!(attempts.load(Ordering::SeqCst), 1);
        assert_eq!(value(&db, 1).await, 0, "nothing written");
    }

    #[tokio::test]
    async fn conflicts_that_outlast_the_policy_answer_conflict_and_write_nothing() {
        let db = TestDatabase::new().await;
        counters(&db, 1).await;
        for max in [1, 3] {
            let policy = RETRY.with_max_attempts(max);
            let attempts = AtomicU32::new(0);
            let out = increment(db.pool(), &policy, 1, &attempts, ("40P01", u32::MAX))
                .await
                .unwrap();
            assert_eq!(out, ChangeOutcome::Conflict { attempts: max });
            assert_eq!(attempts.load(Ordering::SeqCst), max);
            assert_eq!(value(&db, 1).await, 0, "a conflict must not have written");
        }
    }
}
