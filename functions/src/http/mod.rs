//! HTTP plumbing shared by every surface: the request context (request id, span, access log),
//! admission limits (concurrent requests, body bytes, body deadline; bodies read only after
//! authentication), panic and error shaping.

mod body_buffer;
mod context;
mod error;
pub mod limits;

pub use context::{REQUEST_ID_HEADER, RequestId, current_request_id, request_context};
pub use error::{ApiError, error_body, panic_response};
