//! Typed configuration of the HTTP functions, read from the environment.

use std::time::Duration;

pub use crate::limits::RequestLimits;

/// Settings shared by every entry point that serves [`crate::app`].
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Largest accepted request body; larger ones get 413 before any parsing.
    pub max_body_bytes: usize,
    /// What this process admits at once: concurrent requests, body bytes, body deadline.
    pub requests: RequestLimits,
    /// How much runner work one caller and one project may have open, and how runner slots
    /// are shared between callers.
    pub work: WorkQuotas,
    /// How long the health check waits for the database.
    pub health_timeout: Duration,
    /// Hard deadline of one tool dispatch (`WC_DISPATCH_DEADLINE_MS`), under API Gateway's 29 s.
    pub dispatch_deadline: Duration,
    /// `Host` values the MCP endpoint accepts (`WC_ALLOWED_HOSTS`, comma-separated).
    pub allowed_hosts: Vec<String>,
    /// Extra browser origins the MCP endpoint accepts besides those of the allowed hosts
    /// (`WC_ALLOWED_ORIGINS`, comma-separated, with scheme).
    pub allowed_origins: Vec<String>,
    /// Public base URL, the OpenAPI `servers` entry (`WC_PUBLIC_URL`).
    pub public_url: Option<String>,
    /// Serve callers without a token as the Open Anonymous principal (`WC_ALLOW_ANONYMOUS=1`).
    pub allow_anonymous: bool,
    /// Serve the MCP conformance suite's fixtures (`WC_CONFORMANCE_FIXTURES=1`); test only.
    /// Turned on only by [`ServerConfig::enable_conformance_fixtures`], which builds without
    /// the fixtures refuse.
    pub conformance_fixtures: bool,
    /// How long an open audit session stays eligible for reuse after its last event
    /// (`ACTION_SESSION_IDLE_TIMEOUT_SECS`).
    pub audit_idle_timeout: Duration,
    /// Lease granted to a runner on claim and heartbeat (`WC_RUNNER_LEASE_MS`); work whose
    /// lease runs out without a heartbeat becomes `lost`.
    pub runner_lease: Duration,
    /// How long a synchronous execution tool waits for the terminal state before answering
    /// with the job handle (`WC_EXEC_WAIT_MS`, below the dispatch deadline).
    pub exec_wait: Duration,
    /// How long a persistent shell may sit unused before upkeep closes it
    /// (`WC_SHELL_IDLE_SECS`, default 1800).
    pub shell_idle: Duration,
    /// How long a durable MCP task is kept after it is created (`WC_TASK_TTL_SECS`, default
    /// 86400): its `ttlMs`; upkeep deletes it after.
    pub task_ttl: Duration,
    /// Polling interval suggested to task clients (`WC_TASK_POLL_MS`, default 1000).
    pub task_poll_interval: Duration,
    /// An execution call whose `timeout_ms` is above this becomes a task for a client that
    /// declares the tasks extension (`WC_TASK_THRESHOLD_MS`, default 20000, under API
    /// Gateway's 29 s).
    pub task_threshold: Duration,
    /// Longest life of one `subscriptions/listen` stream before it ends gracefully and the
    /// client listens again (`WC_LISTEN_MAX_MS`, default 25000, under API Gateway's 29 s).
    pub listen_max: Duration,
    /// Use Postgres `LISTEN/NOTIFY` as a wake-up hint (`WC_NOTIFY=0` turns it off; durable
    /// state is polled either way).
    pub notify: bool,
    /// SQS queue URL per runner client id (`WC_RUNNER_SQS_QUEUES=client=url,…`); runners not
    /// named here use the Postgres queue.
    pub runner_sqs_queues: std::collections::BTreeMap<String, String>,
    /// SQS endpoint override, e.g. a local moto server (`WC_SQS_ENDPOINT_URL`).
    pub sqs_endpoint_url: Option<String>,
    /// AWS region of the runner queues (`AWS_REGION`, default `us-east-1`).
    pub sqs_region: String,
    /// Key material for observation tokens and assignment fences (`WC_TOKEN_SECRET`, at least
    /// 32 bytes). When absent, a secret generated once and kept in the database is used.
    pub token_secret: Option<TokenSecret>,
    /// OAuth resource-server settings (`WC_OAUTH_*`); `None` serves credentials only.
    pub oauth: Option<crate::auth::OAuthSettings>,
}

