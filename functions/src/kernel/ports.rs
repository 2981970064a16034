//! The kernel's ports: what the invocation path asks of the domain, registered when the runtime
//! is built ([`Ports`]). The kernel orders the calls (authorize → begin recording → dispatch →
//! finish recording → after-call projections → audit note) and knows nothing of how a port
//! answers; the Workflow Session model implements the first three, the message board the
//! ACK attention projection, the audit layer the note.

use std::sync::Arc;

use serde_json::Value;
use uuid::Uuid;
use wc_domain::{ProjectId, SessionId};
use wc_store::sessions::{NewEvent, SessionRow};

use super::Invoked;
use super::spec::ToolSpec;
use super::telemetry::ExecutionState;
use super::wrapper::WrapperMeta;
use crate::auth::Principal;
use crate::deps::Deps;
use crate::kernel::context::ToolContext;
use crate::result::{ErrorKind, ToolError, ToolResult};

pub use super::future::PortFuture;

/// What the kernel knows of a call when it asks a port: the tool, the caller, the wrapper, and
/// the session and project its arguments name, as domain types (parsed once, by the kernel).
#[derive(Debug)]
pub struct CallFacts<'a> {
    /// The tool.
    pub spec: &'a ToolSpec,
    /// The caller.
    pub principal: &'a Principal,
    /// Wrapper metadata (`recording_session_id`, ACKs).
    pub wrapper: &'a WrapperMeta,
    /// The `session_id` argument.
    pub session_id: Option<SessionId>,
    /// The `project` argument.
    pub project: Option<ProjectId>,
    /// Id shared by everything this one invocation records.
    pub invocation_id: Uuid,
}

impl<'a> CallFacts<'a> {
    /// The facts of a call the ports read, with its `session_id` and `project` arguments as
    /// domain types. The arguments were validated against the tool's schema, which those types
    /// generate, so a refusal here means a tool's schema and its type disagree.
    pub(super) fn of(
        spec: &'a ToolSpec,
        principal: &'a Principal,
        wrapper: &'a WrapperMeta,
        args: &Value,
    ) -> Result<CallFacts<'a>, ToolError> {
        Ok(CallFacts {
            spec,
            principal,
            wrapper,
            session_id: typed_arg(args, "session_id")?,
            project: typed_arg(args, "project")?,
            invocation_id: Uuid::now_v7(),
        })
    }
}

/// Argument `name` as its domain type, when the call gives it.
fn typed_arg<T: std::str::FromStr<Err = wc_domain::ParseError>>(
    args: &Value,
    name: &str,
) -> Result<Option<T>, ToolError> {
    match args.get(name).and_then(Value::as_str) {
        None => Ok(None),
        Some(raw) => raw.parse().map(Some).map_err(|e: wc_domain::ParseError| {
            ToolError::new(
                ErrorKind::InvalidArguments,
                format!("argument /{name}: {e}"),
            )
            .with("pointer", format!("/{name}"))
            .with("rule", "pattern")
        }),
    }
}

/// The sessions a call names, loaded and authorized for its caller.
#[derive(Debug, Clone, Default)]
pub struct Sessions {
    /// The business session named by `session_id`.
    pub business: Option<Arc<SessionRow>>,
    /// The recording session named by `recording_session_id`: provenance only, never a
    /// business target, guard or source of execution defaults.
    pub recorder: Option<Arc<SessionRow>>,
}

/// How a dispatch ended, as a recording sees it.
#[derive(Debug)]
pub struct Outcome<'a> {
    /// The shaped result.
    pub result: &'a ToolResult,
    /// Whether the dispatch completed or hit the hard deadline.
    pub execution: ExecutionState,
    /// Wall time of the call so far.
    pub duration_ms: u64,
}

/// Loads and authorizes the sessions a call names; every refusal (unknown, foreign, inactive,
/// wrong project, `read_only` mode) happens here, before any effect.
pub trait SessionAuthority: Send + Sync {
    /// The call's sessions, or the typed refusal.
    fn authorize<'a>(
        &'a self,
        deps: &'a Deps,
        call: &'a CallFacts<'a>,
    ) -> PortFuture<'a, Result<Sessions, crate::result::ToolError>>;
}

/// Writes a call's evidence around its dispatch.
pub trait Recorder: Send + Sync {
    /// Before dispatch: commits whatever must be durable before the effect; a refusal here
    /// stops the call. `args` are the validated arguments.
    fn begin<'a>(
        &'a self,
        deps: &'a Deps,
        call: &'a CallFacts<'a>,
        sessions: &'a Sessions,
        args: &'a Value,
    ) -> PortFuture<'a, Result<Box<dyn Recording>, crate::result::ToolError>>;

    /// The `finished` events of a recording [`Recording::suspend`]ed into `suspended`, per
    /// session, for a call of `spec` that ended with `outcome`: written by whoever ends the
    /// call's task, with its end.
    fn finished_events(
        &self,
        suspended: &Value,
        spec: &ToolSpec,
        outcome: Outcome<'_>,
    ) -> Vec<(SessionId, Vec<NewEvent>)>;
}

/// One call's recording, finished once after dispatch.
pub trait Recording: Send + Sync {
    /// Completes the call's evidence. Never changes the result: a failure is logged.
    fn finish<'a>(
        self: Box<Self>,
        deps: &'a Deps,
        call: &'a CallFacts<'a>,
        outcome: Outcome<'a>,
    ) -> PortFuture<'a, ()>;

    /// The recording as data, for a call that becomes a task: its `started` events are
    /// committed; its `finished` events come from [`Recorder::finished_events`].
    fn suspend(&self, call: &CallFacts<'_>) -> Value;
}

/// A projection onto a finished call's result (the recorder's ACK attention). Runs after the
/// recording is finished; a failure projects nothing and is logged.
pub trait AfterCall: Send + Sync {
    /// Adds what the projection shows to `result`; `ctx` is the call's context, as the tool
    /// had it.
    fn project<'a>(
        &'a self,
        ctx: &'a ToolContext,
        call: &'a CallFacts<'a>,
        sessions: &'a Sessions,
        result: &'a mut ToolResult,
    ) -> PortFuture<'a, ()>;
}

/// Where the kernel notes each finished invocation for the request's audit row; handed in with
/// the call by the surface that serves the request.
pub trait CallAudit: Send + Sync {
    /// Notes `invoked`, the result of tool `tool`.
    fn note(&self, tool: &str, invoked: &Invoked);
}

/// The ports a runtime is built with.
#[derive(Clone)]
pub struct Ports {
    /// Session authority.
    pub authority: Arc<dyn SessionAuthority>,
    /// The recorder.
    pub recorder: Arc<dyn Recorder>,
    /// After-call projections, in order.
    pub after_call: Vec<Arc<dyn AfterCall>>,
}
