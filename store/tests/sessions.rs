//! The Workflow Session aggregate against a real Postgres.

use serde_json::json;
use uuid::Uuid;
use wc_domain::{EventKind, EventRole, Lifecycle, SessionId};
use wc_store::ChangeOutcome;
use wc_store::sessions::{self, Decision, Mutated, NewEvent, RETAINED_EVENTS, SessionChange};
use wc_store::testing::TestDatabase;

fn event(kind: EventKind) -> NewEvent {
    NewEvent {
        kind,
        call_id: Uuid::now_v7(),
        invocation_id: Uuid::now_v7(),
        role: EventRole::Recorder,
        tool_name: Some("t".into()),
        payload: json!({}),
    }
}

async fn new_session(db: &TestDatabase) -> SessionId {
    db.new_session(event(EventKind::TaskInstruction)).await
}

fn append(n: usize) -> impl Fn(&sessions::SessionRow) -> Decision<()> + Send + Sync + 'static {
    move |_| {
        Decision::Write(
            SessionChange::default(),
            (0..n).map(|_| event(EventKind::ToolCallStarted)).collect(),
            (),
        )
    }
}

/// The session holds exactly `expected` events with seqs 1..=expected; returns its row.
async fn assert_gap_free(db: &TestDatabase, id: &SessionId, expected: i64) -> sessions::SessionRow {
    let client = db.pool().get().await.unwrap();
    let session = sessions::get(&client, id).await.unwrap().unwrap();
    assert_eq!(session.events_observed, expected);
    let events = sessions::recent_events(&client, id, 1000).await.unwrap();
    let mut seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
    seqs.sort();
    assert_eq!(seqs, (1..=expected).collect::<Vec<_>>());
    session
}

#[tokio::test]
async fn retention_keeps_the_newest_events_and_the_cumulative_count() {
    let db = TestDatabase::new().await;
    let id = new_session(&db).await;
    for _ in 0..21 {
        sessions::mutate(db.pool(), &id, append(100)).await.unwrap();
    }
    assert_retained_tail(&db, &id, 2101).await;
}

/// After `observed` events, exactly the newest `RETAINED_EVENTS` remain and the session says
/// older ones were removed.
async fn assert_retained_tail(db: &TestDatabase, id: &SessionId, observed: i64) {
    let client = db.pool().get().await.unwrap();
    let session = sessions::get(&client, id).await.unwrap().unwrap();
    assert_eq!(session.events_observed, observed);
    assert!(session.retention_truncated());
    assert_eq!(session.retained_from_seq, observed - RETAINED_EVENTS + 1);
    let n: i64 = client
        .query_one(
            "SELECT count(*) FROM session_events WHERE session_id = $1",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, RETAINED_EVENTS);
    let newest = sessions::recent_events(&client, id, 3).await.unwrap();
    assert_eq!(
        newest.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![observed, observed - 1, observed - 2]
    );
}

#[tokio::test]
async fn leave_writes_nothing_and_missing_sessions_are_reported() {
    let db = TestDatabase::new().await;
    let id = new_session(&db).await;
    let out = sessions::mutate(db.pool(), &id, |s| Decision::Leave(s.events_observed))
        .await
        .unwrap();
    let ChangeOutcome::Applied {
        value: Mutated::Done(seen, row),
        ..
    } = out
    else {
        panic!("{out:?}")
    };
    assert_eq!(seen, 1);
    assert_eq!(row.version, 1, "leave must not bump the version");
    let out = sessions::mutate(
        db.pool(),
        &SessionId::parse("wc_sess_doesnotexist0000000000").unwrap(),
        |_| Decision::Leave(()),
    )
    .await
    .unwrap();
    assert!(matches!(
        out,
        ChangeOutcome::Applied {
            value: Mutated::NotFound,
            ..
        }
    ));
}

