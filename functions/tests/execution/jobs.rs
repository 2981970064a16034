//! Background jobs: followed, read, stopped and listed.

use super::*;

/// job_log of `job_id` with `args`; its output.
async fn job_log(env: &RunnerApp, job_id: &str, mut args: Value) -> Value {
    args["job_id"] = json!(job_id);
    output(&env.call("job_log", args).await).clone()
}

#[tokio::test]
async fn jobs_run_in_the_background_and_can_be_followed_read_stopped_and_listed() {
    let env = start().await;
    let r = env
        .call(
            "run_job",
            json!({ "project": P, "command": "for i in 1 2 3; do echo line $i; sleep 0.3; done" }),
        )
        .await;
    let job = output(&r).clone();
    let lines = job["job_id"].as_str().unwrap().to_owned();
    // run_job answered without waiting for the job: what it returned is not terminal.
    assert!(
        matches!(job["execution_state"].as_str(), Some("queued" | "running")),
        "{job}"
    );
    assert_eq!(job["expectation"]["matched"], Value::Null);
    assert!(
        job.get("stdout").is_none(),
        "a status view carries no output: {job}"
    );
    let status = output(&env.call("job_status", json!({ "job_id": lines })).await).clone();
    assert!(
        matches!(
            status["execution_state"].as_str(),
            Some("queued" | "running")
        ),
        "{status}"
    );
    let done = await_job(&env.st, &env.key, &lines, terminal).await;
    assert_eq!(
        verdict(&done),
        ("succeeded", Some(0), Some(true), false),
        "{done}"
    );
    assert_eq!(done["stdout_bytes"], 21);

    // Ranges of the kept log.
    let log = |args: Value| job_log(&env, &lines, args);
    let first = log(json!({ "offset": 0, "limit": 7 })).await;
    assert_eq!(
        (
            &first["data"],
            &first["next_offset"],
            &first["kept_bytes"],
            &first["complete"]
        ),
        (&json!("line 1\n"), &json!(7), &json!(21), &json!(false)),
        "{first}"
    );
    let middle = log(json!({ "offset": 7, "limit": 7 })).await;
    assert_eq!(middle["data"], "line 2\n", "{middle}");
    assert_eq!(middle["complete"], false);
    let rest = log(json!({ "offset": 14 })).await;
    assert_eq!(
        (&rest["data"], &rest["next_offset"], &rest["complete"]),
        (&json!("line 3\n"), &json!(21), &json!(true)),
        "{rest}"
    );
    let tail = log(json!({ "tail": true, "limit": 10 })).await;
    assert_eq!(
        (&tail["data"], &tail["offset"], &tail["complete"]),
        (&json!(" 2\nline 3\n"), &json!(11), &json!(true)),
        "{tail}"
    );
    let past = log(json!({ "offset": 100 })).await;
    assert_eq!(
        (&past["data"], &past["complete"]),
        (&json!(""), &json!(true))
    );
    let stderr = log(json!({ "stream": "stderr" })).await;
    assert_eq!(
        (&stderr["data"], &stderr["kept_bytes"], &stderr["complete"]),
        (&json!(""), &json!(0), &json!(true))
    );
    assert_eq!(first["execution_state"], "succeeded");

    // A sync run in between, which jobs_only leaves out.
    let sync = env
        .call("run_process", json!({ "project": P, "argv": ["true"] }))
        .await;
    let sync = output(&sync)["job_id"].as_str().unwrap().to_owned();

    // Stopping running work interrupts its process group.
    let r = env
        .call(
            "run_job",
            json!({ "project": P, "command": "echo $$ > sleeper.pid; exec sleep 600" }),
        )
        .await;
    let sleeper = output(&r)["job_id"].as_str().unwrap().to_owned();
    await_job(&env.st, &env.key, &sleeper, |o| {
        o["execution_state"] == "running"
    })
    .await;
    let pid = read_pid(&env.root().join("sleeper.pid")).await;
    assert!(pid.on_host().is_some(), "the sleeper runs: {pid:?}");
    let r = env.call("stop_job", json!({ "job_id": sleeper })).await;
    let stop = output(&r);
    assert_eq!(stop["stop_requested"], true, "{stop}");
    assert_eq!(stop["job"]["job_id"], sleeper.as_str());
    let ended = await_job(&env.st, &env.key, &sleeper, terminal).await;
    assert_eq!(ended["execution_state"], "cancelled", "{ended}");
    let r = env.call("job_status", json!({ "job_id": sleeper })).await;
    failed(&r, "cancelled");
    assert_eq!(
        (
            ended["expectation"]["matched"].as_bool(),
            ended["expectation"]["actionable"].as_bool()
        ),
        (Some(false), Some(true))
    );
    assert_eq!(work_state(&env.db, &sleeper).await, "cancelled");
    assert_process_ends(pid).await;

    // Stopping an ended job changes nothing.
    let r = env.call("stop_job", json!({ "job_id": lines })).await;
    let stop = output(&r);
    assert_eq!(stop["stop_requested"], false, "{stop}");
    assert_eq!(stop["job"]["execution_state"], "succeeded");
    assert_eq!(work_state(&env.db, &lines).await, "succeeded");

    // Newest first; jobs_only leaves the sync run out.
    let ids = |v: &Value| -> Vec<String> {
        output(v)["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["job_id"].as_str().unwrap().to_owned())
            .collect()
    };
    let all = env.call("list_jobs", json!({})).await;
    assert_eq!(ids(&all), [sleeper.as_str(), sync.as_str(), lines.as_str()]);
    let jobs = env.call("list_jobs", json!({ "jobs_only": true })).await;
    assert_eq!(ids(&jobs), [sleeper.as_str(), lines.as_str()]);
    assert_eq!(output(&jobs)["returned"], 2);
    assert_eq!(output(&jobs)["truncated"], false);
    let one = env
        .call("list_jobs", json!({ "jobs_only": true, "limit": 1 }))
        .await;
    assert_eq!(ids(&one), [sleeper.as_str()]);
    assert_eq!(output(&one)["truncated"], true);
    let syncs = env
        .call("list_jobs", json!({ "jobs_only": false, "project": P }))
        .await;
    assert_eq!(ids(&syncs), [sync.as_str()]);

    // Another authority group sees none of it.
    let other = credential_in_group(
        &env.db,
        CredentialKind::SharedKey,
        &ALL_SCOPES,
        &[],
        Some("someone-else"),
    )
    .await;
    for tool in ["job_status", "job_log", "stop_job"] {
        let r = call(&env.st, &other, tool, json!({ "job_id": lines })).await;
        assert_eq!(kind(&r), "unknown_job", "{tool}: {r}");
    }
    let r = call(
        &env.st,
        &other,
        "job_status",
        json!({ "job_id": "not-a-uuid" }),
    )
    .await;
    // A malformed id is refused for its form, naming the field, before any lookup.
    assert_eq!(kind(&r), "invalid_arguments", "{r}");
    assert_eq!(r["error"]["pointer"], "/job_id", "{r}");
    let r = call(&env.st, &other, "list_jobs", json!({})).await;
    assert_eq!(output(&r)["returned"], 0, "{r}");
}
