//! Bearer authentication: tokens, scopes, principals and the middleware that resolves them.
//!
//! A request's `Authorization: Bearer …` token is hashed (SHA-256) and looked up among the
//! active credentials on every request, so a revocation takes effect at once on every instance;
//! a call that waits (a long poll) checks its credential again before it answers (`readmit`).
//! The token text is never logged, stored or echoed. When OAuth is configured, a token shaped
//! like a JWT is verified as an OAuth access token instead (`oauth.rs`).

mod error;
mod middleware;
pub mod oauth;
mod principal;
mod scope;
pub mod token;

pub use error::AuthError;
pub use middleware::{Authenticator, principal_or_anonymous, require_principal};
pub use oauth::{OAuthIdentity, OAuthSettings, OAuthVerifier};
pub use principal::{Principal, PrincipalKind, ProjectGrants};
pub use scope::{Scope, ScopeSet, UnknownScope};
