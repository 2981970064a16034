//! A caller's audit events that meet in one process are recorded together: one statement of at
//! most `MAX_EVENTS_PER_WRITE` events, seqs and counters exactly as if sent one by one, and an
//! event the database refuses refused alone.
//!
//! The tests run on tokio's current-thread runtime, so "every event has been queued" is exact:
//! `record` queues its event on its first poll, before its first await.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;
use tokio::task::JoinSet;
use wc_store::ChangeOutcome;
use wc_store::StoreError;
use wc_store::audit::{self, Affinity, MAX_EVENTS_PER_WRITE, NewActionEvent, Recorded, Visibility};
use wc_store::testing::TestDatabase;

const REUSE: Affinity = Affinity::Reuse {
    idle: Duration::from_secs(1800),
};

fn event(i: usize) -> NewActionEvent {
    NewActionEvent {
        endpoint: "/mcp".into(),
        http_method: "POST".into(),
        action_name: "runtime_status".into(),
        operation: "mcp_tools_call".into(),
        status_code: 200,
        success: !i.is_multiple_of(3),
        duration_ms: i as i64,
        request_id: Some(format!("r{i}")),
        summary: json!({ "transport": "mcp" }),
        principal_kind: Some("shared_key".into()),
        principal_user_id: None,
        oauth_client_id: None,
    }
}

/// Records `events` for `caller` while another transaction holds the lock of the caller's
/// session, so that they all queue before the first can be written; releases the lock once
/// every event has queued. Results in the order of `events`.
async fn record_all_queued(
    db: &TestDatabase,
    caller: &str,
    session: &str,
    events: Vec<NewActionEvent>,
) -> Vec<Result<ChangeOutcome<Recorded>, StoreError>> {
    let mut holder = db.pool().get().await.unwrap();
    let lock = holder.transaction().await.unwrap();
    lock.execute(
        "SELECT 1 FROM action_sessions WHERE session_id = $1 FOR UPDATE",
        &[&session],
    )
    .await
    .unwrap();

    let n = events.len();
    let started = Arc::new(AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    for (i, e) in events.into_iter().enumerate() {
        let pool = db.pool().clone();
        let caller = caller.to_owned();
        let started = started.clone();
        tasks.spawn(async move {
            started.fetch_add(1, Ordering::SeqCst);
            (i, audit::record(&pool, &caller, &REUSE, e).await)
        });
    }
    while started.load(Ordering::SeqCst) < n {
        tokio::task::yield_now().await;
    }
    lock.commit().await.unwrap();

    let mut results: Vec<Option<_>> = (0..n).map(|_| None).collect();
    while let Some(done) = tasks.join_next().await {
        let (i, r) = done.unwrap();
        results[i] = Some(r);
    }
    results.into_iter().map(Option::unwrap).collect()
}

/// A caller with an open session holding one event; its id.
async fn caller_with_session(db: &TestDatabase, caller: &str) -> String {
    audit::record(db.pool(), caller, &REUSE, event(1000))
        .await
        .unwrap()
        .applied()
        .unwrap()
        .session_id
}

/// The session's events by request id: (seq, writing transaction).
async fn events_of(db: &TestDatabase, session: &str) -> BTreeMap<String, (i64, String)> {
    let client = db.pool().get().await.unwrap();
    client
        .query(
            "SELECT request_id, seq, xmin::text FROM action_events WHERE session_id = $1",
            &[&session],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect()
}

#[tokio::test]
async fn queued_events_are_recorded_in_statements_of_at_most_the_bound() {
    let db = TestDatabase::new().await;
    let caller = "q".repeat(64);
    let session = caller_with_session(&db, &caller).await;
    let total = MAX_EVENTS_PER_WRITE + 3;

    let results = record_all_queued(&db, &caller, &session, (0..total).map(event).collect()).await;
    for (i, r) in results.iter().enumerate() {
        let Ok(ChangeOutcome::Applied { value, .. }) = r else {
            panic!("event {i}: {r:?}")
        };
        assert_eq!(value.session_id, session);
        assert_eq!(
            value.seq,
            i as i64 + 2,
            "event {i} takes its arrival position"
        );
        assert!(!value.created_session);
    }

    let rows = events_of(&db, &session).await;
    assert_eq!(rows.len(), total + 1);
    let seqs: Vec<i64> = (0..total).map(|i| rows[&format!("r{i}")].0).collect();
    assert_eq!(seqs, (2..total as i64 + 2).collect::<Vec<_>>());
    let xid = |range: std::ops::Range<usize>| -> HashSet<String> {
        range.map(|i| rows[&format!("r{i}")].1.clone()).collect()
    };
    let first = xid(0..MAX_EVENTS_PER_WRITE);
    let rest = xid(MAX_EVENTS_PER_WRITE..total);
    assert_eq!(first.len(), 1, "first batch written by {first:?}");
    assert_eq!(rest.len(), 1, "second batch written by {rest:?}");
    assert_ne!(first, rest);

    let s = audit::get_session(&db.pool().get().await.unwrap(), Visibility::All, &session)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.event_count, total as i64 + 1);
    let failed = (0..total).filter(|i| i.is_multiple_of(3)).count() as i64;
    assert_eq!(s.error_count, failed);
    let duration: i64 = 1000 + (0..total as i64).sum::<i64>();
    assert_eq!(s.total_duration_ms, duration);
}

#[tokio::test]
async fn an_event_the_database_refuses_is_refused_alone() {
    let db = TestDatabase::new().await;
    let caller = "r".repeat(64);
    let session = caller_with_session(&db, &caller).await;
    let mut events: Vec<NewActionEvent> = (0..6).map(event).collect();
    // Over the summary bound (8 KiB stored), and incompressible.
    let noise: String = (0..4000)
        .map(|i: u32| format!("{:08x}", i.wrapping_mul(2_654_435_761)))
        .collect();
    events[3].summary = json!({ "noise": noise });

    let results = record_all_queued(&db, &caller, &session, events).await;
    for (i, r) in results.iter().enumerate() {
        if i == 3 {
            let Err(e) = r else { panic!("{r:?}") };
            let constraint = match e {
                StoreError::Database(d) => d.as_db_error().and_then(|d| d.constraint()),
                _ => None,
            };
            assert_eq!(constraint, Some("wc_jsonb_8k_size"), "{e}");
        } else {
            assert!(
                matches!(r, Ok(ChangeOutcome::Applied { .. })),
                "event {i}: {r:?}"
            );
        }
    }
    let rows = events_of(&db, &session).await;
    assert!(!rows.contains_key("r3"));
    let mut seqs: Vec<i64> = rows.values().map(|r| r.0).collect();
    seqs.sort_unstable();
    assert_eq!(
        seqs,
        (1..=6).collect::<Vec<_>>(),
        "gap-free without the refused one"
    );
}
