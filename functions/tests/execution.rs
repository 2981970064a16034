//! The execution tools and the runner path end to end: real Postgres, the real router, the
//! real runner agent (in-process, and the `wc-runner` binary for crashes), real processes.
//! Results, expectations, timeouts that kill whole process groups, output bounds, path
//! confinement, input bounds, jobs, session defaults and evidence, two server instances, a
//! runner crash, and the runner API's refusals over a network connection.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::*;
use serde_json::{Value, json};
use uuid::Uuid;
use wc_functions::AppState;
use wc_functions::auth::token;
use wc_functions::config::ServerConfig;
use wc_functions::wake::Wakeups;
use wc_runner_protocol::{
    HeldLease, OutputChunk, OutputRequest, PROTOCOL_VERSION, PollRequest, QueueKind,
    RegisterRequest, ResultRequest, Stream, Termination, WorkOutcome,
};
use wc_store::credentials::CredentialKind;
use wc_store::testing::TestDatabase;

/// The project every test runs in.
const P: &str = "agent:local:alpha";

/// A database with project P, its state, a shared key, a project root and a connected runner.
struct Env {
    db: TestDatabase,
    st: AppState,
    key: String,
    root: tempfile::TempDir,
    _runner: TestRunner,
}

impl Env {
    async fn start() -> Env {
        let db = TestDatabase::new().await;
        register_project(&db, P).await;
        let st = state(&db);
        let key = full_key(&db).await;
        let root = tempfile::tempdir().unwrap();
        let runner = TestRunner::start(&db, &st, "local", &[("alpha", root.path())]).await;
        Env {
            db,
            st,
            key,
            root,
            _runner: runner,
        }
    }

    /// The canonical project root (what the runner resolves cwd against).
    fn root(&self) -> PathBuf {
        self.root.path().canonicalize().unwrap()
    }

    /// `tool` over REST with the shared key.
    async fn call(&self, tool: &str, args: Value) -> Value {
        call(&self.st, &self.key, tool, args).await
    }
}

/// The error kinds of an execution that ran, or that its runner refused, without success.
const EXECUTION_KINDS: [&str; 7] = [
    "execution_rejected",
    "spawn_failed",
    "exit_nonzero",
    "killed_by_signal",
    "timed_out",
    "cancelled",
    "lost",
];

/// `POST /api/actions/{tool}`; returns the `{success, output, error}` body after checking
/// that the HTTP status agrees with it: 200 for a success and for an execution that ended
/// without success (the request was carried out), an error status for a refusal.
async fn call(st: &AppState, key: &str, tool: &str, args: Value) -> Value {
    let r = rest(st, &format!("/api/actions/{tool}"), Some(key), args).await;
    let outcome = r.body["error"]["kind"]
        .as_str()
        .is_some_and(|k| EXECUTION_KINDS.contains(&k));
    if r.body["success"] == true || outcome {
        assert_eq!(r.status, StatusCode::OK, "{tool}: {}", r.text());
    } else {
        assert!(
            r.status.is_client_error() || r.status == StatusCode::SERVICE_UNAVAILABLE,
            "{tool}: a refusal answered HTTP {}: {}",
            r.status,
            r.text()
        );
    }
    r.body
}

/// The output of a successful result.
#[track_caller]
fn output(v: &Value) -> &Value {
    assert_eq!(v["success"], true, "expected success: {v}");
    &v["output"]
}

/// The error kind of a failed result.
#[track_caller]
fn kind(v: &Value) -> &str {
    assert_eq!(v["success"], false, "expected a failure: {v}");
    v["error"]["kind"].as_str().expect("error.kind")
}

/// The output of an execution that ended without success as `kind`: the result is a failure
/// that still carries the whole execution view, and its error names the same job.
#[track_caller]
fn failed<'a>(v: &'a Value, want: &str) -> &'a Value {
    assert_eq!(kind(v), want, "{v}");
    let out = &v["output"];
    assert!(
        out["job_id"].is_string(),
        "a failed execution lost its output: {v}"
    );
    assert_eq!(v["error"]["job_id"], out["job_id"], "{v}");
    assert_eq!(v["error"]["execution_state"], out["execution_state"], "{v}");
    assert!(
        !v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .is_empty(),
        "{v}"
    );
    out
}

