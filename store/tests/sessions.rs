//! The Workflow Session aggregate against a real Postgres.

use serde_json::json;
use uuid::Uuid;
use wc_store::cas::CasOutcome;
use wc_store::sessions::{
    self, Decision, Mutated, NewEvent, NewSession, RETAINED_EVENTS, SessionChange,
};
use wc_store::testing::TestDatabase;

fn event(kind: &str) -> NewEvent {
    NewEvent {
        kind: kind.into(),
        call_id: Uuid::now_v7(),
        invocation_id: Uuid::now_v7(),
        role: "recorder",
        tool_name: Some("t".into()),
        payload: json!({}),
    }
}

async fn new_session(db: &TestDatabase) -> String {
    let id = format!("wc_sess_{}", Uuid::new_v4().simple());
    sessions::create(
        db.pool(),
        &NewSession {
            id: id.clone(),
            project: "agent:local:p".into(),
            owner_authority_fingerprint: "a".repeat(64),
            mode: "normal",
            root_instruction: None,
        },
        &[event("task_instruction")],
    )
    .await
    .unwrap();
    id
}

fn append(n: usize) -> impl Fn(&sessions::SessionRow) -> Decision<()> + Send + Sync + 'static {
    move |_| {
        Decision::Write(
            SessionChange::default(),
            (0..n).map(|_| event("tool_call_started")).collect(),
            (),
        )
    }
}

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
            for _ in 0..5 {
                let out = sessions::mutate(&pool, &id, append(2)).await.unwrap();
                assert!(
                    matches!(
                        out,
                        CasOutcome::Applied {
                            value: Mutated::Done(..),
                            ..
                        }
                    ),
                    "{out:?}"
                );
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let client = db.pool().get().await.unwrap();
    let session = sessions::get(&client, &id).await.unwrap().unwrap();
    assert_eq!(session.events_observed, 1 + 32 * 5 * 2);
    let events = sessions::recent_events(&client, &id, 1000).await.unwrap();
    let mut seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
    seqs.sort();
    assert_eq!(seqs, (1..=session.events_observed).collect::<Vec<_>>());
}

#[tokio::test]
async fn retention_keeps_the_newest_events_and_the_cumulative_count() {
    let db = TestDatabase::new().await;
    let id = new_session(&db).await;
    for _ in 0..21 {
        sessions::mutate(db.pool(), &id, append(100)).await.unwrap();
    }
    let client = db.pool().get().await.unwrap();
    let session = sessions::get(&client, &id).await.unwrap().unwrap();
    assert_eq!(session.events_observed, 2101);
    assert!(session.retention_truncated());
    assert_eq!(session.retained_from_seq, 2101 - RETAINED_EVENTS + 1);
    let n: i64 = client
        .query_one(
            "SELECT count(*) FROM session_events WHERE session_id = $1",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, RETAINED_EVENTS);
    let newest = sessions::recent_events(&client, &id, 1).await.unwrap();
    assert_eq!(newest[0].seq, 2101);
}

#[tokio::test]
async fn leave_writes_nothing_and_missing_sessions_are_reported() {
    let db = TestDatabase::new().await;
    let id = new_session(&db).await;
    let out = sessions::mutate(db.pool(), &id, |s| Decision::Leave(s.events_observed))
        .await
        .unwrap();
    let CasOutcome::Applied {
        value: Mutated::Done(seen, row),
        ..
    } = out
    else {
        panic!("{out:?}")
    };
    assert_eq!(seen, 1);
    assert_eq!(row.version, 1, "leave must not bump the version");
    let out = sessions::mutate(db.pool(), "wc_sess_doesnotexist0000000000", |_| {
        Decision::Leave(())
    })
    .await
    .unwrap();
    assert!(matches!(
        out,
        CasOutcome::Applied {
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
                lifecycle: Some("finished"),
                ..Default::default()
            },
            vec![event("session_finished")],
            (),
        )
    })
    .await
    .unwrap();
    let CasOutcome::Applied {
        value: Mutated::Done((), row),
        ..
    } = out
    else {
        panic!()
    };
    assert_eq!(row.lifecycle, "finished");
    assert!(row.finished_at.is_some() && row.closed_at.is_none());
    assert_eq!(row.events_observed, 2);
}
