//! Benchmark scenarios for `wc-bench`. Each returns one JSON report line per concurrency.

pub mod baseline;
pub mod board;
pub mod checkpoint;
pub mod cold_start;
pub mod cpu;
pub mod files;
pub mod mcp;
pub mod review;
pub mod runner;
pub mod search;
pub mod sessions;
pub mod shells;
pub mod tasks;
pub mod validate;
pub mod worktree;

use std::future::Future;
use std::pin::Pin;
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
    let pct = |p: f64| percentile_ms(&s.latencies, p);
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

/// The `p` quantile (0 to 1, nearest rank) of `sorted` latencies in seconds, in
/// milliseconds; 0 when there are none.
pub fn percentile_ms(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx] * 1000.0
}

/// The median of `values` (the mean of the middle two for an even count); 0 when empty.
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Rounds to three decimals.
pub fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The future of one operation, for scenarios that hand their operation around
/// ([`drive_paired`]): the extra counts to sum.
pub type OpFuture = Pin<Box<dyn Future<Output = anyhow::Result<Vec<u64>>> + Send>>;

/// Runs `op` from `concurrency` tasks for `duration`; each call returns extra counts to sum.
/// The report gets the CPU time each role (server, database, client, runner) spent per
/// operation meanwhile (`cpu_ms_per_op`), where `/proc` tells it.
pub async fn drive<F, Fut>(concurrency: usize, duration: Duration, op: F) -> (Samples, Vec<u64>)
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<Vec<u64>>> + Send,
{
    let mut side = Side::default();
    side.run(concurrency, duration, &Arc::new(op)).await;
    side.finish()
}

/// Two scenarios measured against each other, `b` as a fraction of `a`. They run in rounds
/// (one per second of `duration`, at most five) of alternating slices (a b, b a, a b, …), each
/// side getting `duration` in all, so a change in the machine's speed during the run falls on
/// both alike: run one after the other, a shared two-core box drifting between its fast and
/// slow spells moved the ratio by a quarter from one run to the next. Each side's report covers
/// all its slices; `ratio_by_round` holds the ratio of each round's two adjacent slices.
pub async fn drive_paired<FA, FutA, FB, FutB>(
    concurrency: usize,
    duration: Duration,
    a: FA,
    b: FB,
) -> Paired
where
    FA: Fn(usize) -> FutA + Send + Sync + 'static,
    FutA: Future<Output = anyhow::Result<Vec<u64>>> + Send,
    FB: Fn(usize) -> FutB + Send + Sync + 'static,
    FutB: Future<Output = anyhow::Result<Vec<u64>>> + Send,
{
    let rounds = (duration.as_secs() as u32).clamp(1, 5);
    let slice = duration / rounds;
    let (a, b) = (Arc::new(a), Arc::new(b));
    let (mut side_a, mut side_b) = (Side::default(), Side::default());
    let mut round_rates = Vec::new();
    for round_no in 0..rounds {
        round_rates.push(if round_no % 2 == 0 {
            let ra = side_a.run(concurrency, slice, &a).await;
            (ra, side_b.run(concurrency, slice, &b).await)
        } else {
            let rb = side_b.run(concurrency, slice, &b).await;
            (side_a.run(concurrency, slice, &a).await, rb)
        });
    }
    let (a, _) = side_a.finish();
    let (b, _) = side_b.finish();
    Paired::new(a, b, &round_rates)
}

/// What [`drive_paired`] measured.
pub struct Paired {
    /// The first scenario, over all its slices.
    pub a: Samples,
    /// The second scenario, over all its slices.
    pub b: Samples,
    /// Operations per second of `b` over those of `a`, over the whole run.
    pub ratio: Option<f64>,
    /// The same ratio within each round.
    pub ratio_by_round: Vec<f64>,
}

impl Paired {
    /// `a` and `b` over all their slices, and each round's operations per second of `a` and
    /// `b`; a round in which `a` did nothing has no ratio.
    fn new(a: Samples, b: Samples, round_rates: &[(f64, f64)]) -> Paired {
        Paired {
            ratio: ratio(rate(&b), rate(&a)),
            ratio_by_round: round_rates
                .iter()
                .filter_map(|&(ra, rb)| ratio(rb, ra))
                .collect(),
            a,
            b,
        }
    }

    /// One report line for a scenario measured on two builds of the server, `a` the baseline
    /// and `b` the current build: the current build's figures as the line's own, the
    /// baseline's (`ops`, `ops_per_sec`, `p50_ms`, `p99_ms` and any extras) under `baseline`,
    /// and `ratio_to_baseline` (current over baseline operations per second) with
    /// `ratio_to_baseline_by_round`.
    pub fn against_baseline(self, scenario: &str, concurrency: usize) -> Value {
        let (mut baseline, mut line) =
            self.reports(scenario, scenario, concurrency, "ratio_to_baseline");
        if let Some(fields) = baseline.as_object_mut() {
            fields.remove("scenario");
            fields.remove("concurrency");
        }
        line["baseline"] = baseline;
        line
    }