/// The error kind an execution view must answer with, by the contract: none while pending or
/// after exit 0 or an accepted exit code; otherwise the kind of how it ended.
fn expected_kind(out: &Value) -> Option<&'static str> {
    let accepted = out["expectation"]["accepted_exit_codes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    match out["execution_state"].as_str().unwrap() {
        "queued" | "running" | "succeeded" => None,
        "failed" => match out["exit_code"].as_i64() {
            Some(c) if accepted.contains(&json!(c)) => None,
            Some(_) => Some("exit_nonzero"),
            None => Some("killed_by_signal"),
        },
        "timed_out" => Some("timed_out"),
        "cancelled" => Some("cancelled"),
        "rejected" => Some("execution_rejected"),
        "spawn_failed" => Some("spawn_failed"),
        "lost" => Some("lost"),
        other => panic!("unknown execution_state {other}"),
    }
}

/// The output of an execution result, checking that `success` and `error.kind` tell the truth
/// about it, whichever way it went.
#[track_caller]
fn exec_output(v: &Value) -> &Value {
    let out = &v["output"];
    match expected_kind(out) {
        None => assert_eq!(v["success"], true, "{v}"),
        Some(k) => {
            failed(v, k);
        }
    }
    out
}

/// (execution_state, exit_code, matched, actionable) of an execution output.
fn verdict(out: &Value) -> (&str, Option<i64>, Option<bool>, bool) {
    (
        out["execution_state"].as_str().unwrap(),
        out["exit_code"].as_i64(),
        out["expectation"]["matched"].as_bool(),
        out["expectation"]["actionable"].as_bool().unwrap(),
    )
}

/// How many `runner_work` rows exist.
async fn work_rows(db: &TestDatabase) -> i64 {
    let client = db.pool().get().await.unwrap();
    client
        .query_one("SELECT count(*) FROM runner_work", &[])
        .await
        .unwrap()
        .get(0)
}

/// The stored queue state of one work item.
async fn work_state(db: &TestDatabase, job_id: &str) -> String {
    let id: Uuid = job_id.parse().unwrap();
    let client = db.pool().get().await.unwrap();
    client
        .query_one("SELECT state FROM runner_work WHERE id = $1", &[&id])
        .await
        .unwrap()
        .get(0)
}

/// Polls job_status until `done` holds (bounded); returns the last status output.
async fn await_job(
    st: &AppState,
    key: &str,
    job_id: &str,
    within: Duration,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let r = call(st, key, "job_status", json!({ "job_id": job_id })).await;
        let out = exec_output(&r).clone();
        if done(&out) {
            return out;
        }
        assert!(
            Instant::now() < deadline,
            "job {job_id} did not get there within {within:?}: {out}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn terminal(out: &Value) -> bool {
    !matches!(out["execution_state"].as_str(), Some("queued" | "running"))
}

/// Whether process `pid` no longer runs: gone (ESRCH), or a zombie nobody reaped (this
/// machine's PID 1 may not reap orphans).
fn process_ended(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state follows the parenthesized command name, which may itself hold spaces.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|s| s == "Z" || s == "X"),
    }
}

