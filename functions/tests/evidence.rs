//! Execution evidence lands where the fact lands: the runner's result, the reaper's `lost` and
//! a stop of queued work append the session's `execution_finished` in the transaction that ends
//! the work, so `session_summary` shows it without anyone reading the job, exactly once; the
//! read tools (`job_status`, `job_log`, `list_jobs`) write nothing. Real Postgres, the real
//! router and, for results, the real runner agent.

mod common;

use common::*;
use serde_json::{Value, json};
use uuid::Uuid;
use wc_functions::AppState;
use wc_store::runners::{self, Registration};
use wc_store::work;

/// The project every test runs in.
const P: &str = "agent:local:alpha";

/// `POST /api/actions/{tool}` with `key`; the body.
async fn call(st: &AppState, key: &str, tool: &str, args: Value) -> Value {
    action(st, key, tool, args).await.body
}

/// A new session on P; its id.
async fn session(st: &AppState, key: &str) -> String {
    let r = call(
        st,
        key,
        "work_on_project",
        json!({ "project": P, "instruction": "run things", "mode": "normal" }),
    )
    .await;
    output(&r)["session_id"].as_str().unwrap().to_owned()
}

/// The `execution_finished` events of `job_id` in session `s`, as `session_summary` lists them.
async fn finished_in_summary(st: &AppState, key: &str, s: &str, job_id: &str) -> Vec<Value> {
    let r = call(
        st,
        key,
        "session_summary",
        json!({ "session_id": s, "limit": 200 }),
    )
    .await;
    output(&r)["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "execution_finished" && e["payload"]["job_id"] == job_id)
        .cloned()
        .collect()
}

/// Polls `session_summary` (and runs `between`, if any, before each look) until the
/// `execution_finished` of `job_id` is listed.
async fn await_evidence(
    st: &AppState,
    key: &str,
    s: &str,
    job_id: &str,
    between: impl AsyncFn(),
) -> Vec<Value> {
    eventually(
        &format!("an execution_finished for {job_id} in session {s}"),
        async || {
            between().await;
            Some(finished_in_summary(st, key, s, job_id).await).filter(|found| !found.is_empty())
        },
    )
    .await
}

#[tokio::test]
async fn a_job_whose_result_lands_unread_has_its_evidence_once_and_reads_write_nothing() {
    let env = RunnerApp::start("alpha").await;
    let (db, st, key) = (&env.db, &env.st, &env.key);
    let s = session(st, key).await;

    let r = call(
        st,
        key,
        "run_job",
        json!({ "session_id": s, "project": P, "command": "printf hello; exit 3" }),
    )
    .await;
    let job_id = output(&r)["job_id"].as_str().unwrap().to_owned();

    // Nobody reads the job: the runner's result alone puts the evidence in the ledger.
    let found = await_evidence(st, key, &s, &job_id, async || {}).await;
    assert_eq!(found.len(), 1, "{found:#?}");
    let payload = &found[0]["payload"];
    assert_eq!(payload["execution_state"], "failed", "{payload}");
    assert_eq!(payload["exit_code"], 3);
    assert_eq!(payload["stdout_bytes"], 5);
    assert_eq!(payload["tool"], "run_job");
    assert_eq!(payload["mode"], "job");
    assert_eq!(found[0]["tool_name"], "run_job");
    // It is evidence of the call that queued the job.
    let queued: Vec<Value> = {
        let r = call(
            st,
            key,
            "session_summary",
            json!({ "session_id": s, "limit": 200 }),
        )
        .await;
        output(&r)["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "execution_queued" && e["payload"]["job_id"] == job_id)
            .cloned()
            .collect()
    };
    assert_eq!(queued.len(), 1);
    assert_eq!(found[0]["invocation_id"], queued[0]["invocation_id"]);

    // The read tools, many times over, write nothing to the ledger.
    let before = session_row(db, &s).await.events_observed;
    for _ in 0..5 {
        let r = call(st, key, "job_status", json!({ "job_id": job_id })).await;
        assert_eq!(r["error"]["kind"], "exit_nonzero", "{r}");
        output(&call(st, key, "job_log", json!({ "job_id": job_id })).await);
        output(&call(st, key, "list_jobs", json!({ "project": P })).await);
    }
    assert_eq!(session_row(db, &s).await.events_observed, before);
    assert_eq!(finished_in_summary(st, key, &s, &job_id).await.len(), 1);
}

#[tokio::test]
async fn a_stopped_queued_job_and_a_reaped_job_have_their_evidence_without_a_reader() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P]).await;
    // A runner that registers and takes work, then never reports: it holds leases as the
    // store grants them, as a runner that dies after claiming does.
    let instance = Uuid::now_v7();
    {
        let client = db.pool().get().await.unwrap();
        runners::create(&client, "local", None, &[7u8; 32], true)
            .await
            .unwrap()
            .unwrap();
    }
    runners::register(
        db.pool(),
        &Registration {
            client_id: "local",
            instance_id: instance,
            agent_version: "test",
            queue: "api_poll",
            max_concurrency: 4,
            projects: &["alpha".to_owned()],
            work_kinds: &[
                "process".to_owned(),
                "shell".to_owned(),
                "script".to_owned(),
            ],
        },
        &wc_store::testing::runner_work::NoEvidence,
    )
    .await
    .unwrap();
    let s = session(&st, &key).await;
    let run_job = async |command: &str| {
        let r = call(
            &st,
            &key,
            "run_job",
            json!({ "session_id": s, "project": P, "command": command }),
        )
        .await;
        output(&r)["job_id"].as_str().unwrap().to_owned()
    };

    // Queued work stopped before any runner took it: the stop writes the evidence.
    let stopped = run_job("echo never").await;
    let r = call(&st, &key, "stop_job", json!({ "job_id": stopped })).await;
    assert_eq!(output(&r)["job"]["execution_state"], "cancelled", "{r}");
    let found = finished_in_summary(&st, &key, &s, &stopped).await;
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0]["payload"]["execution_state"], "cancelled");

    // Claimed under a lease that runs out; only the reaper runs, nobody reads the job.
    let reaped = run_job("sleep 30").await;
    let c = db.pool().get().await.unwrap();
    let claimed = work::claim_queued(&c, "local", instance, 1, 1, work::SlotSharing::default())
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].id.to_string(), reaped);
    let found = await_evidence(&st, &key, &s, &reaped, async || {
        wc_functions::maintenance::run_once(db.pool(), None, &*st.deps.work_ends, false)
            .await
            .unwrap();
    })
    .await;
    assert_eq!(found.len(), 1, "{found:#?}");
    let payload = &found[0]["payload"];
    assert_eq!(payload["execution_state"], "lost", "{payload}");
    assert_eq!(payload["exit_code"], Value::Null);
    assert_eq!(
        (
            payload["expectation"]["matched"].as_bool(),
            payload["expectation"]["actionable"].as_bool()
        ),
        (Some(false), Some(true))
    );

    // Reading the lost job, again and again, adds nothing.
    let before = session_row(&db, &s).await.events_observed;
    for _ in 0..3 {
        let r = call(&st, &key, "job_status", json!({ "job_id": reaped })).await;
        assert_eq!(r["error"]["kind"], "lost", "{r}");
    }
    assert_eq!(session_row(&db, &s).await.events_observed, before);
    assert_eq!(finished_in_summary(&st, &key, &s, &reaped).await.len(), 1);
}
