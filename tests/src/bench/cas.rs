//! The compare-and-swap helper on a probe table.

use std::time::Duration;

use serde_json::{Value, json};
use wc_store::cas::{CAS_RETRY, CasOutcome};
use wc_store::config::DatabaseConfig;
use wc_store::testing::{TestDatabase, probe};

use super::{drive, report, round};

/// Which rows the writers hit.
#[derive(Clone, Copy)]
pub enum CasShape {
    /// One row, optimistic load.
    HotRow,
    /// One row, loaded FOR UPDATE.
    HotRowLocked,
    /// One row per worker.
    DistinctRows,
}

/// Runs one CAS shape.
pub async fn cas_scenario(
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
    let policy = CAS_RETRY.with_max_attempts(64);
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
