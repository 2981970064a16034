//! Posts to one session that meet in one process are written together, in arrival order, and
//! each is answered on its own: a batch is one transaction of at most
//! `MAX_POSTS_PER_WRITE` posts, a refused post leaves the rest of its batch alone, and a post
//! that fails its batch fails nobody else.
//!
//! The tests run on tokio's current-thread runtime, so "every post has been queued" is exact:
//! a post queues itself on its first poll, before its first await.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
#[allow(unused_imports)]
use wc_domain::{EventRole, MessageId, SessionId};

use tokio::task::JoinSet;
use uuid::Uuid;
use wc_store::StoreError;
use wc_store::board::{self, Actor, MAX_POSTS_PER_WRITE, NewMessage, Refusal};
use wc_store::testing::pg_proxy::{Break, Fired, PgProxy, proxied_pool, server_addr};
use wc_store::testing::{TestDatabase, note, task_instruction};

async fn new_session(db: &TestDatabase) -> SessionId {
    db.new_session(task_instruction()).await
}

type PostResult = Result<board::Outcome<board::Posted>, StoreError>;

/// Posts `messages` to `session` while another transaction holds the session row's lock, so
/// that they all queue before the first can be written; releases the lock once every post has
/// queued. Results in the order of `messages`.
async fn post_all_queued(
    db: &TestDatabase,
    session: &SessionId,
    messages: Vec<NewMessage>,
) -> Vec<PostResult> {
    post_all_queued_through(db, db.pool(), session, messages).await
}

/// [`post_all_queued`], posting through `pool`.
async fn post_all_queued_through(
    db: &TestDatabase,
    pool: &wc_store::Pool,
    session: &SessionId,
    messages: Vec<NewMessage>,
) -> Vec<PostResult> {
    let mut holder = db.pool().get().await.unwrap();
    let lock = holder.transaction().await.unwrap();
    lock.execute(
        "SELECT 1 FROM workflow_sessions WHERE id = $1 FOR UPDATE",
        &[&session],
    )
    .await
    .unwrap();

    let n = messages.len();
    let started = Arc::new(AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    for (i, m) in messages.into_iter().enumerate() {
        let pool = pool.clone();
        let session = session.to_owned();
        let started = started.clone();
        tasks.spawn(async move {
            started.fetch_add(1, Ordering::SeqCst);
            let r = board::post(
                &pool,
                &session,
                m,
                Actor::new(Uuid::now_v7(), "post_session_message"),
            )
            .await;
            (i, r)
        });
    }
    while started.load(Ordering::SeqCst) < n {
        tokio::task::yield_now().await;
    }
    lock.commit().await.unwrap();

    let mut results: Vec<Option<PostResult>> = (0..n).map(|_| None).collect();
    while let Some(done) = tasks.join_next().await {
        let (i, r) = done.unwrap();
        results[i] = Some(r);
    }
    results.into_iter().map(Option::unwrap).collect()
}

/// Each message of the session: (number, transaction id that wrote it, observation revision).
async fn written(db: &TestDatabase, session: &SessionId) -> BTreeMap<String, (i64, String, i64)> {
    let client = db.pool().get().await.unwrap();
    client
        .query(
            "SELECT id, number, xmin::text, observation_revision FROM session_messages \
             WHERE session_id = $1",
            &[&session],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2), r.get(3))))
        .collect()
}

