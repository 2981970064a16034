//! The SQS outbox against a real Postgres and moto's SQS server: messages leave only after
//! the enqueuing transaction committed, failed sends stay with attempts and a capped backoff,
//! and concurrent drainers send each row once.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use uuid::Uuid;
use wc_runner_protocol::{QueueEnvelope, WorkState};
use wc_store::Pool;
use wc_store::outbox::{
    self, BACKOFF_CAP, DrainStats, QueuePublisher, SEND_LEASE, SendFuture, SqsPublisher,
};
use wc_store::testing::TestDatabase;
use wc_store::testing::runner_work::NoEvidence;
use wc_store::testing::sqs::LocalSqs;
use wc_store::work::{self, Enqueued, NewWork, QueueRoute};

const FP: &str = "0000000000000000000000000000000000000000000000000000000000000000";

fn new_work(queue: QueueRoute) -> NewWork {
    wc_store::testing::runner_work::new_work("host", queue)
}

async fn enqueue_sqs(pool: &Pool, queue_url: &str) -> Uuid {
    let w = new_work(QueueRoute::Sqs {
        queue_url: queue_url.to_owned(),
    });
    match work::applied(
        work::enqueue(pool, &w, None, work::OpenLimits::NONE)
            .await
            .unwrap(),
    )
    .unwrap()
    {
        Enqueued::Queued(row, _) => {
            assert_eq!(row.queue, wc_domain::WorkQueue::Sqs);
            row.id
        }
        other => panic!("{other:?}"),
    }
}

async fn pending(pool: &Pool) -> Vec<outbox::OutboxRow> {
    outbox::pending(&pool.get().await.unwrap()).await.unwrap()
}

fn work_ids(bodies: &[(String, String)]) -> Vec<Uuid> {
    bodies
        .iter()
        .map(|(body, _)| QueueEnvelope::parse(body).unwrap().work_id)
        .collect()
}

/// A publisher that always fails, counting its calls.
#[derive(Default)]
struct Refusing {
    calls: Mutex<usize>,
}

impl QueuePublisher for Refusing {
    fn send<'a>(&'a self, _queue_url: &'a str, _body: &'a str) -> SendFuture<'a> {
        *self.calls.lock().unwrap() += 1;
        Box::pin(async { Err("queue unreachable: connection refused".to_owned()) })
    }
}

/// The real publisher, recording what it sent and pausing before each send so that
/// concurrent drainers overlap.
struct Recording {
    inner: SqsPublisher,
    sent: Mutex<Vec<Uuid>>,
}

impl QueuePublisher for Recording {
    fn send<'a>(&'a self, queue_url: &'a str, body: &'a str) -> SendFuture<'a> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            self.inner.send(queue_url, body).await?;
            let id = QueueEnvelope::parse(body)
                .map_err(|e| e.to_string())?
                .work_id;
            self.sent.lock().unwrap().push(id);
            Ok(())
        })
    }
}

