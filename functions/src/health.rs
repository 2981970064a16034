//! `GET /healthz`: is this instance able to serve?

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::{AppState, VERSION};

/// 200 when the database answers at the schema level this build needs (or newer, as during
/// a rollback), else 503. Unauthenticated, and it reveals nothing beyond versions.
pub async fn healthz(State(state): State<AppState>) -> Response {
    match wc_store::health::check(&state.deps.pool, state.deps.config.health_timeout).await {
        Ok(h) => {
            let current = h
                .schema_level
                .is_some_and(|level| level >= h.expected_level);
            let (status, word) = if current {
                (StatusCode::OK, "ok")
            } else {
                (StatusCode::SERVICE_UNAVAILABLE, "schema_outdated")
            };
            let body = json!({
                "status": word,
                "version": VERSION,
                "database": {
                    "reachable": true,
                    "schema_level": h.schema_level,
                    "expected_schema_level": h.expected_level,
                },
            });
            (status, Json(body)).into_response()
        }
        Err(e) => {
            tracing::error!(error = %e, "health check: database unreachable");
            let body = json!({
                "status": "unavailable",
                "version": VERSION,
                "database": { "reachable": false },
            });
            (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
        }
    }
}
