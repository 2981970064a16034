//! OAuth 2.1 resource server: JWT access tokens from a configured authorization server.
//!
//! A bearer token shaped like a JWT is verified against the configured issuer, audience (the
//! resource URL, RFC 8707) and the issuer's signing keys (a JWKS document fetched from a URL or
//! read from a file). Only asymmetric algorithms are accepted — never `none`, never HMAC — and
//! the algorithm must be one the key allows. Keys are cached; an unknown key id refreshes the
//! set (at most once per cooldown), so a rotation at the issuer is picked up without a restart,
//! and a refresh that fails keeps serving the keys already known.
//!
//! The verified token becomes a [`Principal`] whose authority group is issuer + subject; its
//! scopes are the token's `scope`/`scp` values that name wc scopes, plus what
//! `WC_OAUTH_SCOPE_MAP` maps the others to. The token itself goes nowhere else.
//!
//! RFC 9728 protected-resource metadata is served by [`metadata_root`] and [`metadata_at`]; 401
//! challenges name it in `resource_metadata` ([`OAuthVerifier::metadata_url_for`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::json;

use super::{AuthError, Principal, PrincipalKind, ProjectGrants, Scope, ScopeSet};

/// Longest JWT accepted in a header; longer ones are refused before decoding.
pub const MAX_JWT_LEN: usize = 16 * 1024;
/// Largest JWKS document read from a URL or file.
pub const MAX_JWKS_BYTES: usize = 256 * 1024;
/// Longest accepted `sub` claim.
pub const MAX_SUBJECT_CHARS: usize = 255;
/// Longest `client_id`/`azp` claim kept for audit attribution.
pub const MAX_CLIENT_ID_CHARS: usize = 255;

/// Allowed clock skew when checking `exp` and `nbf`.
const LEEWAY_SECS: u64 = 60;
/// Timeout of one JWKS fetch.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// The RSA algorithms an RSA key may verify.
const RSA_ALGORITHMS: [Algorithm; 6] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
];

/// Whether `alg` is one of the asymmetric algorithms accepted at all.
fn accepted(alg: Algorithm) -> bool {
    RSA_ALGORITHMS.contains(&alg)
        || matches!(alg, Algorithm::ES256 | Algorithm::ES384 | Algorithm::EdDSA)
}

/// Where the issuer's signing keys come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    /// `WC_OAUTH_JWKS_URL`: fetched over HTTPS (plain HTTP only on loopback).
    Url(String),
    /// `WC_OAUTH_JWKS_FILE`: read from disk (re-read on an unknown key id).
    File(PathBuf),
}

/// OAuth resource-server settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthSettings {
    /// The authorization server's issuer identifier (`WC_OAUTH_ISSUER`); `iss` must equal it.
    pub issuer: String,
    /// Accepted audiences (`WC_OAUTH_AUDIENCE`, comma-separated resource URLs); the first is
    /// the canonical resource. `aud` must contain one of them.
    pub audiences: Vec<String>,
    /// The signing keys.
    pub jwks: JwksSource,
    /// Token scope → wc scopes (`WC_OAUTH_SCOPE_MAP`, a JSON object of string arrays), in
    /// addition to token scopes that already name wc scopes.
    pub scope_map: BTreeMap<String, ScopeSet>,
    /// Least time between two refreshes caused by unknown key ids.
    pub refresh_cooldown: Duration,
    /// Age at which a key set is refreshed (the old keys serve while that happens).
    pub keys_ttl: Duration,
}

fn is_loopback_http(url: &str) -> bool {
    let Ok(uri) = url.parse::<Uri>() else {
        return false;
    };
    uri.scheme_str() == Some("http")
        && matches!(
            uri.host(),
            Some("127.0.0.1" | "localhost" | "[::1]" | "::1")
        )
}

/// Why the OAuth resource-server settings were refused (the server's configuration error
/// wraps it).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct OAuthConfigError(pub String);

fn http_url(name: &str, value: &str) -> Result<Uri, OAuthConfigError> {
    let uri: Uri = value
        .parse()
        .map_err(|_| OAuthConfigError(format!("{name}: {value:?} is not a URL")))?;
    match (uri.scheme_str(), uri.host()) {
        (Some("https" | "http"), Some(_)) => Ok(uri),
        _ => Err(OAuthConfigError(format!(
            "{name}: {value:?} is not an http(s) URL with a host"
        ))),
    }
}

