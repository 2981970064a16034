//! Persistent shells end to end: a real bash/sh process owned by the in-process runner, its
//! row in Postgres shared by two server instances, lifecycle evidence in the ledger, and the
//! process group gone (checked on the host's /proc) whenever the shell is released.

use super::*;

/// Starts a session on P in `mode` and returns its id.
async fn session(env: &RunnerApp, mode: &str) -> String {
    let r = env
        .call(
            "work_on_project",
            json!({ "project": P, "instruction": "work in a shell", "mode": mode }),
        )
        .await;
    output(&r)["session_id"].as_str().unwrap().to_owned()
}

/// `tool` on the REST surface (`/api/tools/call`: the shell tools have no named action) of
/// instance `st`; its result body.
async fn rest_tool(st: &AppState, key: &str, tool: &str, args: Value) -> Value {
    let r = rest_call(st, key, tool, args).await;
    if r.body["success"] == true {
        assert_eq!(r.status, StatusCode::OK, "{tool}: {}", r.text());
    }
    r.body
}

/// `tool` (status or close) of shell `id` in session `s`, over REST on instance `st`.
async fn on_shell(st: &AppState, key: &str, tool: &str, s: &str, id: &str) -> Value {
    rest_tool(st, key, tool, json!({ "session_id": s, "shell_id": id })).await
}

/// Opens a bash shell in session `s` through MCP; its id.
async fn open(env: &RunnerApp, s: &str) -> String {
    let r = env
        .mcp_tool(
            "open_session_shell",
            json!({ "session_id": s, "shell": "bash" }),
        )
        .await;
    let out = output(&r);
    assert_eq!(out["state"], "ready", "{r}");
    assert_eq!(out["shell"], "bash", "{r}");
    out["shell_id"].as_str().unwrap().to_owned()
}

/// One command in shell `id` of session `s` through instance `st`.
async fn exec(st: &AppState, key: &str, s: &str, id: &str, command: &str) -> Value {
    rest_tool(
        st,
        key,
        "session_shell_exec",
        json!({ "session_id": s, "shell_id": id, "command": command }),
    )
    .await
}

/// Host pids whose command line contains `marker` (a process started inside the sandbox is a
/// process of this host too).
pub(super) fn pids_with(marker: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if pid == std::process::id() as i32 {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let words: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect();
        if words.iter().any(|w| w == marker) {
            found.push(pid);
        }
    }
    found
}

/// Waits until no process of the host runs with `marker` on its command line.
async fn processes_end(what: &str, marker: &str) {
    eventually(what, async || pids_with(marker).is_empty().then_some(())).await;
}

/// Asserts the stored state and end reason of shell `id`.
async fn assert_ended(db: &TestDatabase, id: &str, state: &str, reason: &str) {
    assert_eq!(
        shell_row_state(db, id).await,
        (state.to_owned(), Some(reason.to_owned()))
    );
}

/// A `sleep` duration nothing else on the host uses, as its command line spells it.
fn unique_sleep() -> String {
    format!("{}.{}", 800 + rand_u16() % 100, rand_u16())
}

fn rand_u16() -> u16 {
    (Uuid::new_v4().as_u128() & 0xffff) as u16
}