#[tokio::test]
async fn queued_posts_are_written_in_transactions_of_at_most_the_bound() {
    let db = TestDatabase::new().await;
    let session = new_session(&db).await;
    let total = MAX_POSTS_PER_WRITE + 4;
    let messages: Vec<NewMessage> = (0..total).map(|i| note(&format!("note {i}"))).collect();
    let ids: Vec<MessageId> = messages.iter().map(|m| m.id.clone()).collect();

    let results = post_all_queued(&db, &session, messages).await;
    for r in &results {
        assert!(matches!(r, Ok(Ok(_))), "{r:?}");
    }
    let rows = written(&db, &session).await;
    assert_eq!(rows.len(), total);

    // Queued in this order, written in this order: numbers and revisions follow it.
    let numbers: Vec<i64> = ids.iter().map(|id| rows[id.as_str()].0).collect();
    assert_eq!(numbers, (1..=total as i64).collect::<Vec<_>>());
    let revisions: Vec<i64> = ids.iter().map(|id| rows[id.as_str()].2).collect();
    assert!(revisions.windows(2).all(|w| w[0] < w[1]), "{revisions:?}");
    for (r, id) in results.iter().zip(&ids) {
        let posted = r.as_ref().unwrap().as_ref().unwrap();
        assert_eq!(&posted.message.id, id);
        assert_eq!(posted.message.number, rows[id.as_str()].0);
    }

    // The first MAX_POSTS_PER_WRITE in one transaction, the rest in the next.
    let first: HashSet<&String> = ids[..MAX_POSTS_PER_WRITE]
        .iter()
        .map(|id| &rows[id.as_str()].1)
        .collect();
    let rest: HashSet<&String> = ids[MAX_POSTS_PER_WRITE..]
        .iter()
        .map(|id| &rows[id.as_str()].1)
        .collect();
    assert_eq!(first.len(), 1, "first batch written by {first:?}");
    assert_eq!(rest.len(), 1, "second batch written by {rest:?}");
    assert_ne!(first, rest);

    // The ledger holds each post's evidence in the same order, numbered like the message.
    let client = db.pool().get().await.unwrap();
    let events = client
        .query(
            "SELECT payload->>'message_id', (payload->>'number')::bigint FROM session_events \
             WHERE session_id = $1 AND kind = 'message_posted' ORDER BY seq",
            &[&session],
        )
        .await
        .unwrap();
    let ledger: Vec<(String, i64)> = events.iter().map(|r| (r.get(0), r.get(1))).collect();
    let expected: Vec<(String, i64)> = ids.iter().map(|i| i.to_string()).zip(1..).collect();
    assert_eq!(ledger, expected);
    let counts = client
        .query_one(
            "SELECT messages_posted, messages_retained FROM workflow_sessions WHERE id = $1",
            &[&session],
        )
        .await
        .unwrap();
    assert_eq!(counts.get::<_, i64>(0), total as i64);
    assert_eq!(counts.get::<_, i32>(1), total as i32);
}

#[tokio::test]
async fn a_refused_post_leaves_the_rest_of_its_batch_written() {
    let db = TestDatabase::new().await;
    let session = new_session(&db).await;
    let mut messages: Vec<NewMessage> = (0..6).map(|i| note(&format!("note {i}"))).collect();
    messages[2].reply_to = Some(MessageId::parse(&format!("wc_msg_{}", "Z".repeat(22))).unwrap());
    let refused = messages[2].id.clone();

    let results = post_all_queued(&db, &session, messages).await;
    for (i, r) in results.iter().enumerate() {
        if i == 2 {
            assert!(
                matches!(r, Ok(Err(Refusal::UnknownMessage("reply_to")))),
                "post {i}: {r:?}"
            );
        } else {
            assert!(matches!(r, Ok(Ok(_))), "post {i}: {r:?}");
        }
    }
    let rows = written(&db, &session).await;
    assert!(!rows.contains_key(refused.as_str()));
    assert_eq!(rows.len(), 5);
    let xids: HashSet<&String> = rows.values().map(|r| &r.1).collect();
    assert_eq!(xids.len(), 1, "written together: {xids:?}");
    let mut numbers: Vec<i64> = rows.values().map(|r| r.0).collect();
    numbers.sort_unstable();
    assert_eq!(numbers, vec![1, 2, 3, 4, 5]);
}