impl OAuthSettings {
    /// Default cooldown between refreshes caused by unknown key ids.
    pub const DEFAULT_REFRESH_COOLDOWN: Duration = Duration::from_secs(10);
    /// Default age at which a key set is refreshed.
    pub const DEFAULT_KEYS_TTL: Duration = Duration::from_secs(10 * 60);

    /// Reads `WC_OAUTH_*`. `None` when none is set; an error when the set is incomplete or
    /// malformed.
    pub fn from_env() -> Result<Option<OAuthSettings>, OAuthConfigError> {
        let get = |name: &str| {
            std::env::var(name)
                .ok()
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        Self::from_values(
            get("WC_OAUTH_ISSUER"),
            get("WC_OAUTH_AUDIENCE"),
            get("WC_OAUTH_JWKS_URL"),
            get("WC_OAUTH_JWKS_FILE"),
            get("WC_OAUTH_SCOPE_MAP"),
        )
    }

    /// The settings from the variables' values (see [`OAuthSettings::from_env`]).
    pub fn from_values(
        issuer: Option<String>,
        audience: Option<String>,
        jwks_url: Option<String>,
        jwks_file: Option<String>,
        scope_map: Option<String>,
    ) -> Result<Option<OAuthSettings>, OAuthConfigError> {
        if issuer.is_none()
            && audience.is_none()
            && jwks_url.is_none()
            && jwks_file.is_none()
            && scope_map.is_none()
        {
            return Ok(None);
        }
        let issuer = issuer.ok_or_else(|| {
            OAuthConfigError("WC_OAUTH_ISSUER is required when OAuth is configured".into())
        })?;
        if issuer.len() > 2048 {
            return Err(OAuthConfigError(
                "WC_OAUTH_ISSUER is longer than 2048 bytes".into(),
            ));
        }
        let audience = audience.ok_or_else(|| {
            OAuthConfigError(
                "WC_OAUTH_AUDIENCE (the resource URL, e.g. https://wc.example.com/mcp) is required when OAuth is configured"
                    .into(),
            )
        })?;
        let audiences: Vec<String> = audience
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(|a| a.trim_end_matches('/').to_owned())
            .collect();
        if audiences.is_empty() {
            return Err(OAuthConfigError(
                "WC_OAUTH_AUDIENCE names no audience".into(),
            ));
        }
        for a in &audiences {
            http_url("WC_OAUTH_AUDIENCE", a)?;
        }
        let jwks = match (jwks_url, jwks_file) {
            (Some(_), Some(_)) => {
                return Err(OAuthConfigError(
                    "set WC_OAUTH_JWKS_URL or WC_OAUTH_JWKS_FILE, not both".into(),
                ));
            }
            (None, None) => {
                return Err(OAuthConfigError(
                    "WC_OAUTH_JWKS_URL or WC_OAUTH_JWKS_FILE is required when OAuth is configured"
                        .into(),
                ));
            }
            (Some(url), None) => {
                let uri = http_url("WC_OAUTH_JWKS_URL", &url)?;
                if uri.scheme_str() != Some("https") && !is_loopback_http(&url) {
                    return Err(OAuthConfigError(
                        "WC_OAUTH_JWKS_URL must be https (plain http only on loopback)".into(),
                    ));
                }
                JwksSource::Url(url)
            }
            (None, Some(path)) => JwksSource::File(PathBuf::from(path)),
        };
        let scope_map = match scope_map {
            None => BTreeMap::new(),
            Some(text) => parse_scope_map(&text)?,
        };
        Ok(Some(OAuthSettings {
            issuer,
            audiences,
            jwks,
            scope_map,
            refresh_cooldown: Self::DEFAULT_REFRESH_COOLDOWN,
            keys_ttl: Self::DEFAULT_KEYS_TTL,
        }))
    }

    /// The wc scopes a token's scope values grant.
    pub fn map_scopes<'a>(&self, token_scopes: impl IntoIterator<Item = &'a str>) -> ScopeSet {
        let mut granted = Vec::new();
        for s in token_scopes {
            if let Ok(scope) = s.parse::<Scope>() {
                granted.push(scope);
            }
            if let Some(mapped) = self.scope_map.get(s) {
                granted.extend(mapped.iter());
            }
        }
        granted.into_iter().collect()
    }

