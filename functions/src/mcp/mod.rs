//! The MCP surface at `POST /mcp`: rmcp's Streamable HTTP service in stateless JSON mode over
//! the tool kernel.
//!
//! Protocol mechanics (versions 2025-06-18, 2025-11-25 and 2026-07-28, per-request `_meta`,
//! `Mcp-Method`/`Mcp-Name` header checks, `server/discover`, Host and Origin validation) are
//! rmcp's; this module supplies the handler ([`handler::WcMcp`]), the tool listing with the
//! wrapper metadata projected into every input schema ([`listing`]), and the service
//! configuration. A caller-supplied `Mcp-Session-Id` never creates or selects any state: no
//! session manager is configured.
//!
//! In the test-only `--conformance-fixtures` mode, [`fixtures`] decorates the handler with
//! what the official MCP conformance suite calls by name (`tests/suites/30-mcp-conformance.sh`).

pub mod fixtures;
pub mod guard;
mod handler;
pub mod listen;
pub mod listing;
pub mod tasks;

use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use axum::routing::MethodRouter;
use rmcp::ServerHandler;

use crate::AppState;
pub use handler::WcMcp;

/// The service serving `/mcp` over `state`: rmcp's, around wc's handler (decorated with the
/// conformance fixtures in that mode). The tool listings are built lazily, once per scope set.
pub fn service<S: Clone + Send + Sync + 'static>(state: AppState) -> MethodRouter<S> {
    let cfg = &state.deps.config;
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_allowed_hosts(cfg.allowed_hosts.clone())
        .with_allowed_origins(cfg.mcp_allowed_origins())
        .enforce_origin_validation()
        .with_max_request_body_bytes(cfg.max_body_bytes);
    let listings = Arc::new(listing::Listings::new(state.runtime.registry().clone()));
    let handler = WcMcp::new(state, listings);
    fixtures::serve(&handler, &config).unwrap_or_else(|| serve(handler, config))
}

/// rmcp's stateless service around `handler`: no session manager, so a caller-supplied
/// `Mcp-Session-Id` never creates or selects any state.
fn serve<H, S>(handler: H, config: StreamableHttpServerConfig) -> MethodRouter<S>
where
    H: ServerHandler + Clone,
    S: Clone + Send + Sync + 'static,
{
    axum::routing::any_service(StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    ))
}
