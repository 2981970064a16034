//! Runner tokens: `wcrk_` bearer secrets of one runner, stored as digests in `runners`. They
//! authenticate only the runner API, and credentials of the tool surfaces never do.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::AppState;
use crate::auth::token;
use crate::http::ApiError;

/// Prefix of runner tokens.
pub const PREFIX: &str = "wcrk_";

/// A fresh runner token (256 random bits).
pub fn generate() -> String {
    token::generate_with_prefix(PREFIX)
}

/// The authenticated runner of one runner-API request.
#[derive(Debug, Clone)]
pub struct RunnerPrincipal {
    /// Its stable client id.
    pub client_id: String,
}

fn unauthorized(message: &str) -> Response {
    let mut resp =
        ApiError::client(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
    resp.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"wc-runner\""),
    );
    resp
}

/// Route middleware of the runner API: a live runner token, or 401.
pub async fn require_runner(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    let Some(value) = req.headers().get(header::AUTHORIZATION) else {
        return unauthorized("a runner token is required (Authorization: Bearer wcrk_…)");
    };
    let Some(token) = value
        .to_str()
        .ok()
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim())
        .filter(|t| t.starts_with(PREFIX) && token::is_plausible(t))
    else {
        return unauthorized("the runner token is malformed");
    };
    let client = match state.deps.pool.get().await {
        Ok(c) => c,
        Err(e) => return ApiError::from(wc_store::StoreError::from(e)).into_response(),
    };
    match wc_store::runners::find_active_by_digest(&client, &token::digest(token)).await {
        Ok(Some(client_id)) => {
            drop(client);
            req.extensions_mut().insert(RunnerPrincipal { client_id });
            next.run(req).await
        }
        Ok(None) => unauthorized("the runner token is unknown or revoked"),
        Err(e) => ApiError::from(e).into_response(),
    }
}