    /// The scope values a client should ask the authorization server for: the mapped names
    /// when a map is configured, else the wc scope names.
    pub fn scopes_supported(&self) -> Vec<String> {
        if self.scope_map.is_empty() {
            Scope::ALL.iter().map(|s| s.as_str().to_owned()).collect()
        } else {
            self.scope_map.keys().cloned().collect()
        }
    }
}

fn parse_scope_map(text: &str) -> Result<BTreeMap<String, ScopeSet>, OAuthConfigError> {
    let raw: BTreeMap<String, Vec<String>> = serde_json::from_str(text).map_err(|e| {
        OAuthConfigError(format!(
            "WC_OAUTH_SCOPE_MAP must be a JSON object of string arrays, e.g. {{\"wc.write\": [\"project:read\", \"project:write\"]}}: {e}"
        ))
    })?;
    raw.into_iter()
        .map(|(k, v)| {
            if k.is_empty() || k.len() > 256 || k.contains(' ') {
                return Err(OAuthConfigError(format!(
                    "WC_OAUTH_SCOPE_MAP: {k:?} is not a scope token"
                )));
            }
            let set = ScopeSet::parse_all(&v)
                .map_err(|e| OAuthConfigError(format!("WC_OAUTH_SCOPE_MAP[{k:?}]: {e}")))?;
            Ok((k, set))
        })
        .collect()
}

/// Whether `token` is shaped like a compact JWS (three base64url segments).
pub fn looks_like_jwt(token: &str) -> bool {
    token.len() <= MAX_JWT_LEN
        && token.split('.').count() == 3
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && token.split('.').take(2).all(|seg| !seg.is_empty())
}

/// One usable signing key.
struct VerifyKey {
    kid: Option<String>,
    key: DecodingKey,
    algorithms: Vec<Algorithm>,
}

#[derive(Default)]
struct KeyCache {
    keys: Arc<Vec<VerifyKey>>,
    fetched_at: Option<Instant>,
    last_attempt: Option<Instant>,
}

/// Why a token was refused (logged; the caller only learns "invalid token").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// Not a decodable JWT.
    Malformed,
    /// `alg` is not an accepted asymmetric algorithm (including `none` and HMAC).
    Algorithm,
    /// No known key matches the key id and algorithm.
    UnknownKey,
    /// Signature, expiry, issuer, audience or claims failed.
    Rejected(&'static str),
}

impl Refusal {
    fn as_str(self) -> &'static str {
        match self {
            Refusal::Malformed => "malformed",
            Refusal::Algorithm => "algorithm_not_accepted",
            Refusal::UnknownKey => "unknown_key",
            Refusal::Rejected(r) => r,
        }
    }
}

/// The claims read from a verified token.
#[derive(Deserialize)]
struct Claims {
    iss: String,
    sub: String,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    scp: Option<ScopeClaim>,
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    azp: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ScopeClaim {
    One(String),
    Many(Vec<String>),
}

/// The OAuth identity behind a principal, for audit attribution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthIdentity {
    /// The token's `sub`.
    pub subject: String,
    /// The token's `client_id` (RFC 9068) or `azp`, when present.
    pub client_id: Option<String>,
}

/// Verifies access tokens; built once per process, fetching keys lazily on first use.
pub struct OAuthVerifier {
    settings: OAuthSettings,
    http: OnceLock<reqwest::Client>,
    cache: tokio::sync::RwLock<KeyCache>,
    refresh: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for OAuthVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthVerifier")
            .field("issuer", &self.settings.issuer)
            .finish_non_exhaustive()
    }
}

