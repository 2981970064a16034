//! Operator routes under `/api/audit/*`. Reading takes `audit:read` and closing also
//! `audit:write`; what a caller sees is [`super::visibility`]: every session for a shared key,
//! else only the sessions it opened, and a session it may not see answers as unknown. Not part
//! of the OpenAPI document or the MCP surface.

use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router, routing::post};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use serde::Deserialize;
use serde_json::json;
use wc_store::ChangeOutcome;
use wc_store::audit::{self, Closing};

use super::{caller_fingerprint, valid_session_id, visibility};
use crate::AppState;
use crate::auth::{AuthError, Principal, Scope};
use crate::http::ApiError;

/// Most sessions per page.
pub const MAX_SESSIONS_PAGE: i64 = 200;
/// Most events per page.
pub const MAX_EVENTS_PAGE: i64 = 500;
/// Most events one stats request aggregates.
pub const MAX_STATS_SCAN: i64 = 100_000;

/// The audit routes (the caller must already be authenticated).
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/audit/sessions", post(list_sessions))
        .route("/api/audit/session", post(get_session))
        .route("/api/audit/session/close", post(close_session))
        .route("/api/audit/stats", post(stats))
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::client(StatusCode::BAD_REQUEST, "invalid_arguments", message)
}

fn parse<T: for<'de> Deserialize<'de>>(body: &axum::body::Bytes) -> Result<T, ApiError> {
    let text = if body.is_empty() {
        b"{}".as_slice()
    } else {
        body.as_ref()
    };
    serde_json::from_slice(text).map_err(|e| bad(format!("invalid request body: {e}")))
}

/// Failures of the audit routes: authorization (with its challenge headers) or the rest.
enum RouteError {
    Auth(AuthError),
    Api(ApiError),
}

impl From<AuthError> for RouteError {
    fn from(e: AuthError) -> Self {
        RouteError::Auth(e)
    }
}

impl From<ApiError> for RouteError {
    fn from(e: ApiError) -> Self {
        RouteError::Api(e)
    }
}

impl From<wc_store::StoreError> for RouteError {
    fn from(e: wc_store::StoreError) -> Self {
        RouteError::Api(ApiError::from(e))
    }
}

impl From<wc_store::PoolError> for RouteError {
    fn from(e: wc_store::PoolError) -> Self {
        RouteError::Api(ApiError::from(wc_store::StoreError::from(e)))
    }
}

impl IntoResponse for RouteError {
    fn into_response(self) -> Response {
        match self {
            RouteError::Auth(e) => e.into_response(),
            RouteError::Api(e) => e.into_response(),
        }
    }
}