#[tokio::test]
async fn a_post_that_fails_its_batch_fails_alone() {
    let db = TestDatabase::new().await;
    let session = new_session(&db).await;
    let mut messages: Vec<NewMessage> = (0..8).map(|i| note(&format!("note {i}"))).collect();
    // The same id twice: whichever is written second violates the primary key, which rolls
    // back the whole batch; every post is then written alone.
    messages[5].id = messages[1].id.clone();

    let results = post_all_queued(&db, &session, messages).await;
    let failed: Vec<usize> = results
        .iter()
        .enumerate()
        .filter(|(_, r)| r.is_err())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(failed.len(), 1, "{results:?}");
    assert!([1, 5].contains(&failed[0]));
    match &results[failed[0]] {
        Err(e) => assert!(e.is_unique_violation(), "{e}"),
        Ok(_) => unreachable!(),
    }
    for (i, r) in results.iter().enumerate() {
        if i != failed[0] {
            assert!(matches!(r, Ok(Ok(_))), "post {i}: {r:?}");
        }
    }
    let rows = written(&db, &session).await;
    assert_eq!(rows.len(), 7);
    let mut numbers: Vec<i64> = rows.values().map(|r| r.0).collect();
    numbers.sort_unstable();
    assert_eq!(numbers, (1..=7).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_post_to_a_missing_session_is_refused_on_its_own() {
    let db = TestDatabase::new().await;
    let results = board::post(
        db.pool(),
        &SessionId::parse(&format!("wc_sess_{}", "A".repeat(22))).unwrap(),
        note("nowhere"),
        Actor::new(Uuid::now_v7(), "post_session_message"),
    )
    .await
    .unwrap();
    assert_eq!(results.unwrap_err(), Refusal::SessionNotFound);
}

/// Posts five queued notes through a proxy armed to break the COMMIT of the transaction that
/// writes at least two of them; the results, and the messages stored afterwards.
async fn five_posts_whose_commit_breaks(
    how: Break,
) -> (
    Vec<PostResult>,
    Vec<Fired>,
    BTreeMap<String, (i64, String, i64)>,
) {
    let db = TestDatabase::new().await;
    let session = new_session(&db).await;
    let proxy = PgProxy::start(server_addr(&db).await).await;
    let pool = proxied_pool(&db, &proxy);
    proxy.arm(how, "INSERT INTO session_messages", 2);
    let messages: Vec<NewMessage> = (0..5).map(|i| note(&format!("note {i}"))).collect();
    let results = post_all_queued_through(&db, &pool, &session, messages).await;
    let fired = proxy.fired();
    (results, fired, written(&db, &session).await)
}

#[tokio::test]
async fn a_batch_whose_commit_answer_is_lost_is_uncertain_for_every_post_and_stored() {
    let (results, fired, rows) = five_posts_whose_commit_breaks(Break::ReplyLost).await;
    assert_eq!(
        fired,
        vec![Fired::ReplyLost {
            server_said: "COMMIT".into()
        }]
    );
    for (i, r) in results.iter().enumerate() {
        assert!(
            matches!(r, Err(StoreError::CommitUncertain(_))),
            "post {i}: {r:?}"
        );
    }
    // The server committed them, once each, together.
    assert_eq!(rows.len(), 5, "{rows:?}");
    let xids: HashSet<&String> = rows.values().map(|r| &r.1).collect();
    assert_eq!(xids.len(), 1);
}

#[tokio::test]
async fn a_batch_whose_commit_is_lost_is_uncertain_for_every_post_and_absent() {
    let (results, fired, rows) = five_posts_whose_commit_breaks(Break::CommitLost).await;
    assert_eq!(fired, vec![Fired::CommitLost]);
    for (i, r) in results.iter().enumerate() {
        assert!(
            matches!(r, Err(StoreError::CommitUncertain(_))),
            "post {i}: {r:?}"
        );
    }
    assert!(rows.is_empty(), "nothing was committed: {rows:?}");
}