impl OAuthVerifier {
    /// A verifier over `settings`. Nothing is fetched until a token arrives.
    pub fn new(settings: OAuthSettings) -> OAuthVerifier {
        OAuthVerifier {
            settings,
            http: OnceLock::new(),
            cache: tokio::sync::RwLock::new(KeyCache::default()),
            refresh: tokio::sync::Mutex::new(()),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &OAuthSettings {
        &self.settings
    }

    /// Verifies `token` and builds its principal.
    pub async fn authenticate(&self, token: &str) -> Result<Principal, AuthError> {
        match self.verify(token).await {
            Ok(principal) => Ok(principal),
            Err(Verify::Refused(why)) => {
                tracing::info!(reason = why.as_str(), "oauth access token refused");
                Err(AuthError::Invalid)
            }
            Err(Verify::KeysUnavailable(cause)) => Err(AuthError::KeysUnavailable(cause)),
        }
    }

    async fn verify(&self, token: &str) -> Result<Principal, Verify> {
        let header =
            jsonwebtoken::decode_header(token).map_err(|_| Verify::Refused(Refusal::Malformed))?;
        if !accepted(header.alg) {
            return Err(Verify::Refused(Refusal::Algorithm));
        }
        let kid = header.kid.as_deref();
        let mut keys = self.current_keys(false).await?;
        if find_key(&keys, kid, header.alg).is_none() {
            // Perhaps the issuer rotated its keys: refresh once (rate-limited) and look again.
            keys = self.current_keys(true).await?;
        }
        let key = find_key(&keys, kid, header.alg).ok_or(Verify::Refused(Refusal::UnknownKey))?;

        let mut validation = Validation::new(header.alg);
        validation.leeway = LEEWAY_SECS;
        validation.validate_nbf = true;
        validation.set_issuer(&[self.settings.issuer.as_str()]);
        validation.set_audience(&self.settings.audiences);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let data = jsonwebtoken::decode::<Claims>(token, &key.key, &validation)
            .map_err(|e| Verify::Refused(Refusal::Rejected(rejection(&e))))?;
        let claims = data.claims;
        if claims.sub.is_empty()
            || claims.sub.chars().count() > MAX_SUBJECT_CHARS
            || claims.sub.chars().any(char::is_control)
        {
            return Err(Verify::Refused(Refusal::Rejected("bad_subject")));
        }
        Ok(self.principal(claims))
    }

    fn principal(&self, claims: Claims) -> Principal {
        let token_scopes: Vec<String> = match (&claims.scope, &claims.scp) {
            (Some(s), _) => s.split(' ').map(str::to_owned).collect(),
            (None, Some(ScopeClaim::One(s))) => s.split(' ').map(str::to_owned).collect(),
            (None, Some(ScopeClaim::Many(v))) => v.clone(),
            (None, None) => Vec::new(),
        };
        let scopes = self.settings.map_scopes(
            token_scopes
                .iter()
                .map(String::as_str)
                .filter(|s| !s.is_empty()),
        );
        let client_id = claims
            .client_id
            .or(claims.azp)
            .filter(|c| !c.is_empty() && !c.chars().any(char::is_control))
            .map(|c| c.chars().take(MAX_CLIENT_ID_CHARS).collect());
        Principal {
            kind: PrincipalKind::OAuth,
            credential_id: subject_id(&claims.iss, &claims.sub),
            authority_group: format!("oauth:{}#{}", claims.iss, claims.sub),
            scopes,
            projects: ProjectGrants::All,
            oauth: Some(OAuthIdentity {
                subject: claims.sub,
                client_id,
            }),
        }
    }

    /// The cached keys, refreshed when stale or when `unknown_key` asks and the cooldown
    /// allows. A failed refresh keeps the keys already known; with none known it is an error.
    async fn current_keys(&self, unknown_key: bool) -> Result<Arc<Vec<VerifyKey>>, Verify> {
        let serve_stale = {
            let cache = self.cache.read().await;
            if !needs_refresh(&cache, unknown_key, &self.settings) {
                return known(&cache);
            }
            // Keys that are merely old keep serving while one request refreshes them.
            (!unknown_key && cache.fetched_at.is_some()).then(|| cache.keys.clone())
        };
        let _one_at_a_time = match serve_stale {
            Some(stale) => match self.refresh.try_lock() {
                Ok(guard) => guard,
                Err(_) => return Ok(stale),
            },
            None => self.refresh.lock().await,
        };
        {
            // Another request may have refreshed while this one waited.
            let cache = self.cache.read().await;
            if !needs_refresh(&cache, unknown_key, &self.settings) {
                return known(&cache);
            }
        }
        let loaded = self.load().await;
        let mut cache = self.cache.write().await;
        cache.last_attempt = Some(Instant::now());
        match loaded {
            Ok(keys) => {
                cache.keys = Arc::new(keys);
                cache.fetched_at = Some(Instant::now());
                Ok(cache.keys.clone())
            }
            Err(cause) if cache.fetched_at.is_some() => {
                tracing::warn!(error = %cause, "oauth signing keys could not be refreshed; keeping the known keys");
                Ok(cache.keys.clone())
            }
            Err(cause) => {
                tracing::error!(error = %cause, "oauth signing keys unavailable");
                Err(Verify::KeysUnavailable(cause))
            }
        }
    }

    async fn load(&self) -> Result<Vec<VerifyKey>, String> {
        let bytes = match &self.settings.jwks {
            JwksSource::File(path) => {
                let bytes = tokio::fs::read(path)
                    .await
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                if bytes.len() > MAX_JWKS_BYTES {
                    return Err(format!(
                        "{} is larger than {MAX_JWKS_BYTES} bytes",
                        path.display()
                    ));
                }
                bytes
            }
            JwksSource::Url(url) => self.fetch(url).await?,
        };
        let set: JwkSet =
            serde_json::from_slice(&bytes).map_err(|e| format!("not a JWKS document: {e}"))?;
        let keys: Vec<VerifyKey> = set.keys.iter().filter_map(usable_key).collect();
        if keys.is_empty() {
            return Err("the JWKS document holds no usable signing key".into());
        }
        Ok(keys)
    }

    async fn fetch(&self, url: &str) -> Result<Vec<u8>, String> {
        let http = self.http.get_or_init(|| {
            reqwest::Client::builder()
                .timeout(FETCH_TIMEOUT)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap_or_default()
        });
        let mut resp = http
            .get(url)
            .header(header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| format!("fetching the JWKS failed: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("the JWKS URL answered HTTP {}", resp.status()));
        }
        if resp
            .content_length()
            .is_some_and(|n| n > MAX_JWKS_BYTES as u64)
        {
            return Err(format!(
                "the JWKS document is larger than {MAX_JWKS_BYTES} bytes"
            ));
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| format!("reading the JWKS failed: {e}"))?
        {
            if body.len() + chunk.len() > MAX_JWKS_BYTES {
                return Err(format!(
                    "the JWKS document is larger than {MAX_JWKS_BYTES} bytes"
                ));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// The RFC 9728 metadata URL a 401 for `request_path` points to: that of the audience
    /// whose path the request is under, else of the canonical (first) audience.
    pub fn metadata_url_for(&self, request_path: &str) -> Option<String> {
        let audiences = &self.settings.audiences;
        let chosen = audiences
            .iter()
            .find(|a| {
                a.parse::<Uri>().is_ok_and(|u| {
                    let p = u.path().trim_end_matches('/');
                    !p.is_empty() && request_path.starts_with(p)
                })
            })
            .or_else(|| audiences.first())?;
        metadata_url(chosen)
    }
}

/// `https://host/.well-known/oauth-protected-resource{path}` for a resource URL (RFC 9728 §3.1).
fn metadata_url(resource: &str) -> Option<String> {
    let uri: Uri = resource.parse().ok()?;
    let scheme = uri.scheme_str()?;
    let authority = uri.authority()?;
    let path = uri.path().trim_end_matches('/');
    Some(format!(
        "{scheme}://{authority}/.well-known/oauth-protected-resource{path}"
    ))
}

enum Verify {
    Refused(Refusal),
    KeysUnavailable(String),
}

/// The cached keys when no refresh is due. Keys never loaded (the last attempt failed within
/// the cooldown) are unavailable, not an empty set: the caller's token is not at fault.
fn known(cache: &KeyCache) -> Result<Arc<Vec<VerifyKey>>, Verify> {
    if cache.fetched_at.is_none() {
        return Err(Verify::KeysUnavailable(
            "the signing keys have not been loaded yet; the last attempt failed".into(),
        ));
    }
    Ok(cache.keys.clone())
}

fn needs_refresh(cache: &KeyCache, unknown_key: bool, settings: &OAuthSettings) -> bool {
    let cooldown = settings.refresh_cooldown;
    let Some(fetched) = cache.fetched_at else {
        // Never loaded: try, unless a failed attempt was just made.
        return cache.last_attempt.is_none_or(|t| t.elapsed() >= cooldown);
    };
    if fetched.elapsed() >= settings.keys_ttl {
        return cache.last_attempt.is_none_or(|t| t.elapsed() >= cooldown);
    }
    unknown_key && cache.last_attempt.is_none_or(|t| t.elapsed() >= cooldown)
}

fn find_key<'k>(keys: &'k [VerifyKey], kid: Option<&str>, alg: Algorithm) -> Option<&'k VerifyKey> {
    let mut fitting = keys.iter().filter(|k| k.algorithms.contains(&alg));
    match kid {
        Some(kid) => fitting.find(|k| k.kid.as_deref() == Some(kid)),
        // Without a key id only an unambiguous key will do.
        None => {
            let first = fitting.next()?;
            fitting.next().is_none().then_some(first)
        }
    }
}

/// A JWK usable for verifying signatures, with the algorithms it may verify.
fn usable_key(jwk: &jsonwebtoken::jwk::Jwk) -> Option<VerifyKey> {
    if matches!(&jwk.common.public_key_use, Some(u) if *u != PublicKeyUse::Signature) {
        return None;
    }
    let by_family: Vec<Algorithm> = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => RSA_ALGORITHMS.to_vec(),
        AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
            EllipticCurve::P256 => vec![Algorithm::ES256],
            EllipticCurve::P384 => vec![Algorithm::ES384],
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(okp) => match okp.curve {
            EllipticCurve::Ed25519 => vec![Algorithm::EdDSA],
            _ => return None,
        },
        // Symmetric keys (and key types this version does not know) never verify access
        // tokens here.
        _ => return None,
    };
    let algorithms = match jwk.common.key_algorithm {
        None => by_family,
        Some(declared) => {
            let alg = key_algorithm(declared)?;
            if !by_family.contains(&alg) {
                return None;
            }
            vec![alg]
        }
    };
    let key = DecodingKey::from_jwk(jwk).ok()?;
    Some(VerifyKey {
        kid: jwk.common.key_id.clone(),
        key,
        algorithms,
    })
}

fn key_algorithm(alg: KeyAlgorithm) -> Option<Algorithm> {
    Some(match alg {
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        KeyAlgorithm::EdDSA => Algorithm::EdDSA,
        _ => return None,
    })
}

fn rejection(e: &jsonwebtoken::errors::Error) -> &'static str {
    use jsonwebtoken::errors::ErrorKind as K;
    match e.kind() {
        K::InvalidSignature => "bad_signature",
        K::ExpiredSignature => "expired",
        K::ImmatureSignature => "not_yet_valid",
        K::InvalidIssuer => "wrong_issuer",
        K::InvalidAudience => "wrong_audience",
        K::MissingRequiredClaim(_) => "missing_claim",
        K::InvalidAlgorithm => "algorithm_mismatch",
        _ => "malformed",
    }
}

/// A stable id for an OAuth subject, standing in for a credential id in logs and fingerprints.
fn subject_id(issuer: &str, subject: &str) -> uuid::Uuid {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for part in ["wc oauth subject", issuer, subject] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    let digest = h.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// `GET /.well-known/oauth-protected-resource`: the RFC 9728 metadata of the canonical
/// resource.
pub async fn metadata_root(State(state): State<super::Authenticator>) -> Response {
    metadata(&state, None)
}

/// `GET /.well-known/oauth-protected-resource/{path}`: the RFC 9728 metadata of the resource
/// at `path`.
pub async fn metadata_at(
    State(state): State<super::Authenticator>,
    Path(path): Path<String>,
) -> Response {
    metadata(&state, Some(path))
}

fn metadata(state: &super::Authenticator, path: Option<String>) -> Response {
    let Some(oauth) = state.oauth() else {
        return crate::http::ApiError::client(
            StatusCode::NOT_FOUND,
            "not_found",
            "OAuth is not configured on this server",
        )
        .into_response();
    };
    let settings = oauth.settings();
    let wanted = path.map(|p| format!("/{}", p.trim_matches('/')));
    let resource = match &wanted {
        None => settings.audiences.first(),
        Some(p) => settings.audiences.iter().find(|a| {
            a.parse::<Uri>()
                .is_ok_and(|u| u.path().trim_end_matches('/') == p)
        }),
    };
    let Some(resource) = resource else {
        return crate::http::ApiError::client(
            StatusCode::NOT_FOUND,
            "not_found",
            "no protected resource at this path",
        )
        .into_response();
    };
    (
        [(header::CACHE_CONTROL, "public, max-age=300")],
        Json(json!({
            "resource": resource,
            "authorization_servers": [settings.issuer],
            "scopes_supported": settings.scopes_supported(),
            "bearer_methods_supported": ["header"],
            "resource_name": "wc",
        })),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Option<String> {
        Some(v.to_owned())
    }

    #[test]
    fn nothing_set_is_no_oauth_and_partial_settings_are_refused() {
        assert_eq!(
            OAuthSettings::from_values(None, None, None, None, None).unwrap(),
            None
        );
        let issuer = "https://as.example";
        let mcp = "https://wc.example/mcp";
        // (audience, jwks url, jwks file, what the error must name)
        let cases = [
            (None, None, None, "WC_OAUTH_AUDIENCE"),
            (Some(mcp), None, None, "WC_OAUTH_JWKS_URL"),
            (
                Some(mcp),
                Some("https://as.example/jwks"),
                Some("/etc/jwks.json"),
                "not both",
            ),
            (
                Some(mcp),
                Some("http://as.example/jwks"),
                None,
                "must be https",
            ),
            (
                Some("wc.example"),
                None,
                Some("/etc/jwks.json"),
                "WC_OAUTH_AUDIENCE",
            ),
        ];
        for (audience, url, file, names) in cases {
            let err = OAuthSettings::from_values(
                s(issuer),
                audience.map(str::to_owned),
                url.map(str::to_owned),
                file.map(str::to_owned),
                None,
            )
            .unwrap_err();
            assert!(
                err.0.contains(names),
                "{audience:?} {url:?} {file:?}: {err}"
            );
        }
    }

    #[test]
    fn scope_map_is_validated_and_applied() {
        let settings = OAuthSettings::from_values(
            s("https://as.example"),
            s("https://wc.example/mcp, https://wc.example/api"),
            s("http://127.0.0.1:9/jwks"),
            None,
            s(r#"{"wc.write": ["project:read", "project:write"], "ops": ["audit:read"]}"#),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            settings.audiences,
            ["https://wc.example/mcp", "https://wc.example/api"]
        );
        let granted = settings.map_scopes(["wc.write", "memory:read", "openid"]);
        assert_eq!(
            granted.to_strings(),
            ["project:read", "project:write", "memory:read"]
        );
        assert_eq!(settings.scopes_supported(), ["ops", "wc.write"]);
        let err = OAuthSettings::from_values(
            s("https://as.example"),
            s("https://wc.example/mcp"),
            None,
            s("/etc/jwks.json"),
            s(r#"{"x": ["project:admin"]}"#),
        )
        .unwrap_err();
        assert!(err.0.contains("project:admin"), "{err}");
    }

    #[test]
    fn metadata_urls_follow_the_resource_path() {
        assert_eq!(
            metadata_url("https://wc.example/mcp").as_deref(),
            Some("https://wc.example/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(
            metadata_url("https://wc.example").as_deref(),
            Some("https://wc.example/.well-known/oauth-protected-resource")
        );
        let verifier = OAuthVerifier::new(
            OAuthSettings::from_values(
                s("https://as.example"),
                s("https://wc.example/mcp,https://wc.example/api"),
                None,
                s("/nonexistent"),
                None,
            )
            .unwrap()
            .unwrap(),
        );
        assert_eq!(
            verifier.metadata_url_for("/api/actions/x").as_deref(),
            Some("https://wc.example/.well-known/oauth-protected-resource/api")
        );
        assert_eq!(
            verifier.metadata_url_for("/healthz").as_deref(),
            Some("https://wc.example/.well-known/oauth-protected-resource/mcp")
        );
    }

    #[test]
    fn jwt_shape() {
        assert!(looks_like_jwt("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"));
        assert!(!looks_like_jwt("wcsk_abcdefghijklmnopqrstuvwxyz"));
        assert!(!looks_like_jwt("a.b"));
        assert!(!looks_like_jwt("a..c"));
        assert!(!looks_like_jwt("a.b.c.d"));
        assert!(!looks_like_jwt("a+b.c.d"));
    }
}
