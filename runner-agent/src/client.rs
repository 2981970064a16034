//! The runner API over HTTP(S): typed requests, typed failures.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use wc_runner_protocol::ApiErrorBody;

use crate::config::Secret;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiFailure {
    /// The server could not be reached or answered garbage; retry with backoff.
    #[error("transport: {0}")]
    Transport(String),
    /// The token is unknown or revoked: stop.
    #[error("the runner token was refused ({0}); it is unknown or revoked")]
    Unauthorized(String),
    /// A newer instance registered (or the runner was revoked): stop this instance.
    #[error("this runner instance was replaced: {0}")]
    Replaced(String),
    /// The server refused the request as malformed or out of bounds.
    #[error("refused ({kind}): {message}")]
    Refused {
        /// Error kind.
        kind: String,
        /// Message.
        message: String,
    },
    /// The server failed (5xx); retry with backoff.
    #[error("server error {0}")]
    Server(u16),
}

impl ApiFailure {
    /// Whether retrying the same request later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, ApiFailure::Transport(_) | ApiFailure::Server(_))
    }
}

/// A runner API client for one server and token.
#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    base: String,
    token: Secret,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl Api {
    /// A client for `base` (e.g. `https://wc.example.com`).
    pub fn new(base: &str, token: Secret) -> Result<Api, ApiFailure> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .pool_idle_timeout(Duration::from_secs(60))
            .user_agent(concat!("wc-runner/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ApiFailure::Transport(e.to_string()))?;
        Ok(Api {
            http,
            base: base.trim_end_matches('/').to_owned(),
            token,
        })
    }

    /// POSTs `body` to `/runner/v1/{op}` and parses the answer, within `timeout`.
    pub async fn call<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        op: &str,
        body: &Req,
        timeout: Duration,
    ) -> Result<Resp, ApiFailure> {
        let resp = self
            .http
            .post(format!("{}/runner/v1/{op}", self.base))
            .bearer_auth(self.token.expose())
            .timeout(timeout)
            .json(body)
            .send()
            .await
            .map_err(|e| ApiFailure::Transport(without_url(&e)))?;
        let status = resp.status();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| ApiFailure::Transport(without_url(&e)))?;
        if status.is_success() {
            return serde_json::from_slice(&bytes)
                .map_err(|e| ApiFailure::Transport(format!("unreadable {op} answer: {e}")));
        }
        if status.is_server_error() {
            return Err(ApiFailure::Server(status.as_u16()));
        }
        let (kind, message) = match serde_json::from_slice::<ApiErrorBody>(&bytes) {
            Ok(b) => (b.error.kind, b.error.message),
            Err(_) => (format!("http_{}", status.as_u16()), String::new()),
        };
        Err(match (status.as_u16(), kind.as_str()) {
            (401, _) => ApiFailure::Unauthorized(message),
            (409, "instance_replaced") => ApiFailure::Replaced(message),
            _ => ApiFailure::Refused { kind, message },
        })
    }
}

/// The error text without the URL (it names the server, never a secret, but stays short).
fn without_url(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    if let Some(url) = e.url() {
        s = s.replace(url.as_str(), "<server>");
    }
    s
}
