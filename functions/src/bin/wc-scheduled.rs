//! AWS Lambda entry point of the scheduled upkeep (an EventBridge rule invokes it, e.g. every
//! minute): one [`wc_functions::maintenance::upkeep`] pass per invocation, pruning included.
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
    let state = wc_functions::AppState::new(pool, config).with_publisher(publisher);
    let state = &state;
    lambda_runtime::run(service_fn(move |_event: LambdaEvent<Value>| async move {
        let (report, failed) = maintenance::upkeep(state, true).await;
        tracing::info!(?report, "upkeep pass");
        // A failed part fails the invocation (after every part ran), so it is retried and seen.
        if let Some(e) = failed {
            return Err(e.into());
        }
        Ok::<_, lambda_runtime::Error>(serde_json::to_value(report)?)
    }))
    .await
}
