//! The runner work queue against a real Postgres: claims, leases, reports, expiry.

use std::collections::BTreeSet;

use uuid::Uuid;
use wc_domain::{ProjectId, SessionId, WorkState};
use wc_store::Pool;
use wc_store::runners::{self, Registered, Registration};
use wc_store::testing::TestDatabase;
use wc_store::work::{self, Chunk, Claim, Enqueued, LeaseView, NewWork, QueueRoute, Report};

use wc_store::testing::runner_work::{NoEvidence, exited, new_work, register, runner};

/// Waits until the database's clock is past the lease of every leased `ids` row: the
/// expiry is read from the rows, never assumed from a local timer. Fails only on a hang.
async fn await_leases_expired(pool: &Pool, ids: &[Uuid]) {
    let client = pool.get().await.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let live: i64 = client
            .query_one(
                "SELECT count(*) FROM runner_work WHERE id = ANY($1) AND lease_expires_at >= now()",
                &[&ids],
            )
            .await
            .unwrap()
            .get(0);
        if live == 0 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "leases of {ids:?} never expired"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

async fn enqueue(pool: &Pool, w: &NewWork) -> Uuid {
    match work::applied(
        work::enqueue(pool, w, None, work::OpenLimits::NONE)
            .await
            .unwrap(),
    )
    .unwrap()
    {
        Enqueued::Queued(row, _) => {
            assert_eq!(row.state, WorkState::Queued);
            row.id
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn concurrent_pollers_claim_each_item_exactly_once() {
    let db = TestDatabase::new().await;
    let instance = runner(db.pool(), "host").await;
    let mut ids = BTreeSet::new();
    for _ in 0..60 {
        ids.insert(enqueue(db.pool(), &new_work("host", QueueRoute::Postgres)).await);
    }
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let pool = db.new_pool();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            loop {
                let c = pool.get().await.unwrap();
                let rows = work::claim_queued(
                    &c,
                    "host",
                    instance,
                    3,
                    30_000,
                    work::SlotSharing::default(),
                )
                .await
                .unwrap();
                if rows.is_empty() {
                    return got;
                }
                got.extend(rows.into_iter().map(|r| r.id));
            }
        }));
    }
    let mut claimed = Vec::new();
    for t in tasks {
        claimed.extend(t.await.unwrap());
    }
    assert_eq!(claimed.len(), 60, "every item claimed once");
    assert_eq!(claimed.iter().copied().collect::<BTreeSet<_>>(), ids);
}

#[tokio::test]
async fn only_the_current_instance_of_the_right_runner_claims() {
    let db = TestDatabase::new().await;
    let a = runner(db.pool(), "a").await;
    let _b = runner(db.pool(), "b").await;
    let w = enqueue(db.pool(), &new_work("b", QueueRoute::Postgres)).await;
    let c = db.pool().get().await.unwrap();
    assert!(
        work::claim_queued(&c, "a", a, 5, 1000, work::SlotSharing::default())
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        work::claim_one(&c, "a", a, w, 1000, work::SlotSharing::default())
            .await
            .unwrap(),
        Claim::NotFound,
        "another runner's work looks unknown"
    );
    // A stale instance of b claims nothing.
    assert!(
        work::claim_queued(
            &c,
            "b",
            Uuid::now_v7(),
            5,
            1000,
            work::SlotSharing::default()
        )
        .await
        .unwrap()
        .is_empty()
    );
}

