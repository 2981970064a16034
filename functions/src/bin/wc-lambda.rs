//! AWS Lambda entry point: the same router as `wc-local`, run by `lambda_http`.
//! Configuration and the pool are built once per cold start; the pool connects lazily.

use wc_functions::config::ServerConfig;
use wc_functions::{AppState, app};
use wc_store::config::DatabaseConfig;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    wc_functions::telemetry::init();
    let db = DatabaseConfig::from_env()?;
    let pool = wc_store::pool::build_pool(&db)?;
    let config = ServerConfig::from_env()?;
    let wake = if config.notify {
        wc_functions::wake::Wakeups::listening(db.url.clone())
    } else {
        wc_functions::wake::Wakeups::polling()
    };
    let publisher = wc_functions::queue_publisher(&config).await;
    let state = AppState::new(pool, config)
        .with_wakeups(wake)
        .with_publisher(publisher);
    lambda_http::run(app(state)).await
}
