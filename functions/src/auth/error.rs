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
    /// A token that is malformed, unknown or revoked. Which one is deliberately not said.
    #[error("invalid bearer token")]
    Invalid,
    /// Authenticated, but without the scope the operation needs.
    #[error("insufficient scope: {0} required")]
    InsufficientScope(Scope),
    /// The credential store could not be consulted.
    #[error("credential store unavailable")]
    Store(#[from] wc_store::StoreError),
}

impl IntoResponse for AuthError {
    fn into_response(self) -> Response {
        let (status, kind, challenge) = match &self {
            AuthError::Missing => (StatusCode::UNAUTHORIZED, "unauthorized", r#"Bearer realm="wc""#.to_owned()),
            AuthError::Invalid => (
                StatusCode::UNAUTHORIZED,
                "invalid_token",
                r#"Bearer realm="wc", error="invalid_token", error_description="the token is malformed, unknown or revoked""#.to_owned(),
            ),
            AuthError::InsufficientScope(scope) => (
                StatusCode::FORBIDDEN,
                "insufficient_scope",
                format!(r#"Bearer realm="wc", error="insufficient_scope", scope="{scope}""#),
            ),
            AuthError::Store(_) => {
                let AuthError::Store(e) = self else { unreachable!() };
                return ApiError::from(e).into_response();
            }
        };
        let mut resp = (status, Json(error_body(kind, &self.to_string()))).into_response();
        if let Ok(v) = HeaderValue::from_str(&challenge) {
            resp.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        resp
    }
}
