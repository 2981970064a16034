//! Structured validation end to end: `cargo_test` and friends run by the real runner on the
//! fixture crate, their evidence in the ledger, `validation_summary` with its delta, and the
//! handoff brief's progress moving from `blocked` to `ready_to_continue` as a failing test is
//! fixed.

use super::*;

/// The fixture crate with one passing and one failing test.
fn add_tests(root: &Path) {
    std::fs::write(
        root.join("src/util/mod.rs"),
        "pub fn double(x: u32) -> u32 {\n    x * 2\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn doubles() {\n        assert_eq!(super::double(2), 4);\n    }\n\n    #[test]\n    fn doubles_one() {\n        assert_eq!(super::double(1), 3);\n    }\n}\n",
    )
    .unwrap();
    git(root, &["commit", "-qam", "tests"]);
}

async fn summary(env: &RunnerApp, sid: &str) -> Value {
    env.mcp_ok("validation_summary", json!({"session_id": sid}))
        .await
}

async fn brief(env: &RunnerApp, sid: &str) -> Value {
    let r = env
        .rest("session_handoff_summary", json!({"session_id": sid}))
        .await;
    output(&r)["handoff_brief"].clone()
}

/// The `validation` facts of the session's `execution_finished` events.
async fn ledger_validations(env: &RunnerApp, sid: &str) -> Vec<Value> {
    let r = env
        .mcp_ok("session_summary", json!({"session_id": sid, "limit": 200}))
        .await;
    let events = r["events"].as_array().cloned().unwrap_or_default();
    events
        .iter()
        .filter(|e| e["kind"] == "execution_finished")
        .filter_map(|e| e["payload"].get("validation").cloned())
        .collect()
}

#[tokio::test]
async fn a_failing_test_blocks_until_a_fix_passes_and_the_delta_is_signed() {
    let env = start().await;
    add_tests(&env.root());
    let sid = session(&env, "fix the doubling test").await;
    assert_eq!(summary(&env, &sid).await["status"], "not_run");

    let r = env.mcp_tool("cargo_test", json!({"session_id": sid})).await;
    assert_eq!(kind(&r), "exit_nonzero", "{r}");
    // A failed run still answers what its output proved.
    let v = &r["output"]["validation"];
    assert_eq!(v["outcome"], "failed", "{r}");
    assert_eq!(v["passed"], false);
    assert_eq!(v["complete"], true, "{r}");
    assert_eq!(
        v["tests"],
        json!({"passed": 1, "failed": 1, "ignored": 0}),
        "{r}"
    );
    assert_eq!(
        v["failures"],
        json!(["cargo_test:util::tests::doubles_one"])
    );
    assert_eq!(v["parser"]["name"], "cargo-libtest");
    let target = v["validation_target_id"].as_str().unwrap().to_owned();
    assert!(target.starts_with("validation_scope:v1:"), "{target}");

    let s = summary(&env, &sid).await;
    assert_eq!(s["status"], "failed", "{s}");
    assert_eq!(
        s["unresolved_failures"]["items"],
        json!(["cargo_test:util::tests::doubles_one"])
    );
    assert_eq!(
        s["validation_delta"],
        json!({"status": "unavailable", "reason_code": "no_previous_validation"})
    );
    let b = brief(&env, &sid).await;
    assert_eq!(b["progress"]["state"], "blocked", "{b}");
    assert_eq!(b["validation"]["status"], "failed", "{b}");
    assert_eq!(
        b["next_actions"]["items"][0],
        json!({"action": "fix_validation_failure", "target": "cargo_test:util::tests::doubles_one"}),
        "{b}"
    );

    // Edited but not yet validated: still blocked by the unresolved failure.
    let read = env
        .rest(
            "read_files",
            json!({"session_id": sid, "files": [{"path": "src/util/mod.rs"}]}),
        )
        .await;
    let sha = output(&read)["files"][0]["sha256"]
        .as_str()
        .unwrap()
        .to_owned();
    env.mcp_ok(
        "apply_text_edits",
        json!({"session_id": sid, "path": "src/util/mod.rs", "expected_sha256": sha,
               "edits": [{"old_text": "double(1), 3)", "new_text": "double(1), 2)"}]}),
    )
    .await;
    assert_eq!(brief(&env, &sid).await["progress"]["state"], "blocked");

    // The fix passes (through REST's callRuntimeTool this time).
    let r = env.rest("cargo_test", json!({"session_id": sid})).await;
    let v = &output(&r)["validation"];
    assert_eq!(
        (v["outcome"].as_str(), v["passed"].as_bool()),
        (Some("passed"), Some(true)),
        "{r}"
    );
    assert_eq!(v["validation_target_id"], target.as_str());
    let s = summary(&env, &sid).await;
    assert_eq!(s["status"], "passed", "{s}");
    assert_eq!(s["unresolved_failures"]["total"], 0);
    let d = &s["validation_delta"];
    assert_eq!(d["status"], "available", "{s}");
    assert_eq!(d["comparison"]["scope_identity"], target.as_str());
    assert_eq!(
        (d["passed_delta"].as_i64(), d["failed_delta"].as_i64()),
        (Some(1), Some(-1)),
        "{d}"
    );
    assert_eq!(
        d["no_longer_failing"]["items"],
        json!(["cargo_test:util::tests::doubles_one"])
    );
    let b = brief(&env, &sid).await;
    assert_eq!(b["validation"]["status"], "passed", "{b}");
    assert_eq!(b["progress"]["state"], "ready_to_continue", "{b}");

    // Another scope is another target: not compared.
    let r = env
        .mcp_tool(
            "cargo_test",
            json!({"session_id": sid, "test_filter": "doubles_one"}),
        )
        .await;
    assert_eq!(output(&r)["validation"]["tests"]["passed"], 1, "{r}");
    assert_eq!(
        summary(&env, &sid).await["validation_delta"]["reason_code"],
        "validation_scope_changed"
    );

    // A count the output does not prove is an evidence gap, typed, with the whole output.
    let r = env
        .mcp_tool("cargo_test", json!({"session_id": sid, "min_tests": 5}))
        .await;
    assert_eq!(kind(&r), "test_count_not_proven", "{r}");
    assert_eq!(r["error"]["observed_tests"], 2, "{r}");
    let v = &r["output"]["validation"];
    assert_eq!(
        v["count_assertion"],
        json!({"min_tests": 5, "observed_tests": 2, "met": false})
    );
    assert_eq!(v["outcome"], "passed");
    assert_eq!(v["passed"], false);

    // Every run left exactly one bounded record: counts and identities, never output.
    let runs = ledger_validations(&env, &sid).await;
    assert_eq!(runs.len(), 4, "{runs:?}");
    for run in &runs {
        assert!(run.get("shown_diagnostics").is_none(), "{run}");
    }
}

