//! Who may use a Workflow Session. A session belongs to the authority group that created it
//! (stored only as a domain-separated fingerprint); project access is checked separately, and
//! neither check implies the other. Every refusal to reveal a session looks like an unknown id.

use std::sync::Arc;

use wc_store::sessions::{self, SessionRow};

use wc_domain::{ProjectId, SessionId};

use crate::auth::Principal;
use crate::result::{ErrorKind, ToolError};

/// Domain of the session authority fingerprint.
const AUTHORITY_DOMAIN: &str = "wc.session-authority.v1";

/// The fingerprint stored as a session's owner: SHA-256 over a domain tag and the principal's
/// authority group (length-prefixed). Credentials of one group share their sessions.
pub fn fingerprint(principal: &Principal) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for field in [AUTHORITY_DOMAIN, principal.authority_group.as_str()] {
        h.update((field.len() as u64).to_be_bytes());
        h.update(field.as_bytes());
    }
    hex::encode(h.finalize())
}

fn unknown(field: &'static str) -> ToolError {
    ToolError::new(
        ErrorKind::UnknownSessionId,
        format!("{field} names no session this caller can use"),
    )
    .with("field", field)
}

/// Loads the session `id` (the value of argument `field`) if this caller may use it: it
/// exists, has the caller's authority group, and its project is reachable by the caller.
/// Anything else is `unknown_session_id`, revealing nothing.
pub async fn load(
    pool: &wc_store::Pool,
    principal: &Principal,
    id: &SessionId,
    field: &'static str,
) -> Result<Arc<SessionRow>, ToolError> {
    let client = pool.get().await.map_err(wc_store::StoreError::from)?;
    let row = sessions::get(&client, id)
        .await?
        .ok_or_else(|| unknown(field))?;
    require_usable(principal, &row, field)?;
    Ok(Arc::new(row))
}

/// `unknown_session_id` unless `principal` may use the session: same authority group, and its
/// project reachable. [`load`] checks it; a call that waited checks it again with the caller
/// as its credential admits it then.
pub fn require_usable(
    principal: &Principal,
    row: &SessionRow,
    field: &'static str,
) -> Result<(), ToolError> {
    if row.owner_authority_fingerprint != fingerprint(principal)
        || !principal.projects.allows(&row.project)
    {
        return Err(unknown(field));
    }
    Ok(())
}

/// `session_closed` unless the session is active.
pub fn require_active(row: &SessionRow, field: &'static str) -> Result<(), ToolError> {
    if row.is_active() {
        Ok(())
    } else {
        Err(ToolError::new(
            ErrorKind::SessionClosed,
            format!("the session named by {field} is {}", row.lifecycle),
        )
        .with("field", field)
        .with("lifecycle", row.lifecycle.as_str()))
    }
}

/// `project_mismatch` unless the session belongs to `project`.
pub fn require_project(
    row: &SessionRow,
    project: &ProjectId,
    field: &'static str,
) -> Result<(), ToolError> {
    if &row.project == project {
        Ok(())
    } else {
        Err(ToolError::new(
            ErrorKind::ProjectMismatch,
            format!("the session named by {field} belongs to another project than this request"),
        )
        .with("field", field)
        .with("session_project", row.project.as_str())
        .with("request_project", project.as_str()))
    }
}
