//! Runner round trips: `run_process ["true"]` over stateless MCP, through the Postgres queue (or,
//! for `runner_roundtrip_sqs`, an SQS queue on a local moto server), to the embedded runner of
//! `wc-local` and back.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wc_store::Pool;

use super::mcp::{mcp_request, post_mcp};
use super::{OpFuture, Samples, drive, report, round};
use crate::client::Client;

fn call_body(project: &str) -> (Vec<(String, String)>, hyper::body::Bytes) {
    let (headers, body) = mcp_request(
        "tools/call",
        Some("run_process"),
        json!({ "name": "run_process", "arguments": { "project": project, "argv": ["true"] } }),
    );
    (headers, hyper::body::Bytes::from(body))
}

/// The execution state in a tools/call reply.
fn execution_state(reply: &Value) -> String {
    reply["result"]["structuredContent"]["output"]["execution_state"]
        .as_str()
        .or_else(|| reply["result"]["structuredContent"]["execution_state"].as_str())
        .unwrap_or("unknown")
        .to_owned()
}

/// Where the time of the work created since `since` went: queued → leased (the runner's poll
/// picking it up) and leased → finished (execution and the result report), p50 in ms; report
/// fields.
pub async fn breakdown(
    pool: &Pool,
    since: chrono::DateTime<chrono::Utc>,
) -> anyhow::Result<serde_json::Map<String, Value>> {
    let client = pool.get().await?;
    let (q, r) = wc_store::testing::work_timing(&client, since).await?;
    // Which queue carried the work: the figures are only about the queue they name.
    let queues = wc_store::testing::work_queues(&client, since).await?;
    let mut fields = serde_json::Map::new();
    fields.insert("queue_to_lease_p50_ms".into(), json!(q.map(round)));
    fields.insert("lease_to_result_p50_ms".into(), json!(r.map(round)));
    fields.insert(
        "work_by_queue".into(),
        queues.into_iter().map(|(q, n)| (q, json!(n))).collect(),
    );
    Ok(fields)
}

/// A caller's own clock around each of its calls: when the request went out and when the
/// reply was in.
pub type CallClock = Arc<std::sync::Mutex<Vec<CallTimes>>>;

/// When one call was sent and answered, by the caller's clock.
#[derive(Debug, Clone, Copy)]
pub struct CallTimes {
    /// The request went out.
    pub sent: chrono::DateTime<chrono::Utc>,
    /// The whole reply was in.
    pub answered: chrono::DateTime<chrono::Utc>,
}

/// Where the time of one caller's round trips went, each call set beside the work item it
/// queued (calls and items in order: only for calls made one at a time, each queuing one
/// item, all since `since`). The report field `stages_p50_ms` holds the p50, in ms, of:
/// `to_queue` (request sent → the enqueuing transaction's start: HTTP, authentication,
/// parsing, the project's runner), `queue_to_lease` (→ the claim's transaction: the enqueue's
/// commit, the wake-up hint, the runner's poll), `lease_to_result` (→ the result's transaction:
/// the claim's commit, the poll's reply, the runner's work, its result request) and
/// `result_to_reply` (→ the reply in: the result's commit, the done hint, the waiter's read,
/// the tool's result, the audit row, the reply). `None` when the items do not pair with the
/// calls.
pub async fn stages(
    pool: &Pool,
    since: chrono::DateTime<chrono::Utc>,
    calls: &[CallTimes],
) -> anyhow::Result<Option<Value>> {
    let client = pool.get().await?;
    let items = wc_store::testing::work_times(&client, since).await?;
    if items.len() != calls.len() {
        return Ok(None);
    }
    let ms = |a: chrono::DateTime<chrono::Utc>, b: chrono::DateTime<chrono::Utc>| {
        (b - a).num_microseconds().unwrap_or(0) as f64 / 1000.0
    };
    let mut split: [Vec<f64>; 4] = Default::default();
    for (call, item) in calls.iter().zip(&items) {
        let (Some(leased), Some(finished)) = (item.leased, item.finished) else {
            return Ok(None);
        };
        split[0].push(ms(call.sent, item.created));
        split[1].push(ms(item.created, leased));
        split[2].push(ms(leased, finished));
        split[3].push(ms(finished, call.answered));
    }
    let p50 = |v: &[f64]| round(super::median(v));
    Ok(Some(json!({
        "to_queue": p50(&split[0]),
        "queue_to_lease": p50(&split[1]),
        "lease_to_result": p50(&split[2]),
        "result_to_reply": p50(&split[3]),
    })))
}

