//! Results and expectations: exit codes, output and stdin as the process produced them, declared expectations, and every way an execution ends without success as a typed failure.

use super::*;

#[tokio::test]
async fn run_tools_report_exit_codes_output_and_stdin_as_the_process_produced_them() {
    let env = start().await;

    let r = env
        .call(
            "run_process",
            json!({ "project": P, "argv": ["sh", "-c", "echo hi; echo err >&2; exit 3"] }),
        )
        .await;
    let out = failed(&r, "exit_nonzero");
    assert_eq!(r["error"]["exit_code"], 3, "{r}");
    assert_eq!(
        verdict(out),
        ("failed", Some(3), Some(false), true),
        "{out}"
    );
    assert_eq!(out["stdout"], "hi\n");
    assert_eq!(out["stderr"], "err\n");
    assert_eq!(
        (out["stdout_bytes"].as_u64(), out["stderr_bytes"].as_u64()),
        (Some(3), Some(4))
    );
    assert_eq!(out["stdout_truncated"], false);
    assert_eq!(out["signal"], Value::Null);
    assert_eq!(out["error"], Value::Null);
    assert_eq!(out["project"], P);
    assert_eq!(out["tool"], "run_process");
    assert!(out["duration_ms"].is_u64(), "{out}");
    assert_eq!(
        work_state(&env.db, out["job_id"].as_str().unwrap()).await,
        "failed"
    );

    // stdin is written, then closed: `cat` echoes it whole and ends.
    let text = "first line\nsecond line, ünïcödé\nno newline at the end";
    let r = env
        .call(
            "run_process",
            json!({ "project": P, "argv": ["cat"], "stdin": text }),
        )
        .await;
    let out = output(&r);
    assert_eq!(
        verdict(out),
        ("succeeded", Some(0), Some(true), false),
        "{out}"
    );
    assert_eq!(out["stdout"], text);
    assert_eq!(out["stdout_bytes"].as_u64(), Some(text.len() as u64));
    assert_eq!(out["stderr"], "");

    // Bash-only syntax runs under bash; without a choice the shell is `sh`.
    let bash_only = "[[ 1 == 1 ]] && echo ok";
    let r = env
        .call(
            "run_shell",
            json!({ "project": P, "command": bash_only, "shell": "bash" }),
        )
        .await;
    let out = output(&r);
    assert_eq!(
        verdict(out),
        ("succeeded", Some(0), Some(true), false),
        "{out}"
    );
    assert_eq!(out["stdout"], "ok\n");
    let r = env
        .call("run_shell", json!({ "project": P, "command": "echo $0" }))
        .await;
    assert_eq!(output(&r)["stdout"], "sh\n", "{r}");
    // The same through MCP: one kernel, one result.
    let r = tools_call(
        &env.st,
        MODERN,
        Some(&env.key),
        "run_shell",
        json!({ "project": P, "command": bash_only, "shell": "bash" }),
    )
    .await;
    let sc = &r.result()["structuredContent"];
    assert_eq!(output(sc)["stdout"], "ok\n", "{sc}");
    assert_eq!(r.result()["isError"], false);

    // A script gets its arguments after the script path, word boundaries intact, and runs in
    // the project root.
    let r = env
        .call(
            "run_script",
            json!({
                "project": P,
                "interpreter": "sh",
                "script": "printf '%s|' \"$#\" \"$1\" \"$2\"; echo; pwd",
                "args": ["a b", "c"],
            }),
        )
        .await;
    let out = output(&r);
    assert_eq!(
        verdict(out),
        ("succeeded", Some(0), Some(true), false),
        "{out}"
    );
    assert_eq!(
        out["stdout"],
        format!("2|a b|c|\n{}\n", env.root().display())
    );
    assert_eq!(out["tool"], "run_script");
}

