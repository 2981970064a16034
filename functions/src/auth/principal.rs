use std::collections::BTreeSet;

use uuid::Uuid;

use super::{AuthError, Scope, ScopeSet};

/// What kind of caller a principal is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PrincipalKind {
    /// An operator shared key.
    SharedKey,
    /// A project-limited credential.
    ProjectCredential,
}

impl PrincipalKind {
    /// The wire and audit spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            PrincipalKind::SharedKey => "shared_key",
            PrincipalKind::ProjectCredential => "project_credential",
        }
    }
}

/// Which projects a principal may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProjectGrants {
    /// Every project.
    All,
    /// Only these project ids.
    Only(BTreeSet<String>),
}

impl ProjectGrants {
    /// Whether `project` is reachable.
    pub fn allows(&self, project: &str) -> bool {
        match self {
            ProjectGrants::All => true,
            ProjectGrants::Only(set) => set.contains(project),
        }
    }
}

/// The authenticated caller of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Kind of caller.
    pub kind: PrincipalKind,
    /// The credential that authenticated it.
    pub credential_id: Uuid,
    /// Authority group: sessions this caller creates belong to it.
    pub authority_group: String,
    /// Granted scopes.
    pub scopes: ScopeSet,
    /// Reachable projects.
    pub projects: ProjectGrants,
}

impl Principal {
    /// `Ok` when the principal holds `scope`, else the 403 `insufficient_scope` error.
    pub fn require(&self, scope: Scope) -> Result<(), AuthError> {
        if self.scopes.contains(scope) {
            Ok(())
        } else {
            Err(AuthError::InsufficientScope(scope))
        }
    }
}
