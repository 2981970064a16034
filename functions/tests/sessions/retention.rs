//! Ledger retention: the newest events are kept and every event is counted.

use super::*;

#[tokio::test]
async fn the_ledger_keeps_the_newest_two_thousand_events_and_counts_the_retained_ones() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let id = start(&st, &key, P, "a very long task").await;
    let mut left = 2099usize;
    let mut n = 0;
    while left > 0 {
        let batch = left.min(100);
        let events: Vec<NewEvent> = (0..batch)
            .map(|i| NewEvent {
                // Filler: a kind no call in this test writes.
                kind: EventKind::SessionContextUpdated,
                call_id: Uuid::now_v7(),
                invocation_id: Uuid::now_v7(),
                role: EventRole::Business,
                tool_name: None,
                payload: json!({ "n": n + i }),
            })
            .collect();
        let outcome = sessions::mutate(db.pool(), &SessionId::parse(&id).unwrap(), move |_| {
            Decision::Write(SessionChange::default(), events.clone(), ())
        })
        .await
        .unwrap();
        assert!(matches!(outcome, wc_store::ChangeOutcome::Applied { .. }));
        left -= batch;
        n += batch;
    }
    let stored = ledger(&db, &id).await;
    assert_eq!(stored.len(), 2000);
    assert_eq!((stored[0].seq, stored[1999].seq), (101, 2100));

    let r = call(&st, &key, "session_summary", json!({ "session_id": id })).await;
    let out = output(&r);
    assert_eq!(out["events_observed"], 2100, "{}", out["events_observed"]);
    assert_eq!(out["retention_truncated"], true);
    assert_eq!(out["retained_from_seq"], 101);
    // Counts by kind describe the retained ledger (the opening instruction and the oldest
    // fillers are gone), while events_observed stays cumulative.
    assert_eq!(
        out["counts"],
        json!({ "session_context_updated": 2000 }),
        "{}",
        out["counts"]
    );
    assert_eq!(out["counts"], retained_counts(&db, &id).await);
    assert_eq!(out["returned"], 50);
    let seqs: Vec<i64> = out["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(
        seqs,
        (2051..=2100).rev().collect::<Vec<_>>(),
        "newest first"
    );

    // An unrecorded summary appended nothing; one recorded in the session itself appends its
    // recorder pair after the read (2101, 2102), pushing two fillers out of the window.
    let r = rec(
        &st,
        &key,
        "session_summary",
        json!({ "session_id": id, "limit": 200 }),
        &id,
    )
    .await;
    let out = output(&r);
    assert_eq!(out["events_observed"], 2100);
    assert_eq!(out["returned"], 200);
    let seqs: Vec<i64> = out["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, (1901..=2100).rev().collect::<Vec<_>>());
    let out =
        output(&call(&st, &key, "session_summary", json!({ "session_id": id })).await).clone();
    assert_eq!(out["events_observed"], 2102);
    assert_eq!(out["retained_from_seq"], 103);
    assert_eq!(
        out["counts"],
        json!({ "session_context_updated": 1998, "tool_call_started": 1, "tool_call_finished": 1 })
    );
    assert_eq!(out["counts"], retained_counts(&db, &id).await);
    assert_eq!(ledger(&db, &id).await.len(), 2000);

    // Out-of-range limits are refused by the schema, before anything is recorded.
    let observed = last_seq(&db, &id).await;
    assert_eq!(observed, 2102);
    for limit in [201, 0] {
        for via in SURFACES {
            let r = call_via(
                &st,
                via,
                &key,
                "session_summary",
                json!({ "session_id": id, "limit": limit }),
                None,
            )
            .await;
            assert_eq!(kind(&r), "invalid_arguments", "{via:?} limit {limit}: {r}");
            assert_eq!(r["error"]["pointer"], "/limit", "{r}");
        }
    }
    assert_eq!(last_seq(&db, &id).await, observed);

    // The handoff still has the root instruction (kept on the session row), but the attempt's
    // opening instruction was evicted, and the brief says so.
    let r = call(
        &st,
        &key,
        "session_handoff_summary",
        json!({ "session_id": id }),
    )
    .await;
    let brief = &output(&r)["handoff_brief"];
    assert_eq!(brief["instruction"]["root"]["text"], "a very long task");
    assert_eq!(brief["instruction"]["latest"], Value::Null);
    let codes = brief["basis"]["reason_codes"].as_array().unwrap();
    assert!(
        codes.contains(&json!("attempt_boundary_evicted")),
        "{brief}"
    );
    assert_eq!(brief["basis"]["complete"], false);
}