#[tokio::test]
async fn a_delivered_id_is_claimed_once_and_then_answers_already_claimed() {
    let db = TestDatabase::new().await;
    let i = runner(db.pool(), "host").await;
    let url = "http://sqs.local/q".to_owned();
    let w = enqueue(
        db.pool(),
        &new_work("host", QueueRoute::Sqs { queue_url: url }),
    )
    .await;
    let c = db.pool().get().await.unwrap();
    assert!(
        work::claim_queued(&c, "host", i, 5, 1000, work::SlotSharing::default())
            .await
            .unwrap()
            .is_empty(),
        "SQS work is not handed out by polling"
    );
    let outbox: i64 = c
        .query_one(
            "SELECT count(*) FROM runner_outbox WHERE work_id = $1",
            &[&w],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(outbox, 1, "the publication is staged with the work");
    assert!(matches!(
        work::claim_one(&c, "host", i, w, 1000, work::SlotSharing::default())
            .await
            .unwrap(),
        Claim::Claimed(_)
    ));
    assert_eq!(
        work::claim_one(&c, "host", i, w, 1000, work::SlotSharing::default())
            .await
            .unwrap(),
        Claim::AlreadyClaimed(WorkState::Leased)
    );
}

#[tokio::test]
async fn reports_need_the_live_lease_and_a_repeated_result_is_accepted_once() {
    let db = TestDatabase::new().await;
    let i = runner(db.pool(), "host").await;
    let w = enqueue(db.pool(), &new_work("host", QueueRoute::Postgres)).await;
    let mut c = db.pool().get().await.unwrap();
    let lease = work::claim_queued(&c, "host", i, 1, 30_000, work::SlotSharing::default())
        .await
        .unwrap()
        .remove(0);
    let token = lease.lease_token.unwrap();
    let out = |offset: i64, data: &[u8]| Chunk {
        stream: "stdout",
        offset,
        data: data.to_vec(),
    };
    // Wrong token, wrong instance: nothing changes.
    assert_eq!(
        work::append_output(&c, "host", i, w, Uuid::new_v4(), &[out(0, b"x")])
            .await
            .unwrap(),
        Report::LeaseLost(WorkState::Leased)
    );
    assert_eq!(
        work::append_output(&c, "host", Uuid::now_v7(), w, token, &[out(0, b"x")])
            .await
            .unwrap(),
        Report::LeaseLost(WorkState::Leased)
    );
    assert_eq!(
        work::append_output(&c, "host", i, w, token, &[out(0, b"hello")])
            .await
            .unwrap(),
        Report::Accepted(WorkState::Leased)
    );
    // Beyond the 10-byte limit of the item.
    assert_eq!(
        work::append_output(&c, "host", i, w, token, &[out(5, b"123456")])
            .await
            .unwrap(),
        Report::BeyondLimit
    );
    let outcome = exited(0);
    let fin = work::finish(
        &mut c,
        "host",
        i,
        w,
        token,
        WorkState::Succeeded,
        &outcome,
        None,
        &[out(5, b"!")],
        &NoEvidence,
    )
    .await
    .unwrap();
    assert_eq!(fin, Report::Accepted(WorkState::Succeeded));
    let again = work::finish(
        &mut c,
        "host",
        i,
        w,
        token,
        WorkState::Succeeded,
        &outcome,
        None,
        &[out(5, b"!")],
        &NoEvidence,
    )
    .await
    .unwrap();
    assert_eq!(
        again,
        Report::Accepted(WorkState::Succeeded),
        "an identical retry is accepted"
    );
    let other = exited(1);
    assert_eq!(
        work::finish(
            &mut c,
            "host",
            i,
            w,
            token,
            WorkState::Failed,
            &other,
            None,
            &[],
            &NoEvidence
        )
        .await
        .unwrap(),
        Report::LeaseLost(WorkState::Succeeded),
        "a terminal state never changes"
    );
    let (bytes, kept) = work::read_output(&c, w, "stdout", 0, 100).await.unwrap();
    assert_eq!((bytes.as_slice(), kept), (&b"hello!"[..], 6));
    let (bytes, _) = work::read_output(&c, w, "stdout", 2, 3).await.unwrap();
    assert_eq!(bytes, b"llo");
}

#[tokio::test]
async fn expired_leases_read_as_lost_the_reaper_ends_them_and_they_never_requeue() {
    let db = TestDatabase::new().await;
    let i = runner(db.pool(), "host").await;
    let mut c = db.pool().get().await.unwrap();
    let w1 = enqueue(db.pool(), &new_work("host", QueueRoute::Postgres)).await;
    let w2 = enqueue(db.pool(), &new_work("host", QueueRoute::Postgres)).await;
    let leases = work::claim_queued(&c, "host", i, 2, 1, work::SlotSharing::default())
        .await
        .unwrap();
    assert_eq!(leases.len(), 2);
    await_leases_expired(db.pool(), &[w1, w2]).await;
    let hb = work::heartbeat(&c, "host", i, &[(w1, leases[0].lease_token.unwrap())], 1000)
        .await
        .unwrap();
    assert_eq!(
        hb,
        vec![(w1, LeaseView::Lost)],
        "an expired lease is not extended"
    );
    let row = work::get(&c, w1).await.unwrap().unwrap();
    assert_eq!(
        (row.state.as_str(), row.end_reason.map(|r| r.as_str())),
        ("lost", Some("lease_expired"))
    );
    let listed = work::list(
        &c,
        &work::ListFilter {
            owner_authority_fingerprint: wc_store::testing::runner_work::FP.into(),
            ..Default::default()
        },
        10,
    )
    .await
    .unwrap();
    assert_eq!(
        listed.iter().map(|r| r.state.as_str()).collect::<Vec<_>>(),
        ["lost", "lost"],
        "listing reads expired leases as lost too"
    );
    let reaped: BTreeSet<Uuid> = work::reap_expired(&mut c, &NoEvidence)
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(
        reaped,
        BTreeSet::from([w1, w2]),
        "reading an expired lease wrote nothing; the reaper ends both"
    );
    assert!(
        work::claim_queued(&c, "host", i, 5, 1000, work::SlotSharing::default())
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_newer_instance_loses_the_older_ones_work_and_the_older_cannot_come_back() {
    let db = TestDatabase::new().await;
    let old = runner(db.pool(), "host").await;
    let mut c = db.pool().get().await.unwrap();
    let w = enqueue(db.pool(), &new_work("host", QueueRoute::Postgres)).await;
    let lease = work::claim_queued(&c, "host", old, 1, 30_000, work::SlotSharing::default())
        .await
        .unwrap()
        .remove(0);
    let new = register(db.pool(), "host").await;
    assert_ne!(old, new);
    assert_eq!(
        work::get(&c, w).await.unwrap().unwrap().state,
        WorkState::Lost
    );
    let outcome = exited(0);
    assert_eq!(
        work::finish(
            &mut c,
            "host",
            old,
            w,
            lease.lease_token.unwrap(),
            WorkState::Succeeded,
            &outcome,
            None,
            &[],
            &NoEvidence,
        )
        .await
        .unwrap(),
        Report::LeaseLost(WorkState::Lost)
    );
    let again = runners::register(
        db.pool(),
        &Registration {
            client_id: "host",
            instance_id: old,
            agent_version: "test",
            queue: "api_poll",
            max_concurrency: 1,
            projects: &[],
            work_kinds: &[],
        },
        &NoEvidence,
    )
    .await
    .unwrap();
    assert_eq!(again, Registered::Superseded);
}

async fn register_as(db: &TestDatabase, instance: Uuid) -> Registered {
    runners::register(
        db.pool(),
        &Registration {
            client_id: "host",
            instance_id: instance,
            agent_version: "test",
            queue: "api_poll",
            max_concurrency: 1,
            projects: &[],
            work_kinds: &[],
        },
        &NoEvidence,
    )
    .await
    .unwrap()
}

async fn current(db: &TestDatabase) -> Option<Uuid> {
    let c = db.pool().get().await.unwrap();
    runners::get(&c, "host").await.unwrap().unwrap().instance_id
}

#[tokio::test]
async fn instances_are_ordered_by_registration_not_by_their_ids() {
    let db = TestDatabase::new().await;
    let first = runner(db.pool(), "host").await;
    // The largest id there is registers next; a smaller, later one still replaces it.
    assert_eq!(
        register_as(&db, Uuid::max()).await,
        Registered::Current { lost_work: 0 }
    );
    let later = Uuid::now_v7();
    assert!(later < Uuid::max());
    assert_eq!(
        register_as(&db, later).await,
        Registered::Current { lost_work: 0 }
    );
    assert_eq!(current(&db).await, Some(later));
    // The current instance may repeat its registration (a retried call); replaced ones never
    // come back, whatever their ids.
    let c = db.pool().get().await.unwrap();
    let w = enqueue(db.pool(), &new_work("host", QueueRoute::Postgres)).await;
    work::claim_queued(&c, "host", later, 1, 30_000, work::SlotSharing::default())
        .await
        .unwrap();
    assert_eq!(
        register_as(&db, later).await,
        Registered::Current { lost_work: 0 }
    );
    assert_eq!(
        work::get(&c, w).await.unwrap().unwrap().state,
        WorkState::Leased
    );
    for old in [first, Uuid::max()] {
        assert_eq!(register_as(&db, old).await, Registered::Superseded);
    }
    assert_eq!(current(&db).await, Some(later));
}

#[tokio::test]
async fn a_runner_remembers_its_newest_instances_and_rotation_forgets_them() {
    let db = TestDatabase::new().await;
    runner(db.pool(), "host").await;
    let mut ids = Vec::new();
    for _ in 0..runners::KEPT_INSTANCES + 5 {
        let id = register(db.pool(), "host").await;
        ids.push(id);
    }
    let c = db.pool().get().await.unwrap();
    let kept: Vec<Uuid> = c
        .query(
            "SELECT instance_id FROM runner_instances WHERE client_id = 'host' ORDER BY seq",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(kept, ids[ids.len() - runners::KEPT_INSTANCES as usize..]);
    // A remembered, replaced instance is refused.
    assert_eq!(register_as(&db, kept[0]).await, Registered::Superseded);

    // Rotation: no instance is current, none is remembered, and any new one registers.
    runners::create(&c, "host", None, &[7u8; 32], true)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(current(&db).await, None);
    let left: i64 = c
        .query_one(
            "SELECT count(*) FROM runner_instances WHERE client_id = 'host'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0);
    assert_eq!(
        register_as(&db, kept[0]).await,
        Registered::Current { lost_work: 0 }
    );
}

#[tokio::test]
async fn cancel_stops_queued_work_at_once_and_flags_leased_work() {
    let db = TestDatabase::new().await;
    let i = runner(db.pool(), "host").await;
    let mut c = db.pool().get().await.unwrap();
    let queued = enqueue(db.pool(), &new_work("host", QueueRoute::Postgres)).await;
    assert_eq!(
        work::request_cancel(&mut c, queued, &NoEvidence)
            .await
            .unwrap(),
        Some(WorkState::Cancelled)
    );
    let leased = enqueue(db.pool(), &new_work("host", QueueRoute::Postgres)).await;
    let lease = work::claim_queued(&c, "host", i, 1, 30_000, work::SlotSharing::default())
        .await
        .unwrap()
        .remove(0);
    assert_eq!(lease.id, leased);
    assert_eq!(
        work::request_cancel(&mut c, leased, &NoEvidence)
            .await
            .unwrap(),
        Some(WorkState::Leased)
    );
    let hb = work::heartbeat(
        &c,
        "host",
        i,
        &[(leased, lease.lease_token.unwrap())],
        30_000,
    )
    .await
    .unwrap();
    assert_eq!(hb, vec![(leased, LeaseView::CancelRequested)]);
    assert_eq!(
        work::request_cancel(&mut c, Uuid::now_v7(), &NoEvidence)
            .await
            .unwrap(),
        None
    );
}

/// Work of runner `host` queued by `owner` (a fingerprint of 64 hex digits) in `project`.
fn owned(owner: char, project: &str, queue: QueueRoute) -> NewWork {
    NewWork {
        owner_authority_fingerprint: owner.to_string().repeat(64),
        project_id: ProjectId::of_runner("host", project).unwrap(),
        ..new_work("host", queue)
    }
}

fn owner_of(row: &wc_store::work::WorkRow) -> char {
    row.owner_authority_fingerprint.chars().next().unwrap()
}

#[tokio::test]
async fn claims_take_turns_between_owners_and_the_least_leased_owner_goes_first() {
    let db = TestDatabase::new().await;
    let i = runner(db.pool(), "host").await;
    // Owner a queued five items before owner b queued two.
    for _ in 0..5 {
        enqueue(db.pool(), &owned('a', "web", QueueRoute::Postgres)).await;
    }
    for _ in 0..2 {
        enqueue(db.pool(), &owned('b', "web", QueueRoute::Postgres)).await;
    }
    let c = db.pool().get().await.unwrap();
    let mut order = String::new();
    loop {
        let rows = work::claim_queued(&c, "host", i, 1, 30_000, work::SlotSharing::default())
            .await
            .unwrap();
        let Some(row) = rows.first() else { break };
        order.push(owner_of(row));
    }
    assert_eq!(order, "ababaaa", "owners alternate while both have work");

    // One claim of several items interleaves the same way, each owner's oldest first.
    let db = TestDatabase::new().await;
    let i = runner(db.pool(), "host").await;
    let mut a_ids = Vec::new();
    for _ in 0..3 {
        a_ids.push(enqueue(db.pool(), &owned('a', "web", QueueRoute::Postgres)).await);
    }
    let b = enqueue(db.pool(), &owned('b', "web", QueueRoute::Postgres)).await;
    let c = db.pool().get().await.unwrap();
    let rows = work::claim_queued(&c, "host", i, 2, 30_000, work::SlotSharing::default())
        .await
        .unwrap();
    let got: BTreeSet<Uuid> = rows.iter().map(|r| r.id).collect();
    assert_eq!(got, BTreeSet::from([a_ids[0], b]));
}

#[tokio::test]
async fn an_owner_never_fills_the_reserved_slot_and_another_owner_takes_it() {
    let db = TestDatabase::new().await;
    // Four slots, one reserved: an owner holds at most three leases.
    let i = runner(db.pool(), "host").await;
    let sharing = work::SlotSharing { reserved: 1 };
    for _ in 0..10 {
        enqueue(db.pool(), &owned('a', "web", QueueRoute::Postgres)).await;
    }
    let mut c = db.pool().get().await.unwrap();
    let first = work::claim_queued(&c, "host", i, 4, 30_000, sharing)
        .await
        .unwrap();
    assert_eq!(first.len(), 3, "the fourth slot stays free");
    assert!(
        work::claim_queued(&c, "host", i, 4, 30_000, sharing)
            .await
            .unwrap()
            .is_empty(),
        "owner a is at its share"
    );
    // Owner b's work, queued after all of a's, gets the reserved slot.
    let b = enqueue(db.pool(), &owned('b', "other", QueueRoute::Postgres)).await;
    let got = work::claim_queued(&c, "host", i, 4, 30_000, sharing)
        .await
        .unwrap();
    assert_eq!(got.iter().map(|r| r.id).collect::<Vec<_>>(), vec![b]);
    // When one of a's items ends, a's next one can be claimed.
    let done = &first[0];
    let fin = work::finish(
        &mut c,
        "host",
        i,
        done.id,
        done.lease_token.unwrap(),
        WorkState::Succeeded,
        &exited(0),
        None,
        &[],
        &NoEvidence,
    )
    .await
    .unwrap();
    assert_eq!(fin, Report::Accepted(WorkState::Succeeded));
    let next = work::claim_queued(&c, "host", i, 4, 30_000, sharing)
        .await
        .unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(owner_of(&next[0]), 'a');
}

#[tokio::test]
async fn a_delivered_id_whose_owner_holds_its_share_is_deferred_and_stays_queued() {
    let db = TestDatabase::new().await;
    let i = runner(db.pool(), "host").await;
    let sharing = work::SlotSharing { reserved: 1 };
    let sqs = || QueueRoute::Sqs {
        queue_url: "http://sqs.local/q".into(),
    };
    let mut a_ids = Vec::new();
    for _ in 0..4 {
        a_ids.push(enqueue(db.pool(), &owned('a', "web", sqs())).await);
    }
    let b = enqueue(db.pool(), &owned('b', "web", sqs())).await;
    let c = db.pool().get().await.unwrap();
    for id in &a_ids[..3] {
        assert!(matches!(
            work::claim_one(&c, "host", i, *id, 30_000, sharing)
                .await
                .unwrap(),
            Claim::Claimed(_)
        ));
    }
    assert_eq!(
        work::claim_one(&c, "host", i, a_ids[3], 30_000, sharing)
            .await
            .unwrap(),
        Claim::Deferred
    );
    assert!(matches!(
        work::claim_one(&c, "host", i, b, 30_000, sharing)
            .await
            .unwrap(),
        Claim::Claimed(_)
    ));
    let state: String = c
        .query_one("SELECT state FROM runner_work WHERE id = $1", &[&a_ids[3]])
        .await
        .unwrap()
        .get(0);
    assert_eq!(state, "queued");
}

#[tokio::test]
async fn an_enqueue_over_an_open_work_limit_is_refused_naming_the_limit_and_writes_nothing() {
    let db = TestDatabase::new().await;
    let i = runner(db.pool(), "host").await;
    let limits = work::OpenLimits {
        shells_per_owner: i64::MAX,
        per_owner: 2,
        per_project: 3,
    };
    let try_enqueue = |w: NewWork| {
        let pool = db.pool().clone();
        async move { work::applied(work::enqueue(&pool, &w, None, limits).await.unwrap()).unwrap() }
    };
    for _ in 0..2 {
        assert!(matches!(
            try_enqueue(owned('a', "web", QueueRoute::Postgres)).await,
            Enqueued::Queued(..)
        ));
    }
    assert!(matches!(
        try_enqueue(owned('a', "web", QueueRoute::Postgres)).await,
        Enqueued::OverLimit(work::OverLimit::Owner(2))
    ));
    // Another owner fits once more in the project, then the project is full.
    assert!(matches!(
        try_enqueue(owned('b', "web", QueueRoute::Postgres)).await,
        Enqueued::Queued(..)
    ));
    assert!(matches!(
        try_enqueue(owned('b', "web", QueueRoute::Postgres)).await,
        Enqueued::OverLimit(work::OverLimit::Project(3))
    ));
    // SQS work is limited the same way, and a refusal stages no outbox row.
    assert!(matches!(
        try_enqueue(owned(
            'a',
            "other",
            QueueRoute::Sqs {
                queue_url: "http://sqs.local/q".into()
            }
        ))
        .await,
        Enqueued::OverLimit(work::OverLimit::Owner(2))
    ));
    let mut c = db.pool().get().await.unwrap();
    let counts: (i64, i64) = {
        let r = c
            .query_one(
                "SELECT (SELECT count(*) FROM runner_work), (SELECT count(*) FROM runner_outbox)",
                &[],
            )
            .await
            .unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!(counts, (3, 0));
    // Ended work no longer counts: a claimed and finished item makes room for its owner.
    let lease = work::claim_queued(&c, "host", i, 1, 30_000, work::SlotSharing::default())
        .await
        .unwrap()
        .remove(0);
    assert_eq!(owner_of(&lease), 'a');
    work::finish(
        &mut c,
        "host",
        i,
        lease.id,
        lease.lease_token.unwrap(),
        WorkState::Succeeded,
        &exited(0),
        None,
        &[],
        &NoEvidence,
    )
    .await
    .unwrap();
    assert!(matches!(
        try_enqueue(owned('a', "other", QueueRoute::Postgres)).await,
        Enqueued::Queued(..)
    ));
}

#[tokio::test]
async fn runners_count_work_in_flight_for_one_owner_or_for_all() {
    let db = TestDatabase::new().await;
    let i = runner(db.pool(), "host").await;
    for owner in ['a', 'a', 'b'] {
        enqueue(db.pool(), &owned(owner, "web", QueueRoute::Postgres)).await;
    }
    let c = db.pool().get().await.unwrap();
    assert_eq!(
        work::claim_queued(&c, "host", i, 3, 30_000, work::SlotSharing::default())
            .await
            .unwrap()
            .len(),
        3
    );
    let in_flight = |owner: Option<String>| {
        let pool = db.pool().clone();
        async move {
            let c = pool.get().await.unwrap();
            runners::list(&c, None, owner.as_deref(), 10).await.unwrap()[0].work_in_flight
        }
    };
    assert_eq!(in_flight(None).await, 3);
    assert_eq!(in_flight(Some("a".repeat(64))).await, 2);
    assert_eq!(in_flight(Some("b".repeat(64))).await, 1);
    assert_eq!(in_flight(Some("c".repeat(64))).await, 0);
}

/// The `execution_finished` events of session `id`, oldest first: `(seq, payload)`.
async fn finished_events(pool: &Pool, id: &SessionId) -> Vec<(i64, serde_json::Value)> {
    let c = pool.get().await.unwrap();
    let mut events: Vec<(i64, serde_json::Value)> = wc_store::sessions::recent_events(&c, id, 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == wc_domain::EventKind::ExecutionFinished)
        .map(|e| (e.seq, e.payload))
        .collect();
    events.reverse();
    events
}

#[tokio::test]
async fn every_transition_that_ends_work_appends_its_evidence_once_in_the_same_transaction() {
    let db = TestDatabase::new().await;
    let session = db.new_session(wc_store::testing::task_instruction()).await;
    let i = runner(db.pool(), "host").await;
    let mut c = db.pool().get().await.unwrap();
    let in_session = || NewWork {
        session_id: Some(session.clone()),
        ..new_work("host", QueueRoute::Postgres)
    };
    let marker = &wc_store::testing::runner_work::MarkerEvidence;

    // The runner's result, reported twice: one event.
    let done = enqueue(db.pool(), &in_session()).await;
    let lease = work::claim_queued(&c, "host", i, 1, 30_000, work::SlotSharing::default())
        .await
        .unwrap()
        .remove(0);
    let outcome = exited(0);
    for _ in 0..2 {
        let report = work::finish(
            &mut c,
            "host",
            i,
            done,
            lease.lease_token.unwrap(),
            WorkState::Succeeded,
            &outcome,
            None,
            &[],
            marker,
        )
        .await
        .unwrap();
        assert_eq!(report, Report::Accepted(WorkState::Succeeded));
    }
    // A stop of queued work.
    let stopped = enqueue(db.pool(), &in_session()).await;
    assert_eq!(
        work::request_cancel(&mut c, stopped, marker).await.unwrap(),
        Some(WorkState::Cancelled)
    );
    // The reaper's lost.
    let expired = enqueue(db.pool(), &in_session()).await;
    let lease = work::claim_queued(&c, "host", i, 1, 1, work::SlotSharing::default())
        .await
        .unwrap()
        .remove(0);
    assert_eq!(lease.id, expired);
    await_leases_expired(db.pool(), &[expired]).await;
    assert_eq!(
        work::reap_expired(&mut c, marker).await.unwrap(),
        vec![expired]
    );
    // A replaced instance's lost.
    let replaced = enqueue(db.pool(), &in_session()).await;
    work::claim_queued(&c, "host", i, 1, 30_000, work::SlotSharing::default())
        .await
        .unwrap();
    let got = runners::register(
        db.pool(),
        &Registration {
            client_id: "host",
            instance_id: Uuid::now_v7(),
            agent_version: "test",
            queue: "api_poll",
            max_concurrency: 4,
            projects: &[],
            work_kinds: &[],
        },
        marker,
    )
    .await
    .unwrap();
    assert_eq!(got, Registered::Current { lost_work: 1 });

    let events = finished_events(db.pool(), &session).await;
    let got: Vec<(String, String)> = events
        .iter()
        .map(|(_, p)| {
            (
                p["job_id"].as_str().unwrap().to_owned(),
                p["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = [
        (done, "succeeded"),
        (stopped, "cancelled"),
        (expired, "lost"),
        (replaced, "lost"),
    ]
    .iter()
    .map(|(id, s)| (id.to_string(), (*s).to_owned()))
    .collect();
    assert_eq!(got, want);
    // The ledger stays gap-free: the session's first event is seq 1, these follow it.
    let seqs: Vec<i64> = events.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(seqs, vec![2, 3, 4, 5]);
}

#[tokio::test]
async fn work_of_a_closed_session_still_ends_and_its_ledger_takes_nothing() {
    let db = TestDatabase::new().await;
    let session = db.new_session(wc_store::testing::task_instruction()).await;
    let i = runner(db.pool(), "host").await;
    let mut c = db.pool().get().await.unwrap();
    let w = enqueue(
        db.pool(),
        &NewWork {
            session_id: Some(session.clone()),
            ..new_work("host", QueueRoute::Postgres)
        },
    )
    .await;
    let lease = work::claim_queued(&c, "host", i, 1, 30_000, work::SlotSharing::default())
        .await
        .unwrap()
        .remove(0);
    c.execute(
        "UPDATE workflow_sessions SET lifecycle = 'closed', closed_at = now() WHERE id = $1",
        &[&session],
    )
    .await
    .unwrap();
    let report = work::finish(
        &mut c,
        "host",
        i,
        w,
        lease.lease_token.unwrap(),
        WorkState::Failed,
        &exited(1),
        None,
        &[],
        &wc_store::testing::runner_work::MarkerEvidence,
    )
    .await
    .unwrap();
    assert_eq!(report, Report::Accepted(WorkState::Failed));
    assert_eq!(
        work::get(&c, w).await.unwrap().unwrap().state,
        WorkState::Failed
    );
    assert!(finished_events(db.pool(), &session).await.is_empty());
    let s = wc_store::sessions::get(&c, &session)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.events_observed, 1, "the closed ledger is unchanged");
}

/// Queues work with a task waiting for it; returns the work and task ids.
async fn enqueue_awaited(pool: &Pool) -> (Uuid, wc_domain::TaskId) {
    let w = new_work("host", QueueRoute::Postgres);
    let task = wc_store::tasks::NewTask {
        id: wc_domain::TaskId::generate(),
        owner_authority_fingerprint: wc_store::testing::runner_work::FP.into(),
        tool: "run_job".into(),
        work_id: None,
        session_id: None,
        recording: serde_json::Value::Null,
        plan: serde_json::Value::Null,
        input_requests: None,
        status_message: None,
        ttl_ms: 60_000,
        poll_interval_ms: 100,
    };
    let queued = work::enqueue_with(pool, &w, None, Some(&task), work::OpenLimits::NONE)
        .await
        .unwrap();
    assert!(matches!(work::applied(queued), Some(Enqueued::Queued(..))));
    (w.id, task.id)
}

async fn task(pool: &Pool, id: &wc_domain::TaskId) -> wc_store::tasks::TaskRow {
    let c = pool.get().await.unwrap();
    wc_store::tasks::get(&c, id, wc_store::testing::runner_work::FP)
        .await
        .unwrap()
        .expect("the task")
}

#[tokio::test]
async fn every_transition_that_ends_work_ends_the_task_waiting_for_it_in_the_same_transaction() {
    use wc_domain::TaskStatus;
    let db = TestDatabase::new().await;
    let i = runner(db.pool(), "host").await;
    let mut c = db.pool().get().await.unwrap();

    // A report: the task ends with what the ending decided from the row, the answer and the
    // head of the output stored by that same report.
    let (reported, t1) = enqueue_awaited(db.pool()).await;
    let lease = work::claim_queued(&c, "host", i, 1, 30_000, work::SlotSharing::default())
        .await
        .unwrap()
        .remove(0);
    assert_eq!(task(db.pool(), &t1).await.status, TaskStatus::Working);
    let chunk = Chunk {
        stream: "stdout",
        offset: 0,
        data: b"hello".to_vec(),
    };
    let answer = serde_json::json!({"op": "process"});
    for _ in 0..2 {
        let report = work::finish(
            &mut c,
            "host",
            i,
            reported,
            lease.lease_token.unwrap(),
            WorkState::Succeeded,
            &exited(0),
            Some(&answer),
            std::slice::from_ref(&chunk),
            &NoEvidence,
        )
        .await
        .unwrap();
        assert_eq!(report, Report::Accepted(WorkState::Succeeded));
    }
    let ended = task(db.pool(), &t1).await;
    assert_eq!(ended.status, TaskStatus::Completed);
    assert_eq!(
        ended.result,
        Some(serde_json::json!({"state": "succeeded", "stdout": "hell", "answered": true})),
        "the head is read in the report's transaction, {} bytes",
        wc_store::testing::runner_work::HEAD_BYTES
    );
    let first_end = ended.updated_at;

    // A stop of queued work.
    let (stopped, t2) = enqueue_awaited(db.pool()).await;
    work::request_cancel(&mut c, stopped, &NoEvidence)
        .await
        .unwrap();
    let ended = task(db.pool(), &t2).await;
    assert_eq!(ended.status, TaskStatus::Completed);
    assert_eq!(ended.result.unwrap()["state"], "cancelled");

    // The reaper.
    let (reaped, t3) = enqueue_awaited(db.pool()).await;
    work::claim_queued(&c, "host", i, 1, 1, work::SlotSharing::default())
        .await
        .unwrap();
    await_leases_expired(db.pool(), &[reaped]).await;
    assert_eq!(
        task(db.pool(), &t3).await.status,
        TaskStatus::Working,
        "reading an expired lease ends nothing"
    );
    work::reap_expired(&mut c, &NoEvidence).await.unwrap();
    let ended = task(db.pool(), &t3).await;
    assert_eq!(ended.status, TaskStatus::Completed);
    assert_eq!(ended.result.unwrap()["state"], "lost");

    // An ended task is never ended again.
    assert_eq!(task(db.pool(), &t1).await.updated_at, first_end);
}
