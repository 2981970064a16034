//! Two server instances over one database: work sent to one completes through a runner connected to the other.

use super::*;

#[tokio::test]
async fn work_sent_to_one_instance_completes_through_a_runner_connected_to_another() {
    let env = start().await;
    let (a, key) = (&env.st, &env.key);
    // The second instance learns of the result by the database's notifications.
    let b = env.second().with_wakeups(Wakeups::listening(
        wc_store::connect::Connector::new(&env.db.config()).unwrap(),
    ));
    let r = call(
        &b,
        key,
        "run_process",
        json!({ "project": P, "argv": ["sh", "-c", "echo from $(pwd)"] }),
    )
    .await;
    let out = output(&r);
    assert_eq!(
        verdict(out),
        ("succeeded", Some(0), Some(true), false),
        "{out}"
    );
    assert_eq!(out["stdout"], format!("from {}\n", env.root().display()));
    // Either instance reads the same job.
    let job_id = out["job_id"].as_str().unwrap();
    let via_a = output(&call(a, key, "job_status", json!({ "job_id": job_id })).await).clone();
    assert_eq!(via_a["execution_state"], "succeeded");
}
