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
        }
    }

    /// An internal failure; `cause` is logged, never returned.
    pub fn internal(cause: impl Into<anyhow::Error>) -> Self {
        Self {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            kind: "internal",
            message: "internal error".into(),
            cause: Some(cause.into()),
        }
    }

    /// A dependency (the database) is unavailable; `cause` is logged, never returned.
    pub fn unavailable(cause: impl Into<anyhow::Error>) -> Self {
        Self {
            status: StatusCode::SERVICE_UNAVAILABLE,
            kind: "unavailable",
            message: "service temporarily unavailable".into(),
            cause: Some(cause.into()),
        }
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
        (self.status, Json(error_body(self.kind, &self.message))).into_response()
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
