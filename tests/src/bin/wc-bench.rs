//! `wc-bench`: benchmark scenarios, one JSON line per scenario and concurrency on stdout.
//!
//! Run through `scripts/bench`. Each scenario runs for a fixed time at each concurrency and
//! reports `{"scenario", "concurrency", "ops", "ops_per_sec", "p50_ms", "p99_ms", …}`. Ratios
//! between scenarios are computed from figures measured in the same run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use wc_e2e::bench::mcp::{McpCall, healthz_scenario, mcp_scenario};
use wc_e2e::bench::sessions::{self, FloorInputs};
use wc_e2e::bench::{baseline, ratio};
use wc_e2e::server::{LocalOptions, LocalServer};
use wc_store::testing::TestDatabase;

#[derive(Debug, Parser)]
#[command(name = "wc-bench", about = "wc benchmarks (JSON lines on stdout)")]
struct Cli {
    /// About 3 s per scenario and concurrency.
    #[arg(long)]
    quick: bool,
    /// Seconds per scenario and concurrency (default 10, or 3 with --quick).
    #[arg(long)]
    seconds: Option<u64>,
    /// Only these scenarios (repeatable).
    #[arg(long = "scenario")]
    scenarios: Vec<String>,
    /// Concurrency levels.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32")]
    concurrency: Vec<usize>,
    /// The wc-local binary to spawn (default: next to this binary).
    #[arg(long)]
    wc_local: Option<PathBuf>,
    /// Directory of the Lambda binaries `cold_start` starts (default: next to wc-local).
    #[arg(long)]
    lambda_dir: Option<PathBuf>,
    /// A wc-local of another build to measure `--wc-local` against: each named scenario
    /// (runner_roundtrip, board_post_hot, board_post_distinct, mcp_recorded_call,
    /// read_files_roundtrip, search_project_texts) runs on both, each over its own fresh
    /// database, in alternating slices.
    #[arg(long)]
    baseline_wc_local: Option<PathBuf>,
    /// `RUST_LOG` of the spawned wc-local (e.g. `info` to see every request's `latency_ms`
    /// and every work item's `duration_ms`); its log file is named on stderr.
    #[arg(long, default_value = "warn")]
    server_log: String,
}

fn wanted(cli: &Cli, name: &str) -> bool {
    cli.scenarios.is_empty() || cli.scenarios.iter().any(|s| s == name)
}

fn emit(v: &Value) {
    println!("{v}");
}

fn with_ratio(mut line: Value, field: &str, base: Option<f64>, key: &str) -> Value {
    let value = line[key].as_f64().unwrap_or(0.0);
    line[field] = json!(base.and_then(|b| ratio(value, b)));
    line
}

/// The wc-local to measure: `--wc-local`, else the one next to this binary.
fn wc_local(cli: &Cli) -> anyhow::Result<PathBuf> {
    Ok(match &cli.wc_local {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("wc-local"),
    })
}

/// Whether the program `bin` lists `option` in its `--help`.
fn takes_option(bin: &Path, option: &str) -> anyhow::Result<bool> {
    let help = std::process::Command::new(bin)
        .arg("--help")
        .output()
        .with_context(|| format!("cannot run {} --help", bin.display()))?;
    Ok(String::from_utf8_lossy(&help.stdout).contains(option))
}

/// A wc-local over a fresh database with one registered project.
struct Stack {
    db: TestDatabase,
    server: LocalServer,
    project: String,
    /// The project's root directory, which the embedded runner serves.
    root: PathBuf,
}

impl Stack {
    async fn start(cli: &Cli) -> anyhow::Result<Stack> {
        Self::start_with(cli, Vec::new()).await
    }

    /// A stack whose runner also lets callers open checkouts beneath `sources/`, beside the
    /// project root.
    async fn start_opening(cli: &Cli) -> anyhow::Result<Stack> {
        Self::spawn_with(
            &wc_local(cli)?,
            TestDatabase::new().await,
            &cli.server_log,
            Vec::new(),
            true,
        )
    }

    /// A stack whose wc-local also gets `env`.
    async fn start_with(cli: &Cli, env: Vec<(String, String)>) -> anyhow::Result<Stack> {
        Self::spawn(
            &wc_local(cli)?,
            TestDatabase::new().await,
            &cli.server_log,
            env,
        )
    }

    /// `bin` over `db` (which it migrates, so an empty database gets the schema of that
    /// build), with `env`.
    fn spawn(
        bin: &Path,
        db: TestDatabase,
        log: &str,
        env: Vec<(String, String)>,
    ) -> anyhow::Result<Stack> {
        Self::spawn_with(bin, db, log, env, false)
    }

