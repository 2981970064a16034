//! The runner API's refusals over a network connection.

use super::*;

#[tokio::test]
async fn the_runner_api_refuses_bad_requests_stale_leases_old_instances_and_revoked_tokens() {
    let app = TestApp::with_projects(&[P]).await;
    let (db, st, key) = (&app.db, &app.st, &app.key);
    let api = RunnerApi::new(&app.serve().await, &app.runner_token("local").await);
    let first = Uuid::now_v7();
    let r = api.register(first, &["alpha"]).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));

    // Malformed JSON.
    let r = api
        .post_raw("poll", b"{\"instance_id\": ".to_vec(), Some(&api.token))
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["kind"], "invalid_request", "{}", r.json());

    // Work to hold a lease on.
    let job = call(
        st,
        key,
        "run_job",
        json!({ "project": P, "argv": ["true"] }),
    )
    .await;
    let job_id = output(&job)["job_id"].as_str().unwrap().to_owned();
    let r = api.poll(first).await;
    assert_eq!(r.status, 200);
    let lease = r.json()["leases"][0].clone();
    assert_eq!(lease["work"]["work_id"], job_id.as_str(), "{lease}");
    let held = HeldLease {
        work_id: job_id.parse().unwrap(),
        lease_token: serde_json::from_value(lease["lease_token"].clone()).unwrap(),
    };
    let chunk = |offset: u64, data: &[u8]| OutputChunk {
        stream: Stream::Stdout,
        offset,
        data: STANDARD.encode(data),
    };
    let output_req = |chunks: Vec<OutputChunk>| {
        serde_json::to_value(OutputRequest {
            instance_id: first,
            lease: held,
            chunks,
        })
        .unwrap()
    };
    let kept = || async {
        let r = call(st, key, "job_log", json!({ "job_id": job_id })).await;
        output(&r)["kept_bytes"].as_u64().unwrap()
    };

    // 17 chunks, and one chunk of 64 KiB + 1, are refused whole.
    let r = api
        .post(
            "output",
            &output_req((0..17).map(|i| chunk(i, b"a")).collect()),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["kind"], "invalid_request", "{}", r.json());
    let r = api
        .post("output", &output_req(vec![chunk(0, &vec![b'b'; 65_537])]))
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["kind"], "invalid_request", "{}", r.json());
    assert_eq!(kept().await, 0, "a refused request stored output");
    // At the bounds both are accepted.
    let r = api
        .post(
            "output",
            &output_req((0..16).map(|i| chunk(i, b"a")).collect()),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json(), json!({ "status": "accepted", "state": "leased" }));
    assert_eq!(kept().await, 16);

    // A result under a wrong lease token changes nothing.
    let outcome = WorkOutcome {
        exit_code: Some(0),
        duration_ms: 5,
        stdout_bytes: 16,
        ..WorkOutcome::ended(Termination::Exited)
    };
    let row_before = {
        let client = db.pool().get().await.unwrap();
        wc_store::work::get(&client, held.work_id)
            .await
            .unwrap()
            .unwrap()
    };
    let wrong = ResultRequest {
        instance_id: first,
        lease: HeldLease {
            lease_token: Uuid::new_v4(),
            ..held
        },
        outcome: outcome.clone(),
        chunks: vec![chunk(16, b"zzz")],
    };
    let r = api
        .post("result", &serde_json::to_value(&wrong).unwrap())
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json(),
        json!({ "status": "lease_lost", "state": "leased" })
    );
    let row_after = {
        let client = db.pool().get().await.unwrap();
        wc_store::work::get(&client, held.work_id)
            .await
            .unwrap()
            .unwrap()
    };
    assert_eq!(row_after, row_before, "a refused result changed the work");
    assert_eq!(kept().await, 16);

    // A newer instance replaces the first: its poll is refused, and its lease is gone.
    let second = Uuid::now_v7();
    let r = api.register(second, &["alpha"]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["lost_work"], 1, "{}", r.json());
    let r = api.poll(first).await;
    assert_eq!(r.status, 409);
    assert_eq!(r.json()["error"]["kind"], "instance_replaced");
    let right = ResultRequest {
        lease: held,
        ..wrong
    };
    let r = api
        .post("result", &serde_json::to_value(&right).unwrap())
        .await;
    assert_eq!(r.json(), json!({ "status": "lease_lost", "state": "lost" }));
    let r = api.poll(second).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!({ "leases": [] }));

    // A revoked token is refused outright.
    {
        let client = db.pool().get().await.unwrap();
        assert!(wc_store::runners::revoke(&client, "local").await.unwrap());
    }
    let r = api.poll(second).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"]["kind"], "unauthorized");
    assert!(r.header("www-authenticate").is_some());
    // And a tool credential is no runner token.
    let r = api
        .post_raw(
            "poll",
            serde_json::to_vec(&poll_request(second)).unwrap(),
            Some(key),
        )
        .await;
    assert_eq!(r.status, 401);
}
