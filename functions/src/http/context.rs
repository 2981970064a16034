use std::time::Instant;

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tracing::Instrument;

/// Header carrying the request id, in both directions.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// The id of one request: the caller's `x-request-id` when it is short and plain, else a fresh
/// UUIDv7. It is on the response, on every log line, and in every error body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(String);

impl RequestId {
    /// Accepts a caller-supplied id only if it is 1–128 characters of `[A-Za-z0-9._:-]`, so it
    /// cannot inject anything into logs or headers.
    pub fn from_caller(value: &str) -> Option<RequestId> {
        let ok = !value.is_empty()
            && value.len() <= 128
            && value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
        ok.then(|| RequestId(value.to_owned()))
    }

    /// A fresh id.
    pub fn generate() -> RequestId {
        RequestId(uuid::Uuid::now_v7().to_string())
    }

    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Longest `Host` or `Origin` accepted: a DNS name (253) with a scheme and a port fits.
const MAX_HOST_HEADER_LEN: usize = 300;

tokio::task_local! {
    static CURRENT: RequestId;
}

/// The id of the request being served by this task, if any.
pub fn current_request_id() -> Option<RequestId> {
    CURRENT.try_with(|id| id.clone()).ok()
}

/// Outermost middleware: assigns the request id, opens the request span (so every log line of
/// the request carries the id), logs one access line, and echoes the id on the response.
/// Only the path is logged: query strings and headers may carry secrets.
///
/// A header that is not UTF-8, or a `Host`/`Origin` longer than any real one, is refused
/// here: the MCP transport logs the `Host` and `Origin` it rejects, and they must stay short.
pub async fn request_context(mut req: Request, next: Next) -> Response {
    if let Some(problem) = req.headers().iter().find_map(|(k, v)| {
        if std::str::from_utf8(v.as_bytes()).is_err() {
            Some(format!("header {k} is not valid UTF-8"))
        } else if (k == axum::http::header::HOST || k == axum::http::header::ORIGIN)
            && v.len() > MAX_HOST_HEADER_LEN
        {
            Some(format!(
                "header {k} is longer than {MAX_HOST_HEADER_LEN} bytes"
            ))
        } else {
            None
        }
    }) {
        let id = RequestId::generate();
        return CURRENT
            .scope(id.clone(), async move {
                let mut resp = super::ApiError::client(
                    axum::http::StatusCode::BAD_REQUEST,
                    "bad_request",
                    problem,
                )
                .into_response();
                if let Ok(v) = HeaderValue::from_str(id.as_str()) {
                    resp.headers_mut().insert(REQUEST_ID_HEADER, v);
                }
                resp
            })
            .await;
    }
    let id = req
        .headers()
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(RequestId::from_caller)
        .unwrap_or_else(RequestId::generate);
    req.extensions_mut().insert(id.clone());
    // The path and a custom method are the caller's text: bounded and escaped.
    let span = tracing::info_span!(
        "request",
        request_id = %id.as_str(),
        method = %crate::telemetry::loggable(req.method().as_str()),
        path = %crate::telemetry::loggable(req.uri().path()),
    );
    let started = Instant::now();
    let mut resp = CURRENT
        .scope(id.clone(), next.run(req))
        .instrument(span.clone())
        .await;
    if let Ok(v) = HeaderValue::from_str(id.as_str()) {
        resp.headers_mut().insert(REQUEST_ID_HEADER, v);
    }
    let status = resp.status().as_u16();
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    span.in_scope(|| tracing::info!(status, latency_ms, "request finished"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caller_ids_are_accepted_only_when_plain_and_short() {
        assert!(RequestId::from_caller("abc-123_x.y:z").is_some());
        for bad in ["", "has space", "new\nline", "quote\"", &"a".repeat(129)] {
            assert!(RequestId::from_caller(bad).is_none(), "{bad:?}");
        }
    }
}
