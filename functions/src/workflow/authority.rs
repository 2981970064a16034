//! Who may use a Workflow Session. A session belongs to the authority group that created it
//! (stored only as a domain-separated fingerprint); project access is checked separately, and
//! neither check implies the other. Every refusal to reveal a session looks like an unknown id.

use std::sync::Arc;

use wc_store::sessions::{self, SessionRow};

use wc_domain::{Mode, ProjectId, SessionId};

use crate::auth::Principal;
use crate::deps::Deps;
use crate::kernel::ports::{CallFacts, PortFuture, SessionAuthority, Sessions};
use crate::kernel::spec::SessionUse;
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

fn mode_denied(field: &'static str, tool: &str) -> ToolError {
    ToolError::new(
        ErrorKind::ModeDenied,
        format!("the session named by {field} is read_only; {tool} changes the project and needs a normal session"),
    )
    .with("field", field)
    .with("mode", "read_only")
}

/// The kernel's session authority: the business session (`session_id`, as the tool's
/// [`SessionUse`] asks) and the recording session (`recording_session_id`) are authorized
/// independently, both against the request's project, and a `read_only` session refuses a
/// project-changing tool in either role.
#[derive(Debug, Default)]
pub struct Authority;

impl SessionAuthority for Authority {
    fn authorize<'a>(
        &'a self,
        deps: &'a Deps,
        call: &'a CallFacts<'a>,
    ) -> PortFuture<'a, Result<Sessions, ToolError>> {
        Box::pin(authorize(&deps.pool, call))
    }
}

async fn authorize(pool: &wc_store::Pool, call: &CallFacts<'_>) -> Result<Sessions, ToolError> {
    let spec = call.spec;
    let business = match (spec.session, &call.session_id) {
        (SessionUse::None, _) | (_, None) => None,
        (use_, Some(id)) => {
            let row = load(pool, call.principal, id, "session_id").await?;
            if matches!(use_, SessionUse::Changes | SessionUse::Works) {
                require_active(&row, "session_id")?;
            }
            if let Some(project) = &call.project {
                require_project(&row, project, "session_id")?;
            }
            Some(row)
        }
    };
    // The request's project: the explicit argument, else the business session's.
    let request_project = call
        .project
        .as_ref()
        .or_else(|| business.as_ref().map(|b| &b.project));
    let recorder = match &call.wrapper.recording_session_id {
        None => None,
        Some(id) => {
            // Recording in the business session itself: it was just loaded and authorized for
            // this caller, and authority does not depend on the argument's role.
            let row = match &business {
                Some(b) if b.id == *id => b.clone(),
                _ => load(pool, call.principal, id, "recording_session_id").await?,
            };
            require_active(&row, "recording_session_id")?;
            if let Some(project) = request_project {
                require_project(&row, project, "recording_session_id")?;
            }
            Some(row)
        }
    };
    // A read-only session records no project-changing work. Session management tools are
    // exempt: they change only the session itself.
    let changes_project = !spec.meta.read_only() && !spec.session.is_session_management();
    if changes_project {
        if business.as_ref().is_some_and(|b| b.mode == Mode::ReadOnly) {
            return Err(mode_denied("session_id", spec.meta.name));
        }
        if recorder.as_ref().is_some_and(|r| r.mode == Mode::ReadOnly) {
            return Err(mode_denied("recording_session_id", spec.meta.name));
        }
    }
    Ok(Sessions { business, recorder })
}
