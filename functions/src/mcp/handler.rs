//! `WcMcp`: the rmcp server handler. It reads the caller and the audit slot from the HTTP
//! request parts rmcp hands over, and goes through the kernel for every tool call.

use std::sync::Arc;
use std::time::Instant;

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CancelTaskParams, GetTaskParams,
    GetTaskResult, Implementation, ListToolsResult, MetaObject, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, RequestParamsMeta,
    ServerCapabilities, ServerConfig, SubscriptionFilter, Tool, UpdateTaskParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Map, Value};

use super::listing::{Era, Listings, conflicts_with_wrapper};
use crate::audit::{AuditNote, AuditSlot};
use crate::auth::Principal;
use crate::kernel::context::{ClientWindow, Progress};
use crate::kernel::ports::CallAudit;
use crate::kernel::telemetry::ModelErgonomics;
use crate::kernel::{ToolCall, wrapper};
use crate::{AppState, VERSION};

/// How long a client may treat a tool listing as fresh: it changes only with a deploy.
const LISTING_TTL_MS: u64 = 300_000;

/// Protocol versions served.
const SUPPORTED: [ProtocolVersion; 3] = [
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

/// The MCP handler; one is made per request by the stateless service, sharing everything.
#[derive(Clone)]
pub struct WcMcp {
    state: AppState,
    listings: Arc<Listings>,
}

impl WcMcp {
    /// A handler over `state`.
    pub fn new(state: AppState, listings: Arc<Listings>) -> Self {
        Self { state, listings }
    }

    /// The application state it serves.
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// A `subscriptions/listen` stream of `sub` whose tasks are read with `read`.
    pub(super) async fn listen_with(
        &self,
        sub: &SubscriptionContext,
        read: super::tasks::Read,
    ) -> Result<(), McpError> {
        let ctx = sub.request_context();
        let who = principal(ctx)?;
        let tasks =
            parts(ctx).and_then(|p| p.extensions.get::<super::listen::ListenTasks>().cloned());
        super::listen::watch(&self.state, &who, tasks, sub, read).await
    }
}

fn parts(ctx: &RequestContext<RoleServer>) -> Option<&http::request::Parts> {
    ctx.extensions.get::<http::request::Parts>()
}

pub(super) fn principal(ctx: &RequestContext<RoleServer>) -> Result<Arc<Principal>, McpError> {
    parts(ctx)
        .and_then(|p| p.extensions.get::<Arc<Principal>>().cloned())
        .ok_or_else(|| McpError::internal_error("request reached MCP without a principal", None))
}

pub(super) fn audit_slot(ctx: &RequestContext<RoleServer>) -> Option<AuditSlot> {
    parts(ctx).and_then(|p| p.extensions.get::<AuditSlot>().cloned())
}

pub(super) fn is_modern(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.meta
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

fn server_implementation() -> Implementation {
    let mut imp = Implementation::new("wc", VERSION);
    imp.title = Some("wc".into());
    imp
}

pub(super) fn server_meta() -> MetaObject {
    let mut map = Map::new();
    map.insert(
        "io.modelcontextprotocol/serverInfo".to_owned(),
        serde_json::to_value(server_implementation()).expect("implementation serializes"),
    );
    MetaObject(map)
}

/// The host window, hashed with the principal. Read from the request `_meta`; the raw value
/// goes no further than this function.
fn window(
    ctx: &RequestContext<RoleServer>,
    params_meta: Option<&Map<String, Value>>,
    who: &Principal,
) -> Option<ClientWindow> {
    let raw = ctx
        .meta
        .get("openai/session")
        .or_else(|| params_meta.and_then(|m| m.get("openai/session")))?;
    let text = match raw {
        Value::String(s) if !s.is_empty() && s.len() <= 1024 => s.clone(),
        Value::Object(_) | Value::Array(_) => {
            let s = raw.to_string();
            if s.len() > 1024 {
                return None;
            }
            s
        }
        _ => return None,
    };
    Some(ClientWindow::derive(who, &text))
}

impl ServerHandler for WcMcp {
    fn get_info(&self) -> ServerConfig {
        // Tasks (SEP-2663): advertised always; a call becomes one only when its request
        // declares the extension (rmcp refuses `tasks/*` otherwise, with -32021).
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tasks()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(server_implementation())
            .with_protocol_version(ProtocolVersion::V_2026_07_28)
            .with_instructions(format!(
                "wc runs coding work on build hosts. Start with list_projects, then use the runtime tools; \
                 every result is {{success, output, error}}. A run (run_*, jobs, validation) succeeds \
                 on exit 0 or an accepted_exit_codes code; otherwise error.kind says how it ended, and \
                 output still holds its exit code, stdout and stderr. {}",
                crate::kernel::wrapper::INSTRUCTIONS
            ))
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let who = principal(&ctx)?;
        super::tasks::shown(&super::tasks::observe(&self.state, &who, &request.task_id).await?)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let who = principal(&ctx)?;
        super::tasks::update(
            &self.state,
            &who,
            &request.task_id,
            &request.input_responses,
        )
        .await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let who = principal(&ctx)?;
        super::tasks::cancel(&self.state, &who, &request.task_id).await
    }

    /// None of the core categories is served; task ids, which rmcp's filter cannot hold,
    /// are read and acknowledged around it ([`super::listen`]).
    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::default())
    }

    async fn listen(&self, sub: SubscriptionContext) -> Result<(), McpError> {
        self.listen_with(&sub, super::tasks::read).await
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Owned(SUPPORTED.to_vec())
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.listings.get(name)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let who = principal(&ctx)?;
        let era = if is_modern(&ctx) {
            Era::Stateless
        } else {
            Era::Legacy
        };
        let tools = self.listings.for_scopes(who.scopes, era);
        let mut result = ListToolsResult::with_all_items((*tools).clone());
        if is_modern(&ctx) {
            // The listing depends only on the caller's scopes: cacheable, but per caller.
            result = result
                .with_ttl_ms(LISTING_TTL_MS)
                .with_cache_scope(CacheScope::Private);
            result.meta = Some(server_meta());
        }
        Ok(result)
    }

    async fn call_tool(
        &self,
        params: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.call_kernel_tool(params, ctx).await
    }
}

