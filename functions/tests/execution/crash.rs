//! A runner crash: its work becomes lost and is never run again.

use super::*;

/// A `wc-runner` process; killed when dropped.
pub(super) struct RunnerProcess(std::process::Child);

impl RunnerProcess {
    pub(super) fn spawn(config: &Path) -> RunnerProcess {
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

    /// SIGKILL, then reaped.
    pub(super) fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for RunnerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

#[tokio::test]
async fn a_crashed_runners_work_becomes_lost_and_is_never_run_again() {
    let app = TestApp::with_config(
        &[P],
        ServerConfig {
            runner_lease: Duration::from_millis(1500),
            ..Default::default()
        },
    )
    .await;
    let (db, st, key) = (&app.db, &app.st, &app.key);
    let base_url = app.serve().await;
    let secret = app.runner_token("local").await;
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
    let first_instance = await_registration(db, "local", None).await;
    // Under a 1.5 s lease a runner counts as disconnected (and run_* answers
    // runner_unavailable, starting nothing) from 1.5 s after it was last seen: the job is sent
    // until the server counts the runner as connected, which its next poll makes it.
    let job_id = eventually("the runner takes the job", async || {
        let r = call(
            st,
            key,
            "run_job",
            json!({
                "project": P,
                "command": "echo $$ > job.pid; echo ran >> lines.txt; exec sleep 600",
            }),
        )
        .await;
        if r["error"]["kind"] == "runner_unavailable" {
            return None;
        }
        Some(output(&r)["job_id"].as_str().unwrap().to_owned())
    })
    .await;
    let lines = root_path.join("lines.txt");
    eventually("the job starts", async || {
        (!std::fs::read_to_string(&lines)
            .unwrap_or_default()
            .is_empty())
        .then_some(())
    })
    .await;
    let pid = read_pid(&root_path.join("job.pid")).await;
    assert!(pid.on_host().is_some(), "the job runs: {pid:?}");

    // The runner dies without a word; its sandboxed job dies with it, so nothing lingers.
    first.kill();
    assert_process_ends(pid).await;

    let lost = await_job(st, key, &job_id, terminal).await;
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
    assert_eq!(work_state(db, &job_id).await, "leased");
    wc_functions::maintenance::run_once(db.pool(), None, &*st.deps.work_ends, false)
        .await
        .unwrap();
    assert_eq!(work_state(db, &job_id).await, "lost");

    // A new instance runs new work, and never the lost job.
    let _second = RunnerProcess::spawn(&config);
    await_registration(db, "local", Some(first_instance)).await;
    // Idle for longer than the lease: the runner's long poll is cut to half a lease, so it is
    // seen again in time and stays online. Waits until its row says it was seen over a lease
    // after it registered.
    eventually(
        "the idle runner is seen over a lease after registering",
        async || {
            let client = db.pool().get().await.unwrap();
            client
                .query_one(
                    "SELECT last_seen_at > instance_started_at + interval '2500 milliseconds' \
                 FROM runners WHERE client_id = 'local'",
                    &[],
                )
                .await
                .unwrap()
                .get::<_, Option<bool>>(0)
                .filter(|&seen| seen)
        },
    )
    .await;
    // New work runs, twice: the second through a later poll that would have been handed the
    // lost job first had it been queued again. The job's line is there once.
    for _ in 0..2 {
        let r = call(
            st,
            key,
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
    }
    assert_eq!(std::fs::read_to_string(&lines).unwrap(), "ran\n");
    assert_eq!(
        work_state(db, &job_id).await,
        "lost",
        "lost work was requeued"
    );
    let r = call(st, key, "job_status", json!({ "job_id": job_id })).await;
    assert_eq!(failed(&r, "lost")["execution_state"], "lost");
    // The same over MCP: a failed call that still carries the job's state.
    let r = tools_call(
        st,
        MODERN,
        Some(key),
        "job_status",
        json!({ "job_id": job_id }),
    )
    .await;
    assert_eq!(r.result()["isError"], true, "{}", r.text());
    let sc = &r.result()["structuredContent"];
    assert_eq!(failed(sc, "lost")["job_id"], job_id.as_str());
}