/// A round-trip scenario (`runner_roundtrip`, `runner_roundtrip_sqs`) at one concurrency.
pub async fn roundtrip(
    scenario: &str,
    base: &str,
    token: &str,
    project: &str,
    pool: &Pool,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<Value> {
    let since = chrono::Utc::now();
    let (mut samples, _) = drive(concurrency, duration, roundtrip_op(base, token, project)).await;
    samples.extra.extend(breakdown(pool, since).await?);
    Ok(report(scenario, concurrency, samples))
}

/// One round trip on the server at `base`: `run_process ["true"]` in `project`, which must
/// come back `succeeded`.
pub fn roundtrip_op(
    base: &str,
    token: &str,
    project: &str,
) -> impl Fn(usize) -> OpFuture + Send + Sync + 'static {
    let client = Client::new();
    let url = Arc::new(format!("{base}/mcp"));
    let (mut headers, body) = call_body(project);
    headers.push(("authorization".to_owned(), format!("Bearer {token}")));
    let headers = Arc::new(headers);
    move |_| {
        let client = client.clone();
        let url = url.clone();
        let headers = headers.clone();
        let body = body.clone();
        Box::pin(async move {
            let (reply, _) = post_mcp(&client, &url, &headers, body, "tools/call").await?;
            let state = execution_state(&reply);
            anyhow::ensure!(state == "succeeded", "run_process ended {state}: {reply}");
            Ok(vec![])
        })
    }
}

/// `runner_soak`: exactly `calls` round trips from `concurrency` tasks; every call must come
/// back `succeeded`, and afterwards no work may be queued, leased or lost.
pub async fn soak(
    base: &str,
    token: &str,
    project: &str,
    pool: &Pool,
    calls: u64,
    concurrency: usize,
) -> anyhow::Result<Value> {
    let client = Client::new();
    let url = Arc::new(format!("{base}/mcp"));
    let (mut headers, body) = call_body(project);
    headers.push(("authorization".to_owned(), format!("Bearer {token}")));
    let headers = Arc::new(headers);
    let next = Arc::new(AtomicU64::new(0));
    let not_succeeded = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let since = chrono::Utc::now();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (client, url, headers, body) =
            (client.clone(), url.clone(), headers.clone(), body.clone());
        let (next, not_succeeded, errors) = (next.clone(), not_succeeded.clone(), errors.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < calls {
                let t = Instant::now();
                match post_mcp(&client, &url, &headers, body.clone(), "tools/call").await {
                    Ok((reply, _)) => {
                        if execution_state(&reply) != "succeeded" {
                            not_succeeded.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Err(e) => {
                        if errors.fetch_add(1, Ordering::Relaxed) == 0 {
                            eprintln!("runner_soak: first failed call: {e:#}");
                        }
                    }
                }
                lat.push(t.elapsed().as_secs_f64());
            }
            lat
        }));
    }
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await?);
    }
    let elapsed = start.elapsed();
    let c = pool.get().await?;
    let mut states = serde_json::Map::new();
    for (state, n) in wc_store::testing::work_states(&c, since).await? {
        states.insert(state, json!(n));
    }
    let count = |s: &str| states.get(s).and_then(Value::as_i64).unwrap_or(0);
    let mut extra = serde_json::Map::new();
    extra.insert("calls".into(), json!(calls));
    extra.insert("lost".into(), json!(count("lost")));
    extra.insert("stuck".into(), json!(count("queued") + count("leased")));
    extra.insert(
        "not_succeeded".into(),
        json!(not_succeeded.load(Ordering::Relaxed)),
    );
    extra.insert("errors".into(), json!(errors.load(Ordering::Relaxed)));
    extra.insert("work_states".into(), Value::Object(states));
    Ok(report(
        "runner_soak",
        concurrency,
        Samples {
            latencies,
            elapsed,
            extra,
        },
    ))
}
