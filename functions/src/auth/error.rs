use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::Scope;
use crate::http::{ApiError, error_body};

/// Why a request was not let through.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// No `Authorization: Bearer` header.
    #[error("missing bearer token")]
    Missing,
    /// A token that is malformed, unknown, expired or revoked. Which one is deliberately not
    /// said.
    #[error("invalid bearer token")]
    Invalid,
    /// Authenticated, but without the scope the operation needs.
    #[error("insufficient scope: {0} required")]
    InsufficientScope(Scope),
    /// The OAuth issuer's signing keys could not be loaded (and none are cached).
    #[error("oauth signing keys unavailable: {0}")]
    KeysUnavailable(String),
    /// The credential store could not be consulted.
    #[error("credential store unavailable")]
    Store(#[from] wc_store::StoreError),
}

impl AuthError {
    /// The `WWW-Authenticate` challenge of this refusal (RFC 6750 §3), naming the RFC 9728
    /// resource metadata when the server is an OAuth resource server (MCP clients discover the
    /// authorization server from it). `None` for failures on the server's side.
    pub fn challenge(&self, resource_metadata: Option<&str>) -> Option<String> {
        let metadata = resource_metadata
            .map(|url| format!(r#", resource_metadata="{url}""#))
            .unwrap_or_default();
        match self {
            AuthError::Missing => Some(format!(r#"Bearer realm="wc"{metadata}"#)),
            AuthError::Invalid => Some(format!(
                r#"Bearer realm="wc", error="invalid_token", error_description="the token is malformed, unknown, expired or revoked"{metadata}"#
            )),
            AuthError::InsufficientScope(scope) => Some(format!(
                r#"Bearer realm="wc", error="insufficient_scope", scope="{scope}"{metadata}"#
            )),
            AuthError::KeysUnavailable(_) | AuthError::Store(_) => None,
        }
    }

    /// The response: 401/403 with the [`challenge`](Self::challenge), or the opaque 503 of a
    /// server-side failure (its cause is logged).
    pub fn into_challenge(self, resource_metadata: Option<&str>) -> Response {
        let (status, kind) = match self {
            AuthError::Missing => (StatusCode::UNAUTHORIZED, "unauthorized"),
            AuthError::Invalid => (StatusCode::UNAUTHORIZED, "invalid_token"),
            AuthError::InsufficientScope(_) => (StatusCode::FORBIDDEN, "insufficient_scope"),
            AuthError::KeysUnavailable(cause) => {
                return ApiError::unavailable(anyhow::anyhow!(
                    "oauth signing keys unavailable: {cause}"
                ))
                .into_response();
            }
            AuthError::Store(e) => return ApiError::from(e).into_response(),
        };
        let challenge = self.challenge(resource_metadata);
        let mut resp = (status, Json(error_body(kind, &self.to_string()))).into_response();
        if let Some(v) = challenge.and_then(|c| HeaderValue::from_str(&c).ok()) {
            resp.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        resp
    }
}

impl IntoResponse for AuthError {
    fn into_response(self) -> Response {
        self.into_challenge(None)
    }
}
