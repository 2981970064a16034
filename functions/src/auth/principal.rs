use std::collections::BTreeSet;

use uuid::Uuid;

use super::{AuthError, OAuthIdentity, Scope, ScopeSet};

/// What kind of caller a principal is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PrincipalKind {
    /// An operator shared key.
    SharedKey,
    /// A project-limited credential.
    ProjectCredential,
    /// The Open Anonymous principal: a caller without a token, admitted only when the server
    /// was started with `--allow-anonymous`. It sees no project and holds no scope.
    Anonymous,
    /// A caller with an OAuth access token from the configured authorization server.
    OAuth,
}

impl PrincipalKind {
    /// The wire and audit spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            PrincipalKind::SharedKey => "shared_key",
            PrincipalKind::ProjectCredential => "project_credential",
            PrincipalKind::Anonymous => "anonymous",
            PrincipalKind::OAuth => "oauth",
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
    pub fn allows(&self, project: &wc_domain::ProjectId) -> bool {
        match self {
            ProjectGrants::All => true,
            ProjectGrants::Only(set) => set.contains(project.as_str()),
        }
    }

    /// The reachable project ids, `None` for every project. A grant that is no project id
    /// names no project.
    pub fn ids(&self) -> Option<Vec<wc_domain::ProjectId>> {
        match self {
            ProjectGrants::All => None,
            ProjectGrants::Only(set) => Some(
                set.iter()
                    .filter_map(|p| wc_domain::ProjectId::parse(p).ok())
                    .collect(),
            ),
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
    /// The OAuth subject and client, for OAuth principals.
    pub oauth: Option<OAuthIdentity>,
}

impl Principal {
    /// The Open Anonymous principal.
    pub fn anonymous() -> Principal {
        Principal {
            kind: PrincipalKind::Anonymous,
            credential_id: Uuid::nil(),
            authority_group: "anonymous".into(),
            scopes: ScopeSet::default(),
            projects: ProjectGrants::Only(BTreeSet::new()),
            oauth: None,
        }
    }

    /// A stable, domain-separated fingerprint of who the caller is (kind, authority group and
    /// credential), for correlating requests without storing identities.
    pub fn fingerprint(&self, domain: &str) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for field in [
            domain,
            self.kind.as_str(),
            self.authority_group.as_str(),
            &self.credential_id.to_string(),
        ] {
            h.update((field.len() as u64).to_be_bytes());
            h.update(field.as_bytes());
        }
        hex::encode(h.finalize())
    }

    /// `Ok` when the principal holds `scope`, else the 403 `insufficient_scope` error.
    pub fn require(&self, scope: Scope) -> Result<(), AuthError> {
        if self.scopes.contains(scope) {
            Ok(())
        } else {
            Err(AuthError::InsufficientScope(scope))
        }
    }
}
