//! The Action Audit aggregate against a real Postgres: racing events of one caller.

use std::time::Duration;

use serde_json::json;
use wc_store::ChangeOutcome;
use wc_store::audit::{self, Affinity, NewActionEvent, Visibility};
use wc_store::testing::TestDatabase;

fn event(success: bool, duration_ms: i64) -> NewActionEvent {
    NewActionEvent {
        endpoint: "/mcp".into(),
        http_method: "POST".into(),
        action_name: "runtime_status".into(),
        operation: "mcp_tools_call".into(),
        status_code: 200,
        success,
        duration_ms,
        request_id: None,
        summary: json!({ "transport": "mcp" }),
        principal_kind: Some("shared_key".into()),
        principal_user_id: None,
        oauth_client_id: None,
    }
}

const REUSE: Affinity = Affinity::Reuse {
    idle: Duration::from_secs(1800),
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_events_of_one_caller_join_one_session_with_gap_free_seqs_and_exact_counters() {
    let db = TestDatabase::new().await;
    let caller = "c".repeat(64);
    let first = audit::record(db.pool(), &caller, &REUSE, event(true, 1))
        .await
        .unwrap()
        .applied()
        .unwrap();
    assert!(first.created_session);
    assert_eq!(first.seq, 1);

    let pools = [db.pool().clone(), db.new_pool()];
    let mut handles = Vec::new();
    for i in 0..16 {
        let pool = pools[i % 2].clone();
        let caller = caller.clone();
        handles.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            for j in 0..10 {
                let out = audit::record(&pool, &caller, &REUSE, event(j % 5 != 0, 3))
                    .await
                    .unwrap();
                let ChangeOutcome::Applied { value, attempts } = out else {
                    panic!("{out:?}")
                };
                assert_eq!(attempts, 1, "an existing session takes the event at once");
                assert!(!value.created_session);
                seen.push((value.session_id, value.seq));
            }
            seen
        }));
    }
    let mut seqs = vec![1];
    for h in handles {
        for (session, seq) in h.await.unwrap() {
            assert_eq!(session, first.session_id);
            seqs.push(seq);
        }
    }
    seqs.sort();
    assert_eq!(seqs, (1..=161).collect::<Vec<i64>>());
    let client = db.pool().get().await.unwrap();
    let session = audit::get_session(&client, Visibility::All, &first.session_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(session.event_count, 161);
    assert_eq!(session.error_count, 16 * 2);
    assert_eq!(session.total_duration_ms, 1 + 160 * 3);
    let stored: Vec<i64> = audit::list_events(&client, &first.session_id, 0, 1000)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(stored, (1..=161).collect::<Vec<i64>>());
}

#[tokio::test]
async fn a_closed_session_takes_no_more_events_and_an_explicit_id_is_created_once() {
    let db = TestDatabase::new().await;
    let caller = "d".repeat(64);
    let a = audit::record(db.pool(), &caller, &REUSE, event(true, 1))
        .await
        .unwrap()
        .applied()
        .unwrap();
    audit::close_session(db.pool(), Visibility::All, &a.session_id)
        .await
        .unwrap();
    let b = audit::record(db.pool(), &caller, &REUSE, event(true, 1))
        .await
        .unwrap()
        .applied()
        .unwrap();
    assert_ne!(b.session_id, a.session_id, "a closed session is not reused");
    assert!(b.created_session);
    let client = db.pool().get().await.unwrap();
    let closed = audit::get_session(&client, Visibility::All, &a.session_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(closed.event_count, 1);

    // Another caller's events never join this caller's session.
    let other = audit::record(db.pool(), &"e".repeat(64), &REUSE, event(true, 1))
        .await
        .unwrap()
        .applied()
        .unwrap();
    assert_ne!(other.session_id, b.session_id);

    let explicit = Affinity::Explicit {
        id: "ops-review-1".into(),
        idle: Duration::from_secs(1800),
    };
    let x1 = audit::record(db.pool(), &caller, &explicit, event(true, 1))
        .await
        .unwrap()
        .applied()
        .unwrap();
    let x2 = audit::record(db.pool(), &caller, &explicit, event(false, 1))
        .await
        .unwrap()
        .applied()
        .unwrap();
    assert_eq!(
        (x1.session_id.as_str(), x1.seq, x1.created_session),
        ("ops-review-1", 1, true)
    );
    assert_eq!(
        (x2.session_id.as_str(), x2.seq, x2.created_session),
        ("ops-review-1", 2, false)
    );
    let s = audit::get_session(&client, Visibility::All, "ops-review-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((s.event_count, s.error_count), (2, 1));
}

/// The newest event's time of `session`.
async fn newest_event_at(db: &TestDatabase, session: &str) -> chrono::DateTime<chrono::Utc> {
    let client = db.pool().get().await.unwrap();
    client
        .query_one(
            "SELECT occurred_at FROM action_events WHERE session_id = $1 ORDER BY seq DESC LIMIT 1",
            &[&session],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn last_event_at_trails_by_under_a_second_and_reuse_follows_the_exact_last_event() {
    let db = TestDatabase::new().await;
    let caller = "d".repeat(64);
    let idle = Affinity::Reuse {
        idle: Duration::from_secs(2),
    };
    let record = |affinity: Affinity| {
        let pool = db.pool().clone();
        let caller = caller.clone();
        async move {
            audit::record(&pool, &caller, &affinity, event(true, 1))
                .await
                .unwrap()
                .applied()
                .unwrap()
        }
    };
    let last_event_at = |id: String| {
        let pool = db.pool().clone();
        async move {
            let client = pool.get().await.unwrap();
            audit::get_session(&client, Visibility::All, &id)
                .await
                .unwrap()
                .unwrap()
                .last_event_at
        }
    };
    let first = record(idle.clone()).await;
    assert!(first.created_session);
    let created_at = last_event_at(first.session_id.clone()).await;

    // Within the second the stored time stays (the row is rewritten in place), and it never
    // runs more than a second behind the newest event.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let second = record(idle.clone()).await;
    assert_eq!(second.session_id, first.session_id);
    let stored = last_event_at(first.session_id.clone()).await;
    assert_eq!(
        stored, created_at,
        "an event within the second moved the stored time"
    );
    let newest = newest_event_at(&db, &first.session_id).await;
    assert!(stored <= newest, "{stored} after the newest event {newest}");
    assert!(
        newest - stored < chrono::Duration::seconds(1),
        "{stored} trails the newest event {newest} by a second or more"
    );

    // Past the idle window counted from the stored time, but within it counted from the
    // exact last event: the session is still the caller's.
    tokio::time::sleep(Duration::from_millis(1650)).await;
    let third = record(idle.clone()).await;
    assert_eq!(
        third.session_id,
        first.session_id,
        "a session used {:?} ago was not reused",
        chrono::Utc::now() - newest
    );
    assert_eq!(third.seq, 3);
    // More than a second behind: the event moves the stored time to its own.
    let moved = last_event_at(first.session_id.clone()).await;
    assert_eq!(moved, newest_event_at(&db, &first.session_id).await);

    // Idle for longer than the window: a new session.
    tokio::time::sleep(Duration::from_millis(2300)).await;
    let fourth = record(idle).await;
    assert!(fourth.created_session);
    assert_ne!(fourth.session_id, first.session_id);
}