/// Limits on runner work per caller and per project, checked when work is queued and when a
/// runner claims it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkQuotas {
    /// Open (queued or running) work items of one authority group, over all projects
    /// (`WC_WORK_MAX_OPEN_PER_CALLER`); more is refused `rate_limited`.
    pub max_open_per_caller: u32,
    /// Open work items of one project, over all callers (`WC_WORK_MAX_OPEN_PER_PROJECT`);
    /// more is refused `queue_full`.
    pub max_open_per_project: u32,
    /// Open persistent shells of one authority group, over all sessions and projects
    /// (`WC_SHELLS_MAX_OPEN_PER_CALLER`); another open is refused `limit_exceeded`.
    pub max_shells_per_caller: u32,
    /// Slots of each runner that one authority group cannot fill (`WC_RUNNER_RESERVED_SLOTS`):
    /// one caller runs at most `max_concurrency - reserved` items on a runner (at least one),
    /// so another caller's work always finds a slot that long jobs cannot take.
    pub reserved_runner_slots: u32,
}

impl Default for WorkQuotas {
    fn default() -> Self {
        Self {
            max_open_per_caller: 100,
            max_open_per_project: 200,
            max_shells_per_caller: 16,
            reserved_runner_slots: 1,
        }
    }
}

/// A secret from configuration; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenSecret(Vec<u8>);

impl TokenSecret {
    /// Shortest accepted secret, in bytes.
    pub const MIN_BYTES: usize = 32;

    /// The secret, if it is long enough.
    pub fn new(bytes: Vec<u8>) -> Option<TokenSecret> {
        (bytes.len() >= Self::MIN_BYTES).then_some(TokenSecret(bytes))
    }

    /// The bytes.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for TokenSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenSecret(redacted)")
    }
}

/// Why configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration: {0}")]
pub struct ConfigError(pub String);

fn env_flag(name: &str) -> Result<bool, ConfigError> {
    match std::env::var(name) {
        Err(_) => Ok(false),
        Ok(v) => match v.trim() {
            "" | "0" | "false" | "no" => Ok(false),
            "1" | "true" | "yes" => Ok(true),
            other => Err(ConfigError(format!("{name} must be 1 or 0, not {other:?}"))),
        },
    }
}

fn env_list(name: &str) -> Option<Vec<String>> {
    std::env::var(name).ok().map(|v| {
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    })
}

/// Whether this build carries the MCP conformance fixtures (the `conformance-fixtures`
/// feature, which no production artifact enables).
pub const CONFORMANCE_FIXTURES_BUILT: bool = cfg!(feature = "conformance-fixtures");

fn env_number(name: &str, min: u64, max: u64) -> Result<Option<u64>, ConfigError> {
    match std::env::var(name) {
        Err(_) => Ok(None),
        Ok(v) => v
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|n| (min..=max).contains(n))
            .map(Some)
            .ok_or_else(|| ConfigError(format!("{name} must be an integer from {min} to {max}"))),
    }
}

impl ServerConfig {
    /// Default body limit: 4 MiB. Every tool argument is bounded, and the bounds are chosen so
    /// that any request the schemas allow — even with every string at its longest and written
    /// with JSON's longest escapes (12 bytes per character) — fits (raw shell text is at
    /// most 16,000 bytes); anything larger is a mistake or an attack.
    pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