#[tokio::test]
async fn diagnostics_formatting_and_a_background_check_land_once() {
    let env = start().await;
    std::fs::write(
        env.root().join("src/lib.rs"),
        "pub mod util;\n\npub fn answer() -> u32 {\n    let unused = 1;\n    42\n}\nfn  badly( ){}\n",
    )
    .unwrap();
    let sid = session(&env, "fix the doubling test").await;
    // The session's default_cwd does not move validation: it runs in the root.
    env.mcp_ok(
        "update_session_context",
        json!({"session_id": sid, "default_cwd": "src/util"}),
    )
    .await;
    let r = env
        .mcp_tool("cargo_check", json!({"session_id": sid}))
        .await;
    let v = &output(&r)["validation"];
    assert_eq!(
        v["diagnostics"]["warnings"].as_u64().map(|w| w >= 1),
        Some(true),
        "{r}"
    );
    assert_eq!(v["diagnostics"]["errors"], 0);
    let shown = &v["shown_diagnostics"][0];
    assert_eq!(shown["file"], "src/lib.rs", "{r}");
    assert_eq!(shown["level"], "warning");

    let r = env.mcp_tool("cargo_fmt", json!({"session_id": sid})).await;
    assert_eq!(kind(&r), "exit_nonzero", "{r}");
    // The failure still names what failed.
    assert_eq!(
        r["output"]["validation"]["failures"],
        json!(["cargo_fmt:fmt:src/lib.rs"]),
        "{r}"
    );

    // Bad scopes are typed refusals; nothing runs.
    let r = env
        .mcp_tool(
            "cargo_check",
            json!({"session_id": sid, "package": "--manifest-path=/etc/x"}),
        )
        .await;
    assert_eq!(kind(&r), "invalid_arguments", "{r}");

    // A background check finishes while nobody waits; two instances then read it: its
    // evidence landed once, with the result.
    let r = env
        .mcp_tool(
            "cargo_check",
            json!({"session_id": sid, "background": true}),
        )
        .await;
    let job = output(&r)["job_id"].as_str().unwrap().to_owned();
    assert!(output(&r)["validation"].is_null());
    eventually("the background check ends", async || {
        let s = env.mcp_ok("job_status", json!({"job_id": job})).await;
        (s["execution_state"] == "succeeded").then_some(())
    })
    .await;
    let second = env.second();
    let (a, b) = tokio::join!(
        mcp_tool(
            &env.st,
            &env.key,
            "validation_summary",
            json!({"session_id": sid})
        ),
        mcp_tool(
            &second,
            &env.key,
            "validation_summary",
            json!({"session_id": sid})
        ),
    );
    assert_eq!(output(&a)["latest"], output(&b)["latest"]);
    assert_eq!(output(&a)["latest"]["job_id"], job.as_str());
    // Check, fmt and the background check: the refused call queued nothing.
    let runs = ledger_validations(&env, &sid).await;
    assert_eq!(runs.len(), 3, "{runs:?}");
}

#[tokio::test]
async fn a_background_check_as_a_task_completes_with_what_its_output_proved() {
    let env = start().await;
    std::fs::write(
        env.root().join("src/lib.rs"),
        "pub mod util;\n\npub fn answer() -> u32 {\n    let unused = 1;\n    42\n}\n",
    )
    .unwrap();
    let sid = session(&env, "fix the doubling test").await;
    let created = call_as_task(
        &env.st,
        &env.key,
        "cargo_check",
        json!({"session_id": sid, "background": true}),
    )
    .await;
    assert_eq!(created["resultType"], "task", "{created}");
    let id = created["taskId"].as_str().unwrap().to_owned();
    let second = env.second();
    let done = task_until_terminal(&second, &env.key, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    let sc = &done["result"]["structuredContent"];
    assert_eq!(sc["success"], true, "{done}");
    // The same answer the blocking call gives: the execution and what its output proved.
    assert_eq!(sc["output"]["execution_state"], "succeeded", "{done}");
    let v = &sc["output"]["validation"];
    assert!(
        v["diagnostics"]["warnings"].as_u64().unwrap() >= 1,
        "{done}"
    );
    assert_eq!(v["diagnostics"]["errors"], 0, "{done}");
    // The session's validation evidence has the run, once.
    let runs = ledger_validations(&env, &sid).await;
    assert_eq!(runs.len(), 1, "{runs:?}");
}
