//! Action Audit Sessions: every audited HTTP request (MCP at `/mcp`, the REST tool routes)
//! becomes one `action_events` row in an audit session, with bounded metadata-only telemetry.
//!
//! The session is chosen by `x-action-session-id`, `x-webcodex-session-id` or
//! `?action_session_id`, else the caller's most recent idle-open session, else a new UUID.
//! Audit persistence is failure-isolated: if the write fails, the response (and the tool's
//! result and effect) are exactly what they would have been.

mod middleware;
pub mod routes;
mod slot;

pub use middleware::{audit_mcp, audit_rest};
pub use slot::{AuditNote, AuditSlot};

/// Longest explicit audit session id accepted.
pub const MAX_SESSION_ID_LEN: usize = 128;

/// Whether a caller-supplied audit session id is acceptable: 1-128 characters of
/// `[A-Za-z0-9._:-]`.
pub fn valid_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_SESSION_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}
