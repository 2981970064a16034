use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Extension};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router, middleware};
use serde_json::json;
use tower_http::catch_panic::CatchPanicLayer;
use wc_store::Pool;
use wc_store::outbox::{QueuePublisher, SqsPublisher, SqsSettings};

use crate::AppState;
use crate::auth::{Principal, ProjectGrants, principal_or_anonymous, require_principal};
use crate::config::ServerConfig;
use crate::deps::Deps;
use crate::http::limits::{
    Admission, limit_caller, limit_requests, read_body, refuse_declared_oversize,
};
use crate::http::{ApiError, panic_response, request_context};
use crate::kernel::ports::Ports;
use crate::kernel::spec::ToolSpec;
use crate::kernel::{KernelConfig, Registry, ToolRuntime};
use crate::{audit, board, health, materials, mcp, rest, runner_api, tools, workflow};

impl AppState {
    /// State over `pool` with `config`: every tool of the build (and the conformance fixtures
    /// when configured), with the Workflow Session model, the board and the audit layer as
    /// the kernel's ports.
    pub fn new(pool: Pool, config: ServerConfig) -> Self {
        let mut specs = tools::all();
        specs.extend(mcp::fixtures::tools(&config));
        let admission = Arc::new(Admission::new(
            config.max_body_bytes,
            config.requests.clone(),
        ));
        let kernel = KernelConfig {
            dispatch_deadline: config.dispatch_deadline,
        };
        let runtime = Arc::new(runtime(kernel, specs));
        let deps = Deps::new(pool, config, work_ends(&runtime));
        Self {
            deps,
            runtime,
            openapi: Arc::default(),
            admission,
        }
    }

    /// The same state serving the tools `specs` instead.
    pub fn with_tools(mut self, specs: Vec<ToolSpec>) -> Self {
        self.runtime = Arc::new(runtime(self.runtime.config().clone(), specs));
        self.deps.work_ends = work_ends(&self.runtime);
        self
    }
}

/// The kernel over `specs` with the domain's ports.
fn runtime(config: KernelConfig, specs: Vec<ToolSpec>) -> ToolRuntime {
    let ports = Ports {
        authority: Arc::new(workflow::authority::Authority),
        recorder: Arc::new(workflow::recording::LedgerRecorder),
        after_call: vec![
            Arc::new(board::AckAttention),
            Arc::new(materials::ContextSidecar),
        ],
    };
    ToolRuntime::new(Arc::new(Registry::new(specs)), ports, config)
}

/// How work ends beside it: its evidence, and the end of the task of a call of `runtime`'s
/// tools that waits for it.
fn work_ends(runtime: &ToolRuntime) -> Arc<dyn wc_store::work::WorkEnding> {
    Arc::new(mcp::tasks::WorkEnds::new(runtime.call_ends()))
}

/// The SQS publisher for `config`, built once per process: `None` unless some runner's work
/// goes through SQS (`WC_RUNNER_SQS_QUEUES`). Uses the default AWS credential chain.
pub fn queue_publisher(config: &ServerConfig) -> Option<Arc<dyn QueuePublisher>> {
    if config.runner_sqs_queues.is_empty() {
        return None;
    }
    let settings = SqsSettings {
        region: config.sqs_region.clone(),
        endpoint_url: config.sqs_endpoint_url.clone(),
    };
    Some(Arc::new(SqsPublisher::from_env(&settings)))
}

/// Which route groups a router serves. `wc-local` and `wc-lambda` serve all of them; the
/// per-surface Lambda functions serve one each (the routes of a group are the same whoever
/// serves them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Surfaces {
    /// `/mcp`.
    pub mcp: bool,
    /// `/api/actions/*`, `/api/tools/*`, `/openapi.json`, `/api/whoami`, `/healthz`.
    pub rest: bool,
    /// `/api/audit/*`.
    pub audit: bool,
    /// `/runner/v1/*`.
    pub runner: bool,
}

impl Surfaces {
    /// Every route group.
    pub const ALL: Surfaces = Surfaces {
        mcp: true,
        rest: true,
        audit: true,
        runner: true,
    };
    /// Only MCP.
    pub const MCP: Surfaces = Surfaces {
        mcp: true,
        ..Surfaces::NONE
    };
    /// Only REST / GPT Actions.
    pub const REST: Surfaces = Surfaces {
        rest: true,
        ..Surfaces::NONE
    };
    /// Only the operator audit routes.
    pub const AUDIT: Surfaces = Surfaces {
        audit: true,
        ..Surfaces::NONE
    };
    /// Only the runner API.
    pub const RUNNER: Surfaces = Surfaces {
        runner: true,
        ..Surfaces::NONE
    };
    const NONE: Surfaces = Surfaces {
        mcp: false,
        rest: false,
        audit: false,
        runner: false,
    };
}

