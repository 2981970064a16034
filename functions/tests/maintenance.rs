//! The upkeep pass shared by `wc-local` and the scheduled cloud function, against a real
//! database and moto's SQS: expired leases end `lost`, staged outbox messages are sent, week-old
//! finished work is pruned, and a pass with nothing to do changes nothing.

use std::time::Duration;

use wc_functions::config::ServerConfig;
use wc_functions::maintenance::{self, Report, Upkeep};
use wc_runner_protocol::QueueEnvelope;
use wc_store::testing::TestDatabase;
use wc_store::testing::runner_work::NoEvidence;
use wc_store::testing::runner_work::{enqueue, new_work, runner};
use wc_store::testing::sqs::LocalSqs;
use wc_store::work::{self, QueueRoute};

#[tokio::test]
async fn one_pass_reaps_drains_and_prunes() {
    let sqs = LocalSqs::start().await;
    let queue_url = sqs.create_queue().await;
    let publisher = sqs.publisher();
    let db = TestDatabase::new().await;
    let instance = runner(db.pool(), "host").await;
    let c = db.pool().get().await.unwrap();

    // Leased work whose lease runs out, and SQS-routed work whose message is still staged.
    let leased = enqueue(db.pool(), &new_work("host", QueueRoute::Postgres)).await;
    let claimed = work::claim_queued(&c, "host", instance, 1, 1, work::SlotSharing::default())
        .await
        .unwrap();
    assert_eq!(claimed[0].id, leased);
    let staged = enqueue(
        db.pool(),
        &new_work(
            "host",
            QueueRoute::Sqs {
                queue_url: queue_url.clone(),
            },
        ),
    )
    .await;
    // The lease of a millisecond has run out by the database's clock, which the reaper reads.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while c
        .query_one(
            "SELECT lease_expires_at >= now() FROM runner_work WHERE id = $1",
            &[&leased],
        )
        .await
        .unwrap()
        .get::<_, bool>(0)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the lease never expired"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    let report = maintenance::run_once(db.pool(), Some(&publisher), &NoEvidence, true)
        .await
        .unwrap();
    assert_eq!(
        report,
        Report {
            lost: 1,
            outbox_sent: 1,
            outbox_failed: 0,
            outbox_discarded: 0,
            pruned: Some(0),
        }
    );
    let row = work::get(&c, leased).await.unwrap().unwrap();
    assert_eq!(row.state, wc_domain::WorkState::Lost);
    let received = sqs.receive(&queue_url, 30).await;
    assert_eq!(received.len(), 1);
    assert_eq!(
        QueueEnvelope::parse(&received[0].0).unwrap().work_id,
        staged
    );

    // Nothing left to do: a second pass changes nothing.
    let again = maintenance::run_once(db.pool(), Some(&publisher), &NoEvidence, true)
        .await
        .unwrap();
    assert_eq!(
        again,
        Report {
            pruned: Some(0),
            ..Report::default()
        }
    );

    // Finished more than a week ago: pruned; without pruning in the pass, kept.
    c.execute(
        "UPDATE runner_work SET finished_at = now() - interval '8 days' WHERE id = $1",
        &[&leased],
    )
    .await
    .unwrap();
    let kept = maintenance::run_once(db.pool(), None, &NoEvidence, false)
        .await
        .unwrap();
    assert_eq!(kept, Report::default());
    assert!(work::get(&c, leased).await.unwrap().is_some());
    let pruned = maintenance::run_once(db.pool(), None, &NoEvidence, true)
        .await
        .unwrap();
    assert_eq!(pruned.pruned, Some(1));
    assert!(work::get(&c, leased).await.unwrap().is_none());
}

/// The whole pass every host runs: the work pass, shells and tasks, each reported.
#[tokio::test]
async fn the_whole_upkeep_pass_runs_every_part_and_reports_each() {
    let db = TestDatabase::new().await;
    let instance = runner(db.pool(), "host").await;
    let c = db.pool().get().await.unwrap();
    let leased = enqueue(db.pool(), &new_work("host", QueueRoute::Postgres)).await;
    work::claim_queued(&c, "host", instance, 1, 1, work::SlotSharing::default())
        .await
        .unwrap();
    c.execute(
        "UPDATE runner_work SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
        &[&leased],
    )
    .await
    .unwrap();
    let state = wc_functions::AppState::new(db.pool().clone(), ServerConfig::default());

    let (report, failed) = maintenance::upkeep(&state, false).await;
    assert!(failed.is_none(), "{failed:?}");
    assert_eq!(
        report,
        Upkeep {
            work: Some(Report {
                lost: 1,
                ..Report::default()
            }),
            shells: Some(0),
            tasks: Some(0),
        }
    );
    let row = work::get(&c, leased).await.unwrap().unwrap();
    assert_eq!(row.state, wc_domain::WorkState::Lost);
    let (again, _) = maintenance::upkeep(&state, false).await;
    assert_eq!(again.work, Some(Report::default()));
}
