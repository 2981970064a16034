//! Session execution defaults and the evidence the ledger keeps of each run.

use super::*;

/// Starts a session on P in `mode` and returns its id.
async fn session(env: &RunnerApp, mode: &str) -> String {
    let r = env
        .call(
            "work_on_project",
            json!({ "project": P, "instruction": "run things", "mode": mode }),
        )
        .await;
    output(&r)["session_id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn session_defaults_apply_and_the_ledger_records_each_run_without_its_output() {
    let env = start().await;
    std::fs::create_dir(env.root().join("sub")).unwrap();
    std::fs::create_dir(env.root().join("other")).unwrap();
    let s = session(&env, "normal").await;
    let r = env
        .call(
            "update_session_context",
            json!({ "session_id": s, "default_cwd": "sub", "default_shell": "bash" }),
        )
        .await;
    output(&r);

    // The output is assembled by the shell, so no argument the ledger summarizes contains it.
    let (a, b) = (
        Uuid::new_v4().simple().to_string(),
        Uuid::new_v4().simple().to_string(),
    );
    let secret = format!("{a}{b}");
    let command = format!(
        "pwd; [[ -n $BASH_VERSION ]] && echo bash; printf '%s%s\\n' {a} {b}; printf '%s%s' {a} {b} >&2"
    );
    let before = session_row(&env.db, &s).await.events_observed;
    let r = env
        .call("run_shell", json!({ "session_id": s, "command": command }))
        .await;
    let out = output(&r).clone();
    assert_eq!(out["execution_state"], "succeeded", "{out}");
    assert_eq!(
        out["stdout"],
        format!("{}\nbash\n{secret}\n", env.root().join("sub").display())
    );
    assert_eq!(out["stderr"], secret.as_str());
    assert_eq!(out["project"], P, "the session's project is the default");

    // An explicit cwd wins over the default.
    let r = env
        .call(
            "run_shell",
            json!({ "session_id": s, "command": "pwd", "cwd": "other" }),
        )
        .await;
    assert_eq!(
        output(&r)["stdout"],
        format!("{}\n", env.root().join("other").display())
    );

    // The first run's evidence: its business pair around execution_queued and
    // execution_finished, one invocation.
    let rows: Vec<LedgerRow> = ledger(&env.db, &s)
        .await
        .into_iter()
        .filter(|e| e.seq > before)
        .collect();
    let job_id = out["job_id"].as_str().unwrap();
    let invocation = rows
        .iter()
        .find(|e| e.kind == "execution_queued" && e.payload["job_id"] == job_id)
        .unwrap_or_else(|| panic!("no execution_queued for {job_id}: {rows:#?}"))
        .invocation_id;
    let of_call: Vec<(&str, &str)> = rows
        .iter()
        .filter(|e| e.invocation_id == invocation)
        .map(|e| (e.kind.as_str(), e.role.as_str()))
        .collect();
    assert_eq!(
        of_call,
        [
            ("tool_call_started", "business"),
            ("execution_queued", "business"),
            ("execution_finished", "business"),
            ("tool_call_finished", "business"),
        ],
        "{rows:#?}"
    );
    let finished = rows
        .iter()
        .find(|e| e.kind == "execution_finished" && e.payload["job_id"] == job_id)
        .unwrap();
    assert_eq!(finished.tool_name.as_deref(), Some("run_shell"));
    assert_eq!(finished.payload["execution_state"], "succeeded");
    assert_eq!(finished.payload["exit_code"], 0);
    assert_eq!(
        finished.payload["stdout_bytes"].as_u64(),
        Some(out["stdout_bytes"].as_u64().unwrap())
    );
    let queued = rows
        .iter()
        .find(|e| e.kind == "execution_queued" && e.payload["job_id"] == job_id)
        .unwrap();
    assert_eq!(queued.payload["cwd"], "sub");
    // Reading the status again records nothing more.
    output(&env.call("job_status", json!({ "job_id": job_id })).await);
    let finished_count = ledger(&env.db, &s)
        .await
        .iter()
        .filter(|e| e.kind == "execution_finished" && e.payload["job_id"] == job_id)
        .count();
    assert_eq!(finished_count, 1, "terminal evidence is recorded once");

    // No output body anywhere in the ledger.
    let client = env.db.pool().get().await.unwrap();
    let leaks: i64 = client
        .query_one(
            "SELECT count(*) FROM session_events WHERE payload::text LIKE '%' || $1 || '%'",
            &[&secret],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(leaks, 0, "stdout/stderr text reached session_events");
    drop(client);

    // A read-only session refuses execution; a session naming a resource refuses to run on
    // the project host instead. Neither queues anything.
    let ro = session(&env, "read_only").await;
    let remote = session(&env, "normal").await;
    let queued_before = work_rows(&env.db).await;
    let r = env
        .call("run_shell", json!({ "session_id": ro, "command": "true" }))
        .await;
    assert_eq!(kind(&r), "mode_denied", "{r}");
    output(
        &env.call(
            "update_session_context",
            json!({ "session_id": remote, "resource": "gpu-box" }),
        )
        .await,
    );
    let r = env
        .call(
            "run_process",
            json!({ "session_id": remote, "argv": ["true"] }),
        )
        .await;
    assert_eq!(kind(&r), "unsupported", "{r}");
    assert_eq!(r["error"]["resource"], "gpu-box");
    assert_eq!(work_rows(&env.db).await, queued_before);
}