    /// [`Stack::spawn`], its runner letting callers open checkouts beneath `sources/` when
    /// `open`.
    fn spawn_with(
        bin: &Path,
        db: TestDatabase,
        log: &str,
        env: Vec<(String, String)>,
        open: bool,
    ) -> anyhow::Result<Stack> {
        let dir = std::env::temp_dir().join(format!("wc-bench-{}", uuid::Uuid::new_v4().simple()));
        let root = dir.join("bench");
        std::fs::create_dir_all(&root)?;
        let mut opts = LocalOptions::in_dir(&dir);
        opts.database_url = Some(db.url().expose().to_owned());
        // A baseline built before wc-local kept its state outside the working directory
        // has no --state-dir; with a database URL it keeps no state of its own.
        if !takes_option(bin, "--state-dir")? {
            opts.state_dir = None;
        }
        opts.args = vec!["--project".into(), format!("bench={}", root.display())];
        if open {
            let sources = dir.join("sources");
            std::fs::create_dir_all(&sources)?;
            opts.args
                .extend(["--open".into(), sources.display().to_string()]);
        }
        opts.env.push(("RUST_LOG".into(), log.into()));
        opts.env.extend(env);
        let server = LocalServer::spawn(bin, &opts)
            .with_context(|| format!("cannot start {}", bin.display()))?;
        eprintln!(
            "wc-bench: {} logs to {}",
            bin.display(),
            server.log_path.display()
        );
        Ok(Stack {
            db,
            server,
            project: "agent:local:bench".into(),
            root,
        })
    }

    /// The stack as a side of a paired run, with `workers` Workflow Sessions started on it.
    async fn paired_side(&self, workers: usize) -> anyhow::Result<baseline::Server> {
        let (base, token) = (&self.server.base_url, &self.server.token);
        let sessions = sessions::start_sessions(base, token, &self.project, workers).await?;
        Ok(baseline::Server {
            base: base.clone(),
            token: token.clone(),
            project: self.project.clone(),
            pool: self.db.pool().clone(),
            sessions: Arc::new(sessions),
            search: None,
        })
    }
}

/// The scenarios named, on the baseline wc-local and on the current one, each over a fresh
/// empty database that its own build migrates: one line per scenario and concurrency.
async fn against_baseline(cli: &Cli, bin: &Path, duration: Duration) -> anyhow::Result<()> {
    let scenarios = baseline::Scenario::select(&cli.scenarios)?;
    let workers = cli.concurrency.iter().copied().max().unwrap_or(1);
    let baseline_stack = Stack::spawn(
        bin,
        TestDatabase::empty().await,
        &cli.server_log,
        Vec::new(),
    )?;
    let current_stack = Stack::spawn(
        &wc_local(cli)?,
        TestDatabase::empty().await,
        &cli.server_log,
        Vec::new(),
    )?;
    let mut baseline_server = baseline_stack.paired_side(workers).await?;
    let mut current_server = current_stack.paired_side(workers).await?;
    baseline_server
        .prepare(&scenarios, &baseline_stack.root)
        .await?;
    current_server
        .prepare(&scenarios, &current_stack.root)
        .await?;
    for scenario in scenarios {
        for &c in &cli.concurrency {
            emit(
                &baseline::against_baseline(
                    scenario,
                    &baseline_server,
                    &current_server,
                    c,
                    duration,
                )
                .await?,
            );
        }
    }
    Ok(())
}

