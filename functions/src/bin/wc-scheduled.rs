//! AWS Lambda entry point of the scheduled upkeep (an EventBridge rule invokes it, e.g. every
//! minute): one [`wc_functions::maintenance::run_once`] pass per invocation, pruning included, then
//! shells and MCP tasks.
//! Configuration, the pool and the SQS publisher are built once per cold start.

use lambda_http::lambda_runtime::{self, LambdaEvent, service_fn};
use serde_json::Value;
use wc_functions::config::ServerConfig;
use wc_functions::maintenance;
use wc_store::config::DatabaseConfig;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    wc_functions::telemetry::init();
    wc_functions::hardening::forbid_inspection()?;
    let db = DatabaseConfig::from_env()?;
    let pool = wc_store::pool::build_pool(&db)?;
    let config = ServerConfig::from_env()?;
    let publisher = wc_functions::queue_publisher(&config);
    let state = wc_functions::AppState::new(pool.clone(), config).with_publisher(publisher.clone());
    let (pool, publisher, state) = (&pool, publisher.as_deref(), &state);
    lambda_runtime::run(service_fn(move |_event: LambdaEvent<Value>| async move {
        let report = maintenance::run_once(pool, publisher, true).await?;
        let shells = maintenance::end_shells(&state.deps).await?;
        tracing::info!(shells, "persistent shells closed");
        let tasks = maintenance::end_tasks(state).await?;
        tracing::info!(?tasks, "MCP tasks ended and expired");
        tracing::info!(?report, "maintenance pass");
        Ok::<_, lambda_runtime::Error>(serde_json::to_value(report)?)
    }))
    .await
}