/// Waits (bounded) until the process `pid` names has ended.
async fn assert_process_ends(pid: JobPid, within: Duration) {
    let deadline = Instant::now() + within;
    while let Some(host) = pid.on_host().filter(|&p| !process_ended(p)) {
        assert!(
            Instant::now() < deadline,
            "process {pid:?} (host pid {host}) still runs: {:?}",
            std::fs::read_to_string(format!("/proc/{host}/stat"))
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A pid a job wrote (`$$`, `$!`): as the job saw it, in its own PID namespace when sandboxed,
/// and the directory the process was started in.
#[derive(Debug, Clone)]
struct JobPid {
    seen: i32,
    cwd: PathBuf,
}

impl JobPid {
    /// The host pid of the process while it runs: the one whose innermost pid (the last `NSpid`
    /// entry, the only one outside a namespace) is `seen` and whose cwd is `cwd`.
    fn on_host(&self) -> Option<i32> {
        std::fs::read_dir("/proc")
            .ok()?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .find(|pid| {
                let innermost = std::fs::read_to_string(format!("/proc/{pid}/status"))
                    .ok()
                    .and_then(|s| {
                        s.lines()
                            .find_map(|l| l.strip_prefix("NSpid:"))
                            .and_then(|ids| ids.split_whitespace().last()?.parse::<i32>().ok())
                    });
                innermost == Some(self.seen)
                    && std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c == self.cwd)
            })
    }
}

/// Reads a pid written by a command into a file in its cwd, waiting (bounded) for the file to
/// be complete.
async fn read_pid(path: &Path) -> JobPid {
    let cwd = path.parent().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.ends_with('\n')
            && let Ok(seen) = text.trim().parse()
        {
            return JobPid { seen, cwd };
        }
        assert!(
            Instant::now() < deadline,
            "no pid in {} within 10 s",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// 1-2. Results and expectations

#[tokio::test]
async fn run_tools_report_exit_codes_output_and_stdin_as_the_process_produced_them() {
    let env = Env::start().await;

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
    assert_eq!(sc["output"]["stdout"], "ok\n", "{sc}");
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
    let env = Env::start().await;
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
async fn mcp_call(env: &Env, tool: &str, args: Value) -> Value {
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
    let env = Env::start().await;
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
    let env = Env::start().await;
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
    let env = Env::start().await;
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
    let done = await_job(
        &env.st,
        &env.key,
        &job_id,
        Duration::from_secs(10),
        terminal,
    )
    .await;
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
    let db = TestDatabase::new().await;
    register_project(&db, P).await;
    let st = state_with(
        &db,
        ServerConfig {
            exec_wait: Duration::from_millis(200),
            ..Default::default()
        },
    );
    let key = full_key(&db).await;
    let root = tempfile::tempdir().unwrap();
    let _runner = TestRunner::start(&db, &st, "local", &[("alpha", root.path())]).await;
    let r = call(
        &st,
        &key,
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
    let done = await_job(&st, &key, &job_id, Duration::from_secs(15), terminal).await;
    assert_eq!(done["exit_code"], 4, "{done}");
    let r = call(&st, &key, "job_status", json!({ "job_id": job_id })).await;
    assert_eq!(failed(&r, "exit_nonzero")["execution_state"], "failed");
}

// ---------------------------------------------------------------------------------------------
// 3-4. Timeouts and output bounds

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group_including_a_grandchild_that_ignores_sigint() {
    let env = Env::start().await;
    let pidfile = env.root().join("grandchild.pid");
    let started = Instant::now();
    let r = env
        .call(
            "run_shell",
            json!({
                "project": P,
                "command": "(trap '' INT TERM; exec sleep 30) & echo $! > grandchild.pid; wait",
                "timeout_ms": 500,
            }),
        )
        .await;
    let out = failed(&r, "timed_out");
    assert_eq!(out["execution_state"], "timed_out", "{out}");
    assert_eq!(out["exit_code"], Value::Null, "{out}");
    assert_eq!(
        (
            out["expectation"]["matched"].as_bool(),
            out["expectation"]["actionable"].as_bool()
        ),
        (Some(false), Some(true))
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the timed-out call took {:?}",
        started.elapsed()
    );
    // Stored as a failure; the caller-facing state names the timeout.
    assert_eq!(
        work_state(&env.db, out["job_id"].as_str().unwrap()).await,
        "failed"
    );
    let pid = read_pid(&pidfile).await;
    assert_process_ends(pid, Duration::from_secs(3)).await;
}

#[tokio::test]
async fn sync_output_keeps_the_first_64_kib_per_stream_and_counts_the_rest() {
    let env = Env::start().await;
    let r = env
        .call(
            "run_shell",
            json!({
                "project": P,
                "command": "head -c 100000 /dev/zero | tr '\\000' x; head -c 70000 /dev/zero | tr '\\000' e >&2",
            }),
        )
        .await;
    let out = output(&r);
    assert_eq!(out["execution_state"], "succeeded", "{}", out["stderr"]);
    let stdout = out["stdout"].as_str().unwrap();
    assert_eq!(stdout.len(), 65_536);
    assert!(stdout.bytes().all(|b| b == b'x'));
    assert_eq!(out["stdout_truncated"], true);
    assert_eq!(out["stdout_bytes"], 100_000);
    let stderr = out["stderr"].as_str().unwrap();
    assert_eq!(stderr.len(), 65_536);
    assert!(stderr.bytes().all(|b| b == b'e'));
    assert_eq!(out["stderr_truncated"], true);
    assert_eq!(out["stderr_bytes"], 70_000);

    // Exactly the bound is no truncation.
    let r = env
        .call(
            "run_shell",
            json!({ "project": P, "command": "head -c 65536 /dev/zero | tr '\\000' y" }),
        )
        .await;
    let out = output(&r);
    assert_eq!(out["stdout"].as_str().unwrap().len(), 65_536);
    assert_eq!(out["stdout_truncated"], false);
    assert_eq!(out["stdout_bytes"], 65_536);
}

// ---------------------------------------------------------------------------------------------
// 5-6. Confinement and bad input

#[tokio::test]
async fn cwd_outside_the_project_is_refused_and_a_symlink_escape_never_runs() {
    let env = Env::start().await;
    for cwd in [
        "../x",
        "/etc",
        "file:x",
        "sub/../../x",
        "~/x",
        "https://example.com/x",
    ] {
        let r = env
            .call(
                "run_process",
                json!({ "project": P, "argv": ["touch", "escaped"], "cwd": cwd }),
            )
            .await;
        assert_eq!(kind(&r), "invalid_arguments", "{cwd}: {r}");
    }
    assert_eq!(work_rows(&env.db).await, 0, "a refused cwd was queued");

    // A symlink inside the root that points outside resolves outside: the runner refuses it
    // before anything starts.
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), env.root().join("link")).unwrap();
    let marker = format!("marker-{}", Uuid::new_v4());
    let r = env
        .call(
            "run_process",
            json!({ "project": P, "argv": ["touch", marker], "cwd": "link" }),
        )
        .await;
    let out = failed(&r, "execution_rejected");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("escapes the project root"),
        "{r}"
    );
    assert_eq!(out["execution_state"], "rejected", "{out}");
    assert_eq!(out["exit_code"], Value::Null);
    let error = out["error"].as_str().unwrap_or_default();
    assert!(error.contains("escapes the project root"), "{out}");
    assert_eq!(out["expectation"]["actionable"], true);
    for dir in [
        env.root(),
        outside.path().to_path_buf(),
        std::env::current_dir().unwrap(),
    ] {
        assert!(
            !dir.join(&marker).exists(),
            "the refused command ran in {}",
            dir.display()
        );
    }

    // A cwd that is a real directory inside the root is fine.
    std::fs::create_dir(env.root().join("inside")).unwrap();
    let r = env
        .call(
            "run_process",
            json!({ "project": P, "argv": ["pwd"], "cwd": "./inside/" }),
        )
        .await;
    assert_eq!(
        output(&r)["stdout"],
        format!("{}\n", env.root().join("inside").display())
    );
}

#[tokio::test]
async fn bad_input_unknown_projects_and_absent_runners_are_refused_before_anything_is_queued() {
    let env = Env::start().await;

    // The shell text bound is in UTF-8 bytes: ASCII over it, and text under the character
    // count but over the byte count.
    let ascii = format!("#{}", "x".repeat(16_000));
    let accented = format!("#{}", "é".repeat(8_000));
    assert_eq!((ascii.len(), accented.len()), (16_001, 16_001));
    for command in [&ascii, &accented] {
        for tool in ["run_shell", "run_job"] {
            let r = env
                .call(tool, json!({ "project": P, "command": command }))
                .await;
            assert_eq!(kind(&r), "invalid_arguments", "{tool}: {r}");
            assert_eq!(r["error"]["pointer"], "/command", "{tool}: {r}");
        }
    }
    let r = env
        .call(
            "run_process",
            json!({ "project": P, "argv": ["echo", "a\u{0}b"] }),
        )
        .await;
    assert_eq!(kind(&r), "invalid_arguments", "{r}");
    assert_eq!(r["error"]["pointer"], "/argv/1", "{r}");
    let r = env
        .call(
            "run_process",
            json!({ "project": "agent:local:nope", "argv": ["true"] }),
        )
        .await;
    assert_eq!(kind(&r), "unknown_project", "{r}");

    // A registered project whose runner exists but has never connected.
    register_project(&env.db, "agent:ghost:beta").await;
    {
        let client = env.db.pool().get().await.unwrap();
        let secret = wc_functions::runner_api::auth::generate();
        wc_store::runners::create(&client, "ghost", None, &token::digest(&secret), true)
            .await
            .unwrap()
            .unwrap();
    }
    for (tool, args) in [
        (
            "run_process",
            json!({ "project": "agent:ghost:beta", "argv": ["true"] }),
        ),
        (
            "run_job",
            json!({ "project": "agent:ghost:beta", "command": "true" }),
        ),
    ] {
        let r = env.call(tool, args).await;
        assert_eq!(kind(&r), "runner_unavailable", "{tool}: {r}");
        assert_eq!(r["error"]["runner"], "ghost", "{r}");
    }
    assert_eq!(work_rows(&env.db).await, 0, "refused work was queued");

    // Exactly the bound is accepted and runs.
    let at_bound = format!("#{}", "x".repeat(15_999));
    let r = env
        .call("run_shell", json!({ "project": P, "command": at_bound }))
        .await;
    assert_eq!(output(&r)["execution_state"], "succeeded", "{r}");
    assert_eq!(work_rows(&env.db).await, 1);
}

// ---------------------------------------------------------------------------------------------
// 7. Jobs

/// job_log of `job_id` with `args`; its output.
async fn job_log(env: &Env, job_id: &str, mut args: Value) -> Value {
    args["job_id"] = json!(job_id);
    output(&env.call("job_log", args).await).clone()
}

#[tokio::test]
async fn jobs_run_in_the_background_and_can_be_followed_read_stopped_and_listed() {
    let env = Env::start().await;
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
    let done = await_job(&env.st, &env.key, &lines, Duration::from_secs(10), terminal).await;
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
            json!({ "project": P, "command": "echo $$ > sleeper.pid; exec sleep 30" }),
        )
        .await;
    let sleeper = output(&r)["job_id"].as_str().unwrap().to_owned();
    await_job(&env.st, &env.key, &sleeper, Duration::from_secs(10), |o| {
        o["execution_state"] == "running"
    })
    .await;
    let pid = read_pid(&env.root().join("sleeper.pid")).await;
    assert!(pid.on_host().is_some(), "the sleeper runs: {pid:?}");
    let asked = Instant::now();
    let r = env.call("stop_job", json!({ "job_id": sleeper })).await;
    let stop = output(&r);
    assert_eq!(stop["stop_requested"], true, "{stop}");
    assert_eq!(stop["job"]["job_id"], sleeper.as_str());
    let ended = await_job(
        &env.st,
        &env.key,
        &sleeper,
        Duration::from_secs(5),
        terminal,
    )
    .await;
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
    assert!(asked.elapsed() < Duration::from_secs(5));
    assert_eq!(work_state(&env.db, &sleeper).await, "cancelled");
    assert_process_ends(pid, Duration::from_secs(3)).await;

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
    // A malformed id is refused for its form, naming the field, before any lookup.
    let r = call(
        &env.st,
        &other,
        "job_status",
        json!({ "job_id": "not-a-uuid" }),
    )
    .await;
    assert_eq!(kind(&r), "invalid_arguments", "{r}");
    assert_eq!(r["error"]["pointer"], "/job_id", "{r}");
    let r = call(&env.st, &other, "list_jobs", json!({})).await;
    assert_eq!(output(&r)["returned"], 0, "{r}");
}

// ---------------------------------------------------------------------------------------------
// 8. Session defaults and evidence

/// Starts a session on P in `mode` and returns its id.
async fn session(env: &Env, mode: &str) -> String {
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
    let env = Env::start().await;
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
    let queued_before = work_rows(&env.db).await;
    let ro = session(&env, "read_only").await;
    let r = env
        .call("run_shell", json!({ "session_id": ro, "command": "true" }))
        .await;
    assert_eq!(kind(&r), "mode_denied", "{r}");
    let remote = session(&env, "normal").await;
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

// ---------------------------------------------------------------------------------------------
// 9. Two instances

#[tokio::test]
async fn work_sent_to_one_instance_completes_through_a_runner_connected_to_another() {
    let db = TestDatabase::new().await;
    register_project(&db, P).await;
    let key = full_key(&db).await;
    let root = tempfile::tempdir().unwrap();
    let a = state(&db);
    let _runner = TestRunner::start(&db, &a, "local", &[("alpha", root.path())]).await;
    let b = second_instance(&db, ServerConfig::default()).with_wakeups(Wakeups::listening(
        wc_store::connect::Connector::new(&db.config()).unwrap(),
    ));
    let started = Instant::now();
    let r = call(
        &b,
        &key,
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
    assert_eq!(
        out["stdout"],
        format!("from {}\n", root.path().canonicalize().unwrap().display())
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    // Either instance reads the same job.
    let job_id = out["job_id"].as_str().unwrap();
    let via_a = output(&call(&a, &key, "job_status", json!({ "job_id": job_id })).await).clone();
    assert_eq!(via_a["execution_state"], "succeeded");
}

// ---------------------------------------------------------------------------------------------
// 10. A runner crash

/// A `wc-runner` process; killed when dropped.
struct RunnerProcess(std::process::Child);

impl RunnerProcess {
    fn spawn(config: &Path) -> RunnerProcess {
        let bin = wc_e2e::server::workspace_binary("wc-runner");
        RunnerProcess(
            std::process::Command::new(bin)
                .arg("--config")
                .arg(config)
                .env_remove("WC_RUNNER_TOKEN")
                .env("WC_RUNNER_LOG", "warn")
                .stdin(std::process::Stdio::null())
                .spawn()
                .expect("start wc-runner"),
        )
    }

    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for RunnerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn current_instance(db: &TestDatabase, client_id: &str) -> Option<Uuid> {
    let client = db.pool().get().await.unwrap();
    wc_store::runners::get(&client, client_id)
        .await
        .unwrap()
        .and_then(|r| r.instance_id)
}

/// Waits (bounded) until a runner instance other than `before` has registered.
async fn await_registration(db: &TestDatabase, client_id: &str, before: Option<Uuid>) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while current_instance(db, client_id).await == before {
        assert!(Instant::now() < deadline, "wc-runner did not register");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_crashed_runners_work_becomes_lost_and_is_never_run_again() {
    let db = TestDatabase::new().await;
    register_project(&db, P).await;
    let key = full_key(&db).await;
    let st = state_with(
        &db,
        ServerConfig {
            runner_lease: Duration::from_millis(1500),
            ..Default::default()
        },
    );
    let base_url = serve(st.clone()).await;
    let secret = wc_functions::runner_api::auth::generate();
    {
        let client = db.pool().get().await.unwrap();
        wc_store::runners::create(&client, "local", None, &token::digest(&secret), true)
            .await
            .unwrap()
            .unwrap();
    }
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    let conf_dir = tempfile::tempdir().unwrap();
    let config = conf_dir.path().join("runner.toml");
    std::fs::write(
        &config,
        format!(
            "server_url = {base_url:?}\nclient_id = \"local\"\ntoken = {secret:?}\n\
             queue = \"api-poll\"\n[projects]\nalpha = {:?}\n",
            root_path.display().to_string()
        ),
    )
    .unwrap();

    let mut first = RunnerProcess::spawn(&config);
    await_registration(&db, "local", None).await;
    let first_instance = current_instance(&db, "local").await;
    // Work is sent soon after each registration: an idle runner long-polls for up to 20 s
    // without being seen again, so under a 1.5 s lease it counts as disconnected (and
    // run_* answers runner_unavailable) from 1.5 s after its last poll started or ended.
    let r = call(
        &st,
        &key,
        "run_job",
        json!({
            "project": P,
            "command": "echo $$ > job.pid; echo ran >> lines.txt; exec sleep 30",
        }),
    )
    .await;
    let job_id = output(&r)["job_id"].as_str().unwrap().to_owned();
    let lines = root_path.join("lines.txt");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(&lines)
        .unwrap_or_default()
        .is_empty()
    {
        assert!(Instant::now() < deadline, "the job never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = read_pid(&root_path.join("job.pid")).await;
    assert!(pid.on_host().is_some(), "the job runs: {pid:?}");

    // The runner dies without a word; its sandboxed job dies with it, so nothing lingers.
    first.kill();
    assert_process_ends(pid, Duration::from_secs(3)).await;

    let lost = await_job(&st, &key, &job_id, Duration::from_secs(6), terminal).await;
    assert_eq!(lost["execution_state"], "lost", "{lost}");
    let error = lost["error"].as_str().unwrap_or_default();
    assert!(error.contains("lease"), "{lost}");
    assert_eq!(
        (
            lost["expectation"]["matched"].as_bool(),
            lost["expectation"]["actionable"].as_bool()
        ),
        (Some(false), Some(true))
    );
    // Reading wrote nothing: the stored lease ends when the reaper runs.
    assert_eq!(work_state(&db, &job_id).await, "leased");
    wc_functions::maintenance::run_once(db.pool(), None, false)
        .await
        .unwrap();
    assert_eq!(work_state(&db, &job_id).await, "lost");

    // A new instance runs new work, and never the lost job.
    let _second = RunnerProcess::spawn(&config);
    await_registration(&db, "local", first_instance).await;
    // Idle for longer than the lease: the runner's long poll is cut to half a lease, so it is
    // seen again in time and stays online.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let r = call(
        &st,
        &key,
        "run_process",
        json!({ "project": P, "argv": ["cat", "lines.txt"] }),
    )
    .await;
    let out = output(&r);
    assert_eq!(
        verdict(out),
        ("succeeded", Some(0), Some(true), false),
        "{out}"
    );
    assert_eq!(out["stdout"], "ran\n");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(std::fs::read_to_string(&lines).unwrap(), "ran\n");
    assert_eq!(
        work_state(&db, &job_id).await,
        "lost",
        "lost work was requeued"
    );
    let r = call(&st, &key, "job_status", json!({ "job_id": job_id })).await;
    assert_eq!(failed(&r, "lost")["execution_state"], "lost");
    // The same over MCP: a failed call that still carries the job's state.
    let r = tools_call(
        &st,
        MODERN,
        Some(&key),
        "job_status",
        json!({ "job_id": job_id }),
    )
    .await;
    assert_eq!(r.result()["isError"], true, "{}", r.text());
    let sc = &r.result()["structuredContent"];
    assert_eq!(failed(sc, "lost")["job_id"], job_id.as_str());
}

// ---------------------------------------------------------------------------------------------
// 11. The runner API's refusals

#[tokio::test]
async fn the_runner_api_refuses_bad_requests_stale_leases_old_instances_and_revoked_tokens() {
    let db = TestDatabase::new().await;
    register_project(&db, P).await;
    let key = full_key(&db).await;
    let st = state(&db);
    let base = serve(st.clone()).await;
    let secret = wc_functions::runner_api::auth::generate();
    {
        let client = db.pool().get().await.unwrap();
        wc_store::runners::create(&client, "local", None, &token::digest(&secret), true)
            .await
            .unwrap()
            .unwrap();
    }
    let http = wc_e2e::client::Client::new();
    let post = |op: &str, body: Vec<u8>, auth: Option<String>| {
        let url = format!("{base}/runner/v1/{op}");
        let http = http.clone();
        async move {
            let bearer = auth.map(|t| format!("Bearer {t}"));
            let mut headers = vec![("content-type", "application/json")];
            if let Some(b) = &bearer {
                headers.push(("authorization", b.as_str()));
            }
            http.send(Method::POST, &url, &headers, body).await.unwrap()
        }
    };
    let send = |op: &'static str, body: Value| {
        post(op, serde_json::to_vec(&body).unwrap(), Some(secret.clone()))
    };

    let register = |instance: Uuid| {
        serde_json::to_value(RegisterRequest {
            protocol_version: PROTOCOL_VERSION,
            instance_id: instance,
            projects: vec!["alpha".into()],
            agent_version: "test".into(),
            queue: QueueKind::ApiPoll,
            max_concurrency: 1,
        })
        .unwrap()
    };
    let first = Uuid::now_v7();
    let r = send("register", register(first)).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));

    // Malformed JSON.
    let r = post("poll", b"{\"instance_id\": ".to_vec(), Some(secret.clone())).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["kind"], "invalid_request", "{}", r.json());

    // Work to hold a lease on.
    let job = call(
        &st,
        &key,
        "run_job",
        json!({ "project": P, "argv": ["true"] }),
    )
    .await;
    let job_id = output(&job)["job_id"].as_str().unwrap().to_owned();
    let r = send(
        "poll",
        serde_json::to_value(PollRequest {
            instance_id: first,
            wait_ms: 0,
            max_items: 1,
        })
        .unwrap(),
    )
    .await;
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
        let r = call(&st, &key, "job_log", json!({ "job_id": job_id })).await;
        output(&r)["kept_bytes"].as_u64().unwrap()
    };

    // 17 chunks, and one chunk of 64 KiB + 1, are refused whole.
    let r = send(
        "output",
        output_req((0..17).map(|i| chunk(i, b"a")).collect()),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["kind"], "invalid_request", "{}", r.json());
    let r = send("output", output_req(vec![chunk(0, &vec![b'b'; 65_537])])).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["kind"], "invalid_request", "{}", r.json());
    assert_eq!(kept().await, 0, "a refused request stored output");
    // At the bounds both are accepted.
    let r = send(
        "output",
        output_req((0..16).map(|i| chunk(i, b"a")).collect()),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json(), json!({ "status": "accepted", "state": "leased" }));
    assert_eq!(kept().await, 16);

    // A result under a wrong lease token changes nothing.
    let outcome = WorkOutcome {
        termination: Termination::Exited,
        exit_code: Some(0),
        signal: None,
        error: None,
        duration_ms: 5,
        stdout_bytes: 16,
        stderr_bytes: 0,
        stdout_truncated: false,
        stderr_truncated: false,
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
    let r = send("result", serde_json::to_value(&wrong).unwrap()).await;
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
    let r = send("register", register(second)).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["lost_work"], 1, "{}", r.json());
    let poll = |instance: Uuid| {
        serde_json::to_value(PollRequest {
            instance_id: instance,
            wait_ms: 0,
            max_items: 1,
        })
        .unwrap()
    };
    let r = send("poll", poll(first)).await;
    assert_eq!(r.status, 409);
    assert_eq!(r.json()["error"]["kind"], "instance_replaced");
    let right = ResultRequest {
        lease: held,
        ..wrong
    };
    let r = send("result", serde_json::to_value(&right).unwrap()).await;
    assert_eq!(r.json(), json!({ "status": "lease_lost", "state": "lost" }));
    let r = send("poll", poll(second)).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!({ "leases": [] }));

    // A revoked token is refused outright.
    {
        let client = db.pool().get().await.unwrap();
        assert!(wc_store::runners::revoke(&client, "local").await.unwrap());
    }
    let r = send("poll", poll(second)).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"]["kind"], "unauthorized");
    assert!(r.header("www-authenticate").is_some());
    // And a tool credential is no runner token.
    let r = post(
        "poll",
        serde_json::to_vec(&poll(second)).unwrap(),
        Some(key.clone()),
    )
    .await;
    assert_eq!(r.status, 401);
}
