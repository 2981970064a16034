//! HTTP plumbing shared by every surface: the request context (request id, span, access log),
//! the request body limit, panic and error shaping.

mod context;
mod error;
mod limits;

pub use context::{REQUEST_ID_HEADER, RequestId, current_request_id, request_context};
pub use error::{ApiError, error_body, panic_response};
pub use limits::limit_body;
