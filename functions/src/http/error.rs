use std::any::Any;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::context::current_request_id;

/// The one JSON error body of the HTTP surfaces:
/// `{"error": {"kind", "message", "request_id"}}`.
pub fn error_body(kind: &str, message: &str) -> Value {
    let mut error = json!({ "kind": kind, "message": message });
    if let Some(id) = current_request_id() {
        error["request_id"] = json!(id.as_str());
    }
    json!({ "error": error })
}

/// An error answered by an HTTP route (not a tool result). Server errors are opaque to the
/// caller: the body says only `internal`, and the cause is logged with the request id.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    kind: &'static str,
    message: String,
    cause: Option<anyhow::Error>,
    retry_after: Option<std::time::Duration>,
}

impl ApiError {
    /// A client error with a stable kind and a message naming what was wrong.
    pub fn client(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        debug_assert!(status.is_client_error());
        Self {
            status,
            kind,
            message: message.into(),
            cause: None,
            retry_after: None,
        }
    }

    /// An internal failure; `cause` is logged, never returned.
    pub fn internal(cause: impl Into<anyhow::Error>) -> Self {
        Self {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            kind: "internal",
            message: "internal error".into(),
            cause: Some(cause.into()),
            retry_after: None,
        }
    }

    /// A dependency (the database) is unavailable; `cause` is logged, never returned.
    pub fn unavailable(cause: impl Into<anyhow::Error>) -> Self {
        Self {
            status: StatusCode::SERVICE_UNAVAILABLE,
            kind: "unavailable",
            message: "service temporarily unavailable".into(),
            cause: Some(cause.into()),
            retry_after: None,
        }
    }

    /// This process is at one of its admission limits: 503 `unavailable` with `Retry-After`.
    /// The message names the limit (it holds no server internals); nothing was done.
    pub fn overloaded(message: impl Into<String>, retry_after: std::time::Duration) -> Self {
        Self {
            status: StatusCode::SERVICE_UNAVAILABLE,
            kind: "unavailable",
            message: message.into(),
            cause: None,
            retry_after: Some(retry_after),
        }
    }

    /// The same error, telling the caller when to retry (`Retry-After`, whole seconds).
    pub fn with_retry_after(mut self, after: std::time::Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }
}

impl From<wc_store::StoreError> for ApiError {
    fn from(e: wc_store::StoreError) -> Self {
        if e.is_unavailable() {
            ApiError::unavailable(e)
        } else {
            ApiError::internal(e)
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let Some(cause) = &self.cause {
            tracing::error!(
                status = self.status.as_u16(),
                error = format!("{cause:#}"),
                "request failed"
            );
        }
        let mut resp = (self.status, Json(error_body(self.kind, &self.message))).into_response();
        if let Some(after) = self.retry_after {
            // Whole seconds, rounded up, at least one (RFC 9110 delay-seconds).
            let secs = after.as_millis().div_ceil(1000).max(1) as u64;
            resp.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, secs.into());
        }
        resp
    }
}

/// Turns a handler panic into the same opaque 500 body, logging the panic message.
pub fn panic_response(panic: Box<dyn Any + Send + 'static>) -> Response {
    let detail = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("non-string panic payload");
    tracing::error!(panic = detail, "handler panicked");
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        Json(error_body("internal", "internal error")),
    )
        .into_response()
}
