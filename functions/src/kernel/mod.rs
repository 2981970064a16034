//! The tool kernel (`ToolRuntime`): one registry of tool specs and one invocation path that
//! every surface (MCP, REST) goes through, so a tool behaves the same whichever door it came in.
//!
//! An invocation: look up the spec → check scopes → validate arguments against the input
//! schema (`invalid_arguments` names the field and rule) → the session authority port
//! (authorizes the business and recording sessions) → the recorder port (durable intent) →
//! dispatch under the hard deadline → the recording finished → after-call projections →
//! shape `{success, output, error}` → telemetry → the audit note. What each port does is
//! registered when the runtime is built ([`ports`]); how a task's call ends is [`ending`].

pub mod args;
pub mod context;
mod ending;
pub mod future;
pub mod ports;
pub mod spec;
pub mod task;
pub mod telemetry;
pub mod wrapper;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::auth::{Principal, ScopeSet};
use crate::deps::Deps;
use crate::result::{ErrorKind, ToolError, ToolResult};
use context::{ClientWindow, Clock, SystemClock, ToolContext};
pub use ending::{CallEnds, TaskEnd};
use ports::{CallAudit, CallFacts, Outcome, Ports};
use spec::ToolSpec;
use telemetry::{ExecutionState, ModelErgonomics};
use wrapper::WrapperMeta;

/// Kernel settings.
#[derive(Debug, Clone)]
pub struct KernelConfig {
    /// Hard deadline of one tool dispatch; under API Gateway's 29 s.
    pub dispatch_deadline: Duration,
}

impl Default for KernelConfig {
    fn default() -> Self {
        Self {
            dispatch_deadline: Duration::from_secs(25),
        }
    }
}

/// One tool call as a surface hands it to the kernel.
#[derive(Clone)]
pub struct ToolCall {
    /// The tool, as the surface looked it up ([`ToolRuntime::get`]): once per call.
    pub spec: Arc<ToolSpec>,
    /// Concrete arguments (wrapper fields already removed); `null` means none.
    pub arguments: Value,
    /// Wrapper metadata split off by the surface.
    pub wrapper: WrapperMeta,
    /// The caller.
    pub principal: Arc<Principal>,
    /// The host window, if any.
    pub window: Option<ClientWindow>,
    /// Where the request's audit row learns how the call went, when the request is audited.
    pub audit: Option<Arc<dyn CallAudit>>,
    /// The task the call may become, when the surface can answer with one.
    pub task: Option<Arc<task::TaskOffer>>,
    /// Where the call reports its progress, when its caller asked.
    pub progress: Option<Arc<dyn context::Progress>>,
}

impl std::fmt::Debug for ToolCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCall")
            .field("name", &self.spec.meta.name)
            .field("wrapper", &self.wrapper)
            .field("audited", &self.audit.is_some())
            .finish_non_exhaustive()
    }
}

/// A finished invocation.
#[derive(Debug, Clone)]
pub struct Invoked {
    /// The model-facing result.
    pub result: ToolResult,
    /// The result serialized once, as the surfaces send it (and as telemetry counts it).
    pub json: String,
    /// Its telemetry record.
    pub telemetry: ModelErgonomics,
    /// The task the call became: its result is the task's to give, later.
    pub task: Option<wc_store::tasks::TaskRow>,
}

/// Every registered tool, by name: what listings, documents and the invocation path read.
pub struct Registry {
    specs: Vec<Arc<ToolSpec>>,
    by_name: HashMap<&'static str, usize>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("tools", &self.specs.len())
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// A registry of `specs`, listed in name order. Panics on a duplicate name: a programming
    /// error caught by tests.
    pub fn new(mut specs: Vec<ToolSpec>) -> Registry {
        specs.sort_by(|a, b| a.meta.name.cmp(b.meta.name));
        let mut by_name = HashMap::new();
        for (i, s) in specs.iter().enumerate() {
            assert!(
                by_name.insert(s.meta.name, i).is_none(),
                "duplicate tool {}",
                s.meta.name
            );
        }
        Registry {
            specs: specs.into_iter().map(Arc::new).collect(),
            by_name,
        }
    }

    /// Every registered tool, in name order.
    pub fn specs(&self) -> &[Arc<ToolSpec>] {
        &self.specs
    }

    /// The tools a holder of `scopes` may see and call, in name order.
    pub fn visible(&self, scopes: ScopeSet) -> impl Iterator<Item = &Arc<ToolSpec>> {
        self.specs
            .iter()
            .filter(move |s| s.meta.scopes.iter().all(|sc| scopes.contains(*sc)))
    }

    /// The spec named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<ToolSpec>> {
        self.by_name.get(name).map(|&i| &self.specs[i])
    }
}