    /// The two report lines, `a`'s named `name_a` and `b`'s `name_b`; `b`'s carries the
    /// ratio as `ratio_field`, the rounds' ratios as `{ratio_field}_by_round` and its median
    /// latency over `a`'s as `p50_{ratio_field}`.
    pub fn reports(
        self,
        name_a: &str,
        name_b: &str,
        concurrency: usize,
        ratio_field: &str,
    ) -> (Value, Value) {
        let a = report(name_a, concurrency, self.a);
        let mut b = report(name_b, concurrency, self.b);
        b[ratio_field] = json!(self.ratio);
        b[format!("{ratio_field}_by_round")] = json!(self.ratio_by_round);
        b[format!("p50_{ratio_field}")] = json!(ratio(
            b["p50_ms"].as_f64().unwrap_or(0.0),
            a["p50_ms"].as_f64().unwrap_or(0.0)
        ));
        (a, b)
    }
}

/// `value` as a fraction of `base`, rounded; `None` when `base` is not positive.
pub fn ratio(value: f64, base: f64) -> Option<f64> {
    (base > 0.0).then(|| round(value / base))
}

fn rate(s: &Samples) -> f64 {
    let secs = s.elapsed.as_secs_f64();
    if secs > 0.0 {
        s.latencies.len() as f64 / secs
    } else {
        0.0
    }
}

/// One scenario's measurements, accumulated over one or more slices of a run.
#[derive(Default)]
struct Side {
    latencies: Vec<f64>,
    sums: Vec<u64>,
    elapsed: Duration,
    cpu: Option<cpu::CpuSpent>,
}

impl Side {
    /// Runs `op` from `concurrency` tasks for `duration` and adds what it measured; returns
    /// this slice's operations per second.
    async fn run<F, Fut>(&mut self, concurrency: usize, duration: Duration, op: &Arc<F>) -> f64
    where
        F: Fn(usize) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = anyhow::Result<Vec<u64>>> + Send,
    {
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
                    add_counts(&mut sums, counts);
                }
                (lat, sums)
            }));
        }
        let mut ops = 0;
        for t in tasks {
            let (lat, sums) = t.await.expect("benchmark task");
            ops += lat.len();
            self.latencies.extend(lat);
            add_counts(&mut self.sums, sums);
        }
        let elapsed = start.elapsed();
        self.elapsed += elapsed;
        if let Some(spent) = cpu_before.spent_until(&cpu::CpuSnapshot::take()) {
            self.cpu.get_or_insert_with(Default::default).add(&spent);
        }
        ops as f64 / elapsed.as_secs_f64()
    }

    fn finish(self) -> (Samples, Vec<u64>) {
        let mut extra = serde_json::Map::new();
        if let Some(cpu) = self.cpu.and_then(|c| c.per_op(self.latencies.len())) {
            extra.insert("cpu_ms_per_op".into(), cpu);
        }
        (
            Samples {
                latencies: self.latencies,
                elapsed: self.elapsed,
                extra,
            },
            self.sums,
        )
    }
}

fn add_counts(into: &mut Vec<u64>, counts: Vec<u64>) {
    if into.len() < counts.len() {
        into.resize(counts.len(), 0);
    }
    for (s, c) in into.iter_mut().zip(counts) {
        *s += c;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(ops: usize, latency_ms: f64, elapsed_ms: u64) -> Samples {
        Samples {
            latencies: vec![latency_ms / 1000.0; ops],
            elapsed: Duration::from_millis(elapsed_ms),
            extra: Default::default(),
        }
    }

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn a_ratio_needs_a_positive_base() {
        assert_eq!(ratio(3.0, 2.0), Some(1.5));
        assert_eq!(ratio(2.0, 3.0), Some(0.667));
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(ratio(0.0, 4.0), Some(0.0));
    }

    #[test]
    fn the_paired_ratio_is_over_all_slices_and_each_round_has_its_own() {
        // a: 200 operations in 2 s (100/s); b: 180 in 1.5 s (120/s).
        let rounds = [(100.0, 90.0), (0.0, 50.0), (120.0, 132.0)];
        let paired = Paired::new(samples(200, 1.0, 2000), samples(180, 1.0, 1500), &rounds);
        assert_eq!(paired.ratio, Some(1.2));
        // The round in which `a` did nothing has no ratio.
        assert_eq!(paired.ratio_by_round, vec![0.9, 1.1]);
        let idle = Paired::new(
            samples(0, 1.0, 1000),
            samples(10, 1.0, 1000),
            &[(0.0, 10.0)],
        );
        assert_eq!(idle.ratio, None);
        assert!(idle.ratio_by_round.is_empty());
    }

    #[test]
    fn a_line_against_the_baseline_carries_both_builds_and_their_ratio() {
        let mut baseline = samples(100, 2.0, 1000);
        baseline
            .extra
            .insert("cpu_ms_per_op".into(), json!({ "server": 0.5 }));
        let rounds = [(90.0, 99.0), (110.0, 121.0)];
        let line = Paired::new(baseline, samples(110, 1.0, 1000), &rounds)
            .against_baseline("mcp_recorded_call", 8);
        assert_eq!(
            line,
            json!({
                "scenario": "mcp_recorded_call",
                "concurrency": 8,
                "ops": 110,
                "ops_per_sec": 110.0,
                "p50_ms": 1.0,
                "p99_ms": 1.0,
                "baseline": {
                    "ops": 100,
                    "ops_per_sec": 100.0,
                    "p50_ms": 2.0,
                    "p99_ms": 2.0,
                    "cpu_ms_per_op": { "server": 0.5 },
                },
                "ratio_to_baseline": 1.1,
                "ratio_to_baseline_by_round": [1.1, 1.1],
                "p50_ratio_to_baseline": 0.5,
            })
        );
    }
}