impl WcMcp {
    /// A `tools/call` through the kernel: the path every real tool takes.
    pub(super) async fn call_kernel_tool(
        &self,
        params: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let started = Instant::now();
        let who = principal(&ctx)?;
        let slot = audit_slot(&ctx);
        let Some(spec) = self.state.runtime.get(&params.name).cloned() else {
            // The transport logs error answers: the caller's name goes out bounded and escaped.
            return Err(McpError::invalid_params(
                format!("unknown tool: {}", crate::telemetry::loggable(&params.name)),
                None,
            ));
        };
        let reject = |message: String| {
            if let Some(slot) = &slot {
                slot.note(AuditNote {
                    action_name: spec.meta.name.to_owned(),
                    success: false,
                    model_ergonomics: Some(ModelErgonomics::surface_rejection(
                        &spec,
                        "invalid_params",
                        started.elapsed(),
                    )),
                    extra: None,
                });
            }
            McpError::invalid_params(message, None)
        };
        if let Some(field) = conflicts_with_wrapper(&spec) {
            return Err(reject(format!(
                "{} declares the wrapper field {field}; it cannot be called",
                spec.meta.name
            )));
        }
        let progress = PeerProgress::of(&params, &ctx).map(|p| Arc::new(p) as Arc<dyn Progress>);
        let window = window(&ctx, params.meta.as_ref().map(|m| &m.0.0), &who);
        let mut args = params.arguments.unwrap_or_default();
        let mut wrapper = wrapper::split(&mut args).map_err(|e| {
            reject(format!(
                "invalid wrapper metadata: {}",
                crate::telemetry::loggable(&e.to_string())
            ))
        })?;
        // The context sidecar is part of the stateless contract only: an older revision's
        // request is stripped of it and answered without materials.
        if !is_modern(&ctx) {
            wrapper.context_materials.clear();
        }
        let task =
            (spec.task.is_some() && declares_tasks(&ctx)).then(|| super::tasks::offer(&self.state));
        let call = ToolCall {
            spec: spec.clone(),
            arguments: Value::Object(args),
            wrapper,
            principal: who.clone(),
            window,
            audit: slot.map(|s| Arc::new(s) as Arc<dyn CallAudit>),
            task,
            progress,
        };
        let invoked = self.state.runtime.invoke(&self.state.deps, call).await;
        if let Some(row) = &invoked.task {
            // Written with its work before the kernel answered: what the client gets is the row.
            return Ok(CallToolResponse::Task(super::tasks::created(row)));
        }
        Ok(CallToolResponse::Complete(super::tasks::call_tool_result(
            invoked.result,
            invoked.json,
            is_modern(&ctx),
        )))
    }
}

