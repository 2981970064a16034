//! Benchmark scenarios for `wc-bench`. Each returns one JSON report line per concurrency.

pub mod board;
pub mod cas;
pub mod cold_start;
pub mod cpu;
pub mod mcp;
pub mod runner;
pub mod sessions;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Latencies of one run, in seconds.
pub struct Samples {
    /// Per-operation latencies.
    pub latencies: Vec<f64>,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Extra fields for the report line.
    pub extra: serde_json::Map<String, Value>,
}

/// The report line of one run.
pub fn report(scenario: &str, concurrency: usize, mut s: Samples) -> Value {
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

/// Rounds to three decimals.
pub fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Runs `op` from `concurrency` tasks for `duration`; each call returns extra counts to sum.
/// The report gets the CPU time each role (server, database, client, runner) spent per
/// operation meanwhile (`cpu_ms_per_op`), where `/proc` tells it.
pub async fn drive<F, Fut>(concurrency: usize, duration: Duration, op: F) -> (Samples, Vec<u64>)
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = anyhow::Result<Vec<u64>>> + Send,
{
    let op = Arc::new(op);
    let cpu_before = cpu::CpuSnapshot::take();
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
    let elapsed = start.elapsed();
    let mut extra = serde_json::Map::new();
    if let Some(cpu) = cpu_before.per_op(&cpu::CpuSnapshot::take(), latencies.len()) {
        extra.insert("cpu_ms_per_op".into(), cpu);
    }
    (
        Samples {
            latencies,
            elapsed,
            extra,
        },
        sums,
    )
}
