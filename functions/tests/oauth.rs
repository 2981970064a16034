//! The OAuth 2.1 resource server: RFC 9728 metadata, 401 challenges naming it, the refusal
//! matrix (expired, wrong audience, wrong issuer, unknown key id, bad signature, `alg=none`,
//! HMAC with the public key, missing subject, not yet valid), valid tokens on MCP and REST
//! with their scopes, 403 `insufficient_scope`, the subject as the authority group, audit
//! attribution, key rotation and JWKS outages, the JWKS file and the scope map — against a
//! local JWKS server and key pairs generated here. Tokens are signed by the test itself
//! (aws-lc-rs), independently of the verifier under test.

mod common;

use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair, RSA_PKCS1_SHA256, RsaKeyPair,
};
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::*;
use serde_json::{Value, json};
use wc_functions::AppState;
use wc_functions::auth::oauth::JwksSource;
use wc_functions::auth::{OAuthSettings, ScopeSet};
use wc_functions::config::ServerConfig;
use wc_store::testing::TestDatabase;

const ISSUER: &str = "https://auth.test.example";
const AUD_MCP: &str = "https://wc.test.example/mcp";
const AUD_API: &str = "https://wc.test.example/api";
const CLIENT: &str = "chatgpt-connector";

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// A signing key of the test issuer.
enum Key {
    Rsa(RsaKeyPair),
    Ec(EcdsaKeyPair),
}

impl Key {
    fn rsa() -> Key {
        Key::Rsa(RsaKeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap())
    }

    fn ec() -> Key {
        Key::Ec(EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap())
    }

    /// The public JWK. RSA keys declare `alg`; EC keys leave it to the curve.
    fn jwk(&self, kid: &str) -> Value {
        match self {
            Key::Rsa(k) => {
                let public = k.public_key();
                json!({
                    "kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                    "n": b64(public.modulus().big_endian_without_leading_zero()),
                    "e": b64(public.exponent().big_endian_without_leading_zero()),
                })
            }
            Key::Ec(k) => {
                let point = k.public_key().as_ref();
                assert_eq!(point.len(), 65, "an uncompressed P-256 point");
                json!({
                    "kty": "EC", "kid": kid, "crv": "P-256",
                    "x": b64(&point[1..33]), "y": b64(&point[33..65]),
                })
            }
        }
    }

    /// A compact JWS of `claims` under `kid`.
    fn sign(&self, kid: &str, claims: &Value) -> String {
        let alg = match self {
            Key::Rsa(_) => "RS256",
            Key::Ec(_) => "ES256",
        };
        let header = json!({ "alg": alg, "typ": "at+jwt", "kid": kid });
        let input = format!(
            "{}.{}",
            b64(&serde_json::to_vec(&header).unwrap()),
            b64(&serde_json::to_vec(claims).unwrap())
        );
        let rng = SystemRandom::new();
        let signature = match self {
            Key::Rsa(k) => {
                let mut sig = vec![0u8; k.public_modulus_len()];
                k.sign(&RSA_PKCS1_SHA256, &rng, input.as_bytes(), &mut sig)
                    .unwrap();
                sig
            }
            Key::Ec(k) => k.sign(&rng, input.as_bytes()).unwrap().as_ref().to_vec(),
        };
        format!("{input}.{}", b64(&signature))
    }
}

/// Access-token claims: a valid token for `sub`, changed by `overrides` (`null` removes).
fn claims(sub: &str, overrides: Value) -> Value {
    let mut c = json!({
        "iss": ISSUER,
        "sub": sub,
        "aud": AUD_MCP,
        "iat": now(),
        "exp": now() + 600,
        "scope": "project:read project:write",
        "client_id": CLIENT,
    });
    for (k, v) in overrides.as_object().unwrap() {
        if v.is_null() {
            c.as_object_mut().unwrap().remove(k);
        } else {
            c[k] = v.clone();
        }
    }
    c
}