/// Checks that the caller may read audit sessions; its fingerprint, for [`visibility`].
fn authorize(principal: &Principal) -> Result<String, RouteError> {
    principal.require(Scope::AuditRead)?;
    Ok(caller_fingerprint(principal))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListSessions {
    limit: Option<i64>,
    status: Option<String>,
    cursor: Option<String>,
}

fn encode_cursor(at: DateTime<Utc>, id: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{}|{id}", at.timestamp_micros()))
}

fn decode_cursor(cursor: &str) -> Option<(DateTime<Utc>, String)> {
    let raw = String::from_utf8(URL_SAFE_NO_PAD.decode(cursor).ok()?).ok()?;
    let (micros, id) = raw.split_once('|')?;
    let at = DateTime::from_timestamp_micros(micros.parse().ok()?)?;
    valid_session_id(id).then(|| (at, id.to_owned()))
}

async fn list_sessions(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    body: axum::body::Bytes,
) -> Result<Response, RouteError> {
    let caller = authorize(&principal)?;
    let args: ListSessions = parse(&body).map_err(RouteError::from)?;
    let limit = args.limit.unwrap_or(50);
    if !(1..=MAX_SESSIONS_PAGE).contains(&limit) {
        return Err(bad(format!("limit must be 1-{MAX_SESSIONS_PAGE}")).into());
    }
    if let Some(s) = &args.status
        && s != "open"
        && s != "closed"
    {
        return Err(bad("status must be open or closed").into());
    }
    let before = match &args.cursor {
        Some(c) => Some(decode_cursor(c).ok_or_else(|| RouteError::from(bad("malformed cursor")))?),
        None => None,
    };
    let client = state.deps.pool.get().await?;
    let mut sessions = audit::list_sessions(
        &client,
        visibility(&principal, &caller),
        args.status.as_deref(),
        before,
        limit + 1,
    )
    .await?;
    let has_more = sessions.len() as i64 > limit;
    sessions.truncate(limit as usize);
    let next_cursor = if has_more {
        sessions
            .last()
            .map(|s| encode_cursor(s.last_event_at, &s.session_id))
    } else {
        None
    };
    Ok(
        Json(json!({ "sessions": sessions, "has_more": has_more, "next_cursor": next_cursor }))
            .into_response(),
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GetSession {
    session_id: String,
    limit: Option<i64>,
    after_seq: Option<i64>,
}

async fn get_session(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    body: axum::body::Bytes,
) -> Result<Response, RouteError> {
    let caller = authorize(&principal)?;
    let args: GetSession = parse(&body).map_err(RouteError::from)?;
    if !valid_session_id(&args.session_id) {
        return Err(bad("session_id must be 1-128 characters of A-Z a-z 0-9 . _ : -").into());
    }
    let limit = args.limit.unwrap_or(100);
    if !(1..=MAX_EVENTS_PAGE).contains(&limit) {
        return Err(bad(format!("limit must be 1-{MAX_EVENTS_PAGE}")).into());
    }
    let after = args.after_seq.unwrap_or(0).max(0);
    let client = state.deps.pool.get().await?;
    // The events are read only once the session was found visible (its opener never changes).
    let visible = visibility(&principal, &caller);
    let Some(session) = audit::get_session(&client, visible, &args.session_id).await? else {
        return Err(ApiError::client(
            StatusCode::NOT_FOUND,
            "not_found",
            "no audit session with this id",
        )
        .into());
    };
    let mut events = audit::list_events(&client, &args.session_id, after, limit + 1).await?;
    let has_more = events.len() as i64 > limit;
    events.truncate(limit as usize);
    let next_after_seq = if has_more {
        events.last().map(|e| e.seq)
    } else {
        None
    };
    Ok(Json(json!({ "session": session, "events": events, "has_more": has_more, "next_after_seq": next_after_seq }))
        .into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CloseSession {
    session_id: String,
}

async fn close_session(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    body: axum::body::Bytes,
) -> Result<Response, RouteError> {
    let caller = authorize(&principal)?;
    principal.require(Scope::AuditWrite)?;
    let args: CloseSession = parse(&body).map_err(RouteError::from)?;
    if !valid_session_id(&args.session_id) {
        return Err(bad("session_id must be 1-128 characters of A-Z a-z 0-9 . _ : -").into());
    }
    match audit::close_session(
        &state.deps.pool,
        visibility(&principal, &caller),
        &args.session_id,
    )
    .await?
    {
        ChangeOutcome::Applied {
            value: Closing::Closed(s),
            ..
        } => Ok(Json(json!({ "session": s, "closed": true })).into_response()),
        ChangeOutcome::Applied {
            value: Closing::AlreadyClosed(s),
            ..
        } => Ok(Json(json!({ "session": s, "closed": false })).into_response()),
        ChangeOutcome::Applied {
            value: Closing::NotFound,
            ..
        } => Err(ApiError::client(
            StatusCode::NOT_FOUND,
            "not_found",
            "no audit session with this id",
        )
        .into()),
        ChangeOutcome::Conflict { .. } => Err(ApiError::client(
            StatusCode::CONFLICT,
            "conflict",
            "the session is being changed concurrently; retry",
        )
        .into()),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Stats {
    since_seconds: Option<i64>,
    max_scan: Option<i64>,
}

async fn stats(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    body: axum::body::Bytes,
) -> Result<Response, RouteError> {
    let caller = authorize(&principal)?;
    let args: Stats = parse(&body).map_err(RouteError::from)?;
    let since_seconds = args.since_seconds.unwrap_or(24 * 3600);
    if !(1..=366 * 24 * 3600).contains(&since_seconds) {
        return Err(bad("since_seconds must be 1 to one year").into());
    }
    let max_scan = args.max_scan.unwrap_or(10_000);
    if !(1..=MAX_STATS_SCAN).contains(&max_scan) {
        return Err(bad(format!("max_scan must be 1-{MAX_STATS_SCAN}")).into());
    }
    let since = Utc::now() - ChronoDuration::seconds(since_seconds);
    let client = state.deps.pool.get().await?;
    // A read error fails the request: a partial aggregate is never presented as complete.
    let stats = audit::stats(&client, visibility(&principal, &caller), since, max_scan).await?;
    let pairs = |v: &[(String, i64)]| -> serde_json::Map<String, serde_json::Value> {
        v.iter().map(|(k, n)| (k.clone(), json!(n))).collect()
    };
    Ok(Json(json!({
        "window": { "since": since, "since_seconds": since_seconds },
        "coverage": { "scanned": stats.scanned, "available": stats.available, "complete": stats.complete, "max_scan": max_scan },
        "events": { "total": stats.scanned, "succeeded": stats.succeeded, "failed": stats.failed },
        "sessions_touched": stats.sessions,
        "credential_kinds": pairs(&stats.by_principal_kind),
        "oauth_clients": pairs(&stats.by_oauth_client),
        "operations": pairs(&stats.by_operation),
    }))
    .into_response())
}
