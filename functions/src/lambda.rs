//! The AWS Lambda entry points' shared start-up: configuration, the pool (connecting lazily)
//! and the SQS publisher are built once per cold start, then `lambda_http::run` serves the
//! router of the function's route groups (or, with `WC_LAMBDA_LOCAL_LISTEN`, `axum::serve`). Each binary (`wc-lambda` for all groups,
//! `wc-lambda-mcp`, `wc-lambda-rest`, `wc-lambda-audit`, `wc-lambda-runner`) is one call.

use crate::config::ServerConfig;
use crate::wake::Wakeups;
use crate::{AppState, Surfaces, app_for};
use wc_store::config::DatabaseConfig;
use wc_store::connect::Connector;

/// Serves `surfaces` under the Lambda runtime until it stops.
pub async fn serve(surfaces: Surfaces) -> Result<(), lambda_http::Error> {
    let started = std::time::Instant::now();
    crate::telemetry::init();
    crate::hardening::forbid_inspection()?;
    let db = DatabaseConfig::from_env()?;
    let connector = Connector::new(&db)?;
    let pool = wc_store::pool::build_pool_with(&db, connector.clone())?;
    let config = ServerConfig::from_env()?;
    let wake = if config.notify {
        Wakeups::listening(connector)
    } else {
        Wakeups::polling()
    };
    let publisher = crate::queue_publisher(&config);
    let state = AppState::new(pool, config)
        .with_wakeups(wake)
        .with_publisher(publisher);
    let state_ready = started.elapsed();
    let app = app_for(state, surfaces);
    tracing::info!(
        state_us = state_ready.as_micros() as u64,
        init_us = started.elapsed().as_micros() as u64,
        "initialized"
    );
    // Local HTTP mode (`WC_LAMBDA_LOCAL_LISTEN=host:port`): the same start-up and router under
    // `axum::serve`, for measuring start-up and running a function without the Lambda runtime.
    if let Ok(addr) = std::env::var("WC_LAMBDA_LOCAL_LISTEN") {
        let listener = tokio::net::TcpListener::bind(&addr).await?;
        axum::serve(listener, app).await?;
        return Ok(());
    }
    lambda_http::run(app).await
}