async fn shell_row_state(db: &TestDatabase, id: &str) -> (String, Option<String>) {
    let client = db.pool().get().await.unwrap();
    let row = client
        .query_one(
            "SELECT state::text, end_reason::text FROM persistent_shells WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

#[tokio::test]
async fn a_shell_keeps_cwd_exports_functions_and_variables_between_commands() {
    let env = start().await;
    std::fs::create_dir(env.root().join("src")).unwrap();
    let (st, key) = (&env.st, env.key.as_str());
    let s = session(&env, "normal").await;
    let id = open(&env, &s).await;

    let r = exec(
        st,
        key,
        &s,
        &id,
        "cd src && export GREETING=hello && unset HOME && umask 027 && \
         shout() { echo \"loud:$1\"; } && counter=41 && declare -a list=(a b c)",
    )
    .await;
    assert_eq!(output(&r)["exit_code"], 0, "{r}");
    assert_eq!(output(&r)["state"], "ready", "{r}");

    // Through MCP this time: the same process answers.
    let r = env
        .mcp_tool(
            "session_shell_exec",
            json!({ "session_id": s, "shell_id": id, "command":
                "pwd; echo $GREETING; echo ${HOME-unset}; umask; shout x; echo $((counter + 1)); echo ${list[2]}" }),
        )
        .await;
    let out = output(&r);
    let lines: Vec<&str> = out["stdout"].as_str().unwrap().lines().collect();
    assert!(lines[0].ends_with("/src"), "{r}");
    assert_eq!(
        &lines[1..],
        ["hello", "unset", "0027", "loud:x", "42", "c"],
        "{r}"
    );
    assert_eq!(out["stdout_truncated"], false, "{r}");

    // The result is the command's exit status, not the shell's; the shell stays.
    let r = exec(st, key, &s, &id, "echo out; echo err >&2; false").await;
    assert_eq!(kind(&r), "exit_nonzero", "{r}");
    assert_eq!(r["output"]["exit_code"], 1, "{r}");
    assert_eq!(r["output"]["stdout"], "out\n", "{r}");
    assert_eq!(r["output"]["stderr"], "err\n", "{r}");
    assert_eq!(r["output"]["state"], "ready", "{r}");
    let r = exec(st, key, &s, &id, "echo $GREETING").await;
    assert_eq!(output(&r)["stdout"], "hello\n", "{r}");

    // A command with no stdin reads end-of-file at once; given stdin, it reads that.
    let r = exec(st, key, &s, &id, "cat; echo done").await;
    assert_eq!(output(&r)["stdout"], "done\n", "{r}");
    let r = rest_tool(
        st,
        key,
        "session_shell_exec",
        json!({ "session_id": s, "shell_id": id, "command": "tr a-z A-Z", "stdin": "piped\n" }),
    )
    .await;
    assert_eq!(output(&r)["stdout"], "PIPED\n", "{r}");

    // Output that looks like framing is only output.
    let r = exec(
        st,
        key,
        &s,
        &id,
        "printf '0123456789abcdef0123456789abcdef 0\\n'; exit_code=7; echo __done__ 0",
    )
    .await;
    assert_eq!(output(&r)["exit_code"], 0, "{r}");
    assert!(
        output(&r)["stdout"]
            .as_str()
            .unwrap()
            .contains("__done__ 0"),
        "{r}"
    );

    // A second open is refused, naming the open shell.
    let r = env
        .mcp_tool("open_session_shell", json!({ "session_id": s }))
        .await;
    assert_eq!(kind(&r), "shell_already_open", "{r}");
    assert_eq!(r["error"]["shell_id"], id.as_str(), "{r}");

    let r = on_shell(st, key, "session_shell_status", &s, &id).await;
    assert_eq!(output(&r)["state"], "ready", "{r}");
    assert!(output(&r)["cwd"] == "", "opened at the root: {r}");

    // Close is idempotent; the id stays terminal and a new shell starts afresh.
    let r = on_shell(st, key, "close_session_shell", &s, &id).await;
    assert_eq!(output(&r)["state"], "closed", "{r}");
    assert_eq!(output(&r)["released"], true, "{r}");
    let r = on_shell(st, key, "close_session_shell", &s, &id).await;
    assert_eq!(output(&r)["state"], "closed", "{r}");
    assert_eq!(output(&r)["released"], false, "{r}");
    let r = exec(st, key, &s, &id, "true").await;
    assert_eq!(kind(&r), "shell_closed", "{r}");
    let fresh = open(&env, &s).await;
    assert_ne!(fresh, id);
    let r = exec(st, key, &s, &fresh, "echo ${GREETING-none}; pwd").await;
    let out = output(&r)["stdout"].as_str().unwrap().to_owned();
    assert!(
        out.starts_with("none\n") && !out.trim_end().ends_with("/src"),
        "{r}"
    );
}

#[tokio::test]
async fn exit_in_the_shell_ends_it_and_a_poisoned_shell_takes_no_more_commands() {
    let env = start().await;
    let (st, key) = (&env.st, env.key.as_str());
    let s = session(&env, "normal").await;

    let id = open(&env, &s).await;
    let r = exec(st, key, &s, &id, "echo bye; exit 3").await;
    assert_eq!(kind(&r), "shell_closed", "{r}");
    // The refusal still carries what the shell printed before it exited.
    assert_eq!(r["output"]["state"], "exited", "{r}");
    assert_eq!(r["output"]["stdout"], "bye\n", "{r}");
    assert_ended(&env.db, &id, "exited", "exited").await;
    let r = exec(st, key, &s, &id, "true").await;
    assert_eq!(kind(&r), "shell_closed", "{r}");

    // A timeout interrupts the foreground command and the shell stays in step.
    let id = open(&env, &s).await;
    let r = exec(st, key, &s, &id, "kept=yes").await;
    output(&r);
    let r = rest_tool(
        st,
        key,
        "session_shell_exec",
        json!({ "session_id": s, "shell_id": id, "command": "sleep 30", "timeout_ms": 500 }),
    )
    .await;
    assert_eq!(kind(&r), "timed_out", "{r}");
    assert_eq!(r["output"]["timed_out"], true, "{r}");
    assert_eq!(r["output"]["recovered"], true, "{r}");
    assert_eq!(r["output"]["state"], "ready", "{r}");
    let r = exec(st, key, &s, &id, "echo $kept").await;
    assert_eq!(output(&r)["stdout"], "yes\n", "{r}");

    // A command that ignores the interrupt cannot be brought back: the shell is reset.
    let marker = unique_sleep();
    let r = rest_tool(
        st,
        key,
        "session_shell_exec",
        json!({ "session_id": s, "shell_id": id,
                "command": format!("trap '' INT; sleep {marker}"), "timeout_ms": 500 }),
    )
    .await;
    assert_eq!(kind(&r), "shell_reset_required", "{r}");
    assert_eq!(r["output"]["state"], "poisoned", "{r}");
    assert_eq!(r["output"]["recovered"], false, "{r}");
    assert!(
        pids_with(&marker).is_empty(),
        "the reset killed its processes"
    );
    let r = exec(st, key, &s, &id, "true").await;
    assert_eq!(kind(&r), "shell_reset_required", "{r}");
    let r = on_shell(st, key, "session_shell_status", &s, &id).await;
    assert_eq!(output(&r)["state"], "poisoned", "{r}");
}

#[tokio::test]
async fn a_concurrent_command_from_a_second_instance_is_told_the_shell_is_busy() {
    let env = start().await;
    let (a, b, key) = (env.st.clone(), env.second(), env.key.clone());
    let s = session(&env, "normal").await;
    let id = open(&env, &s).await;

    let first = {
        let (a, key, s, id) = (a.clone(), key.clone(), s.clone(), id.clone());
        tokio::spawn(async move { exec(&a, &key, &s, &id, "sleep 2; echo first").await })
    };
    eventually("the shell is busy", async || {
        (shell_row_state(&env.db, &id).await.0 == "busy").then_some(())
    })
    .await;
    let r = exec(&b, &key, &s, &id, "echo second").await;
    assert_eq!(kind(&r), "shell_busy", "{r}");
    assert_eq!(r["error"]["shell_id"], id.as_str(), "{r}");
    let r = first.await.unwrap();
    assert_eq!(output(&r)["stdout"], "first\n", "{r}");
    // B now takes its turn on the same process.
    let r = exec(&b, &key, &s, &id, "echo second").await;
    assert_eq!(output(&r)["stdout"], "second\n", "{r}");
}

#[tokio::test]
async fn shells_are_refused_in_read_only_sessions_and_ids_of_others_look_unknown() {
    let env = start().await;
    let (st, key) = (&env.st, env.key.as_str());
    let ro = session(&env, "read_only").await;
    let r = env
        .mcp_tool("open_session_shell", json!({ "session_id": ro }))
        .await;
    assert_eq!(kind(&r), "mode_denied", "{r}");

    let s = session(&env, "normal").await;
    let other = session(&env, "normal").await;
    let id = open(&env, &s).await;
    for (session, shell) in [
        (&other, id.clone()),
        (&s, "wc_shell_AAAAAAAAAAAAAAAAAAAAAA".to_owned()),
    ] {
        let r = exec(st, key, session, &shell, "true").await;
        assert_eq!(kind(&r), "unknown_shell", "{r}");
        let r = on_shell(st, key, "session_shell_status", session, &shell).await;
        assert_eq!(kind(&r), "unknown_shell", "{r}");
    }
    // An oversized command is refused before anything reaches the shell.
    let r = exec(st, key, &s, &id, &"x".repeat(16_001)).await;
    assert_eq!(kind(&r), "invalid_arguments", "{r}");
    let r = exec(st, key, &s, &id, "echo still").await;
    assert_eq!(output(&r)["stdout"], "still\n", "{r}");
}

#[tokio::test]
async fn the_ledger_keeps_shell_lifecycle_and_never_commands_or_output() {
    let env = start().await;
    let (st, key) = (&env.st, env.key.as_str());
    let s = session(&env, "normal").await;
    let id = open(&env, &s).await;
    let (a, b) = (
        Uuid::new_v4().simple().to_string(),
        Uuid::new_v4().simple().to_string(),
    );
    let command = format!("printf '%s%s\\n' {a} {b}");
    let r = rest_tool(
        st,
        key,
        "session_shell_exec",
        json!({ "session_id": s, "shell_id": id, "command": command, "stdin": format!("{b}{a}") }),
    )
    .await;
    assert_eq!(output(&r)["stdout"], format!("{a}{b}\n"), "{r}");
    let ledger = ledger(&env.db, &s).await;
    let text = format!("{ledger:?}");
    assert!(
        !text.contains(&a) && !text.contains(&b),
        "command, stdin or output leaked: {text}"
    );
    let finished: Vec<&LedgerRow> = ledger
        .iter()
        .filter(|e| {
            e.kind == "tool_call_finished" && e.tool_name.as_deref() == Some("session_shell_exec")
        })
        .collect();
    assert_eq!(finished.len(), 1, "{text}");
    let facts = &finished[0].payload;
    assert_eq!(facts["shell_id"], id.as_str(), "{facts}");
    assert_eq!(facts["state"], "ready", "{facts}");
    assert_eq!(facts["exit_code"], 0, "{facts}");
    assert_eq!(facts["stdout_truncated"], false, "{facts}");
    let started = ledger
        .iter()
        .find(|e| {
            e.kind == "tool_call_started" && e.tool_name.as_deref() == Some("session_shell_exec")
        })
        .unwrap();
    assert_eq!(
        started.payload["arguments"]["command"],
        json!({ "omitted": "private", "bytes": command.len() }),
        "{:?}",
        started.payload
    );
}

#[tokio::test]
async fn closing_the_session_releases_the_shells_processes() {
    let env = start().await;
    let (st, key) = (&env.st, env.key.as_str());
    let s = session(&env, "normal").await;
    let id = open(&env, &s).await;
    let marker = unique_sleep();
    // A background child, and a daemon that keeps the pipes open: neither holds the command.
    let r = exec(
        st,
        key,
        &s,
        &id,
        &format!("sleep {marker} & (sleep {marker} &); echo started"),
    )
    .await;
    assert_eq!(output(&r)["stdout"], "started\n", "{r}");
    let r = exec(st, key, &s, &id, "echo next").await;
    assert_eq!(output(&r)["stdout"], "next\n", "{r}");
    assert_eq!(pids_with(&marker).len(), 2, "both children run");

    let r = env.call("close_session", json!({ "session_id": s })).await;
    output(&r);
    assert_ended(&env.db, &id, "closed", "session_ended").await;
    processes_end("the shell's processes are gone", &marker).await;
}

#[tokio::test]
async fn a_restarted_runner_never_reattaches_its_shells_become_lost() {
    let mut env = start().await;
    let (st, key) = (env.st.clone(), env.key.clone());
    let s = session(&env, "normal").await;
    let id = open(&env, &s).await;
    let marker = unique_sleep();
    let r = exec(&st, &key, &s, &id, &format!("sleep {marker} &")).await;
    output(&r);
    assert_eq!(pids_with(&marker).len(), 1);

    // The runner stops (its shells with it) and a new instance of it registers.
    let root = env.root();
    let new = env.app.runner("local", &[("alpha", &root)]).await;
    let old = std::mem::replace(&mut env.runner, new);
    old.stop().await.unwrap();
    processes_end("the old runner's shell processes are gone", &marker).await;
    let r = on_shell(&st, &key, "session_shell_status", &s, &id).await;
    assert_eq!(output(&r)["state"], "lost", "{r}");
    assert_eq!(output(&r)["end_reason"], "instance_replaced", "{r}");
    let r = exec(&st, &key, &s, &id, "true").await;
    assert_eq!(kind(&r), "shell_reset_required", "{r}");
    // The session opens a new shell on the new instance.
    let fresh = open(&env, &s).await;
    let r = exec(&st, &key, &s, &fresh, "echo again").await;
    assert_eq!(output(&r)["stdout"], "again\n", "{r}");
}

#[tokio::test]
async fn an_idle_shell_is_closed_by_upkeep() {
    let env = RunnerApp::start_with(
        "alpha",
        ServerConfig {
            shell_idle: Duration::from_secs(1),
            ..Default::default()
        },
    )
    .await;
    let s = session(&env, "normal").await;
    let id = open(&env, &s).await;
    let marker = unique_sleep();
    let r = exec(&env.st, &env.key, &s, &id, &format!("sleep {marker} &")).await;
    output(&r);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let closed = wc_functions::maintenance::end_shells(&env.st.deps)
        .await
        .unwrap();
    assert_eq!(closed, 1);
    assert_ended(&env.db, &id, "closed", "idle_expired").await;
    processes_end("the idle shell's processes are gone", &marker).await;
}

#[tokio::test]
async fn a_killed_runners_shell_dies_with_it_and_ends_lost() {
    let app = TestApp::with_config(
        &[P],
        ServerConfig {
            runner_lease: Duration::from_millis(1500),
            ..Default::default()
        },
    )
    .await;
    let (st, key) = (&app.st, app.key.as_str());
    let base_url = app.serve().await;
    let secret = app.runner_token("local").await;
    let root = tempfile::tempdir().unwrap();
    let conf_dir = tempfile::tempdir().unwrap();
    let config = conf_dir.path().join("runner.toml");
    std::fs::write(
        &config,
        format!(
            "server_url = {base_url:?}\nclient_id = \"local\"\ntoken = {secret:?}\n\
             queue = \"api-poll\"\n[projects]\nalpha = {:?}\n",
            root.path().canonicalize().unwrap().display().to_string()
        ),
    )
    .unwrap();
    let mut runner = super::crash::RunnerProcess::spawn(&config);
    await_registration(&app.db, "local", None).await;
    let r = call(
        st,
        key,
        "work_on_project",
        json!({ "project": P, "instruction": "work in a shell" }),
    )
    .await;
    let s = output(&r)["session_id"].as_str().unwrap().to_owned();
    // Sent until the server counts the runner as connected (its next poll makes it).
    let id = eventually("the shell opens", async || {
        let r = mcp_tool(st, key, "open_session_shell", json!({ "session_id": s })).await;
        if r["error"]["kind"] == "runner_unavailable" {
            return None;
        }
        Some(output(&r)["shell_id"].as_str().unwrap().to_owned())
    })
    .await;
    let marker = unique_sleep();
    let r = exec(st, key, &s, &id, &format!("sleep {marker} &")).await;
    output(&r);
    assert_eq!(pids_with(&marker).len(), 1, "the shell's child runs");

    // kill -9: the runner says nothing, and its shell with everything it started dies with it.
    runner.kill();
    processes_end("the shell's processes die with the runner", &marker).await;
    // Once the runner has been gone for a lease, upkeep ends its shell `lost`.
    eventually("the shell ends lost", async || {
        wc_functions::maintenance::end_shells(&st.deps)
            .await
            .unwrap();
        let r = on_shell(st, key, "session_shell_status", &s, &id).await;
        (output(&r)["state"] == "lost").then_some(r)
    })
    .await;
    assert_ended(&app.db, &id, "lost", "runner_disconnected").await;
    let r = exec(st, key, &s, &id, "true").await;
    assert_eq!(kind(&r), "shell_reset_required", "{r}");
}

#[tokio::test]
async fn new_session_defaults_never_move_an_open_shell_a_new_one_takes_them() {
    let env = start().await;
    std::fs::create_dir(env.root().join("sub")).unwrap();
    let (st, key) = (&env.st, env.key.as_str());
    let s = session(&env, "normal").await;
    let id = open(&env, &s).await;
    let r = env
        .call(
            "update_session_context",
            json!({ "session_id": s, "default_cwd": "sub", "default_shell": "sh" }),
        )
        .await;
    output(&r);
    // Still bash, still at the root.
    let r = exec(st, key, &s, &id, "pwd; echo \"bash=${BASH_VERSION:+yes}\"").await;
    let root = env.root().display().to_string();
    assert_eq!(output(&r)["stdout"], format!("{root}\nbash=yes\n"), "{r}");
    // Closed and opened again, the shell starts where the defaults now say, as sh.
    output(&on_shell(st, key, "close_session_shell", &s, &id).await);
    let r = env
        .mcp_tool("open_session_shell", json!({ "session_id": s }))
        .await;
    assert_eq!(
        (&output(&r)["cwd"], &output(&r)["shell"]),
        (&json!("sub"), &json!("sh")),
        "{r}"
    );
    let fresh = output(&r)["shell_id"].as_str().unwrap().to_owned();
    let r = exec(
        st,
        key,
        &s,
        &fresh,
        "pwd; echo \"bash=${BASH_VERSION:+yes}\"",
    )
    .await;
    assert_eq!(output(&r)["stdout"], format!("{root}/sub\nbash=\n"), "{r}");
}
