//! `wc-bench`: benchmark scenarios, one JSON line per scenario and concurrency on stdout.
//!
//! Run through `scripts/bench`. Each scenario runs for a fixed time at each concurrency and
//! reports `{"scenario", "concurrency", "ops", "ops_per_sec", "p50_ms", "p99_ms", …}`. Ratios
//! between scenarios are computed from figures measured in the same run.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::{Value, json};
use wc_e2e::client::Client;
use wc_e2e::server::{LocalOptions, LocalServer};
use wc_store::cas::{CasOutcome, CasPolicy};
use wc_store::config::DatabaseConfig;
use wc_store::testing::{TestDatabase, probe};

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
    /// An already running wc server to measure instead of spawning wc-local.
    #[arg(long)]
    server_url: Option<String>,
    /// The wc-local binary to spawn (default: next to this binary).
    #[arg(long)]
    wc_local: Option<PathBuf>,
}

/// Latencies of one run, in seconds.
struct Samples {
    latencies: Vec<f64>,
    elapsed: Duration,
    extra: serde_json::Map<String, Value>,
}

fn report(scenario: &str, concurrency: usize, mut s: Samples) -> Value {
    s.latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| -> f64 {
        if s.latencies.is_empty() {
            return 0.0;
        }
        let idx = ((s.latencies.len() as f64 - 1.0) * p).round() as usize;
        s.latencies[idx] * 1000.0
    };
    let ops = s.latencies.len();
    let mut line = json!({
        "scenario": scenario,
        "concurrency": concurrency,
        "ops": ops,
        "ops_per_sec": round(ops as f64 / s.elapsed.as_secs_f64()),
        "p50_ms": round(pct(0.50)),
        "p99_ms": round(pct(0.99)),
    });
    line.as_object_mut().unwrap().extend(s.extra);
    line
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Runs `op` from `concurrency` tasks for `duration`; each call returns extra counts to sum.
async fn drive<F, Fut>(concurrency: usize, duration: Duration, op: F) -> (Samples, Vec<u64>)
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = anyhow::Result<Vec<u64>>> + Send,
{
    let op = Arc::new(op);
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::new();
    for worker in 0..concurrency {
        let op = op.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut sums: Vec<u64> = Vec::new();
            while Instant::now() < deadline {
                let t = Instant::now();
                let counts = op(worker).await.expect("benchmark operation failed");
                lat.push(t.elapsed().as_secs_f64());
                if sums.len() < counts.len() {
                    sums.resize(counts.len(), 0);
                }
                for (s, c) in sums.iter_mut().zip(counts) {
                    *s += c;
                }
            }
            (lat, sums)
        }));
    }
    let mut latencies = Vec::new();
    let mut sums: Vec<u64> = Vec::new();
    for t in tasks {
        let (lat, s) = t.await.expect("benchmark task");
        latencies.extend(lat);
        if sums.len() < s.len() {
            sums.resize(s.len(), 0);
        }
        for (a, b) in sums.iter_mut().zip(s) {
            *a += b;
        }
    }
    (
        Samples {
            latencies,
            elapsed: start.elapsed(),
            extra: Default::default(),
        },
        sums,
    )
}

#[derive(Clone, Copy)]
enum CasShape {
    HotRow,
    HotRowLocked,
    DistinctRows,
}

async fn cas_scenario(
    name: &str,
    concurrency: usize,
    duration: Duration,
    shape: CasShape,
) -> anyhow::Result<Value> {
    let db = TestDatabase::new().await;
    let mut cfg: DatabaseConfig = db.config();
    cfg.max_connections = concurrency;
    let pool = wc_store::pool::build_pool(&cfg)?;
    probe::setup(&pool.get().await?, concurrency as i64).await?;
    let policy = CasPolicy {
        max_attempts: 64,
        ..CasPolicy::default()
    };
    let (mut samples, sums) = drive(concurrency, duration, move |worker| {
        let pool = pool.clone();
        async move {
            let outcome = match shape {
                CasShape::HotRow => probe::increment(&pool, &policy, 1).await?,
                CasShape::HotRowLocked => probe::increment_locked(&pool, &policy, 1).await?,
                CasShape::DistinctRows => {
                    probe::increment(&pool, &policy, worker as i64 + 1).await?
                }
            };
            Ok(match outcome {
                CasOutcome::Applied { attempts, .. } => vec![u64::from(attempts - 1), 0],
                CasOutcome::Conflict { attempts } => vec![u64::from(attempts), 1],
            })
        }
    })
    .await;
    let ops = samples.latencies.len().max(1) as f64;
    let retries = sums.first().copied().unwrap_or(0);
    samples
        .extra
        .insert("retries_per_op".into(), json!(round(retries as f64 / ops)));
    samples
        .extra
        .insert("conflicts".into(), json!(sums.get(1).copied().unwrap_or(0)));
    Ok(report(name, concurrency, samples))
}

/// Headers and body of a stateless 2026-07-28 MCP request.
fn mcp_request(
    method: &str,
    name: Option<&str>,
    params: Value,
) -> (Vec<(String, String)>, Vec<u8>) {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": { "name": "wc-bench", "version": "1" },
    });
    let mut headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        (
            "accept".to_owned(),
            "application/json, text/event-stream".to_owned(),
        ),
        ("mcp-protocol-version".to_owned(), "2026-07-28".to_owned()),
        ("mcp-method".to_owned(), method.to_owned()),
    ];
    if let Some(n) = name {
        headers.push(("mcp-name".to_owned(), n.to_owned()));
    }
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    (headers, serde_json::to_vec(&body).expect("json"))
}

/// One MCP request shape, measured.
struct McpCall {
    scenario: &'static str,
    method: &'static str,
    name: Option<&'static str>,
    params: Value,
}

