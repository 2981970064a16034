//! The compare-and-swap helper under contention, against a real Postgres.

use std::collections::BTreeSet;
use std::time::Duration;

use wc_store::Pool;
use wc_store::cas::{Backoff, CAS_RETRY, CasOutcome, Jitter};
use wc_store::testing::{TestDatabase, probe};

const TASKS: usize = 64;
const INCREMENTS: usize = 50;

/// A generous policy: the contract under test is "no lost or duplicated update", and each
/// task re-issues an increment that answers `Conflict`, as a client would on a retryable error.
fn contention_policy() -> Backoff {
    Backoff::new(Duration::from_millis(1), Duration::from_millis(20))
        .with_jitter(Jitter::UpToOneIn(1))
        .with_max_attempts(32)
}

struct Tally {
    versions: Vec<i64>,
    retries: u64,
    conflicts: u64,
}

async fn hammer(pools: Vec<Pool>) -> Tally {
    let policy = contention_policy();
    let mut handles = Vec::new();
    for t in 0..TASKS {
        let pool = pools[t % pools.len()].clone();
        handles.push(tokio::spawn(async move {
            let mut tally = Tally {
                versions: Vec::new(),
                retries: 0,
                conflicts: 0,
            };
            for _ in 0..INCREMENTS {
                loop {
                    match probe::increment(&pool, &policy, 1)
                        .await
                        .expect("increment")
                    {
                        CasOutcome::Applied { value, attempts } => {
                            tally.versions.push(value);
                            tally.retries += u64::from(attempts - 1);
                            break;
                        }
                        CasOutcome::Conflict { attempts } => {
                            tally.retries += u64::from(attempts);
                            tally.conflicts += 1;
                        }
                    }
                }
            }
            tally
        }));
    }
    let mut all = Tally {
        versions: Vec::new(),
        retries: 0,
        conflicts: 0,
    };
    for h in handles {
        let t = h.await.expect("task");
        all.versions.extend(t.versions);
        all.retries += t.retries;
        all.conflicts += t.conflicts;
    }
    all
}

async fn assert_exact(db: &TestDatabase, tally: Tally) {
    let total = (TASKS * INCREMENTS) as i64;
    let client = db.pool().get().await.unwrap();
    let (value, version) = probe::read(&client, 1).await.unwrap();
    assert_eq!(value, total, "final value");
    assert_eq!(version, total, "final version");
    assert_eq!(tally.versions.len() as i64, total, "applied outcomes");
    let distinct: BTreeSet<i64> = tally.versions.iter().copied().collect();
    assert_eq!(
        distinct.len() as i64,
        total,
        "each version observed exactly once"
    );
    assert_eq!(distinct.first(), Some(&1));
    assert_eq!(distinct.last(), Some(&total));
    // 64 writers on one row cannot all win first time: the helper must have retried.
    assert!(tally.retries > 0, "no retries counted under contention");
    eprintln!("retries={} conflicts={}", tally.retries, tally.conflicts);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hot_row_contention_one_pool() {
    let db = TestDatabase::new().await;
    probe::setup(&db.pool().get().await.unwrap(), 1)
        .await
        .unwrap();
    let tally = hammer(vec![db.pool().clone()]).await;
    assert_exact(&db, tally).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hot_row_contention_two_instances() {
    let db = TestDatabase::new().await;
    probe::setup(&db.pool().get().await.unwrap(), 1)
        .await
        .unwrap();
    let tally = hammer(vec![db.pool().clone(), db.new_pool()]).await;
    assert_exact(&db, tally).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn single_attempt_policy_reports_conflict_and_writes_nothing_for_it() {
    let db = TestDatabase::new().await;
    probe::setup(&db.pool().get().await.unwrap(), 1)
        .await
        .unwrap();
    let policy = CAS_RETRY.with_max_attempts(1);
    let pools = [db.pool().clone(), db.new_pool()];
    let mut handles = Vec::new();
    for t in 0..32 {
        let pool = pools[t % 2].clone();
        handles.push(tokio::spawn(async move {
            let mut applied = 0i64;
            let mut conflicts = 0i64;
            for _ in 0..20 {
                match probe::increment(&pool, &policy, 1).await.unwrap() {
                    CasOutcome::Applied { attempts, .. } => {
                        assert_eq!(attempts, 1);
                        applied += 1;
                    }
                    CasOutcome::Conflict { attempts } => {
                        assert_eq!(attempts, 1);
                        conflicts += 1;
                    }
                }
            }
            (applied, conflicts)
        }));
    }
    let (mut applied, mut conflicts) = (0, 0);
    for h in handles {
        let (a, c) = h.await.unwrap();
        applied += a;
        conflicts += c;
    }
    let client = db.pool().get().await.unwrap();
    let (value, version) = probe::read(&client, 1).await.unwrap();
    assert_eq!(value, applied, "a conflict must not have written");
    assert_eq!(version, applied);
    assert_eq!(applied + conflicts, 32 * 20);
}

#[tokio::test]
async fn serialization_failure_and_deadlock_are_retried() {
    let db = TestDatabase::new().await;
    probe::setup(&db.pool().get().await.unwrap(), 1)
        .await
        .unwrap();
    for (i, code) in ["40001", "40P01"].into_iter().enumerate() {
        let outcome = probe::increment_injecting(db.pool(), &CAS_RETRY, 1, Some(code))
            .await
            .expect("retried, not failed");
        assert_eq!(
            outcome,
            CasOutcome::Applied {
                value: i as i64 + 1,
                attempts: 2
            },
            "{code}"
        );
    }
}

#[tokio::test]
async fn other_errors_are_not_retried() {
    let db = TestDatabase::new().await;
    probe::setup(&db.pool().get().await.unwrap(), 1)
        .await
        .unwrap();
    // 23505 (unique violation) is a real error, not contention.
    let err = probe::increment_injecting(db.pool(), &CAS_RETRY, 1, Some("23505"))
        .await
        .expect_err("must surface");
    assert!(err.is_unique_violation(), "{err}");
    let client = db.pool().get().await.unwrap();
    assert_eq!(
        probe::read(&client, 1).await.unwrap(),
        (0, 0),
        "nothing written"
    );
}

#[tokio::test]
async fn distinct_rows_never_conflict() {
    let db = TestDatabase::new().await;
    probe::setup(&db.pool().get().await.unwrap(), 32)
        .await
        .unwrap();
    let mut handles = Vec::new();
    for id in 1..=32i64 {
        let pool = db.pool().clone();
        handles.push(tokio::spawn(async move {
            for n in 1..=10 {
                let out = probe::increment(&pool, &CAS_RETRY, id).await.unwrap();
                assert_eq!(
                    out,
                    CasOutcome::Applied {
                        value: n,
                        attempts: 1
                    }
                );
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let client = db.pool().get().await.unwrap();
    for id in 1..=32 {
        assert_eq!(probe::read(&client, id).await.unwrap(), (10, 10));
    }
}