    /// Reads the environment; everything has a default.
    pub fn from_env() -> Result<Self, ConfigError> {
        let mut cfg = Self::default();
        if let Some(n) = env_number("WC_MAX_BODY_BYTES", 1024, 64 * 1024 * 1024)? {
            cfg.max_body_bytes = n as usize;
        }
        if let Some(n) = env_number("WC_MAX_CONCURRENT_REQUESTS", 1, 100_000)? {
            cfg.requests.max_concurrent_requests = n as usize;
        }
        if let Some(n) = env_number("WC_MAX_CONCURRENT_RUNNER_REQUESTS", 1, 100_000)? {
            cfg.requests.max_concurrent_runner_requests = n as usize;
        }
        if let Some(n) = env_number("WC_MAX_CONCURRENT_REQUESTS_PER_CALLER", 1, 100_000)? {
            cfg.requests.max_concurrent_requests_per_caller = n as usize;
        }
        if let Some(n) = env_number("WC_MAX_LISTEN_STREAMS_PER_CALLER", 1, 100_000)? {
            cfg.requests.max_listen_streams_per_caller = n as usize;
        }
        if let Some(n) = env_number("WC_SHELLS_MAX_OPEN_PER_CALLER", 1, 100_000)? {
            cfg.work.max_shells_per_caller = n as u32;
        }
        if let Some(n) = env_number("WC_MAX_BODY_BYTES_IN_FLIGHT", 1024, 16 * 1024 * 1024 * 1024)? {
            cfg.requests.max_body_bytes_in_flight = n as usize;
        }
        if cfg.requests.max_body_bytes_in_flight < cfg.max_body_bytes {
            return Err(ConfigError(
                "WC_MAX_BODY_BYTES_IN_FLIGHT must be at least WC_MAX_BODY_BYTES".into(),
            ));
        }
        if let Some(ms) = env_number("WC_BODY_TIMEOUT_MS", 100, 600_000)? {
            cfg.requests.body_timeout = Duration::from_millis(ms);
        }
        if let Some(n) = env_number("WC_WORK_MAX_OPEN_PER_CALLER", 1, 100_000)? {
            cfg.work.max_open_per_caller = n as u32;
        }
        if let Some(n) = env_number("WC_WORK_MAX_OPEN_PER_PROJECT", 1, 100_000)? {
            cfg.work.max_open_per_project = n as u32;
        }
        if let Some(n) = env_number("WC_RUNNER_RESERVED_SLOTS", 0, 255)? {
            cfg.work.reserved_runner_slots = n as u32;
        }
        if let Some(ms) = env_number("WC_DISPATCH_DEADLINE_MS", 1, 28_000)? {
            cfg.dispatch_deadline = Duration::from_millis(ms);
        }
        if let Some(hosts) = env_list("WC_ALLOWED_HOSTS") {
            cfg.allowed_hosts = hosts;
        }
        if let Some(origins) = env_list("WC_ALLOWED_ORIGINS") {
            cfg.allowed_origins = origins;
        }
        if let Ok(url) = std::env::var("WC_PUBLIC_URL") {
            let url = url.trim().trim_end_matches('/').to_owned();
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err(ConfigError("WC_PUBLIC_URL must be an http(s) URL".into()));
            }
            cfg.public_url = Some(url);
        }
        cfg.allow_anonymous = env_flag("WC_ALLOW_ANONYMOUS")?;
        if env_flag("WC_CONFORMANCE_FIXTURES")? {
            cfg.enable_conformance_fixtures("WC_CONFORMANCE_FIXTURES=1")?;
        }
        if let Some(secs) = env_number("ACTION_SESSION_IDLE_TIMEOUT_SECS", 1, 7 * 24 * 3600)? {
            cfg.audit_idle_timeout = Duration::from_secs(secs);
        }
        if let Some(ms) = env_number("WC_RUNNER_LEASE_MS", 500, 600_000)? {
            cfg.runner_lease = Duration::from_millis(ms);
        }
        if let Some(ms) = env_number("WC_EXEC_WAIT_MS", 0, 27_000)? {
            cfg.exec_wait = Duration::from_millis(ms);
        }
        if let Some(secs) = env_number("WC_SHELL_IDLE_SECS", 1, 7 * 24 * 3600)? {
            cfg.shell_idle = Duration::from_secs(secs);
        }
        if let Some(secs) = env_number("WC_TASK_TTL_SECS", 60, 30 * 24 * 3600)? {
            cfg.task_ttl = Duration::from_secs(secs);
        }
        if let Some(ms) = env_number("WC_TASK_POLL_MS", 100, 60_000)? {
            cfg.task_poll_interval = Duration::from_millis(ms);
        }
        if let Some(ms) = env_number("WC_TASK_THRESHOLD_MS", 0, 3_600_000)? {
            cfg.task_threshold = Duration::from_millis(ms);
        }
        if let Some(ms) = env_number("WC_LISTEN_MAX_MS", 100, 3_600_000)? {
            cfg.listen_max = Duration::from_millis(ms);
        }
        if cfg.exec_wait + Duration::from_secs(1) > cfg.dispatch_deadline {
            return Err(ConfigError(
                "WC_EXEC_WAIT_MS must be at least 1 s below WC_DISPATCH_DEADLINE_MS".into(),
            ));
        }
        if let Ok(v) = std::env::var("WC_TOKEN_SECRET") {
            cfg.token_secret = Some(TokenSecret::new(v.into_bytes()).ok_or_else(|| {
                ConfigError(format!(
                    "WC_TOKEN_SECRET must be at least {} bytes",
                    TokenSecret::MIN_BYTES
                ))
            })?);
        }
        if let Ok(v) = std::env::var("WC_NOTIFY") {
            cfg.notify = !matches!(v.trim(), "0" | "false" | "no" | "off");
        }
        if let Some(pairs) = env_list("WC_RUNNER_SQS_QUEUES") {
            for pair in pairs {
                let (client, url) = pair.split_once('=').ok_or_else(|| {
                    ConfigError("WC_RUNNER_SQS_QUEUES entries are client_id=queue_url".into())
                })?;
                if !wc_runner_protocol::valid_name(client) || !url.starts_with("http") {
                    return Err(ConfigError(format!(
                        "WC_RUNNER_SQS_QUEUES: bad entry for {client:?} (client id, then an http(s) queue URL)"
                    )));
                }
                cfg.runner_sqs_queues
                    .insert(client.to_owned(), url.to_owned());
            }
        }
        if let Ok(url) = std::env::var("WC_SQS_ENDPOINT_URL") {
            let url = url.trim();
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err(ConfigError(
                    "WC_SQS_ENDPOINT_URL must be an http(s) URL".into(),
                ));
            }
            cfg.sqs_endpoint_url = Some(url.to_owned());
        }
        if let Ok(region) = std::env::var("AWS_REGION")
            && !region.trim().is_empty()
        {
            cfg.sqs_region = region.trim().to_owned();
        }
        cfg.oauth = crate::auth::OAuthSettings::from_env().map_err(|e| ConfigError(e.0))?;
        Ok(cfg)
    }

    /// How often runners heartbeat: a quarter of the lease, at most 20 s.
    pub fn runner_heartbeat(&self) -> Duration {
        (self.runner_lease / 4).min(Duration::from_secs(20))
    }

    /// Turns on the MCP conformance fixtures, as `source` (the flag or variable) asks. A build
    /// without the `conformance-fixtures` feature — every production artifact — refuses, so the
    /// switch never passes silently for a server that cannot serve them.
    pub fn enable_conformance_fixtures(&mut self, source: &str) -> Result<(), ConfigError> {
        if !CONFORMANCE_FIXTURES_BUILT {
            return Err(ConfigError(format!(
                "{source} asks for the MCP conformance fixtures, which this build does not carry; \
                 they are test only, built with `--features wc-functions/conformance-fixtures`"
            )));
        }
        tracing::warn!(
            %source,
            "conformance fixtures are registered: this server is for testing only"
        );
        self.conformance_fixtures = true;
        Ok(())
    }

    /// Browser origins accepted by the MCP endpoint: those of the allowed hosts, on any port,
    /// plus the configured extras.
    pub fn mcp_allowed_origins(&self) -> Vec<String> {
        let mut origins: Vec<String> = self
            .allowed_hosts
            .iter()
            .flat_map(|h| {
                let host = if h.contains(':') && !h.starts_with('[') && h.matches(':').count() > 1 {
                    format!("[{h}]")
                } else {
                    h.clone()
                };
                let with_port = host
                    .rsplit_once(':')
                    .is_some_and(|(_, p)| p.chars().all(|c| c.is_ascii_digit()))
                    && !host.ends_with(']');
                if with_port {
                    vec![format!("http://{host}"), format!("https://{host}")]
                } else {
                    vec![format!("http://{host}:*"), format!("https://{host}:*")]
                }
            })
            .collect();
        origins.extend(self.allowed_origins.iter().cloned());
        origins
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            max_body_bytes: Self::DEFAULT_MAX_BODY_BYTES,
            requests: RequestLimits::default(),
            work: WorkQuotas::default(),
            health_timeout: Duration::from_secs(3),
            dispatch_deadline: Duration::from_secs(25),
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            allowed_origins: Vec::new(),
            public_url: None,
            allow_anonymous: false,
            conformance_fixtures: false,
            audit_idle_timeout: Duration::from_secs(1800),
            runner_lease: Duration::from_secs(60),
            exec_wait: Duration::from_secs(20),
            shell_idle: Duration::from_secs(1800),
            task_ttl: Duration::from_secs(86_400),
            task_poll_interval: Duration::from_secs(1),
            task_threshold: Duration::from_secs(20),
            listen_max: Duration::from_secs(25),
            notify: true,
            runner_sqs_queues: Default::default(),
            sqs_endpoint_url: None,
            sqs_region: "us-east-1".into(),
            token_secret: None,
            oauth: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixtures_turn_on_only_in_a_build_that_carries_them() {
        let mut cfg = ServerConfig::default();
        assert!(!cfg.conformance_fixtures);
        let asked = cfg.enable_conformance_fixtures("--conformance-fixtures");
        if CONFORMANCE_FIXTURES_BUILT {
            asked.unwrap();
            assert!(cfg.conformance_fixtures);
            return;
        }
        let err = asked.unwrap_err().to_string();
        assert!(!cfg.conformance_fixtures);
        assert!(
            err.starts_with("invalid configuration: --conformance-fixtures asks for"),
            "{err}"
        );
        assert!(
            err.contains("--features wc-functions/conformance-fixtures"),
            "{err}"
        );
    }

    #[test]
    fn origins_follow_the_allowed_hosts() {
        let cfg = ServerConfig {
            allowed_hosts: vec![
                "wc.example.com".into(),
                "127.0.0.1:8787".into(),
                "::1".into(),
            ],
            allowed_origins: vec!["https://chat.example".into()],
            ..ServerConfig::default()
        };
        assert_eq!(
            cfg.mcp_allowed_origins(),
            [
                "http://wc.example.com:*",
                "https://wc.example.com:*",
                "http://127.0.0.1:8787",
                "https://127.0.0.1:8787",
                "http://[::1]:*",
                "https://[::1]:*",
                "https://chat.example",
            ]
        );
    }
}