#[tokio::test]
async fn lifecycle_changes_stamp_their_times() {
    let db = TestDatabase::new().await;
    let id = new_session(&db).await;
    let out = sessions::mutate(db.pool(), &id, |_| {
        Decision::Write(
            SessionChange {
                lifecycle: Some(Lifecycle::Finished),
                ..Default::default()
            },
            vec![event(EventKind::SessionFinished)],
            (),
        )
    })
    .await
    .unwrap();
    let ChangeOutcome::Applied {
        value: Mutated::Done((), row),
        ..
    } = out
    else {
        panic!()
    };
    assert_eq!(row.lifecycle, Lifecycle::Finished);
    assert!(row.finished_at.is_some() && row.closed_at.is_none());
    assert_eq!(row.events_observed, 2);
}

/// The session's `kind_counts` and the counts of its retained events, grouped by a scan.
async fn counts_and_scan(
    db: &TestDatabase,
    id: &SessionId,
) -> (serde_json::Value, serde_json::Value) {
    let client = db.pool().get().await.unwrap();
    let session = sessions::get(&client, id).await.unwrap().unwrap();
    let scanned: serde_json::Value = client
        .query_one(
            "SELECT coalesce(jsonb_object_agg(kind, n), '{}'::jsonb) FROM \
             (SELECT kind, count(*) AS n FROM session_events WHERE session_id = $1 GROUP BY kind) k",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    (session.kind_counts, scanned)
}

#[tokio::test]
async fn kind_counts_are_the_retained_ledgers_counts_on_every_write_path() {
    let db = TestDatabase::new().await;
    let id = new_session(&db).await;
    // Kinds change from write to write, so retention removes one kind while others arrive and
    // a kind whose last event leaves the window leaves the counts.
    let kinds = [
        EventKind::ToolCallStarted,
        EventKind::ToolCallFinished,
        EventKind::ExecutionQueued,
        EventKind::ExecutionFinished,
    ];
    let mut observed = 1;
    for round in 0..52 {
        let kind = kinds[round % kinds.len()];
        let events: Vec<NewEvent> = (0..MAX_BATCH).map(|_| event(kind)).collect();
        match round % 3 {
            0 => {
                let client = db.pool().get().await.unwrap();
                let out = sessions::append(&client, &id, &events, true).await.unwrap();
                assert!(matches!(out, sessions::Appended::Done(_)), "{out:?}");
            }
            1 => {
                let out = sessions::mutate(db.pool(), &id, move |_| {
                    Decision::Write(SessionChange::default(), events.clone(), ())
                })
                .await
                .unwrap();
                assert!(matches!(out, ChangeOutcome::Applied { .. }), "{out:?}");
            }
            _ => {
                // A post appends its `message_posted` event in the post statement.
                let posted = wc_store::board::post(
                    db.pool(),
                    &id,
                    wc_store::testing::note("counted"),
                    wc_store::board::Actor::new(Uuid::now_v7(), "post_session_message"),
                )
                .await
                .unwrap();
                assert!(posted.is_ok(), "{posted:?}");
            }
        }
        observed += if round % 3 == 2 { 1 } else { MAX_BATCH as i64 };
        let (counts, scanned) = counts_and_scan(&db, &id).await;
        assert_eq!(counts, scanned, "round {round}");
    }
    let client = db.pool().get().await.unwrap();
    let session = sessions::get(&client, &id).await.unwrap().unwrap();
    assert_eq!(
        session.events_observed, observed,
        "events_observed stays cumulative"
    );
    assert!(session.retention_truncated(), "{}", session.events_observed);
    let (counts, _) = counts_and_scan(&db, &id).await;
    assert!(counts.get("task_instruction").is_none(), "{counts}");
    let total: i64 = counts
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_i64().unwrap())
        .sum();
    assert_eq!(total, RETAINED_EVENTS);
}