#[tokio::test]
async fn the_outbox_sends_after_commit_and_never_before() {
    let sqs = LocalSqs::start().await;
    let queue = sqs.create_queue().await;
    let db = TestDatabase::new().await;
    let publisher = sqs.publisher();

    // Enqueueing stages the row and sends nothing.
    let id = enqueue_sqs(db.pool(), &queue).await;
    let staged = pending(db.pool()).await;
    assert_eq!(staged.len(), 1);
    assert_eq!((staged[0].work_id, staged[0].attempts), (id, 0));
    assert_eq!(staged[0].queue_url, queue);
    assert!(sqs.receive(&queue, 30).await.is_empty(), "sent on enqueue");

    // A row of a transaction still open is invisible to drainers.
    let mut client = db.pool().get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    let uncommitted = Uuid::now_v7();
    tx.execute(
        "INSERT INTO runner_work (id, client_id, project_id, owner_authority_fingerprint, tool, \
             mode, item, queue) VALUES ($1, 'host', 'agent:host:web', $2::text, 'run_process', 'sync', \
             '{}'::jsonb, 'sqs')",
        &[&uncommitted, &FP],
    )
    .await
    .unwrap();
    tx.execute(
        "INSERT INTO runner_outbox (work_id, queue_url) VALUES ($1, $2)",
        &[&uncommitted, &queue],
    )
    .await
    .unwrap();

    let stats = outbox::drain_outbox(db.pool(), &publisher, 100)
        .await
        .unwrap();
    assert_eq!(
        stats,
        DrainStats {
            sent: 1,
            ..Default::default()
        }
    );
    assert_eq!(work_ids(&sqs.receive(&queue, 30).await), [id]);
    assert!(
        outbox::drain_one(db.pool(), &publisher, uncommitted)
            .await
            .unwrap()
            == DrainStats::default(),
        "an uncommitted row was drained"
    );

    tx.commit().await.unwrap();
    let stats = outbox::drain_one(db.pool(), &publisher, uncommitted)
        .await
        .unwrap();
    assert_eq!(stats.sent, 1);
    let received = sqs.receive(&queue, 30).await;
    assert_eq!(work_ids(&received), [uncommitted]);
    assert_eq!(
        received[0].0,
        format!(r#"{{"protocol_version":1,"work_id":"{uncommitted}"}}"#),
        "the body is the protocol envelope"
    );
    assert!(pending(db.pool()).await.is_empty(), "sent rows are deleted");
}

#[tokio::test]
async fn a_failing_publisher_keeps_the_row_with_attempts_and_a_capped_backoff() {
    let sqs = LocalSqs::start().await;
    let queue = sqs.create_queue().await;
    let db = TestDatabase::new().await;
    let refusing = Refusing::default();
    let first = enqueue_sqs(db.pool(), &queue).await;
    let second = enqueue_sqs(db.pool(), &queue).await;

    let stats = outbox::drain_outbox(db.pool(), &refusing, 100)
        .await
        .unwrap();
    assert_eq!(
        stats,
        DrainStats {
            failed: 1,
            deferred: 1,
            ..Default::default()
        },
        "after one failure the other row for that queue waits instead of being tried"
    );
    assert_eq!(*refusing.calls.lock().unwrap(), 1);
    let rows: BTreeMap<Uuid, outbox::OutboxRow> = pending(db.pool())
        .await
        .into_iter()
        .map(|r| (r.work_id, r))
        .collect();
    assert_eq!(rows.len(), 2, "nothing is lost");
    let (failed, deferred) = (&rows[&first], &rows[&second]);
    assert_eq!(failed.attempts, 1);
    assert_eq!(
        failed.last_error.as_deref(),
        Some("queue unreachable: connection refused")
    );
    let now = chrono::Utc::now();
    let wait = (failed.next_attempt_at - now).to_std().unwrap_or_default();
    assert!(wait <= Duration::from_secs(1), "first backoff: {wait:?}");
    assert_eq!(deferred.attempts, 0, "a deferred row was not tried");
    assert!(deferred.next_attempt_at - now > chrono::Duration::seconds(60));

    // Once the database's clock passes the row's next attempt, a drain retries it.
    let client = db.pool().get().await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !client
        .query_one(
            "SELECT next_attempt_at <= now() FROM runner_outbox WHERE work_id = $1",
            &[&first],
        )
        .await
        .unwrap()
        .get::<_, bool>(0)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the failed row never came due"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stats = outbox::drain_outbox(db.pool(), &refusing, 100)
        .await
        .unwrap();
    assert_eq!(stats.failed, 1, "the failed row was retried once due");
    let again = pending(db.pool())
        .await
        .into_iter()
        .find(|r| r.work_id == first)
        .unwrap();
    assert_eq!(again.attempts, 2);
    let wait = (again.next_attempt_at - chrono::Utc::now())
        .to_std()
        .unwrap_or_default();
    assert!(
        wait > Duration::from_millis(1000) && wait <= Duration::from_secs(2),
        "second backoff doubles: {wait:?}"
    );

    // The delay is capped however many attempts failed.
    let client = db.pool().get().await.unwrap();
    client
        .execute(
            "UPDATE runner_outbox SET attempts = 40, next_attempt_at = now()",
            &[],
        )
        .await
        .unwrap();
    outbox::drain_outbox(db.pool(), &refusing, 100)
        .await
        .unwrap();
    let row = pending(db.pool())
        .await
        .into_iter()
        .find(|r| r.work_id == first)
        .unwrap();
    assert_eq!(row.attempts, 41);
    let wait = (row.next_attempt_at - chrono::Utc::now()).to_std().unwrap();
    assert!(wait <= BACKOFF_CAP, "{wait:?}");
    assert!(wait >= BACKOFF_CAP * 3 / 4, "{wait:?}");

    // A long error is stored cut to the column's bound.
    client
        .execute("UPDATE runner_outbox SET next_attempt_at = now()", &[])
        .await
        .unwrap();
    struct Verbose;
    impl QueuePublisher for Verbose {
        fn send<'a>(&'a self, _: &'a str, _: &'a str) -> SendFuture<'a> {
            Box::pin(async { Err("é".repeat(5000)) })
        }
    }
    outbox::drain_one(db.pool(), &Verbose, first).await.unwrap();
    let row = pending(db.pool())
        .await
        .into_iter()
        .find(|r| r.work_id == first)
        .unwrap();
    assert_eq!(row.last_error.unwrap().chars().count(), 1000);

    // Once the queue answers, the rows go out and are deleted.
    client
        .execute("UPDATE runner_outbox SET next_attempt_at = now()", &[])
        .await
        .unwrap();
    let stats = outbox::drain_outbox(db.pool(), &sqs.publisher(), 100)
        .await
        .unwrap();
    assert_eq!(stats.sent, 2);
    let mut sent = work_ids(&sqs.receive(&queue, 30).await);
    sent.sort();
    assert_eq!(sent, [first, second]);
    assert!(pending(db.pool()).await.is_empty());
}

