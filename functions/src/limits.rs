//! The admission limits of one process: configuration that the admission layer
//! (`http::limits`) enforces. A leaf, so configuration and HTTP both read it and neither
//! reaches into the other.

use std::time::Duration;

/// Admission limits of one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLimits {
    /// Requests served at once, runner API aside (`WC_MAX_CONCURRENT_REQUESTS`); more are
    /// refused at once with 503 `unavailable` and `Retry-After`.
    pub max_concurrent_requests: usize,
    /// Runner-API requests served at once (`WC_MAX_CONCURRENT_RUNNER_REQUESTS`), counted
    /// apart so callers can never crowd out heartbeats.
    pub max_concurrent_runner_requests: usize,
    /// Request-body bytes held at once across all requests
    /// (`WC_MAX_BODY_BYTES_IN_FLIGHT`, at least `WC_MAX_BODY_BYTES`).
    pub max_body_bytes_in_flight: usize,
    /// How long a body may take to arrive once its caller is authenticated
    /// (`WC_BODY_TIMEOUT_MS`); a slower one is 408 `request_timeout`.
    pub body_timeout: Duration,
    /// Requests one caller (authority group) has served at once by this process, streams
    /// included (`WC_MAX_CONCURRENT_REQUESTS_PER_CALLER`); more are 429 `rate_limited`, so
    /// one caller never takes the whole of `max_concurrent_requests` from the others.
    pub max_concurrent_requests_per_caller: usize,
    /// MCP `subscriptions/listen` streams one caller holds open at once on this process
    /// (`WC_MAX_LISTEN_STREAMS_PER_CALLER`); more are 429 `rate_limited`.
    pub max_listen_streams_per_caller: usize,
}

impl Default for RequestLimits {
    fn default() -> Self {
        Self {
            max_concurrent_requests: 512,
            max_concurrent_runner_requests: 256,
            max_body_bytes_in_flight: 64 * 1024 * 1024,
            body_timeout: Duration::from_secs(30),
            max_concurrent_requests_per_caller: 128,
            max_listen_streams_per_caller: 8,
        }
    }
}
