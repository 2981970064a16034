//! Row-level compare-and-swap, the one way aggregates are mutated.
//!
//! A mutation is a closure run inside a short transaction: it loads the row (with its
//! `version`), computes the new state, and writes it with
//! `UPDATE … SET …, version = version + 1 WHERE id = $1 AND version = $2`. Zero rows updated
//! means a concurrent writer won; the closure answers [`Step::Stale`] and the helper rolls back,
//! waits a jittered, growing delay ([`CAS_RETRY`], a `wc-retry` policy) and runs the closure
//! again on fresh state. Serialization failures (SQLSTATE 40001) and deadlocks (40P01) are
//! retried the same way. After the policy's attempts the caller gets [`CasOutcome::Conflict`],
//! a typed, retryable answer. No lock is held between attempts, and nothing process-local
//! decides correctness.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use deadpool_postgres::{Pool, Transaction};
/// The retry policy type [`compare_and_swap`] takes, for callers that tune it.
pub use wc_retry::{Backoff, Jitter};

use crate::StoreError;

/// A boxed, sendable future borrowing the transaction for `'t`.
pub type StepFuture<'t, T> = Pin<Box<dyn Future<Output = Result<Step<T>, StoreError>> + Send + 't>>;

/// What one attempt of a mutation decided.
#[derive(Debug)]
pub enum Step<T> {
    /// Commit the transaction and return the value. Also used for decisions that write
    /// nothing (an idempotent replay, a typed stale answer): committing an empty transaction
    /// is harmless.
    Done(T),
    /// The guarded write matched no row because the version moved: roll back and retry.
    Stale,
}

impl<T> Step<T> {
    /// `Done(value)` when exactly one row was written, `Stale` when none was.
    pub fn from_rows_updated(rows: u64, value: T) -> Step<T> {
        if rows == 1 {
            Step::Done(value)
        } else {
            Step::Stale
        }
    }
}

/// The typed result of a compare-and-swap mutation.
#[derive(Debug, PartialEq, Eq)]
pub enum CasOutcome<T> {
    /// The mutation committed.
    Applied {
        /// What the closure returned.
        value: T,
        /// Attempts used, at least 1. `attempts - 1` is the number of retries.
        attempts: u32,
    },
    /// Every attempt lost to a concurrent writer; nothing was written. Retryable.
    Conflict {
        /// Attempts used.
        attempts: u32,
    },
}

impl<T> CasOutcome<T> {
    /// Attempts used either way.
    pub fn attempts(&self) -> u32 {
        match self {
            CasOutcome::Applied { attempts, .. } | CasOutcome::Conflict { attempts } => *attempts,
        }
    }

    /// The committed value, if the mutation applied.
    pub fn applied(self) -> Option<T> {
        match self {
            CasOutcome::Applied { value, .. } => Some(value),
            CasOutcome::Conflict { .. } => None,
        }
    }
}

/// How hard a mutation tries before answering [`CasOutcome::Conflict`]: 24 attempts, each
/// retry after a random delay (full jitter) whose bound doubles from 2 ms up to 100 ms. A
/// losing attempt costs one short transaction; delays grow fast enough that a crowd of
/// contenders spreads out instead of colliding again on every retry.
pub const CAS_RETRY: Backoff = Backoff::new(Duration::from_millis(2), Duration::from_millis(100))
    .with_jitter(Jitter::UpToOneIn(1))
    .with_max_attempts(24);

/// Runs `step` in a fresh transaction per attempt until it commits, a non-retryable error
/// occurs, or the policy's attempts are used up (a policy without a limit retries until the
/// step wins).
pub async fn compare_and_swap<T, F>(
    pool: &Pool,
    policy: &Backoff,
    mut step: F,
) -> Result<CasOutcome<T>, StoreError>
where
    T: Send,
    F: for<'t> FnMut(&'t Transaction<'t>) -> StepFuture<'t, T> + Send,
{
    let mut client = pool.get().await?;
    let mut retries = policy.retries();
    loop {
        let attempt = retries.failures() + 1;
        let tx = client.transaction().await?;
        match step(&tx).await {
            Ok(Step::Done(value)) => match tx.commit().await {
                Ok(()) => {
                    return Ok(CasOutcome::Applied {
                        value,
                        attempts: attempt,
                    });
                }
                Err(e) => {
                    // No SQLSTATE: the connection broke while the COMMIT was in flight.
                    if e.code().is_none() {
                        return Err(StoreError::CommitUncertain(std::sync::Arc::new(e)));
                    }
                    let e = StoreError::from(e);
                    if !e.is_transient_conflict() {
                        return Err(e);
                    }
                    tracing::debug!(attempt, "cas commit conflict");
                }
            },
            Ok(Step::Stale) => {
                tx.rollback().await?;
                tracing::debug!(attempt, "cas version moved");
            }
            Err(e) if e.is_transient_conflict() => {
                // The failed transaction is unusable; dropping it rolls it back.
                drop(tx);
                tracing::debug!(attempt, error = %e, "cas transient conflict");
            }
            Err(e) => return Err(e),
        }
        match retries.after_failure() {
            Some(wait) => tokio::time::sleep(wait).await,
            None => return Ok(CasOutcome::Conflict { attempts: attempt }),
        }
    }
}

/// Runs `attempt`, a whole transaction of its own that is not a [`compare_and_swap`] step (a
/// pipelined one, which checks its guards in SQL and has no stale answer), until it succeeds or
/// fails for good; an attempt that lost to a transient conflict (a deadlock, a serialization
/// failure) is retried after the policy's delay, up to the policy's attempts, after which the
/// last conflict is returned.
pub(crate) async fn retry_transient<T, F, Fut>(
    policy: &Backoff,
    attempt: F,
) -> Result<T, StoreError>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    let conflict = |e: &StoreError| {
        let transient = e.is_transient_conflict();
        if transient {
            tracing::debug!(error = %e, "transient conflict");
        }
        transient
    };
    wc_retry::retry(policy, conflict, attempt).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_and_stay_capped() {
        for retry in 1..40 {
            let d = CAS_RETRY.delay(retry);
            assert!(d <= Duration::from_millis(100), "retry {retry}: {d:?}");
            let bound = Duration::from_millis(2) * (1 << (retry - 1).min(16));
            assert!(d <= bound, "retry {retry}: {d:?} above {bound:?}");
        }
        assert_eq!(CAS_RETRY.max_attempts(), Some(24));
    }

    #[test]
    fn rows_updated_decides_the_step() {
        assert!(matches!(Step::from_rows_updated(1, 5), Step::Done(5)));
        assert!(matches!(Step::from_rows_updated(0, 5), Step::Stale));
    }
}
