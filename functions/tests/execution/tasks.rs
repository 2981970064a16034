//! Durable MCP tasks (`io.modelcontextprotocol/tasks`) over real runner work: created on one
//! instance, polled and cancelled on another, owned by the caller's authority group, their
//! recording finished exactly once whoever ends them.

use super::shells::pids_with;
use super::*;

/// A Workflow Session on P; its id.
async fn session(env: &RunnerApp, instruction: &str) -> String {
    let r = env
        .call(
            "work_on_project",
            json!({ "project": P, "instruction": instruction }),
        )
        .await;
    output(&r)["session_id"].as_str().unwrap().to_owned()
}

/// A `run_job` of `command` on P made a task by `key` on `st`; its id.
async fn job_task(st: &AppState, key: &str, command: &str) -> String {
    let created = call_as_task(
        st,
        key,
        "run_job",
        json!({ "project": P, "command": command }),
    )
    .await;
    assert_eq!(created["resultType"], "task", "{created}");
    created["taskId"].as_str().unwrap().to_owned()
}

/// Whether `e` is the `kind` event of a `tool` call.
fn is_call(e: &LedgerRow, kind: &str, tool: &str) -> bool {
    e.kind == kind && e.tool_name.as_deref() == Some(tool)
}

#[tokio::test]
async fn a_job_task_made_on_one_instance_is_polled_and_answered_by_another() {
    let env = start().await;
    let b = env.second();
    let created = call_as_task(
        &env.st,
        &env.key,
        "run_job",
        json!({ "project": P, "command": "sleep 3; echo done" }),
    )
    .await;
    assert_eq!(created["resultType"], "task", "{created}");
    assert_eq!(created["status"], "working", "{created}");
    let id = created["taskId"].as_str().unwrap().to_owned();
    for field in ["createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"] {
        assert!(!created[field].is_null(), "{field} missing: {created}");
    }
    assert!(created.get("result").is_none(), "{created}");

    // Durable before it was answered: the other instance reads it at once.
    let first = task_get(&b, &env.key, &id).await;
    assert_eq!(first.result()["resultType"], "complete", "{}", first.text());
    assert_eq!(first.result()["taskId"], json!(id));
    assert_eq!(first.result()["status"], "working");

    let done = task_until_terminal(&b, &env.key, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    let result = &done["result"];
    assert_eq!(result["isError"], false, "{done}");
    let sc = &result["structuredContent"];
    assert_eq!(sc["success"], true, "{done}");
    assert_eq!(sc["output"]["stdout"], "done\n", "{done}");
    assert_eq!(sc["output"]["exit_code"], 0);
    // The text block is the same object, as in every tool result.
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(&text, sc);

    // The result is the job's: job_status says the same of the same job.
    let job = sc["output"]["job_id"].as_str().unwrap();
    let status = output(&call(&b, &env.key, "job_status", json!({ "job_id": job })).await).clone();
    assert_eq!(status["execution_state"], sc["output"]["execution_state"]);
    assert_eq!(status["exit_code"], sc["output"]["exit_code"]);
    assert_eq!(status["duration_ms"], sc["output"]["duration_ms"]);

    // Terminal is final: the first instance reads the same end.
    let again = task_get(&env.st, &env.key, &id).await;
    assert_eq!(again.result()["result"], done["result"]);
    assert_eq!(again.result()["lastUpdatedAt"], done["lastUpdatedAt"]);
}

#[tokio::test]
async fn a_task_is_its_owners_only_and_an_unknown_id_is_invalid_params() {
    let env = start().await;
    let id = job_task(&env.st, &env.key, "sleep 1").await;
    let other = env.token(CredentialKind::SharedKey, &ALL_SCOPES, &[]).await;
    let foreign = task_get(&env.st, &other, &id).await;
    let unknown = task_get(&env.st, &other, "wc_task_AAAAAAAAAAAAAAAAAAAAAA").await;
    let malformed = task_get(&env.st, &other, "not-a-task").await;
    // Control bytes reach a task id only in JSON and in the header's base64 form: they are
    // the same documented error, never a bare HTTP failure.
    let nul = task_get(&env.st, &other, "wc_task_\0AAAAAAAAAAAAAAAAAAAAA").await;
    let control = task_get(&env.st, &other, "\u{1}\n\u{7f}").await;
    for r in [&foreign, &unknown, &malformed, &nul, &control] {
        assert_eq!(r.rpc_code(), Some(-32602), "{}", r.text());
    }
    // Another principal's cancel changes nothing and reveals nothing.
    let cancel = task_cancel(&env.st, &other, &id).await;
    assert_eq!(cancel.rpc_code(), Some(-32602), "{}", cancel.text());
    let done = task_until_terminal(&env.st, &env.key, &id).await;
    assert_eq!(done["status"], "completed", "{done}");

    // One authority group, two credentials: the task is the group's, but a credential that
    // does not reach the task's project is told it does not exist, as job_status tells it.
    let wide = credential_in_group(
        &env.db,
        CredentialKind::Project,
        &ALL_SCOPES,
        &[P],
        Some("team"),
    )
    .await;
    let narrow = credential_in_group(
        &env.db,
        CredentialKind::Project,
        &ALL_SCOPES,
        &["agent:local:other"],
        Some("team"),
    )
    .await;
    let shared = call_as_task(
        &env.st,
        &wide,
        "run_job",
        json!({ "project": P, "command": "true" }),
    )
    .await;
    let shared = shared["taskId"].as_str().unwrap();
    assert_eq!(
        task_get(&env.st, &wide, shared).await.result()["taskId"],
        shared
    );
    let hidden = task_get(&env.st, &narrow, shared).await;
    assert_eq!(hidden.rpc_code(), Some(-32602), "{}", hidden.text());

    // Without the extension declared: no task methods, and tools/call answers as before.
    let gated = tasks_rpc(
        &env.st,
        &env.key,
        "tasks/get",
        json!({ "taskId": id }),
        false,
    )
    .await;
    assert_eq!(gated.rpc_code(), Some(-32021), "{}", gated.text());
    let plain = tasks_rpc(
        &env.st,
        &env.key,
        "tools/call",
        json!({ "name": "run_job", "arguments": { "project": P, "command": "true" } }),
        false,
    )
    .await;
    let plain = plain.result();
    assert!(plain.get("taskId").is_none(), "{plain}");
    assert!(
        output(&plain["structuredContent"])["job_id"].is_string(),
        "{plain}"
    );
}

#[tokio::test]
async fn cancelling_a_task_on_another_instance_kills_its_process_group() {
    let env = start().await;
    let b = env.second();
    let marker = format!("wc-task-{}", Uuid::now_v7().simple());
    let created = call_as_task(
        &env.st,
        &env.key,
        "run_job",
        json!({
            "project": P,
            "argv": ["sh", "-c", "sh -c 'sleep 300; true' \"$0\" & sleep 300; true", &marker],
        }),
    )
    .await;
    let id = created["taskId"].as_str().unwrap().to_owned();
    // Both shells (and the sandbox that started them, whose command line names them too).
    eventually("the job's two shells run", async || {
        (pids_with(&marker).len() >= 2).then_some(())
    })
    .await;
    let ack = task_cancel(&b, &env.key, &id).await;
    assert_eq!(
        ack.result(),
        &json!({ "resultType": "complete" }),
        "{}",
        ack.text()
    );
    let done = task_until_terminal(&b, &env.key, &id).await;
    assert_eq!(done["status"], "cancelled", "{done}");
    assert!(done.get("result").is_none(), "{done}");
    eventually("the job's processes are gone", async || {
        pids_with(&marker).is_empty().then_some(())
    })
    .await;
    // Cancelling a terminal task is the same empty acknowledgement.
    let again = task_cancel(&env.st, &env.key, &id).await;
    assert_eq!(again.result(), &json!({ "resultType": "complete" }));
}

#[tokio::test]
async fn a_tasks_recording_finishes_once_when_it_ends_whoever_polls() {
    let env = start().await;
    let b = env.second();
    let s = session(&env, "run a long job").await;
    let created = call_as_task(
        &env.st,
        &env.key,
        "run_shell",
        json!({ "session_id": s, "command": "sleep 1; echo slow", "timeout_ms": 60000 }),
    )
    .await;
    assert_eq!(created["resultType"], "task", "{created}");
    let id = created["taskId"].as_str().unwrap().to_owned();
    let finished = |ledger: &[LedgerRow]| finished(ledger, "run_shell");
    let before = ledger(&env.db, &s).await;
    assert!(
        before
            .iter()
            .any(|e| is_call(e, "tool_call_started", "run_shell")),
        "durable intent before the effect"
    );
    assert_eq!(finished(&before), 0, "the call has not ended yet");

    // Two instances poll at once, again and again, while the work ends.
    let poll = |st: AppState| {
        let (key, id) = (env.key.clone(), id.clone());
        async move { task_until_terminal(&st, &key, &id).await }
    };
    let (x, y) = tokio::join!(poll(env.st.clone()), poll(b.clone()));
    assert_eq!(x["result"], y["result"]);
    assert_eq!(
        output(&x["result"]["structuredContent"])["stdout"],
        "slow\n"
    );
    let after = ledger(&env.db, &s).await;
    assert_eq!(finished(&after), 1, "{after:#?}");
    let end = after
        .iter()
        .find(|e| e.kind == "tool_call_finished")
        .unwrap();
    let start = after
        .iter()
        .find(|e| is_call(e, "tool_call_started", "run_shell"))
        .unwrap();
    assert_eq!(end.call_id, start.call_id, "one pair");
    assert_eq!(end.invocation_id, start.invocation_id);
    assert_eq!(end.payload["success"], true, "{:?}", end.payload);
}

#[tokio::test]
async fn a_task_nobody_polls_ends_with_its_work() {
    let env = start().await;
    let s = session(&env, "start and walk away").await;
    let created = call_as_task(
        &env.st,
        &env.key,
        "run_job",
        json!({ "session_id": s, "command": "echo left" }),
    )
    .await;
    let id = created["taskId"].as_str().unwrap().to_owned();
    // Nobody polls and no upkeep runs: the transaction that ends the work ends the task.
    let (status, state) = eventually("the work ends", async || {
        let client = env.db.pool().get().await.unwrap();
        let row = client
            .query_one(
                "SELECT t.status, w.state FROM mcp_tasks t JOIN runner_work w ON w.id = t.work_id \
                 WHERE t.id = $1",
                &[&id],
            )
            .await
            .unwrap();
        let (status, state): (String, String) = (row.get(0), row.get(1));
        (state != "queued" && state != "leased").then_some((status, state))
    })
    .await;
    assert_eq!(
        (status.as_str(), state.as_str()),
        ("completed", "succeeded")
    );
    let ended = ledger(&env.db, &s).await;
    assert_eq!(finished(&ended, "run_job"), 1, "{ended:#?}");
    // A poll only reads: the same result, and no second event.
    let t = task_get(&env.st, &env.key, &id).await;
    assert_eq!(t.result()["status"], "completed", "{}", t.text());
    assert_eq!(
        output(&t.result()["result"]["structuredContent"])["stdout"],
        "left\n"
    );
    task_get(&env.st, &env.key, &id).await;
    assert_eq!(finished(&ledger(&env.db, &s).await, "run_job"), 1);

    // Past its TTL a task is gone: deleted by upkeep, unknown to its owner.
    let client = env.db.pool().get().await.unwrap();
    client
        .execute(
            "UPDATE mcp_tasks SET expires_at = now() - interval '1 second' WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    assert_eq!(
        task_get(&env.st, &env.key, &id).await.rpc_code(),
        Some(-32602)
    );
    let expired = wc_functions::maintenance::prune_tasks(&env.st.deps)
        .await
        .unwrap();
    assert_eq!(expired, 1);
}

#[tokio::test]
async fn a_call_with_a_progress_token_streams_its_progress_then_its_result() {
    let env = start().await;
    let mut body = rpc(
        MODERN,
        9,
        "tools/call",
        json!({ "name": "run_shell", "arguments": { "project": P, "command": "sleep 2.5; echo late" } }),
    );
    body["params"]["_meta"]["progressToken"] = json!("wc-progress-1");
    let r = send(&env.st, mcp_request(MODERN, Some(&env.key), &body)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.headers["content-type"].to_str().unwrap(),
        "text/event-stream",
        "{}",
        r.text()
    );
    let messages: Vec<Value> = r
        .text()
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect();
    let (result, notes) = messages.split_last().expect("a message");
    assert_eq!(result["id"], 9, "the stream ends with the answer: {result}");
    let sc = &result["result"]["structuredContent"];
    assert_eq!(output(sc)["stdout"], "late\n", "{result}");
    let progress: Vec<f64> = notes
        .iter()
        .map(|n| {
            assert_eq!(n["method"], "notifications/progress", "{n}");
            assert_eq!(n["params"]["progressToken"], "wc-progress-1", "{n}");
            assert!(
                n["params"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("run_shell"),
                "{n}"
            );
            assert_eq!(n["params"]["total"], 600.0, "the timeout bounds it: {n}");
            n["params"]["progress"].as_f64().unwrap()
        })
        .collect();
    assert!(
        progress.len() >= 2,
        "a 2.5 s run reports about once a second: {progress:?}"
    );
    assert!(
        progress.windows(2).all(|w| w[0] < w[1]),
        "progress only grows: {progress:?}"
    );

    // Without a token the same call answers one JSON object.
    let plain = send(
        &env.st,
        mcp_request(
            MODERN,
            Some(&env.key),
            &rpc(
                MODERN,
                10,
                "tools/call",
                json!({ "name": "run_shell", "arguments": { "project": P, "command": "sleep 1.5" } }),
            ),
        ),
    )
    .await;
    assert_eq!(
        plain.headers["content-type"].to_str().unwrap(),
        "application/json"
    );
}

#[tokio::test]
async fn a_working_tasks_status_message_says_how_its_work_is_doing() {
    let env = start().await;
    let id = job_task(&env.st, &env.key, "sleep 2").await;
    let running = eventually("the task's work runs", async || {
        let t = task_get(&env.st, &env.key, &id).await.result().clone();
        t["statusMessage"]
            .as_str()
            .is_some_and(|m| m.contains("running"))
            .then_some(t)
    })
    .await;
    assert_eq!(running["status"], "working", "{running}");
    assert!(
        running["statusMessage"]
            .as_str()
            .unwrap()
            .starts_with("run_job running on its runner for "),
        "{running}"
    );
    let done = task_until_terminal(&env.st, &env.key, &id).await;
    assert_eq!(done["statusMessage"], "run_job finished", "{done}");
}

/// The JSON-RPC messages of an event-stream reply, in order.
fn stream_messages(r: &Reply) -> Vec<Value> {
    r.text()
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect()
}

/// A `subscriptions/listen` for `task_ids` by `key` on `st`, declaring the extension when
/// `declared`; the whole reply (the stream ends by itself).
async fn listen(st: &AppState, key: &str, task_ids: Value, declared: bool) -> Reply {
    let mut body = rpc(
        MODERN,
        31,
        "subscriptions/listen",
        json!({ "notifications": { "taskIds": task_ids } }),
    );
    if declared {
        body["params"]["_meta"] = declaring();
    }
    send(st, mcp_request(MODERN, Some(key), &body)).await
}

#[tokio::test]
async fn a_listener_on_another_instance_is_told_of_its_own_tasks_until_they_end() {
    let env = start().await;
    let b = env.second();
    let id = job_task(&env.st, &env.key, "sleep 2; echo heard").await;
    let other = env.token(CredentialKind::SharedKey, &ALL_SCOPES, &[]).await;
    let foreign = job_task(&env.st, &other, "sleep 1").await;

    // Own, foreign, unknown and repeated ids: only the caller's own task is taken.
    let r = listen(
        &b,
        &env.key,
        json!([id, foreign, "wc_task_AAAAAAAAAAAAAAAAAAAAAA", id]),
        true,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.headers["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let messages = stream_messages(&r);
    let (ack, rest) = messages.split_first().expect("an acknowledgement");
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["notifications"]["taskIds"],
        json!([id]),
        "{ack}"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 31,
        "{ack}"
    );
    let (end, notes) = rest.split_last().expect("a final result");
    assert_eq!(
        end["id"], 31,
        "the stream ends with the listen's result: {end}"
    );
    assert_eq!(end["result"]["resultType"], "complete", "{end}");
    assert_eq!(
        end["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 31,
        "{end}"
    );
    let statuses: Vec<&str> = notes
        .iter()
        .map(|n| {
            assert_eq!(n["method"], "notifications/tasks", "{n}");
            assert_eq!(
                n["params"]["taskId"],
                json!(id),
                "only the caller's task: {n}"
            );
            assert_eq!(
                n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 31,
                "{n}"
            );
            n["params"]["status"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        statuses,
        ["working", "completed"],
        "the state at once, then each change, once"
    );
    let last = &notes[1]["params"];
    assert_eq!(
        output(&last["result"]["structuredContent"])["stdout"],
        "heard\n",
        "{last}"
    );
    // What tasks/get answers now is what the notification said.
    let got = task_get(&env.st, &env.key, &id).await;
    let got = got.result();
    for field in ["status", "result", "lastUpdatedAt", "createdAt", "ttlMs"] {
        assert_eq!(got[field], last[field], "{field}");
    }

    // Listening to a task already ended: its end, then the result, at once.
    let again = stream_messages(&listen(&env.st, &env.key, json!([id]), true).await);
    assert_eq!(again.len(), 3, "{again:?}");
    assert_eq!(again[1]["params"]["status"], "completed");

    // Nothing of the caller's: an empty acknowledgement and the end.
    let none = stream_messages(&listen(&b, &env.key, json!([foreign]), true).await);
    assert_eq!(none.len(), 2, "{none:?}");
    assert_eq!(none[0]["params"]["notifications"]["taskIds"], json!([]));

    // Task ids without the extension declared: -32021, naming what is missing.
    let gated = listen(&b, &env.key, json!([id]), false).await;
    assert_eq!(gated.status, 400, "{}", gated.text());
    assert_eq!(gated.rpc_code(), Some(-32021), "{}", gated.text());
    assert!(
        gated.body["error"]["data"]["requiredCapabilities"]["extensions"]
            ["io.modelcontextprotocol/tasks"]
            .is_object(),
        "{}",
        gated.text()
    );
    // Malformed task ids are invalid params.
    let bad = listen(&b, &env.key, json!("not-a-list"), true).await;
    assert_eq!(bad.rpc_code(), Some(-32602), "{}", bad.text());
}

#[tokio::test]
async fn a_listen_stream_ends_gracefully_at_its_bound_and_the_task_goes_on() {
    let env = start().await;
    let mut cfg = (*env.st.deps.config).clone();
    cfg.listen_max = std::time::Duration::from_millis(1500);
    let short = second_instance(&env.db, cfg);
    let id = job_task(&env.st, &env.key, "sleep 30").await;
    let messages = stream_messages(&listen(&short, &env.key, json!([id]), true).await);
    let kinds: Vec<String> = messages
        .iter()
        .map(|m| {
            m["method"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| format!("result:{}", m["result"]["resultType"]))
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "notifications/subscriptions/acknowledged",
            "notifications/tasks",
            "result:\"complete\""
        ],
        "{messages:?}"
    );
    assert_eq!(messages[1]["params"]["status"], "working");
    // The stream's end is not the task's: it is still working, and can be cancelled.
    let now = task_get(&env.st, &env.key, &id).await;
    assert_eq!(now.result()["status"], "working", "{}", now.text());
    let cancel = task_cancel(&env.st, &env.key, &id).await;
    assert_eq!(cancel.status, 200, "{}", cancel.text());
    let done = task_until_terminal(&env.st, &env.key, &id).await;
    assert_eq!(done["status"], "cancelled", "{done}");
}

#[tokio::test]
async fn a_call_that_takes_info_lines_hears_its_output_as_it_comes() {
    let env = start().await;
    let call = |id: i64, level: &str, token: bool| {
        let mut body = rpc(
            MODERN,
            id,
            "tools/call",
            json!({ "name": "run_shell", "arguments": {
                "project": P, "command": "echo one; sleep 4; printf 'two é\\n' >&2"
            } }),
        );
        body["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!(level);
        if token {
            body["params"]["_meta"]["progressToken"] = json!("wc-lines");
        }
        mcp_request(MODERN, Some(&env.key), &body)
    };
    let r = send(&env.st, call(12, "info", true)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let messages = stream_messages(&r);
    let (result, notes) = messages.split_last().expect("a message");
    assert_eq!(result["id"], 12, "{result}");
    let lines: Vec<(usize, &str, &str)> = notes
        .iter()
        .enumerate()
        .filter(|(_, n)| n["method"] == "notifications/message")
        .map(|(i, n)| {
            assert_eq!(n["params"]["level"], "info", "{n}");
            (
                i,
                n["params"]["logger"].as_str().unwrap(),
                n["params"]["data"].as_str().unwrap(),
            )
        })
        .collect();
    let texts: Vec<(&str, &str)> = lines.iter().map(|(_, l, d)| (*l, *d)).collect();
    assert_eq!(
        texts,
        [("stdout", "one\n"), ("stderr", "two é\n")],
        "{notes:?}"
    );
    // The first line was passed on while the call still waited: progress came after it.
    let first = lines[0].0;
    assert!(
        notes[first..]
            .iter()
            .any(|n| n["method"] == "notifications/progress"),
        "{notes:?}"
    );
    // The output is the result's too.
    let sc = output(&result["result"]["structuredContent"]);
    assert_eq!(sc["stdout"], "one\n");
    assert_eq!(sc["stderr"], "two é\n");

    // Output past one read, ended at once: passed on whole, no character split between
    // lines, the same bytes as the result's.
    let mut body = rpc(
        MODERN,
        14,
        "tools/call",
        json!({ "name": "run_shell", "arguments": {
            "project": P, "command": "printf x; yes é | head -n 14000 | tr -d '\\n'"
        } }),
    );
    body["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("debug");
    let long = send(&env.st, mcp_request(MODERN, Some(&env.key), &body)).await;
    let messages = stream_messages(&long);
    let (result, notes) = messages.split_last().expect("a message");
    let passed: String = notes
        .iter()
        .filter(|n| n["params"]["logger"] == "stdout")
        .map(|n| n["params"]["data"].as_str().unwrap())
        .collect();
    let stdout = output(&result["result"]["structuredContent"])["stdout"]
        .as_str()
        .unwrap();
    // One ASCII byte first: a read boundary (16 KiB) falls inside a character.
    assert_eq!(stdout.len(), 28_001, "{result}");
    assert!(notes.len() >= 2, "more than one read: {}", notes.len());
    assert_eq!(passed, stdout);

    // A level above info, and no token: one JSON answer.
    let quiet = send(&env.st, call(13, "warning", false)).await;
    assert_eq!(
        quiet.headers["content-type"].to_str().unwrap(),
        "application/json",
        "{}",
        quiet.text()
    );
    assert_eq!(
        output(&quiet.result()["structuredContent"])["stdout"],
        "one\n"
    );
}

/// How many `tool_call_finished` events of `tool` the ledger holds.
fn finished(ledger: &[LedgerRow], tool: &str) -> usize {
    ledger
        .iter()
        .filter(|e| e.kind == "tool_call_finished" && e.tool_name.as_deref() == Some(tool))
        .count()
}
