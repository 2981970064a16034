//! The one retry policy of wc: how long to wait before trying again, and how often to try.
//!
//! A [`Backoff`] doubles a delay from its first value up to a cap, takes a random part off each
//! delay ([`Jitter`]) so that many clients failing together do not retry together, and may
//! limit the attempts. [`Retries`] walks one operation's attempts under a policy; [`retry`]
//! is the sleeping loop over an async operation. What is worth retrying is the caller's
//! question (`StoreError::is_transient_conflict` in a store change,
//! `StoreError::is_unavailable` at the boundaries, `ApiFailure::is_retryable` in the runner):
//! this crate knows no errors.
//!
//! Written here rather than taken from a retry crate: the callers' delays were tuned with
//! three jitter shapes — the store change's full jitter, the runner's "at least half",
//! the SQS outbox's "at least four fifths" of each delay — which the retry crates on
//! crates.io do not offer (they add jitter on top of the delay), and the outbox stores its
//! next delay in a row instead of sleeping, which needs the delay alone. The whole is a
//! hundred lines with no dependency beyond `rand` and `tokio`'s timer, shared by `wc-store`
//! and the runner agent, which never depends on the store.
#![warn(missing_docs)]

use std::future::Future;
use std::time::Duration;

use rand::Rng;

/// How much of each delay is chosen at random.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jitter {
    /// Exactly the computed delay (one waiter alone, nothing to spread).
    None,
    /// Up to `1/n` of the delay is taken off at random: `UpToOneIn(1)` waits anywhere from
    /// zero to the delay ("full jitter"), `UpToOneIn(2)` at least half of it, `UpToOneIn(5)`
    /// at least four fifths. `0` counts as 1.
    UpToOneIn(u32),
}

impl Jitter {
    /// `delay` with this jitter applied: never longer than `delay`.
    pub fn apply(self, delay: Duration) -> Duration {
        match self {
            Jitter::None => delay,
            Jitter::UpToOneIn(n) => {
                let most = delay.as_micros() / u128::from(n.max(1));
                let most = u64::try_from(most).unwrap_or(u64::MAX);
                if most == 0 {
                    return delay;
                }
                delay.saturating_sub(Duration::from_micros(rand::rng().random_range(0..=most)))
            }
        }
    }
}

/// A retry policy: the delay before retry `n` (1-based) is `first · 2^(n-1)`, at most `cap`,
/// with [`Jitter`]; at most `max_attempts` attempts when limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    first: Duration,
    cap: Duration,
    jitter: Jitter,
    max_attempts: Option<u32>,
}

impl Backoff {
    /// Delays doubling from `first` up to `cap`, without jitter or an attempt limit.
    pub const fn new(first: Duration, cap: Duration) -> Backoff {
        Backoff {
            first,
            cap,
            jitter: Jitter::None,
            max_attempts: None,
        }
    }

    /// The same policy with `jitter`.
    pub const fn with_jitter(mut self, jitter: Jitter) -> Backoff {
        self.jitter = jitter;
        self
    }

    /// The same policy giving up after `attempts` attempts (at least 1).
    pub const fn with_max_attempts(mut self, attempts: u32) -> Backoff {
        self.max_attempts = Some(if attempts == 0 { 1 } else { attempts });
        self
    }

    /// Attempts before giving up, if limited.
    pub const fn max_attempts(&self) -> Option<u32> {
        self.max_attempts
    }

    /// The longest delay before retry `retry` (1-based; 0 counts as 1): `first · 2^(retry-1)`,
    /// at most the cap.
    pub fn ceiling(&self, retry: u32) -> Duration {
        let doublings = retry.saturating_sub(1).min(31);
        self.first.saturating_mul(1 << doublings).min(self.cap)
    }

    /// The delay before retry `retry` (1-based): [`Self::ceiling`] with the jitter applied.
    pub fn delay(&self, retry: u32) -> Duration {
        self.jitter.apply(self.ceiling(retry))
    }

    /// The attempts of one operation under this policy, none made yet.
    pub fn retries(&self) -> Retries {
        Retries {
            policy: *self,
            failures: 0,
        }
    }
}

/// One operation's attempts under a [`Backoff`].
#[derive(Debug, Clone)]
pub struct Retries {
    policy: Backoff,
    failures: u32,
}

impl Retries {
    /// Records a failed attempt: the delay before the next one, or `None` when the policy's
    /// attempts are used up.
    pub fn after_failure(&mut self) -> Option<Duration> {
        let wait = self.wait_after_failure();
        match self.policy.max_attempts {
            Some(max) if self.failures >= max => None,
            _ => Some(wait),
        }
    }