/// A local JWKS endpoint whose document and status the test controls.
#[derive(Clone)]
struct Jwks {
    doc: Arc<Mutex<Value>>,
    status: Arc<AtomicU16>,
    fetches: Arc<AtomicUsize>,
    url: String,
}

impl Jwks {
    async fn start(keys: Vec<Value>) -> Jwks {
        let doc = Arc::new(Mutex::new(json!({ "keys": keys })));
        let status = Arc::new(AtomicU16::new(200));
        let fetches = Arc::new(AtomicUsize::new(0));
        let (d, s, f) = (doc.clone(), status.clone(), fetches.clone());
        let app = axum::Router::new().route(
            "/jwks.json",
            axum::routing::get(move || {
                let (d, s, f) = (d.clone(), s.clone(), f.clone());
                async move {
                    f.fetch_add(1, Ordering::SeqCst);
                    let status = StatusCode::from_u16(s.load(Ordering::SeqCst)).unwrap();
                    let body = d.lock().unwrap().clone();
                    (status, axum::Json(body))
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Jwks {
            doc,
            status,
            fetches,
            url: format!("http://{addr}/jwks.json"),
        }
    }

    fn set_keys(&self, keys: Vec<Value>) {
        *self.doc.lock().unwrap() = json!({ "keys": keys });
    }

    fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}

fn settings(jwks: JwksSource, scope_map: Option<&str>) -> OAuthSettings {
    let (url, file) = match jwks {
        JwksSource::Url(u) => (Some(u), None),
        JwksSource::File(p) => (None, Some(p.display().to_string())),
    };
    let mut s = OAuthSettings::from_values(
        Some(ISSUER.into()),
        Some(format!("{AUD_MCP},{AUD_API}")),
        url,
        file,
        scope_map.map(str::to_owned),
    )
    .unwrap()
    .unwrap();
    // Rotation is picked up on the first unknown key id, however soon.
    s.refresh_cooldown = Duration::ZERO;
    s
}

fn oauth_state(db: &TestDatabase, settings: OAuthSettings) -> AppState {
    state_with(
        db,
        ServerConfig {
            oauth: Some(settings),
            ..ServerConfig::default()
        },
    )
}

async fn get(st: &AppState, path: &str, auth: Option<&str>) -> Reply {
    let mut b = Request::get(path).header(header::HOST, "localhost");
    if let Some(t) = auth {
        b = b.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    send(st, b.body(Body::empty()).unwrap()).await
}

/// The status of `GET /api/whoami` with `token`.
async fn whoami(st: &AppState, token: &str) -> StatusCode {
    get(st, "/api/whoami", Some(token)).await.status
}

/// The start of a reply body, for failure messages.
fn head(r: &Reply) -> String {
    r.text().chars().take(300).collect()
}

fn challenge(r: &Reply) -> String {
    r.headers
        .get(header::WWW_AUTHENTICATE)
        .unwrap_or_else(|| panic!("no WWW-Authenticate on HTTP {}: {}", r.status, r.text()))
        .to_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn metadata_names_the_authorization_server_and_challenges_point_to_it() {
    let db = TestDatabase::new().await;
    let key = Key::rsa();
    let jwks = Jwks::start(vec![key.jwk("k1")]).await;
    let st = oauth_state(&db, settings(JwksSource::Url(jwks.url.clone()), None));

    for (path, resource) in [
        ("/.well-known/oauth-protected-resource", AUD_MCP),
        ("/.well-known/oauth-protected-resource/mcp", AUD_MCP),
        ("/.well-known/oauth-protected-resource/api", AUD_API),
    ] {
        let r = get(&st, path, None).await;
        assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text());
        assert_eq!(r.body["resource"], resource, "{path}");
        assert_eq!(r.body["authorization_servers"], json!([ISSUER]), "{path}");
        assert_eq!(r.body["bearer_methods_supported"], json!(["header"]));
        let scopes: Vec<&str> = r.body["scopes_supported"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        assert!(scopes.contains(&"project:write"), "{scopes:?}");
    }
    let r = get(&st, "/.well-known/oauth-protected-resource/nowhere", None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);

    // Without a token: 401 naming the metadata of the resource the request is for.
    let r = tools_list(&st, MODERN, None).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        challenge(&r),
        r#"Bearer realm="wc", resource_metadata="https://wc.test.example/.well-known/oauth-protected-resource/mcp""#
    );
    let r = rest(
        &st,
        "/api/tools/call",
        None,
        json!({ "tool": "list_projects" }),
    )
    .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert!(
        challenge(&r).contains(
            r#"resource_metadata="https://wc.test.example/.well-known/oauth-protected-resource/api""#
        ),
        "{}",
        challenge(&r)
    );
    // Nothing was fetched: keys load on the first token, not on start or on anonymous calls.
    assert_eq!(jwks.fetches(), 0);

    // A server without OAuth has no metadata and plain challenges.
    let plain = state(&db);
    let r = get(&plain, "/.well-known/oauth-protected-resource", None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = tools_list(&plain, MODERN, None).await;
    assert_eq!(challenge(&r), r#"Bearer realm="wc""#);
}

#[tokio::test]
async fn refused_tokens_are_401_invalid_token_on_mcp_and_rest() {
    let db = TestDatabase::new().await;
    let key = Key::rsa();
    let stranger = Key::rsa();
    let jwks = Jwks::start(vec![key.jwk("k1")]).await;
    let st = oauth_state(&db, settings(JwksSource::Url(jwks.url.clone()), None));

    let valid = key.sign("k1", &claims("user-1", json!({})));
    let mut tampered: Vec<&str> = valid.split('.').collect();
    let other_payload = b64(&serde_json::to_vec(&claims("admin", json!({}))).unwrap());
    tampered[1] = &other_payload;
    let tampered = tampered.join(".");

    let none_token = format!(
        "{}.{}.",
        b64(br#"{"alg":"none","typ":"at+jwt"}"#),
        b64(&serde_json::to_vec(&claims("user-1", json!({}))).unwrap())
    );
    // HS256 keyed with the public modulus: the algorithm-confusion attack.
    let hs_token = {
        use hmac::{Hmac, KeyInit, Mac};
        let Key::Rsa(k) = &key else { unreachable!() };
        let secret = k
            .public_key()
            .modulus()
            .big_endian_without_leading_zero()
            .to_vec();
        let input = format!(
            "{}.{}",
            b64(br#"{"alg":"HS256","kid":"k1"}"#),
            b64(&serde_json::to_vec(&claims("user-1", json!({}))).unwrap())
        );
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&secret).unwrap();
        mac.update(input.as_bytes());
        format!("{input}.{}", b64(&mac.finalize().into_bytes()))
    };

    let cases: Vec<(&str, String)> = vec![
        (
            "expired",
            key.sign("k1", &claims("user-1", json!({ "exp": now() - 3600 }))),
        ),
        (
            "wrong audience",
            key.sign(
                "k1",
                &claims("user-1", json!({ "aud": "https://other.example/mcp" })),
            ),
        ),
        (
            "wrong issuer",
            key.sign(
                "k1",
                &claims("user-1", json!({ "iss": "https://evil.example" })),
            ),
        ),
        (
            "unknown key id",
            stranger.sign("k9", &claims("user-1", json!({}))),
        ),
        (
            "known key id, another key's signature",
            stranger.sign("k1", &claims("user-1", json!({}))),
        ),
        ("tampered payload", tampered),
        ("alg=none", none_token),
        ("HS256 with the public key", hs_token),
        (
            "no subject",
            key.sign("k1", &claims("user-1", json!({ "sub": null }))),
        ),
        (
            "no expiry",
            key.sign("k1", &claims("user-1", json!({ "exp": null }))),
        ),
        (
            "not yet valid",
            key.sign("k1", &claims("user-1", json!({ "nbf": now() + 3600 }))),
        ),
    ];
    for (what, token) in &cases {
        let r = tools_list(&st, MODERN, Some(token)).await;
        assert_eq!(
            r.status,
            StatusCode::UNAUTHORIZED,
            "{what} (MCP): {}",
            head(&r)
        );
        let c = challenge(&r);
        assert!(c.contains(r#"error="invalid_token""#), "{what}: {c}");
        assert!(c.contains("resource_metadata="), "{what}: {c}");
        assert_eq!(r.body["error"]["kind"], "invalid_token", "{what}");

        let r = get(&st, "/api/whoami", Some(token)).await;
        assert_eq!(
            r.status,
            StatusCode::UNAUTHORIZED,
            "{what} (REST): {}",
            head(&r)
        );
        let r = rest_tools_call(&st, token, "list_projects", json!({})).await;
        assert_eq!(
            r.status,
            StatusCode::UNAUTHORIZED,
            "{what} (REST call): {}",
            head(&r)
        );
    }
    // No refused request reached a tool or left an audit row.
    assert!(events(&db).await.is_empty());

    // The valid token itself is accepted, so the refusals above are about what they changed.
    let r = tools_list(&st, MODERN, Some(&valid)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
}

#[tokio::test]
async fn valid_tokens_work_on_mcp_and_rest_with_their_scopes_and_subject() {
    let db = TestDatabase::new().await;
    register_project(&db, "agent:local:demo").await;
    let rsa = Key::rsa();
    let ec = Key::ec();
    let jwks = Jwks::start(vec![rsa.jwk("rsa-1"), ec.jwk("ec-1")]).await;
    let st = oauth_state(&db, settings(JwksSource::Url(jwks.url.clone()), None));

    let alice = rsa.sign("rsa-1", &claims("alice", json!({})));
    let bob = ec.sign("ec-1", &claims("bob", json!({ "aud": [AUD_API, "other"] })));

    // MCP: listing and calling.
    let r = tools_list(&st, MODERN, Some(&alice)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert!(tool_names(r.result()).contains(&"work_on_project".to_owned()));
    let r = tools_call(&st, MODERN, Some(&alice), "list_projects", json!({})).await;
    let sc = &r.result()["structuredContent"];
    assert_eq!(sc["success"], true, "{sc}");

    // REST: who the caller is, and a call.
    let r = get(&st, "/api/whoami", Some(&bob)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.body["principal_kind"], "oauth");
    assert_eq!(r.body["oauth_subject"], "bob");
    assert_eq!(r.body["oauth_client_id"], CLIENT);
    assert_eq!(r.body["scopes"], json!(["project:read", "project:write"]));

    let r = rest_tools_call(
        &st,
        &alice,
        "work_on_project",
        json!({ "project": "agent:local:demo", "instruction": "tidy the parser" }),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let session = output(&r.body)["session_id"].as_str().unwrap().to_owned();

    // The session belongs to alice (issuer + subject): bob, same issuer, does not see it.
    let r = rest_tools_call(
        &st,
        &alice,
        "session_summary",
        json!({ "session_id": session }),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.body["success"], true, "{}", r.text());
    let r = rest_tools_call(
        &st,
        &bob,
        "session_summary",
        json!({ "session_id": session }),
    )
    .await;
    assert_eq!(
        r.body["error"]["kind"],
        "unknown_session_id",
        "{}",
        r.text()
    );

    // Too few scopes: 403 naming the scope needed.
    let reader = rsa.sign("rsa-1", &claims("carol", json!({ "scope": "memory:read" })));
    let r = rest(&st, "/api/actions/list_projects", Some(&reader), json!({})).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text());
    assert_eq!(r.body["error"]["kind"], "insufficient_scope");
    assert_eq!(
        challenge(&r),
        r#"Bearer realm="wc", error="insufficient_scope", scope="project:read""#
    );
    let r = tools_call(&st, MODERN, Some(&reader), "list_projects", json!({})).await;
    assert_eq!(
        r.result()["structuredContent"]["error"]["kind"],
        "insufficient_scope"
    );

    // Audit attribution: the OAuth kind, subject and client; the token itself nowhere.
    let rows = events(&db).await;
    assert!(!rows.is_empty());
    for row in &rows {
        assert_eq!(row.principal_kind.as_deref(), Some("oauth"), "{row:?}");
        assert_eq!(row.oauth_client_id.as_deref(), Some(CLIENT), "{row:?}");
        assert!(
            matches!(
                row.principal_user_id.as_deref(),
                Some("alice" | "bob" | "carol")
            ),
            "{row:?}"
        );
    }
    let text = audit_tables_text(&db).await;
    for token in [&alice, &bob, &reader] {
        let signature = token.rsplit('.').next().unwrap();
        assert!(
            !text.contains(signature),
            "a token reached the audit tables"
        );
    }

    // Shared keys keep working beside OAuth.
    let key = full_key(&db).await;
    let r = get(&st, "/api/whoami", Some(&key)).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["principal_kind"], "shared_key");
    // Keys were fetched once for all of the above.
    assert_eq!(jwks.fetches(), 1);
}

#[tokio::test]
async fn rotated_keys_are_picked_up_and_an_outage_keeps_the_known_keys() {
    let db = TestDatabase::new().await;
    let old = Key::rsa();
    let new = Key::ec();
    let jwks = Jwks::start(vec![old.jwk("old")]).await;
    let st = oauth_state(&db, settings(JwksSource::Url(jwks.url.clone()), None));

    let with_old = old.sign("old", &claims("dana", json!({})));
    let with_new = new.sign("new", &claims("dana", json!({})));
    assert_eq!(whoami(&st, &with_old).await, StatusCode::OK);
    assert_eq!(whoami(&st, &with_old).await, StatusCode::OK);
    assert_eq!(jwks.fetches(), 1, "known keys are cached");

    // The issuer rotates: the new key id triggers one refresh; the retired key stops working.
    jwks.set_keys(vec![new.jwk("new")]);
    assert_eq!(whoami(&st, &with_new).await, StatusCode::OK);
    assert_eq!(jwks.fetches(), 2);
    assert_eq!(whoami(&st, &with_old).await, StatusCode::UNAUTHORIZED);

    // The JWKS endpoint fails: known keys keep working.
    jwks.status.store(500, Ordering::SeqCst);
    assert_eq!(whoami(&st, &with_new).await, StatusCode::OK);

    // A fresh instance that never loaded keys cannot verify anything: 503, not 401.
    let cold = oauth_state(&db, settings(JwksSource::Url(jwks.url.clone()), None));
    let r = get(&cold, "/api/whoami", Some(&with_new)).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text());
    jwks.status.store(200, Ordering::SeqCst);
    assert_eq!(whoami(&cold, &with_new).await, StatusCode::OK);

    // With the default cooldown, a request soon after a failed first load is still 503 (the
    // keys are unavailable), never a 401 blaming the token.
    jwks.status.store(500, Ordering::SeqCst);
    let mut s = settings(JwksSource::Url(jwks.url.clone()), None);
    s.refresh_cooldown = OAuthSettings::DEFAULT_REFRESH_COOLDOWN;
    let cold = oauth_state(&db, s);
    for _ in 0..2 {
        let r = get(&cold, "/api/whoami", Some(&with_new)).await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text());
    }
}

#[tokio::test]
async fn a_jwks_file_and_a_scope_map() {
    let db = TestDatabase::new().await;
    let key = Key::ec();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jwks.json");
    std::fs::write(&path, json!({ "keys": [key.jwk("file-1")] }).to_string()).unwrap();
    let st = oauth_state(
        &db,
        settings(
            JwksSource::File(path.clone()),
            Some(r#"{"wc.work": ["project:read", "project:write"], "wc.ops": ["audit:read"]}"#),
        ),
    );
    let token = key.sign(
        "file-1",
        &claims(
            "erin",
            json!({ "scope": null, "scp": ["wc.work", "openid"] }),
        ),
    );
    let r = get(&st, "/api/whoami", Some(&token)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let want = ScopeSet::parse_all(&["project:read", "project:write"]).unwrap();
    assert_eq!(r.body["scopes"], json!(want.to_strings()));

    let r = get(&st, "/.well-known/oauth-protected-resource", None).await;
    assert_eq!(r.body["scopes_supported"], json!(["wc.ops", "wc.work"]));

    // The file is re-read when an unknown key id arrives.
    let next = Key::rsa();
    std::fs::write(
        &path,
        json!({ "keys": [key.jwk("file-1"), next.jwk("file-2")] }).to_string(),
    )
    .unwrap();
    let token = next.sign("file-2", &claims("erin", json!({ "scope": "wc.ops" })));
    let r = get(&st, "/api/whoami", Some(&token)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.body["scopes"], json!(["audit:read"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wc_local_honours_the_oauth_configuration() {
    use wc_e2e::client::Client;
    use wc_e2e::server::{LocalOptions, LocalServer};

    let db = TestDatabase::empty().await;
    let dir = tempfile::tempdir().unwrap();
    let key = Key::ec();
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, json!({ "keys": [key.jwk("local-1")] }).to_string()).unwrap();
    let bin = wc_e2e::server::workspace_binary("wc-local");
    let options = |env: Vec<(&str, String)>| {
        let mut opts = LocalOptions::in_dir(dir.path().join("run"));
        opts.database_url = Some(db.url().expose().to_owned());
        opts.env = env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        opts
    };

    // An incomplete configuration stops wc-local before it serves, naming what is missing.
    let incomplete = options(vec![
        ("WC_OAUTH_ISSUER", ISSUER.to_owned()),
        ("WC_OAUTH_JWKS_FILE", jwks.display().to_string()),
    ]);
    let Err(err) = LocalServer::spawn(&bin, &incomplete) else {
        panic!("wc-local must refuse to start without WC_OAUTH_AUDIENCE");
    };
    assert!(format!("{err:#}").contains("WC_OAUTH_AUDIENCE"), "{err:#}");

    let server = LocalServer::spawn(
        &bin,
        &options(vec![
            ("WC_OAUTH_ISSUER", ISSUER.to_owned()),
            ("WC_OAUTH_AUDIENCE", AUD_MCP.to_owned()),
            ("WC_OAUTH_JWKS_FILE", jwks.display().to_string()),
        ]),
    )
    .unwrap();
    let http = Client::new();
    let token = key.sign("local-1", &claims("frank", json!({})));
    let me = http
        .get(&format!("{}/api/whoami", server.base_url), Some(&token))
        .await
        .unwrap();
    assert_eq!(me.status, 200);
    let me = me.json();
    assert_eq!(me["principal_kind"], "oauth");
    assert_eq!(me["oauth_subject"], "frank");
    let metadata = http
        .get(
            &format!("{}/.well-known/oauth-protected-resource", server.base_url),
            None,
        )
        .await
        .unwrap();
    assert_eq!(metadata.status, 200);
    // wc-local's own token still works beside OAuth.
    let me = http
        .get(
            &format!("{}/api/whoami", server.base_url),
            Some(&server.token),
        )
        .await
        .unwrap();
    assert_eq!(me.status, 200);
    assert!(server.interrupt().unwrap().success());
}

#[tokio::test]
async fn old_keys_are_refreshed_and_keep_serving_when_the_refresh_fails() {
    let db = TestDatabase::new().await;
    let key = Key::rsa();
    let jwks = Jwks::start(vec![key.jwk("k1")]).await;
    let mut s = settings(JwksSource::Url(jwks.url.clone()), None);
    // Every key set is already old: each request refreshes it.
    s.keys_ttl = Duration::ZERO;
    let st = oauth_state(&db, s);
    let token = key.sign("k1", &claims("gina", json!({})));
    assert_eq!(whoami(&st, &token).await, StatusCode::OK);
    assert_eq!(whoami(&st, &token).await, StatusCode::OK);
    assert_eq!(jwks.fetches(), 2, "an old key set is refetched");

    jwks.status.store(503, Ordering::SeqCst);
    assert_eq!(whoami(&st, &token).await, StatusCode::OK);
    assert_eq!(jwks.fetches(), 3, "the refresh was tried and failed");
}
