use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};

use super::ApiError;

/// Reads the whole request body up to `limit` bytes before any handler parses it. A declared
/// `Content-Length` over the limit is refused without reading; a body that turns out longer is
/// refused as soon as it passes the limit. Either way: 413 `payload_too_large`.
pub async fn limit_body(State(limit): State<usize>, req: Request, next: Next) -> Response {
    let too_large = || {
        ApiError::client(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("request body exceeds the {limit}-byte limit"),
        )
        .into_response()
    };
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return too_large();
    }
    let (parts, body) = req.into_parts();
    let bytes = match Limited::new(body, limit).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => return too_large(),
        Err(e) => {
            return ApiError::client(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!("could not read the request body: {e}"),
            )
            .into_response();
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}