    /// Records a failed attempt of an operation that never gives up (a reconnect loop, which
    /// ends only when asked to): the delay before the next one, whatever the attempt limit.
    pub fn wait_after_failure(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        self.policy.delay(self.failures)
    }

    /// Forgets the failures: the operation succeeded and the next failure waits the first
    /// delay again.
    pub fn reset(&mut self) {
        self.failures = 0;
    }

    /// Failed attempts recorded since the start or the last [`Self::reset`].
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

/// Runs `attempt` until it succeeds, fails with an error `retryable` refuses, or the policy's
/// attempts are used up (the last error is returned), sleeping the policy's delay between
/// attempts.
pub async fn retry<T, E, F, Fut>(
    policy: &Backoff,
    mut retryable: impl FnMut(&E) -> bool,
    mut attempt: F,
) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut retries = policy.retries();
    loop {
        match attempt().await {
            Err(e) if retryable(&e) => match retries.after_failure() {
                Some(wait) => tokio::time::sleep(wait).await,
                None => return Err(e),
            },
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn delays_double_from_the_first_up_to_the_cap() {
        let p = Backoff::new(2 * MS, 100 * MS);
        let got: Vec<_> = (1..=9).map(|n| p.delay(n)).collect();
        let want = [2, 4, 8, 16, 32, 64, 100, 100, 100].map(|ms| ms * MS);
        assert_eq!(got, want);
        assert_eq!(p.delay(0), 2 * MS);
        assert_eq!(p.delay(u32::MAX), 100 * MS);
    }

    #[test]
    fn jitter_takes_off_at_most_its_share() {
        for (n, floor) in [(1, 0), (2, 500), (5, 800)] {
            let p = Backoff::new(1000 * MS, 1000 * MS).with_jitter(Jitter::UpToOneIn(n));
            let delays: Vec<_> = (0..2000).map(|_| p.delay(1)).collect();
            assert!(
                delays.iter().all(|d| *d >= floor * MS && *d <= 1000 * MS),
                "1/{n}: {delays:?}"
            );
            // Random, not a constant: two thousand draws from a range of at least 200,000
            // microseconds are not all equal.
            assert!(delays.iter().any(|d| *d != delays[0]), "1/{n}: no spread");
        }
        assert_eq!(Jitter::UpToOneIn(0).apply(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn attempts_stop_at_the_limit_and_start_over_after_a_reset() {
        let p = Backoff::new(MS, MS).with_max_attempts(3);
        let mut r = p.retries();
        assert_eq!(r.after_failure(), Some(MS));
        assert_eq!(r.after_failure(), Some(MS));
        assert_eq!(r.after_failure(), None);
        r.reset();
        assert_eq!(r.failures(), 0);
        assert_eq!(r.after_failure(), Some(MS));
        let mut once = Backoff::new(MS, MS).with_max_attempts(0).retries();
        assert_eq!(once.after_failure(), None);
        let mut unlimited = Backoff::new(MS, MS).retries();
        assert!((0..1000).all(|_| unlimited.after_failure().is_some()));
        let mut never_give_up = Backoff::new(MS, 4 * MS).with_max_attempts(1).retries();
        let waits: Vec<_> = (0..4).map(|_| never_give_up.wait_after_failure()).collect();
        assert_eq!(waits, [MS, 2 * MS, 4 * MS, 4 * MS]);
    }

    #[tokio::test]
    async fn retry_stops_at_success_refusal_or_the_limit() {
        let p = Backoff::new(MS, MS).with_max_attempts(4);
        let mut calls = 0;
        let r: Result<u32, &str> = retry(
            &p,
            |_| true,
            || {
                calls += 1;
                let n = calls;
                async move { if n < 3 { Err("again") } else { Ok(n) } }
            },
        )
        .await;
        assert_eq!(r, Ok(3));

        let mut calls = 0;
        let r: Result<(), &str> = retry(
            &p,
            |_| true,
            || {
                calls += 1;
                async { Err("always") }
            },
        )
        .await;
        assert_eq!((r, calls), (Err("always"), 4));

        let mut calls = 0;
        let r: Result<(), &str> = retry(
            &p,
            |e| *e != "fatal",
            || {
                calls += 1;
                async { Err("fatal") }
            },
        )
        .await;
        assert_eq!((r, calls), (Err("fatal"), 1));
    }
}