/// The router every entry point serves.
pub fn app(state: AppState) -> Router {
    app_for(state, Surfaces::ALL)
}

/// The router of the route groups in `surfaces`, with the same layers as [`app`]. A path of
/// a group not served here answers the same JSON 404 as an unknown path.
pub fn app_for(state: AppState, surfaces: Surfaces) -> Router {
    // Route layers added later wrap those added earlier. Every route group reads its body
    // (`read_body`) only after authentication: a caller without a valid token is answered
    // before one body byte is read.
    let anyone = || middleware::from_fn_with_state(state.clone(), principal_or_anonymous);
    let body = || middleware::from_fn_with_state(state.clone(), read_body);
    // Each caller's share of this process, taken before its body is read.
    let share = || middleware::from_fn_with_state(state.clone(), limit_caller);
    let authenticated =
        |routes: Router<AppState>| {
            routes.route_layer(body()).route_layer(share()).route_layer(
                middleware::from_fn_with_state(state.clone(), require_principal),
            )
        };
    let mut router = Router::new();
    if surfaces.rest {
        // Authentication, then the body, then auditing.
        let rest_tools = rest::tool_routes()
            .route_layer(middleware::from_fn_with_state(
                state.clone(),
                audit::audit_rest,
            ))
            .route_layer(body())
            .route_layer(share())
            .route_layer(anyone());
        router = router
            .route("/healthz", get(health::healthz))
            .merge(rest::public_routes())
            .merge(rest_tools)
            .merge(authenticated(
                Router::new().route("/api/whoami", get(whoami)),
            ));
    }
    if surfaces.mcp && state.deps.auth.oauth().is_some() {
        // RFC 9728 metadata, public: how an MCP client finds the authorization server.
        router = router
            .route(
                "/.well-known/oauth-protected-resource",
                get(crate::auth::oauth::metadata_root),
            )
            .route(
                "/.well-known/oauth-protected-resource/{*path}",
                get(crate::auth::oauth::metadata_at),
            );
    }
    if surfaces.mcp {
        // Authentication, then the body, then auditing, then the JSON-RPC shape check, so a
        // rejected request still leaves its audit row, then the task ids of a listen.
        let mcp = Router::new()
            .route("/mcp", mcp::service(state.clone()))
            .route_layer(middleware::from_fn_with_state(
                state.clone(),
                mcp::listen::prepare,
            ))
            .route_layer(middleware::from_fn(mcp::guard::jsonrpc_guard))
            .route_layer(middleware::from_fn_with_state(
                state.clone(),
                audit::audit_mcp,
            ))
            .route_layer(body())
            .route_layer(share())
            .route_layer(anyone());
        router = router.merge(mcp);
    }
    if surfaces.audit {
        router = router.merge(authenticated(audit::routes::router()));
    }
    if surfaces.runner {
        router = router.merge(runner_api::router(state.clone()));
    }
    let max_body = state.deps.config.max_body_bytes;
    router
        .fallback(not_found)
        // Innermost first: a declared body over the limit is refused unread; panics are
        // caught; the concurrent-request limit admits the request (or answers 503 at once);
        // the request context outermost stamps every response and log line. The extractor
        // limit stays as a backstop for any handler that reads a body itself.
        .layer(middleware::from_fn_with_state(
            state.clone(),
            refuse_declared_oversize,
        ))
        .layer(DefaultBodyLimit::max(max_body))
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            limit_requests,
        ))
        .layer(middleware::from_fn(request_context))
        .with_state(state)
}

/// Who the caller is, as far as wc is concerned. Never includes secret material.
async fn whoami(Extension(principal): Extension<Principal>) -> impl IntoResponse {
    let projects = match &principal.projects {
        ProjectGrants::All => json!("*"),
        ProjectGrants::Only(set) => json!(set),
    };
    let mut body = json!({
        "principal_kind": principal.kind.as_str(),
        "credential_id": principal.credential_id,
        "scopes": principal.scopes.to_strings(),
        "projects": projects,
    });
    if let Some(identity) = &principal.oauth {
        body["oauth_subject"] = json!(identity.subject);
        body["oauth_client_id"] = json!(identity.client_id);
    }
    Json(body)
}

async fn not_found() -> ApiError {
    ApiError::client(StatusCode::NOT_FOUND, "not_found", "no such route")
}