#[tokio::test]
async fn rows_of_work_no_longer_queued_are_discarded_unsent() {
    let sqs = LocalSqs::start().await;
    let queue = sqs.create_queue().await;
    let db = TestDatabase::new().await;
    let id = enqueue_sqs(db.pool(), &queue).await;
    let mut client = db.pool().get().await.unwrap();
    assert_eq!(
        work::request_cancel(&mut client, id, &NoEvidence)
            .await
            .unwrap(),
        Some(WorkState::Cancelled)
    );
    let stats = outbox::drain_outbox(db.pool(), &sqs.publisher(), 100)
        .await
        .unwrap();
    assert_eq!(
        stats,
        DrainStats {
            discarded: 1,
            ..Default::default()
        }
    );
    assert!(pending(db.pool()).await.is_empty());
    assert!(sqs.receive(&queue, 30).await.is_empty());
}

#[tokio::test]
async fn concurrent_drainers_send_each_row_once() {
    let sqs = LocalSqs::start().await;
    let queue = sqs.create_queue().await;
    let db = TestDatabase::new().await;
    let mut ids = Vec::new();
    for _ in 0..40 {
        ids.push(enqueue_sqs(db.pool(), &queue).await);
    }
    let publisher = Arc::new(Recording {
        inner: sqs.publisher(),
        sent: Mutex::default(),
    });
    let mut drainers = tokio::task::JoinSet::new();
    for n in 0..6 {
        let pool = if n % 2 == 0 {
            db.pool().clone()
        } else {
            db.new_pool()
        };
        let publisher = publisher.clone();
        let only = ids[n * 5];
        drainers.spawn(async move {
            // Half drain everything due, half first try one row, as submit does.
            let mut stats = DrainStats::default();
            if n % 2 == 1 {
                stats += outbox::drain_one(&pool, publisher.as_ref(), only)
                    .await
                    .unwrap();
            }
            stats += outbox::drain_outbox(&pool, publisher.as_ref(), 100)
                .await
                .unwrap();
            stats
        });
    }
    let mut total = DrainStats::default();
    while let Some(stats) = drainers.join_next().await {
        total += stats.unwrap();
    }
    assert_eq!(
        total,
        DrainStats {
            sent: 40,
            ..Default::default()
        }
    );
    let mut sent = publisher.sent.lock().unwrap().clone();
    sent.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(sent, want, "each row sent exactly once");
    assert!(pending(db.pool()).await.is_empty());

    let mut received = Vec::new();
    for _ in 0..20 {
        let batch = sqs.receive(&queue, 60).await;
        if batch.is_empty() && received.len() == ids.len() {
            break;
        }
        received.extend(work_ids(&batch));
    }
    received.sort();
    assert_eq!(received, want, "the queue holds each work id once");
}

#[tokio::test]
async fn a_claimed_row_is_reserved_for_the_send_lease() {
    let sqs = LocalSqs::start().await;
    let queue = sqs.create_queue().await;
    let db = TestDatabase::new().await;
    let id = enqueue_sqs(db.pool(), &queue).await;

    // A drainer that claimed the row and died leaves it reserved, not lost.
    let client = db.pool().get().await.unwrap();
    client
        .execute(
            "UPDATE runner_outbox SET next_attempt_at = now() + make_interval(secs => $1)",
            &[&SEND_LEASE.as_secs_f64()],
        )
        .await
        .unwrap();
    let publisher = sqs.publisher();
    assert_eq!(
        outbox::drain_one(db.pool(), &publisher, id).await.unwrap(),
        DrainStats::default()
    );
    client
        .execute(
            "UPDATE runner_outbox SET next_attempt_at = now() - interval '1 second'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        outbox::drain_outbox(db.pool(), &publisher, 100)
            .await
            .unwrap()
            .sent,
        1
    );
    assert_eq!(work_ids(&sqs.receive(&queue, 30).await), [id]);
}
