//! The execution tools and the runner path end to end: real Postgres, the real router, the
//! real runner agent (in-process, and the `wc-runner` binary for crashes), real processes.
//! Results, expectations, timeouts that kill whole process groups, output bounds, path
//! confinement, input bounds, jobs, session defaults and evidence, two server instances, a
//! runner crash, durable MCP tasks, and the runner API's refusals over a network connection.

#[path = "../common/mod.rs"]
mod common;

mod bounds;
mod confinement;
mod crash;
mod instances;
mod jobs;
mod results;
mod runner_api;
mod session_defaults;
mod shells;
mod tasks;

use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::http::StatusCode;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::*;
use serde_json::{Value, json};
use uuid::Uuid;
use wc_functions::AppState;
use wc_functions::config::ServerConfig;
use wc_functions::wake::Wakeups;
use wc_runner_protocol::{
    HeldLease, OutputChunk, OutputRequest, ResultRequest, Stream, Termination, WorkOutcome,
};
use wc_store::credentials::CredentialKind;
use wc_store::testing::TestDatabase;

/// The project every test runs in.
const P: &str = "agent:local:alpha";

impl RunnerApp {
    /// `tool` over REST with the shared key.
    async fn call(&self, tool: &str, args: Value) -> Value {
        call(&self.st, &self.key, tool, args).await
    }
}

/// Project P served by a connected runner.
async fn start() -> RunnerApp {
    RunnerApp::start("alpha").await
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
    let r = action(st, key, tool, args).await;
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

/// Polls job_status until `done` holds; returns that status output.
async fn await_job(st: &AppState, key: &str, job_id: &str, done: impl Fn(&Value) -> bool) -> Value {
    eventually(&format!("job {job_id} gets there"), async || {
        let r = call(st, key, "job_status", json!({ "job_id": job_id })).await;
        Some(exec_output(&r).clone()).filter(|out| done(out))
    })
    .await
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

/// Waits until the process `pid` names has ended. The processes tests wait on sleep far
/// longer than a wait may last, so only a kill ends them in time.
async fn assert_process_ends(pid: JobPid) {
    eventually(&format!("process {pid:?} ends"), async || {
        pid.on_host()
            .filter(|&p| !process_ended(p))
            .is_none()
            .then_some(())
    })
    .await
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

/// Reads a pid written by a command into a file in its cwd, once the file is complete.
async fn read_pid(path: &Path) -> JobPid {
    let cwd = path.parent().unwrap().to_owned();
    let seen = eventually(&format!("a pid in {}", path.display()), async || {
        std::fs::read_to_string(path)
            .ok()
            .filter(|text| text.ends_with('\n'))
            .and_then(|text| text.trim().parse().ok())
    })
    .await;
    JobPid { seen, cwd }
}