/// The request's progress token: rmcp hands the request `_meta` over in the context.
pub(super) fn progress_token(
    params: &CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
) -> Option<ProgressToken> {
    ctx.meta
        .get_progress_token()
        .or_else(|| params.progress_token())
}

/// A call's progress as `notifications/progress`, and its work's output as
/// `notifications/message` lines (logger `stdout` or `stderr`, level `info`), on its request's
/// own response: once one is sent, rmcp answers that request with an event stream (the
/// notifications, then the result) instead of one JSON object. The stream belongs to the
/// request; nothing outlives it. Output goes only to a 2026-07-28 request whose `_meta` log
/// level takes `info`: a stateless server keeps no level set by an earlier `logging/setLevel`.
struct PeerProgress {
    peer: rmcp::Peer<RoleServer>,
    token: Option<ProgressToken>,
    output: bool,
}

impl PeerProgress {
    fn of(params: &CallToolRequestParams, ctx: &RequestContext<RoleServer>) -> Option<Self> {
        #[allow(deprecated, reason = "log levels are still part of the 2026-07-28 contract")]
        let output = is_modern(ctx)
            && ctx.meta.log_level().is_some_and(|level| {
                use rmcp::model::LoggingLevel::{Debug, Info};
                matches!(level, Debug | Info)
            });
        let token = progress_token(params, ctx);
        (token.is_some() || output).then(|| PeerProgress {
            peer: ctx.peer.clone(),
            token,
            output,
        })
    }
}

impl Progress for PeerProgress {
    fn report(
        &self,
        progress: f64,
        total: Option<f64>,
        message: String,
    ) -> crate::kernel::ports::PortFuture<'_, ()> {
        Box::pin(async move {
            let Some(token) = &self.token else { return };
            let mut param =
                ProgressNotificationParam::new(token.clone(), progress).with_message(message);
            param.total = total;
            if let Err(e) = self.peer.notify_progress(param).await {
                tracing::debug!(error = %e, "a progress notification was not sent");
            }
        })
    }

    fn wants_output(&self) -> bool {
        self.output
    }

    fn output(
        &self,
        stream: &'static str,
        text: String,
    ) -> crate::kernel::ports::PortFuture<'_, ()> {
        #[allow(deprecated, reason = "log lines are still part of the 2026-07-28 contract")]
        Box::pin(async move {
            use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
            let mut line =
                LoggingMessageNotificationParam::new(LoggingLevel::Info, Value::String(text));
            line.logger = Some(stream.to_owned());
            if let Err(e) = self.peer.notify_logging_message(line).await {
                tracing::debug!(error = %e, "an output line was not sent");
            }
        })
    }
}

/// Whether the request declares the tasks extension in its client capabilities (a 2026-07-28
/// request; older revisions keep the blocking behaviour).
pub(super) fn declares_tasks(ctx: &RequestContext<RoleServer>) -> bool {
    is_modern(ctx)
        && ctx
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks())
}