/// The file tools' scenarios on `stack`: `read_files_roundtrip` and
/// `apply_text_edits_roundtrip` at each concurrency, `search_project_texts_vs_rg` once over a
/// tree it generates in the project, `cargo_check_vs_direct` (and `_edited`) once on a crate it
/// writes there.
async fn file_tool_scenarios(cli: &Cli, stack: &Stack, duration: Duration) -> anyhow::Result<()> {
    use wc_e2e::bench::{files, search, validate};
    let (base, token) = (&stack.server.base_url, &stack.server.token);
    let (project, pool) = (&stack.project, stack.db.pool());
    if wanted(cli, "read_files_roundtrip") {
        files::prepare_read(&stack.root)?;
        for &c in &cli.concurrency {
            emit(&files::read_roundtrip(base, token, project, pool, c, duration).await?);
        }
    }
    if wanted(cli, "search_project_texts_vs_rg") {
        // Fail before spending time on the tree when rg is missing.
        search::rg_version().await?;
        let tree = search::generate(&stack.root.join(search::TREE_DIR))?;
        let repetitions = if cli.quick { 5 } else { 11 };
        emit(&search::against_rg(base, token, project, &tree, repetitions).await?);
    }
    for (name, edited) in [
        ("cargo_check_vs_direct", false),
        ("cargo_check_vs_direct_edited", true),
    ] {
        if wanted(cli, name) {
            let dir = validate::prepare(&stack.root)?;
            let repetitions = if cli.quick { 5 } else { 11 };
            emit(&validate::against_direct(base, token, project, &dir, repetitions, edited).await?);
        }
    }
    if wanted(cli, "checkpoint_vs_git") {
        // Its own stack: the project root is the tree's repository, with nothing else in it.
        use wc_e2e::bench::checkpoint;
        let own = Stack::start(cli).await?;
        let tree = checkpoint::prepare(&own.root)?;
        let repetitions = if cli.quick { 5 } else { 11 };
        let (base, token) = (&own.server.base_url, &own.server.token);
        emit(
            &checkpoint::against_git(base, token, &own.project, &own.root, &tree, repetitions)
                .await?,
        );
    }
    if wanted(cli, "diff_summary_vs_git") {
        // Its own stack: the project root is the tree's repository, with nothing else in it.
        use wc_e2e::bench::{checkpoint, review};
        let own = Stack::start(cli).await?;
        let tree = checkpoint::prepare(&own.root)?;
        let repetitions = if cli.quick { 5 } else { 11 };
        let (base, token) = (&own.server.base_url, &own.server.token);
        emit(&review::against_git(base, token, &own.project, &own.root, &tree, repetitions).await?);
    }
    if wanted(cli, "worktree_vs_git") {
        // Its own stack, whose runner may open checkouts beneath `sources/`.
        use wc_e2e::bench::{checkpoint, worktree};
        let own = Stack::start_opening(cli).await?;
        let sources = own.root.with_file_name("sources");
        let tree = checkpoint::prepare(&sources.join("app"))?;
        let scratch = own.root.with_file_name("floor-worktrees");
        std::fs::create_dir_all(&scratch)?;
        let repetitions = if cli.quick { 5 } else { 11 };
        let (base, token) = (&own.server.base_url, &own.server.token);
        let files = tree.text_files + tree.binary_files;
        emit(
            &worktree::against_git(
                base,
                token,
                &sources.join("app"),
                &scratch,
                files,
                repetitions,
            )
            .await?,
        );
    }
    if wanted(cli, "shell_exec_true") {
        use wc_e2e::bench::shells;
        for &c in cli.concurrency.iter().filter(|&&c| c <= 8) {
            let (run_shell, exec) =
                shells::against_run_shell(base, token, project, c, duration).await?;
            emit(&run_shell);
            emit(&exec);
        }
    }
    if wanted(cli, "tasks_get") {
        use wc_e2e::bench::tasks;
        for &c in &cli.concurrency {
            let (job_status, get) =
                tasks::against_job_status(base, token, project, c, duration).await?;
            emit(&job_status);
            emit(&get);
        }
    }
    if wanted(cli, "apply_text_edits_roundtrip") {
        if !files::has_tool(base, token, "apply_text_edits").await? {
            emit(&json!({
                "scenario": "apply_text_edits_roundtrip",
                "skipped": "this wc-local offers no apply_text_edits tool",
            }));
            return Ok(());
        }
        for &c in &cli.concurrency {
            emit(
                &files::edit_roundtrip(base, token, project, &stack.root, pool, c, duration)
                    .await?,
            );
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let duration = Duration::from_secs(cli.seconds.unwrap_or(if cli.quick { 3 } else { 10 }));
    if let Some(bin) = &cli.baseline_wc_local {
        return against_baseline(&cli, bin, duration).await;
    }

    let http = ["http_healthz", "mcp_tools_list", "mcp_runtime_status"];
    let runner = ["runner_roundtrip", "runner_soak", "runner_roundtrip_sqs"];
    let file_tools = [
        "read_files_roundtrip",
        "search_project_texts_vs_rg",
        "cargo_check_vs_direct",
        "cargo_check_vs_direct_edited",
        "apply_text_edits_roundtrip",
        "shell_exec_true",
        "tasks_get",
        "checkpoint_vs_git",
        "worktree_vs_git",
        "diff_summary_vs_git",
    ];
    let recorded = [
        "mcp_recorded_call",
        "sql_floor_recorded_call",
        "hot_session",
        "mcp_recorded_call_large",
    ];
    let board_names = [
        "board_post_hot",
        "board_post_distinct",
        "board_post_store_hot",
        "board_post_store_distinct",
        "board_post_complete_hot",
        "board_post_complete_distinct",
        "observe_wake",
    ];
    if !http
        .iter()
        .chain(recorded.iter())
        .chain(runner.iter())
        .chain(file_tools.iter())
        .chain(board_names.iter())
        .chain(["cold_start", "tools_list_size"].iter())
        .any(|n| wanted(&cli, n))
    {
        return Ok(());
    }
    let stack = Stack::start(&cli).await?;
    let (base, token) = (stack.server.base_url.clone(), stack.server.token.clone());

    if wanted(&cli, "runner_roundtrip") {
        for &c in &cli.concurrency {
            emit(
                &wc_e2e::bench::runner::roundtrip(
                    "runner_roundtrip",
                    &base,
                    &token,
                    &stack.project,
                    stack.db.pool(),
                    c,
                    duration,
                )
                .await?,
            );
        }
    }
    if wanted(&cli, "runner_roundtrip_sqs") {
        // The same round trip with the embedded runner (client id `local`) routed through an
        // SQS queue on a local moto server: publish after commit, receive, claim, result.
        let sqs = wc_store::testing::sqs::LocalSqs::start().await;
        let queue = sqs.create_queue().await;
        let env = sqs.wc_local_env("local", &queue);
        let via_sqs = Stack::start_with(&cli, env).await?;
        for &c in &cli.concurrency {
            emit(
                &wc_e2e::bench::runner::roundtrip(
                    "runner_roundtrip_sqs",
                    &via_sqs.server.base_url,
                    &via_sqs.server.token,
                    &via_sqs.project,
                    via_sqs.db.pool(),
                    c,
                    duration,
                )
                .await?,
            );
        }
    }
    if wanted(&cli, "runner_soak") {
        let calls = if cli.quick { 2_000 } else { 10_000 };
        emit(
            &wc_e2e::bench::runner::soak(&base, &token, &stack.project, stack.db.pool(), calls, 32)
                .await?,
        );
    }

    if file_tools.iter().any(|n| wanted(&cli, n)) {
        file_tool_scenarios(&cli, &stack, duration).await?;
    }

    if wanted(&cli, "tools_list_size") {
        emit(&wc_e2e::bench::mcp::tools_list_size(&base, &token).await?);
    }

    // /healthz is measured whenever the MCP scenarios are, as their ratio's denominator.
    let mut healthz: HashMap<usize, f64> = HashMap::new();
    if http.iter().any(|n| wanted(&cli, n)) {
        for &c in &cli.concurrency {
            let line = healthz_scenario(&base, c, duration).await?;
            healthz.insert(c, line["ops_per_sec"].as_f64().unwrap_or(0.0));
            if wanted(&cli, "http_healthz") {
                emit(&line);
            }
        }
    }
    for (scenario, method, name, params) in [
        ("mcp_tools_list", "tools/list", None, json!({})),
        (
            "mcp_runtime_status",
            "tools/call",
            Some("runtime_status"),
            json!({ "name": "runtime_status", "arguments": {} }),
        ),
    ] {
        if wanted(&cli, scenario) {
            for &c in &cli.concurrency {
                let call = McpCall {
                    scenario,
                    method,
                    name,
                    params: params.clone(),
                };
                let line = mcp_scenario(call, &base, &token, c, duration).await?;
                emit(&with_ratio(
                    line,
                    "ratio_to_healthz",
                    healthz.get(&c).copied(),
                    "ops_per_sec",
                ));
            }
        }
    }

    if wanted(&cli, "cold_start") {
        use wc_e2e::bench::cold_start::{Probe, cold_start};
        let dir = match (&cli.lambda_dir, &cli.wc_local) {
            (Some(d), _) => d.clone(),
            (None, Some(p)) => p.parent().map(|d| d.to_path_buf()).unwrap_or_default(),
            (None, None) => std::env::current_exe()?
                .parent()
                .map(|d| d.to_path_buf())
                .unwrap_or_default(),
        };
        // The database is on loopback: no TLS, as in the target. (With the default
        // sslmode=prefer and a server whose certificate does not verify, the first connection
        // of a process also pays for a failed handshake and a reconnect.)
        let url = stack.db.url().expose();
        let plain = if url.contains('?') {
            format!("{url}&sslmode=disable")
        } else {
            format!("{url}?sslmode=disable")
        };
        for (bin, probe) in [
            ("wc-lambda-mcp", Probe::McpToolsList),
            ("wc-lambda", Probe::McpToolsList),
            ("wc-lambda-rest", Probe::Healthz),
            ("wc-lambda-audit", Probe::AuditSessions),
            ("wc-lambda-runner", Probe::RunnerPoll),
        ] {
            emit(&cold_start(bin, &dir.join(bin), &plain, &token, probe, 10).await?);
        }
    }

    if board_names.iter().any(|n| wanted(&cli, n)) {
        use wc_e2e::bench::board::{self, Target};
        let workers = cli.concurrency.iter().copied().max().unwrap_or(1);
        let ids = Arc::new(sessions::start_sessions(&base, &token, &stack.project, workers).await?);
        for target in [Target::Hot, Target::Distinct] {
            for &c in &cli.concurrency {
                let store_name = format!("board_post_store_{}", target.as_str());
                let post_name = format!("board_post_{}", target.as_str());
                if wanted(&cli, &post_name) {
                    // The post and its store floor in alternating slices.
                    let (store, post) = board::post_against_store(
                        stack.db.pool().clone(),
                        &base,
                        &token,
                        ids.clone(),
                        target,
                        c,
                        duration,
                    )
                    .await?;
                    if wanted(&cli, &store_name) {
                        emit(&store);
                    }
                    emit(&post);
                } else if wanted(&cli, &store_name) {
                    let pool = stack.db.pool().clone();
                    emit(&board::post_floor(pool, ids.clone(), target, c, duration).await?);
                }
                if wanted(&cli, &format!("board_post_complete_{}", target.as_str())) {
                    emit(
                        &board::post_complete(&base, &token, ids.clone(), target, c, duration)
                            .await?,
                    );
                }
            }
        }
        if wanted(&cli, "observe_wake") {
            let rounds = if cli.quick { 100 } else { 300 };
            emit(&board::observe_wake(&base, &token, &ids[0], rounds).await?);
        }
    }

    if !recorded.iter().any(|n| wanted(&cli, n)) {
        return Ok(());
    }
    let workers = cli.concurrency.iter().copied().max().unwrap_or(1);
    let ids = Arc::new(sessions::start_sessions(&base, &token, &stack.project, workers).await?);
    let floor_inputs = FloorInputs {
        pool: stack.db.pool().clone(),
        token_digest: Sha256::digest(token.as_bytes()).into(),
        sessions: ids.clone(),
        audit_caller: "f".repeat(64),
    };
    let mut small_p50: HashMap<usize, f64> = HashMap::new();
    for &c in &cli.concurrency {
        if wanted(&cli, "mcp_recorded_call") {
            // The call and its floor in alternating slices, so the ratio compares like with like.
            let (floor, call) = sessions::recorded_call_against_floor(
                floor_inputs.clone(),
                &base,
                &token,
                c,
                duration,
            )
            .await?;
            small_p50.insert(c, call["p50_ms"].as_f64().unwrap_or(0.0));
            if wanted(&cli, "sql_floor_recorded_call") {
                emit(&floor);
            }
            emit(&call);
            continue;
        }
        if wanted(&cli, "sql_floor_recorded_call") {
            emit(&sessions::sql_floor(floor_inputs.clone(), c, duration).await?);
        }
        if wanted(&cli, "mcp_recorded_call_large") {
            let line = sessions::recorded_call(
                "mcp_recorded_call",
                &base,
                &token,
                ids.clone(),
                c,
                duration,
            )
            .await?;
            small_p50.insert(c, line["p50_ms"].as_f64().unwrap_or(0.0));
        }
    }
    if wanted(&cli, "hot_session") {
        emit(&sessions::hot_session(&stack.db, &ids[0], 32, duration, false).await?);
        emit(&sessions::hot_session(&stack.db, &ids[0], 32, duration, true).await?);
    }
    if wanted(&cli, "mcp_recorded_call_large") {
        const STORED: i64 = 100_000;
        let client = stack.db.pool().get().await?;
        wc_store::testing::seed_sessions(&client, STORED, 4, &stack.project, &"e".repeat(64))
            .await?;
        drop(client);
        for &c in &cli.concurrency {
            let mut line = sessions::recorded_call(
                "mcp_recorded_call_large",
                &base,
                &token,
                ids.clone(),
                c,
                duration,
            )
            .await?;
            line["sessions_stored"] = json!(STORED + ids.len() as i64);
            emit(&with_ratio(
                line,
                "p50_ratio_to_small",
                small_p50.get(&c).copied(),
                "p50_ms",
            ));
        }
    }
    Ok(())
}
