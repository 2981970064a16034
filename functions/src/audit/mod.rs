//! Action Audit Sessions: every audited HTTP request (MCP at `/mcp`, the REST tool routes)
//! becomes one `action_events` row in an audit session, with bounded metadata-only telemetry.
//!
//! The session is chosen by `x-action-session-id`, `x-webcodex-session-id` or
//! `?action_session_id`, else the caller's most recent idle-open session, else a new UUID. A
//! named session belongs to the caller that opened it: another caller naming it is recorded in
//! its own session, as if it had named none. Audit persistence is failure-isolated: if the
//! write fails, the response (and the tool's result and effect) are exactly what they would
//! have been.
//!
//! Who reads what: a shared key with `audit:read` reads every caller's sessions; any other
//! caller with `audit:read` reads only the sessions it opened (others look unknown). Closing a
//! session also takes `audit:write`.

mod middleware;
pub mod routes;
mod slot;

pub use middleware::{audit_mcp, audit_rest};
pub use slot::{AuditNote, AuditSlot};

use wc_store::audit::Visibility;

use crate::auth::{Principal, PrincipalKind};

/// The `compact_schemas` fact of the `tools/list` audit summary (`tool_surface` v1): MCP lists
/// each input schema in its compact form (`mcp::listing::compact`: no patterns, no `null`
/// branches), the full one is in the OpenAPI document and docs/TOOLS.md. One listing form
/// exists, so this is a fact of the build, kept true by `mcp::listing`'s
/// `listed_input_schemas_are_the_compact_form_of_the_full_ones`.
pub const COMPACT_SCHEMAS: bool = true;

/// The `gateway_tool_included` fact of the `tools/list` audit summary: no MCP tool dispatches
/// other tools by name (REST's `callRuntimeTool` is a route, not a listed tool), so no listing
/// includes one; kept true by `mcp::listing`'s `no_registered_tool_is_a_gateway`.
pub const GATEWAY_TOOL_INCLUDED: bool = false;

/// Domain of the caller fingerprint: the opener stored on an audit session.
const CALLER_DOMAIN: &str = "wc.audit-caller.v1";

/// The caller as an audit session's opener: a domain-separated fingerprint of its kind,
/// authority group and credential (an OAuth caller's credential is its subject).
pub fn caller_fingerprint(principal: &Principal) -> String {
    principal.fingerprint(CALLER_DOMAIN)
}

/// Which audit sessions `principal` may read: all of them for an operator's shared key, else
/// the ones it opened (`fingerprint`, its [`caller_fingerprint`]).
pub fn visibility<'a>(principal: &Principal, fingerprint: &'a str) -> Visibility<'a> {
    match principal.kind {
        PrincipalKind::SharedKey => Visibility::All,
        PrincipalKind::ProjectCredential | PrincipalKind::OAuth | PrincipalKind::Anonymous => {
            Visibility::OpenedBy(fingerprint)
        }
    }
}

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