/// Events per write in [`kind_counts_are_the_retained_ledgers_counts_on_every_write_path`].
const MAX_BATCH: usize = 60;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_appends_from_two_instances_are_gap_free() {
    let db = TestDatabase::new().await;
    let id = new_session(&db).await;
    let pools = [db.pool().clone(), db.new_pool()];
    let mut handles = Vec::new();
    for i in 0..32 {
        let pool = pools[i % 2].clone();
        let id = id.clone();
        handles.push(tokio::spawn(async move {
            for round in 0..5 {
                // Half the writers append with one statement, half through the locked
                // read–decide–write path, interleaved on one row.
                if (i + round) % 2 == 0 {
                    let client = pool.get().await.unwrap();
                    let events = vec![
                        event(EventKind::ToolCallStarted),
                        event(EventKind::ToolCallFinished),
                    ];
                    let out = sessions::append(&client, &id, &events, true).await.unwrap();
                    assert!(matches!(out, sessions::Appended::Done(_)), "{out:?}");
                } else {
                    let out = sessions::mutate(&pool, &id, append(2)).await.unwrap();
                    // Writers queue on the row lock: none loses a race it would have to retry.
                    assert!(
                        matches!(out, ChangeOutcome::Applied { attempts: 1, .. }),
                        "{out:?}"
                    );
                }
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let session = assert_gap_free(&db, &id, 1 + 32 * 5 * 2).await;
    // The per-kind counts add up across both paths: 80 single-statement appends (one started
    // and one finished event each) and 80 mutations (two started events each).
    assert_eq!(session.kind_counts["tool_call_started"], json!(80 + 80 * 2));
    assert_eq!(session.kind_counts["tool_call_finished"], json!(80));
    assert_eq!(session.kind_counts["task_instruction"], json!(1));
}

#[tokio::test]
async fn appends_keep_the_retention_bound_and_refuse_inactive_or_missing_sessions() {
    let db = TestDatabase::new().await;
    let id = new_session(&db).await;
    let client = db.pool().get().await.unwrap();
    for _ in 0..21 {
        let events: Vec<NewEvent> = (0..100)
            .map(|_| event(EventKind::ToolCallStarted))
            .collect();
        sessions::append(&client, &id, &events, true).await.unwrap();
    }
    assert_retained_tail(&db, &id, 2101).await;

    // Finished: an append that requires an active session writes nothing; one that does
    // not (a call's closing events) still lands.
    sessions::mutate(db.pool(), &id, |_| {
        Decision::Write(
            SessionChange {
                lifecycle: Some(Lifecycle::Finished),
                ..Default::default()
            },
            vec![],
            (),
        )
    })
    .await
    .unwrap();
    let before = sessions::get(&client, &id).await.unwrap().unwrap();
    let out = sessions::append(&client, &id, &[event(EventKind::ToolCallStarted)], true)
        .await
        .unwrap();
    assert_eq!(out, sessions::Appended::Inactive(before.clone()));
    let after = sessions::get(&client, &id).await.unwrap().unwrap();
    assert_eq!(after, before, "a refused append changes nothing");
    let out = sessions::append(&client, &id, &[event(EventKind::ToolCallFinished)], false)
        .await
        .unwrap();
    let sessions::Appended::Done(row) = out else {
        panic!("{out:?}")
    };
    assert_eq!(row.events_observed, before.events_observed + 1);
    assert_eq!(row.version, before.version + 1);

    let out = sessions::append(
        &client,
        &SessionId::parse("wc_sess_doesnotexist0000000000").unwrap(),
        &[event(EventKind::ToolCallStarted)],
        false,
    )
    .await
    .unwrap();
    assert_eq!(out, sessions::Appended::NotFound);
    // An empty or oversized append is refused before it reaches the database.
    assert!(sessions::append(&client, &id, &[], false).await.is_err());
    let many: Vec<NewEvent> = (0..=sessions::MAX_EVENTS_PER_WRITE)
        .map(|_| event(EventKind::ToolCallStarted))
        .collect();
    assert!(sessions::append(&client, &id, &many, false).await.is_err());
}