async fn mcp_scenario(
    call: McpCall,
    base: &str,
    token: &str,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<Value> {
    let client = Client::new();
    let url = Arc::new(format!("{base}/mcp"));
    let (mut headers, body) = mcp_request(call.method, call.name, call.params);
    headers.push(("authorization".to_owned(), format!("Bearer {token}")));
    let headers = Arc::new(headers);
    let body = hyper::body::Bytes::from(body);
    let reply_bytes = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let seen = reply_bytes.clone();
    let method = call.method;
    let (mut samples, _) = drive(concurrency, duration, move |_| {
        let client = client.clone();
        let url = url.clone();
        let headers = headers.clone();
        let body = body.clone();
        let seen = seen.clone();
        async move {
            let h: Vec<(&str, &str)> = headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let r = client.send(hyper::Method::POST, &url, &h, body).await?;
            anyhow::ensure!(
                r.status == 200,
                "{method} answered {}: {}",
                r.status,
                String::from_utf8_lossy(&r.body)
            );
            let v: Value = serde_json::from_slice(&r.body)?;
            anyhow::ensure!(v.get("error").is_none(), "{method} failed: {v}");
            anyhow::ensure!(
                v["result"]["isError"] != json!(true),
                "{method} failed: {v}"
            );
            seen.store(r.body.len() as u64, std::sync::atomic::Ordering::Relaxed);
            Ok(vec![])
        }
    })
    .await;
    samples.extra.insert(
        "reply_bytes".into(),
        json!(reply_bytes.load(std::sync::atomic::Ordering::Relaxed)),
    );
    Ok(report(call.scenario, concurrency, samples))
}

async fn healthz_scenario(
    base: &str,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<Value> {
    let client = Client::new();
    let url = Arc::new(format!("{base}/healthz"));
    let (samples, _) = drive(concurrency, duration, move |_| {
        let client = client.clone();
        let url = url.clone();
        async move {
            let r = client.get(&url, None).await?;
            anyhow::ensure!(r.status == 200, "healthz answered {}", r.status);
            Ok(vec![])
        }
    })
    .await;
    Ok(report("http_healthz", concurrency, samples))
}

fn wanted(cli: &Cli, name: &str) -> bool {
    cli.scenarios.is_empty() || cli.scenarios.iter().any(|s| s == name)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let duration = Duration::from_secs(cli.seconds.unwrap_or(if cli.quick { 3 } else { 10 }));
    let emit = |v: Value| println!("{v}");

    for (name, shape) in [
        ("cas_hot_row", CasShape::HotRow),
        ("cas_hot_row_locked", CasShape::HotRowLocked),
        ("cas_distinct_rows", CasShape::DistinctRows),
    ] {
        if wanted(&cli, name) {
            for &c in &cli.concurrency {
                emit(cas_scenario(name, c, duration, shape).await?);
            }
        }
    }

    let http_scenarios = ["http_healthz", "mcp_tools_list", "mcp_runtime_status"];
    if http_scenarios.iter().any(|n| wanted(&cli, n)) {
        // Spawn wc-local against a fresh database unless a server was given.
        let mut _server = None;
        let _db;
        let (base, token) = match &cli.server_url {
            Some(url) => (
                url.trim_end_matches('/').to_owned(),
                std::env::var("WC_BENCH_TOKEN")
                    .map_err(|_| anyhow::anyhow!("--server-url needs WC_BENCH_TOKEN"))?,
            ),
            None => {
                let db = TestDatabase::new().await;
                let bin = match &cli.wc_local {
                    Some(p) => p.clone(),
                    None => std::env::current_exe()?.with_file_name("wc-local"),
                };
                let dir = std::env::temp_dir()
                    .join(format!("wc-bench-{}", uuid::Uuid::new_v4().simple()));
                let mut opts = LocalOptions::in_dir(&dir);
                opts.database_url = Some(db.url().expose().to_owned());
                opts.env.push(("RUST_LOG".into(), "warn".into()));
                let server = LocalServer::spawn(&bin, &opts)?;
                let base = server.base_url.clone();
                let token = server.token.clone();
                _server = Some(server);
                _db = db;
                (base, token)
            }
        };
        // Ratios are computed against /healthz measured in this same run.
        let mut healthz: std::collections::HashMap<usize, f64> = Default::default();
        for &c in &cli.concurrency {
            let line = healthz_scenario(&base, c, duration).await?;
            healthz.insert(c, line["ops_per_sec"].as_f64().unwrap_or(0.0));
            if wanted(&cli, "http_healthz") {
                emit(line);
            }
        }
        let ratio = |mut line: Value, c: usize| {
            let base = healthz.get(&c).copied().unwrap_or(0.0);
            let ops = line["ops_per_sec"].as_f64().unwrap_or(0.0);
            line["ratio_to_healthz"] = json!(if base > 0.0 { round(ops / base) } else { 0.0 });
            line
        };
        if wanted(&cli, "mcp_tools_list") {
            for &c in &cli.concurrency {
                let call = McpCall {
                    scenario: "mcp_tools_list",
                    method: "tools/list",
                    name: None,
                    params: json!({}),
                };
                let line = mcp_scenario(call, &base, &token, c, duration).await?;
                emit(ratio(line, c));
            }
        }
        if wanted(&cli, "mcp_runtime_status") {
            for &c in &cli.concurrency {
                let call = McpCall {
                    scenario: "mcp_runtime_status",
                    method: "tools/call",
                    name: Some("runtime_status"),
                    params: json!({ "name": "runtime_status", "arguments": {} }),
                };
                let line = mcp_scenario(call, &base, &token, c, duration).await?;
                emit(ratio(line, c));
            }
        }
    }
    Ok(())
}
