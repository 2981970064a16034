use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Extension};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router, middleware};
use serde_json::json;
use tower_http::catch_panic::CatchPanicLayer;
use wc_store::Pool;

use crate::auth::{Principal, ProjectGrants, require_principal};
use crate::config::ServerConfig;
use crate::health;
use crate::http::{ApiError, limit_body, panic_response, request_context};

/// Everything a request handler may use. Cloned per request; holds no request state.
#[derive(Clone)]
pub struct AppState {
    /// The database pool, built once per process.
    pub pool: Pool,
    /// Configuration, read once per process.
    pub config: Arc<ServerConfig>,
}

impl AppState {
    /// State over `pool` with `config`.
    pub fn new(pool: Pool, config: ServerConfig) -> Self {
        Self {
            pool,
            config: Arc::new(config),
        }
    }
}

/// The router every entry point serves.
pub fn app(state: AppState) -> Router {
    let authenticated = Router::new().route("/api/whoami", get(whoami)).route_layer(
        middleware::from_fn_with_state(state.clone(), require_principal),
    );
    let max_body = state.config.max_body_bytes;
    Router::new()
        .route("/healthz", get(health::healthz))
        .merge(authenticated)
        .fallback(not_found)
        // Innermost first: the body limit runs before any handler, inside panic catching,
        // inside the request context that stamps every response and log line.
        .layer(middleware::from_fn_with_state(max_body, limit_body))
        .layer(DefaultBodyLimit::max(max_body))
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(middleware::from_fn(request_context))
        .with_state(state)
}

/// Who the caller is, as far as wc is concerned. Never includes secret material.
async fn whoami(Extension(principal): Extension<Principal>) -> impl IntoResponse {
    let projects = match &principal.projects {
        ProjectGrants::All => json!("*"),
        ProjectGrants::Only(set) => json!(set),
    };
    Json(json!({
        "principal_kind": principal.kind.as_str(),
        "credential_id": principal.credential_id,
        "scopes": principal.scopes.to_strings(),
        "projects": projects,
    }))
}

async fn not_found() -> ApiError {
    ApiError::client(StatusCode::NOT_FOUND, "not_found", "no such route")
}
