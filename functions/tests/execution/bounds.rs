//! Timeouts that kill whole process groups, and output kept within its bounds.

use super::*;

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group_including_a_grandchild_that_ignores_sigint() {
    let env = start().await;
    let pidfile = env.root().join("grandchild.pid");
    let r = env
        .call(
            "run_shell",
            json!({
                "project": P,
                "command": "(trap '' INT TERM; exec sleep 600) & echo $! > grandchild.pid; wait",
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
    // Stored as a failure; the caller-facing state names the timeout.
    assert_eq!(
        work_state(&env.db, out["job_id"].as_str().unwrap()).await,
        "failed"
    );
    // The grandchild would sleep for ten minutes: it ends only because it was killed.
    let pid = read_pid(&pidfile).await;
    assert_process_ends(pid).await;
}

#[tokio::test]
async fn sync_output_keeps_the_first_64_kib_per_stream_and_counts_the_rest() {
    let env = start().await;
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