/// The registry, its ports and the invocation path.
pub struct ToolRuntime {
    registry: Arc<Registry>,
    ports: Ports,
    config: KernelConfig,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for ToolRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRuntime")
            .field("registry", &self.registry)
            .finish_non_exhaustive()
    }
}

impl ToolRuntime {
    /// A runtime over `registry`, asking `ports`.
    pub fn new(registry: Arc<Registry>, ports: Ports, config: KernelConfig) -> ToolRuntime {
        ToolRuntime {
            registry,
            ports,
            config,
            clock: Arc::new(SystemClock),
        }
    }

    /// The registered tools.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The spec named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<ToolSpec>> {
        self.registry.get(name)
    }

    /// How the calls of its tools that became tasks end.
    pub fn call_ends(&self) -> CallEnds {
        CallEnds {
            registry: self.registry.clone(),
            recorder: self.ports.recorder.clone(),
        }
    }

    /// Kernel settings.
    pub fn config(&self) -> &KernelConfig {
        &self.config
    }

    /// Runs one call through the whole path with `deps`. Every failure is a shaped result; the
    /// call's audit sink, if any, is told how it went, once.
    pub async fn invoke(&self, deps: &Deps, call: ToolCall) -> Invoked {
        let spec = call.spec.clone();
        let started = Instant::now();
        let audit = call.audit.clone();
        let offer = call.task.clone();
        let (result, execution) = self.run(deps, &spec, call, started).await;
        let task = offer.and_then(|o| o.taken().cloned());
        let json = serde_json::to_string(&result).expect("tool results serialize");
        let bytes = match execution {
            ExecutionState::Rejected => None,
            _ => Some(result.model_facing_bytes(&json) as u64),
        };
        let kind = result.error.as_ref().map(|e| e.kind);
        let telemetry = ModelErgonomics {
            schema_version: telemetry::SCHEMA_VERSION,
            tool_name: spec.meta.name,
            tool_category: spec.meta.category.as_str(),
            success: result.success,
            duration_ms: started.elapsed().as_millis() as u64,
            serialized_result_bytes: bytes,
            error_kind: match execution {
                ExecutionState::TimedOut => Some("dispatch_hard_timeout"),
                _ => kind.map(ErrorKind::as_str),
            },
            failure_kind: kind.map_or("none", ErrorKind::failure_kind),
            recovery_kind: kind.map_or("none", ErrorKind::recovery_kind),
            execution_state: execution,
            edit_surface: spec.edit_surface.map(|s| s.as_str()),
            edit_outcome: spec
                .edit_surface
                .map(|_| telemetry::edit_outcome(execution, &result)),
            edit_conflict_kind: kind.map(ErrorKind::as_str).filter(|k| {
                spec.edit_surface.is_some() && telemetry::EDIT_CONFLICT_KINDS.contains(k)
            }),
        };
        let invoked = Invoked {
            result,
            json,
            telemetry,
            task,
        };
        if let Some(audit) = &audit {
            audit.note(spec.meta.name, &invoked);
        }
        invoked
    }

    /// The call's result and how its dispatch ended.
    async fn run(
        &self,
        deps: &Deps,
        spec: &Arc<ToolSpec>,
        call: ToolCall,
        started: Instant,
    ) -> (ToolResult, ExecutionState) {
        let rejected = |e: ToolError| (ToolResult::err(e), ExecutionState::Rejected);
        if let Some(missing) = spec
            .meta
            .scopes
            .iter()
            .find(|s| !call.principal.scopes.contains(**s))
        {
            let err = ToolError::new(
                ErrorKind::InsufficientScope,
                format!("{} needs the {missing} scope", spec.meta.name),
            )
            .with("scope", missing.as_str());
            return rejected(err);
        }
        let mut args = match call.arguments {
            Value::Null => Value::Object(Default::default()),
            other => other,
        };
        args::normalize_integers(&mut args);
        if let Err(e) = args::validate(spec.validator(), &spec.input_schema_value, &args) {
            return rejected(e);
        }
        let facts = match CallFacts::of(spec, &call.principal, &call.wrapper, &args) {
            Ok(f) => f,
            Err(e) => return rejected(e),
        };
        let sessions = match self.ports.authority.authorize(deps, &facts).await {
            Ok(s) => s,
            Err(e) => return rejected(e),
        };
        let recording = match self
            .ports
            .recorder
            .begin(deps, &facts, &sessions, &args)
            .await
        {
            Ok(r) => r,
            Err(e) => return rejected(e),
        };
        // A call that may become a task keeps its recording as data for whoever ends it.
        let offer = match (&call.task, spec.task) {
            (Some(offer), Some(support)) => {
                offer.suspend(recording.suspend(&facts));
                Some((offer.clone(), support.when))
            }
            _ => None,
        };
        let ctx = ToolContext {
            tool: spec.meta.name,
            task: offer.clone(),
            progress: call.progress.clone(),
            deps: deps.clone(),
            registry: self.registry.clone(),
            principal: call.principal.clone(),
            window: call.window.clone(),
            clock: self.clock.clone(),
            dispatch_deadline: self.config.dispatch_deadline,
            invocation_id: facts.invocation_id,
            business: sessions.business.clone(),
            recorder: sessions.recorder.clone(),
        };
        let deadline = ctx.dispatch_deadline;
        let after_ctx = ctx.clone();
        let (mut result, execution) = match tokio::time::timeout(
            deadline,
            (spec.handler)(ctx, args),
        )
        .await
        {
            Ok(Ok(output)) => (ToolResult::ok(output), ExecutionState::Completed),
            Ok(Err(e)) => (ToolResult::err(e), ExecutionState::Completed),
            Err(_) => {
                let err = ToolError::new(
                    ErrorKind::DispatchTimeout,
                    format!(
                        "{} did not finish within {} ms; whether it took effect is unknown, so check before retrying",
                        spec.meta.name,
                        deadline.as_millis()
                    ),
                );
                (ToolResult::err(err), ExecutionState::TimedOut)
            }
        };
        if offer.is_some_and(|(o, _)| o.is_taken()) {
            // The call is a task now: its recording finishes with the task's end.
            return (result, execution);
        }
        let outcome = Outcome {
            result: &result,
            execution,
            duration_ms: started.elapsed().as_millis() as u64,
        };
        recording.finish(deps, &facts, outcome).await;
        for projection in &self.ports.after_call {
            projection
                .project(&after_ctx, &facts, &sessions, &mut result)
                .await;
        }
        (result, execution)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use serde_json::json;

    use super::ports::{AfterCall, Recorder, Recording, SessionAuthority, Sessions};
    use super::spec::{Category, ToolMeta};
    use super::*;
    use crate::auth::{PrincipalKind, ProjectGrants};
    use crate::config::ServerConfig;
    use crate::result::ErrorKind;

    /// What the ports and the tool saw, in order.
    type Trace = Arc<Mutex<Vec<String>>>;

    fn push(trace: &Trace, what: impl Into<String>) {
        trace.lock().unwrap().push(what.into());
    }

    struct Gate {
        trace: Trace,
        refuse: bool,
    }

    impl SessionAuthority for Gate {
        fn authorize<'a>(
            &'a self,
            _: &'a Deps,
            call: &'a CallFacts<'a>,
        ) -> ports::PortFuture<'a, Result<Sessions, ToolError>> {
            Box::pin(async move {
                push(&self.trace, format!("authorize {}", call.spec.meta.name));
                if self.refuse {
                    return Err(ToolError::new(ErrorKind::UnknownSessionId, "refused"));
                }
                Ok(Sessions::default())
            })
        }
    }

    struct Ledger(Trace);
    struct Open(Trace);

    impl Recorder for Ledger {
        fn begin<'a>(
            &'a self,
            _: &'a Deps,
            call: &'a CallFacts<'a>,
            _: &'a Sessions,
            args: &'a Value,
        ) -> ports::PortFuture<'a, Result<Box<dyn Recording>, ToolError>> {
            Box::pin(async move {
                push(
                    &self.0,
                    format!("begin {} {args}", call.invocation_id.is_nil()),
                );
                Ok(Box::new(Open(self.0.clone())) as Box<dyn Recording>)
            })
        }

        fn finished_events(
            &self,
            _: &Value,
            _: &ToolSpec,
            _: Outcome<'_>,
        ) -> Vec<(wc_domain::SessionId, Vec<wc_store::sessions::NewEvent>)> {
            Vec::new()
        }
    }

    impl Recording for Open {
        fn finish<'a>(
            self: Box<Self>,
            _: &'a Deps,
            _: &'a CallFacts<'a>,
            outcome: Outcome<'a>,
        ) -> ports::PortFuture<'a, ()> {
            Box::pin(async move {
                push(&self.0, format!("finish {}", outcome.result.success));
            })
        }

        fn suspend(&self, _: &CallFacts<'_>) -> Value {
            Value::Null
        }
    }

    struct Attention(Trace);

    impl AfterCall for Attention {
        fn project<'a>(
            &'a self,
            _: &'a ToolContext,
            _: &'a CallFacts<'a>,
            _: &'a Sessions,
            result: &'a mut ToolResult,
        ) -> ports::PortFuture<'a, ()> {
            Box::pin(async move {
                push(&self.0, "after");
                result.session_attention = Some(json!("projected"));
            })
        }
    }

    struct Audit(Trace);

    impl CallAudit for Audit {
        fn note(&self, tool: &str, invoked: &Invoked) {
            push(&self.0, format!("audit {tool} {}", invoked.result.success));
        }
    }

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct ProbeArgs {
        /// What to echo.
        word: String,
    }

    #[derive(serde::Serialize, schemars::JsonSchema)]
    struct Echo {
        word: String,
    }

    /// A runtime with one tool, `probe`, over ports that trace every call.
    fn runtime(trace: &Trace, refuse: bool) -> ToolRuntime {
        let t = trace.clone();
        let probe = ToolSpec::new(
            ToolMeta::reads(Category::Discovery, "probe", "Probe").about("Echoes its word."),
            move |_ctx: ToolContext, args: ProbeArgs| {
                let t = t.clone();
                async move {
                    push(&t, format!("dispatch {}", args.word));
                    Ok::<_, ToolError>(Echo { word: args.word })
                }
            },
        );
        let ports = Ports {
            authority: Arc::new(Gate {
                trace: trace.clone(),
                refuse,
            }),
            recorder: Arc::new(Ledger(trace.clone())),
            after_call: vec![Arc::new(Attention(trace.clone()))],
        };
        ToolRuntime::new(
            Arc::new(Registry::new(vec![probe])),
            ports,
            KernelConfig::default(),
        )
    }

    /// Dependencies whose pool never connects: these ports do not use it.
    fn deps() -> Deps {
        let url =
            wc_store::config::DatabaseUrl::parse("postgres://postgres@127.0.0.1:1/none").unwrap();
        let pool = wc_store::pool::build_pool(&wc_store::config::DatabaseConfig::new(url)).unwrap();
        Deps::new(
            pool,
            ServerConfig::default(),
            Arc::new(wc_store::testing::runner_work::NoEvidence),
        )
    }

    fn call(rt: &ToolRuntime, trace: &Trace, arguments: Value, scopes: ScopeSet) -> ToolCall {
        ToolCall {
            spec: rt.get("probe").expect("the probe tool").clone(),
            arguments,
            wrapper: WrapperMeta::default(),
            principal: Arc::new(Principal {
                kind: PrincipalKind::SharedKey,
                credential_id: uuid::Uuid::nil(),
                authority_group: "g".into(),
                scopes,
                projects: ProjectGrants::All,
                oauth: None,
            }),
            window: None,
            audit: Some(Arc::new(Audit(trace.clone()))),
            task: None,
            progress: None,
        }
    }

    fn taken(trace: &Trace) -> Vec<String> {
        std::mem::take(&mut *trace.lock().unwrap())
    }

    #[tokio::test]
    async fn the_kernel_asks_its_ports_in_order_and_notes_the_audit_once() {
        let trace = Trace::default();
        let rt = runtime(&trace, false);
        let invoked = rt
            .invoke(
                &deps(),
                call(&rt, &trace, json!({"word": "hi"}), ScopeSet::all()),
            )
            .await;
        assert!(invoked.result.success);
        assert_eq!(invoked.result.session_attention, Some(json!("projected")));
        assert_eq!(invoked.telemetry.execution_state, ExecutionState::Completed);
        assert_eq!(
            taken(&trace),
            [
                "authorize probe",
                r#"begin false {"word":"hi"}"#,
                "dispatch hi",
                "finish true",
                "after",
                "audit probe true",
            ]
        );
    }

    #[tokio::test]
    async fn a_refusal_stops_the_call_before_any_effect_and_is_still_audited() {
        let trace = Trace::default();
        let refusing = runtime(&trace, true);
        let invoked = refusing
            .invoke(
                &deps(),
                call(&refusing, &trace, json!({"word": "hi"}), ScopeSet::all()),
            )
            .await;
        assert_eq!(
            invoked.result.error.as_ref().map(|e| e.kind),
            Some(ErrorKind::UnknownSessionId)
        );
        assert_eq!(invoked.telemetry.execution_state, ExecutionState::Rejected);
        assert_eq!(taken(&trace), ["authorize probe", "audit probe false"]);

        // Bad arguments and a missing scope never reach a port.
        let rt = runtime(&trace, false);
        let bad = rt
            .invoke(
                &deps(),
                call(&rt, &trace, json!({"word": 3}), ScopeSet::all()),
            )
            .await;
        assert_eq!(
            bad.result.error.as_ref().map(|e| e.kind),
            Some(ErrorKind::InvalidArguments)
        );
        let unscoped = rt
            .invoke(
                &deps(),
                call(&rt, &trace, json!({"word": "hi"}), ScopeSet::default()),
            )
            .await;
        assert_eq!(
            unscoped.result.error.as_ref().map(|e| e.kind),
            Some(ErrorKind::InsufficientScope)
        );
        assert_eq!(taken(&trace), ["audit probe false", "audit probe false"]);
    }
}