/// (execution_state, exit_code, matched, actionable) as a case expects it.
type Verdict = (&'static str, i64, bool, bool);

/// (argv, result_expectation, accepted_exit_codes, expected verdict, expected success).
type ExpectationCase = (Value, Option<&'static str>, Option<Value>, Verdict, bool);

#[tokio::test]
async fn declared_expectations_classify_outcomes_without_rewriting_them() {
    let env = start().await;
    let exit = |code: i32| json!(["sh", "-c", format!("exit {code}")]);
    // (argv, result_expectation, accepted_exit_codes) → (state, exit, matched, actionable) and
    // the result's success: exit 0 or an accepted code, whatever was declared.
    let cases: Vec<ExpectationCase> = vec![
        (
            exit(1),
            Some("failure"),
            None,
            ("failed", 1, true, false),
            false,
        ),
        (
            exit(0),
            Some("failure"),
            None,
            ("succeeded", 0, false, true),
            true,
        ),
        (
            exit(1),
            Some("observe"),
            None,
            ("failed", 1, true, false),
            false,
        ),
        (
            exit(0),
            Some("observe"),
            None,
            ("succeeded", 0, true, false),
            true,
        ),
        (
            exit(1),
            None,
            Some(json!([1])),
            ("failed", 1, true, false),
            true,
        ),
        (
            exit(2),
            None,
            Some(json!([1])),
            ("failed", 2, false, true),
            false,
        ),
        (
            exit(1),
            Some("success"),
            None,
            ("failed", 1, false, true),
            false,
        ),
        // An accepted code is success, so it is no expected failure.
        (
            exit(1),
            Some("failure"),
            Some(json!([1])),
            ("failed", 1, false, true),
            true,
        ),
    ];
    for (argv, declared, accepted, want, success) in cases {
        let mut args = json!({ "project": P, "argv": argv });
        if let Some(d) = declared {
            args["result_expectation"] = json!(d);
        }
        if let Some(a) = &accepted {
            args["accepted_exit_codes"] = a.clone();
        }
        let r = env.call("run_process", args.clone()).await;
        assert_eq!(r["success"], success, "{args}: {r}");
        let out = exec_output(&r);
        let (state, code, matched, actionable) = want;
        assert_eq!(
            verdict(out),
            (state, Some(code), Some(matched), actionable),
            "{args}: {out}"
        );
        assert_eq!(
            out["expectation"]["declared"],
            declared.unwrap_or("success"),
            "{args}"
        );
        assert_eq!(
            out["expectation"]["accepted_exit_codes"],
            accepted.clone().unwrap_or(json!([])),
            "{args}"
        );
        // The stored outcome is the process's, whatever was declared.
        let job_id = out["job_id"].as_str().unwrap();
        assert_eq!(work_state(&env.db, job_id).await, state, "{args}");
        // job_status tells the same truth about the ended run.
        let status = env.call("job_status", json!({ "job_id": job_id })).await;
        assert_eq!(status["success"], success, "{args}: {status}");
        assert_eq!(status["error"]["kind"], r["error"]["kind"], "{args}");
        assert_eq!(verdict(exec_output(&status)), verdict(out), "{args}");
    }
}

/// `tool` over MCP: the structuredContent, after checking that `isError` mirrors its
/// `success` and that the text block is the same result.
async fn mcp_call(env: &RunnerApp, tool: &str, args: Value) -> Value {
    let r = tools_call(&env.st, MODERN, Some(&env.key), tool, args).await;
    let result = r.result();
    let sc = result["structuredContent"].clone();
    assert_eq!(
        result["isError"],
        sc["success"] == false,
        "{tool}: {result}"
    );
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap())
        .expect("the text block is JSON");
    assert_eq!(
        text, sc,
        "{tool}: the text block and structuredContent differ"
    );
    sc
}

#[tokio::test]
async fn every_way_an_execution_ends_without_success_is_a_typed_failure_carrying_its_output() {
    let env = start().await;
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), env.root().join("link")).unwrap();
    // (tool, arguments, kind, what the carried output must show)
    type Check = fn(&Value);
    let cases: Vec<(&str, Value, &str, Check)> = vec![
        (
            "run_shell",
            json!({ "project": P, "command": "echo out; echo err >&2; exit 7" }),
            "exit_nonzero",
            |o| {
                assert_eq!(
                    (&o["exit_code"], &o["stdout"], &o["stderr"]),
                    (&json!(7), &json!("out\n"), &json!("err\n")),
                    "{o}"
                )
            },
        ),
        (
            "run_script",
            json!({ "project": P, "script": "echo scripted; exit 5" }),
            "exit_nonzero",
            |o| {
                assert_eq!(
                    (&o["exit_code"], &o["stdout"]),
                    (&json!(5), &json!("scripted\n")),
                    "{o}"
                )
            },
        ),
        (
            "run_shell",
            json!({ "project": P, "command": "echo dying; kill -KILL $$" }),
            "killed_by_signal",
            |o| {
                assert_eq!(
                    (&o["signal"], &o["exit_code"], &o["stdout"]),
                    (&json!(9), &Value::Null, &json!("dying\n")),
                    "{o}"
                )
            },
        ),
        (
            "run_shell",
            json!({ "project": P, "command": "echo before; exec sleep 30", "timeout_ms": 300 }),
            "timed_out",
            |o| {
                assert_eq!(o["stdout"], "before\n", "{o}");
                assert!(o["duration_ms"].is_u64(), "{o}");
            },
        ),
        (
            "run_process",
            json!({ "project": P, "argv": ["pwd"], "cwd": "link" }),
            "execution_rejected",
            |o| {
                assert!(
                    o["error"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("escapes the project root"),
                    "{o}"
                );
                assert_eq!(o["exit_code"], Value::Null, "{o}");
            },
        ),
        (
            "run_process",
            json!({ "project": P, "argv": ["wc-no-such-program-anywhere"] }),
            "spawn_failed",
            |o| {
                assert!(
                    o["error"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("cannot start"),
                    "{o}"
                )
            },
        ),
    ];
    for (tool, args, want, check) in cases {
        // REST answers 200 (checked by `call`): the request was carried out.
        let r = env.call(tool, args.clone()).await;
        let out = failed(&r, want);
        check(out);
        assert_eq!(out["tool"], tool, "{r}");
        assert!(
            out["stdout_truncated"].is_boolean() && out["stderr_bytes"].is_u64(),
            "{out}"
        );
        assert_eq!(out["expectation"]["actionable"], true, "{out}");
        // MCP: isError, and the same kind and output shape.
        let sc = mcp_call(&env, tool, args).await;
        check(failed(&sc, want));
        // job_status of the ended run tells the same truth.
        let status = env
            .call("job_status", json!({ "job_id": out["job_id"] }))
            .await;
        assert_eq!(failed(&status, want)["job_id"], out["job_id"], "{status}");
    }
    assert!(
        std::fs::read_dir(outside.path()).unwrap().next().is_none(),
        "the refused command ran outside the root"
    );
}

#[tokio::test]
async fn a_sync_run_stopped_while_it_waits_answers_cancelled_with_what_it_wrote() {
    let env = start().await;
    let run = {
        let (st, key) = (env.st.clone(), env.key.clone());
        tokio::spawn(async move {
            call(
                &st,
                &key,
                "run_shell",
                json!({ "project": P, "command": "echo started; echo $$ > run.pid; exec sleep 30" }),
            )
            .await
        })
    };
    // Stop the run once its process has started.
    read_pid(&env.root().join("run.pid")).await;
    let jobs = env.call("list_jobs", json!({})).await;
    let job = &output(&jobs)["jobs"][0];
    assert_eq!(job["execution_state"], "running", "{jobs}");
    let job_id = job["job_id"].as_str().unwrap().to_owned();
    let stop = env.call("stop_job", json!({ "job_id": job_id })).await;
    // The stop itself did what was asked.
    assert_eq!(output(&stop)["stop_requested"], true, "{stop}");
    let r = run.await.unwrap();
    let out = failed(&r, "cancelled");
    assert_eq!(
        (&out["job_id"], &out["stdout"]),
        (&json!(job_id), &json!("started\n")),
        "{r}"
    );
    let sc = mcp_call(&env, "job_status", json!({ "job_id": job_id })).await;
    failed(&sc, "cancelled");
}

#[tokio::test]
async fn accepted_exit_codes_make_a_listed_exit_a_success_on_every_run_tool_and_are_bounded() {
    let env = start().await;
    let runs = [
        (
            "run_process",
            json!({ "project": P, "argv": ["sh", "-c", "exit 3"] }),
        ),
        ("run_shell", json!({ "project": P, "command": "exit 3" })),
        ("run_script", json!({ "project": P, "script": "exit 3" })),
    ];
    for (tool, args) in runs {
        let r = env.call(tool, args.clone()).await;
        failed(&r, "exit_nonzero");
        let mut accepted = args.clone();
        accepted["accepted_exit_codes"] = json!([1, 3]);
        let r = env.call(tool, accepted.clone()).await;
        let out = output(&r);
        // The process's facts are not rewritten: it exited 3, which the caller accepted.
        assert_eq!(
            verdict(out),
            ("failed", Some(3), Some(true), false),
            "{tool}: {out}"
        );
        assert_eq!(out["expectation"]["accepted_exit_codes"], json!([1, 3]));
        let sc = mcp_call(&env, tool, accepted).await;
        assert_eq!(sc["success"], true, "{tool}: {sc}");
    }
    // A background job keeps its accepted codes for job_status.
    let r = env
        .call(
            "run_job",
            json!({ "project": P, "command": "exit 3", "accepted_exit_codes": [3] }),
        )
        .await;
    let job_id = output(&r)["job_id"].as_str().unwrap().to_owned();
    let done = await_job(&env.st, &env.key, &job_id, terminal).await;
    assert_eq!(done["exit_code"], 3, "{done}");
    output(&env.call("job_status", json!({ "job_id": job_id })).await);

    // Out of bounds: refused by name before anything is queued.
    let before = work_rows(&env.db).await;
    let too_many: Vec<i32> = (0..33).collect();
    for bad in [json!(too_many), json!([256]), json!([-1]), json!(["1"])] {
        for tool in ["run_process", "run_shell", "run_script", "run_job"] {
            let mut args = match tool {
                "run_process" => json!({ "project": P, "argv": ["true"] }),
                "run_script" => json!({ "project": P, "script": "true" }),
                _ => json!({ "project": P, "command": "true" }),
            };
            args["accepted_exit_codes"] = bad.clone();
            let r = env.call(tool, args).await;
            assert_eq!(kind(&r), "invalid_arguments", "{tool} {bad}: {r}");
            let pointer = r["error"]["pointer"].as_str().unwrap_or_default();
            assert!(
                pointer.starts_with("/accepted_exit_codes"),
                "{tool} {bad}: {r}"
            );
        }
    }
    assert_eq!(
        work_rows(&env.db).await,
        before,
        "a refused request was queued"
    );
}

#[tokio::test]
async fn a_run_still_going_when_the_wait_ends_is_a_running_success_and_its_end_is_told_by_job_status()
 {
    let env = RunnerApp::start_with(
        "alpha",
        ServerConfig {
            exec_wait: Duration::from_millis(200),
            ..Default::default()
        },
    )
    .await;
    let (st, key) = (&env.st, &env.key);
    let r = call(
        st,
        key,
        "run_shell",
        json!({ "project": P, "command": "sleep 1; echo late; exit 4" }),
    )
    .await;
    let out = output(&r);
    assert!(
        matches!(out["execution_state"].as_str(), Some("queued" | "running")),
        "{out}"
    );
    assert_eq!(out["expectation"]["matched"], Value::Null, "{out}");
    let job_id = out["job_id"].as_str().unwrap().to_owned();
    let done = await_job(st, key, &job_id, terminal).await;
    assert_eq!(done["exit_code"], 4, "{done}");
    let r = call(st, key, "job_status", json!({ "job_id": job_id })).await;
    assert_eq!(failed(&r, "exit_nonzero")["execution_state"], "failed");
}
