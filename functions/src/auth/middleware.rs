use std::collections::BTreeSet;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::Response;
use wc_store::Pool;
use wc_store::credentials::{self, CredentialKind};

use super::{
    AuthError, OAuthVerifier, Principal, PrincipalKind, ProjectGrants, ScopeSet, oauth, token,
};

/// Who may call: resolves bearer tokens against the stored credentials and, when OAuth is
/// configured, the issuer's access tokens. Built once per process; cloned per request.
#[derive(Clone)]
pub struct Authenticator {
    pool: Pool,
    oauth: Option<Arc<OAuthVerifier>>,
    allow_anonymous: bool,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("oauth", &self.oauth.is_some())
            .field("allow_anonymous", &self.allow_anonymous)
            .finish_non_exhaustive()
    }
}

impl Authenticator {
    /// Credentials from `pool`; OAuth access tokens through `oauth` when configured; a request
    /// without any `Authorization` header admitted as Open Anonymous when `allow_anonymous`.
    pub fn new(pool: Pool, oauth: Option<Arc<OAuthVerifier>>, allow_anonymous: bool) -> Self {
        Self {
            pool,
            oauth,
            allow_anonymous,
        }
    }

    /// The OAuth verifier, when OAuth is configured.
    pub fn oauth(&self) -> Option<&OAuthVerifier> {
        self.oauth.as_deref()
    }

    /// Resolves the bearer token in `headers` to a principal.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, AuthError> {
        authenticate(self, headers).await
    }

    /// The caller of a request admitted earlier, as its credential admits it now: a call that
    /// waited (a long poll) answers only what the next request could see. A stored credential
    /// revoked meanwhile is [`AuthError::Invalid`], as the next request's would be. An OAuth
    /// access token was verified on admission and cannot be revoked at this server, and the
    /// anonymous principal is admitted by configuration: both stand as admitted.
    pub async fn readmit(&self, principal: &Principal) -> Result<Principal, AuthError> {
        match principal.kind {
            PrincipalKind::SharedKey | PrincipalKind::ProjectCredential => {
                let client = self.pool.get().await.map_err(wc_store::StoreError::from)?;
                let cred = credentials::find_active_by_id(&client, principal.credential_id)
                    .await?
                    .ok_or(AuthError::Invalid)?;
                Ok(principal_of(cred))
            }
            PrincipalKind::OAuth | PrincipalKind::Anonymous => Ok(principal.clone()),
        }
    }
}

async fn authenticate(state: &Authenticator, headers: &HeaderMap) -> Result<Principal, AuthError> {
    let value = headers
        .get(header::AUTHORIZATION)
        .ok_or(AuthError::Missing)?;
    let value = value.to_str().map_err(|_| AuthError::Invalid)?;
    let (scheme, token) = value.split_once(' ').ok_or(AuthError::Invalid)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AuthError::Missing);
    }
    let token = token.trim();
    if let Some(oauth) = state.oauth.as_deref()
        && oauth::looks_like_jwt(token)
    {
        return oauth.authenticate(token).await;
    }
    if !token::is_plausible(token) {
        return Err(AuthError::Invalid);
    }
    let client = state.pool.get().await.map_err(wc_store::StoreError::from)?;
    let cred = credentials::find_active_by_digest(&client, &token::digest(token))
        .await?
        .ok_or(AuthError::Invalid)?;
    Ok(principal_of(cred))
}

/// The principal a stored credential admits.
fn principal_of(cred: credentials::Credential) -> Principal {
    // Scopes were validated when the credential was made; an unknown one now means a newer
    // server wrote it, and an unknown scope grants nothing here.
    let scopes: ScopeSet = cred.scopes.iter().filter_map(|s| s.parse().ok()).collect();
    let (kind, projects) = match cred.kind {
        CredentialKind::SharedKey => (PrincipalKind::SharedKey, ProjectGrants::All),
        CredentialKind::Project => (
            PrincipalKind::ProjectCredential,
            ProjectGrants::Only(cred.projects.iter().cloned().collect::<BTreeSet<_>>()),
        ),
    };
    Principal {
        kind,
        credential_id: cred.id,
        authority_group: cred.authority_group,
        scopes,
        projects,
        oauth: None,
    }
}

/// Route middleware: authenticates the caller and puts the [`Principal`] in the request
/// extensions (as `Arc<Principal>` too), or answers 401 with a `WWW-Authenticate` challenge.
pub async fn require_principal(
    State(state): State<Authenticator>,
    req: Request,
    next: Next,
) -> Response {
    admit(state, req, next, false).await
}

/// Like [`require_principal`], but a request without any `Authorization` header becomes the
/// Open Anonymous principal when the server allows it. A bad token is still a 401.
pub async fn principal_or_anonymous(
    State(state): State<Authenticator>,
    req: Request,
    next: Next,
) -> Response {
    let allow = state.allow_anonymous;
    admit(state, req, next, allow).await
}

async fn admit(
    state: Authenticator,
    mut req: Request,
    next: Next,
    allow_anonymous: bool,
) -> Response {
    let result = match authenticate(&state, req.headers()).await {
        Err(AuthError::Missing)
            if allow_anonymous && !req.headers().contains_key(header::AUTHORIZATION) =>
        {
            Ok(Principal::anonymous())
        }
        other => other,
    };
    match result {
        Ok(principal) => {
            tracing::debug!(
                principal_kind = principal.kind.as_str(),
                credential_id = %principal.credential_id,
                "authenticated"
            );
            req.extensions_mut().insert(crate::http::limits::Caller(
                principal.authority_group.clone(),
            ));
            req.extensions_mut()
                .insert(std::sync::Arc::new(principal.clone()));
            req.extensions_mut().insert(principal);
            next.run(req).await
        }
        Err(e) => {
            let metadata = state
                .oauth
                .as_deref()
                .and_then(|o| o.metadata_url_for(req.uri().path()));
            e.into_challenge(metadata.as_deref())
        }
    }
}
