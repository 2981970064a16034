//! The tool kernel (`ToolRuntime`): one registry of tool specs and one invocation path that
//! every surface (MCP, REST) goes through, so a tool behaves the same whichever door it came in.
//!
//! An invocation: look up the spec → check scopes → validate arguments against the input
//! schema (`invalid_arguments` names the field and rule) → check wrapper metadata → the
//! recorder (authorizes the business and recording sessions, writes their
//! `tool_call_started`/`tool_call_finished` pairs) → dispatch under the hard deadline → shape
//! `{success, output, error}` → telemetry.

pub mod args;
pub mod context;
pub mod recorder;
pub mod spec;
pub mod telemetry;
pub mod wrapper;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::AppState;
use crate::auth::{Principal, ScopeSet};
use crate::result::{ErrorKind, ToolError, ToolResult};
use context::{ClientWindow, Clock, SystemClock, ToolContext};
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
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// Tool name.
    pub name: String,
    /// Concrete arguments (wrapper fields already removed); `null` means none.
    pub arguments: Value,
    /// Wrapper metadata split off by the surface.
    pub wrapper: WrapperMeta,
    /// The caller.
    pub principal: Arc<Principal>,
    /// The host window, if any.
    pub window: Option<ClientWindow>,
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
}

/// The named tool is not registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tool {0:?}")]
pub struct UnknownTool(pub String);

/// The registry and the invocation path.
pub struct ToolRuntime {
    specs: Vec<Arc<ToolSpec>>,
    by_name: HashMap<&'static str, usize>,
    config: KernelConfig,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for ToolRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRuntime")
            .field("tools", &self.specs.len())
            .finish_non_exhaustive()
    }
}

impl ToolRuntime {
    /// A runtime over `specs`, listed in name order. Panics on a duplicate name or a tool
    /// whose schema declares a wrapper field: both are programming errors caught by tests.
    pub fn new(mut specs: Vec<ToolSpec>, config: KernelConfig) -> ToolRuntime {
        specs.sort_by(|a, b| a.meta.name.cmp(b.meta.name));
        let mut by_name = HashMap::new();
        for (i, s) in specs.iter().enumerate() {
            assert!(
                by_name.insert(s.meta.name, i).is_none(),
                "duplicate tool {}",
                s.meta.name
            );
        }
        ToolRuntime {
            specs: specs.into_iter().map(Arc::new).collect(),
            by_name,
            config,
            clock: Arc::new(SystemClock),
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

    /// Kernel settings.
    pub fn config(&self) -> &KernelConfig {
        &self.config
    }

    /// Runs one call through the whole path. Every failure after the tool is identified is a
    /// shaped result, never an error of this function.
    pub async fn invoke(&self, state: &AppState, call: ToolCall) -> Result<Invoked, UnknownTool> {
        let spec = self
            .get(&call.name)
            .ok_or_else(|| UnknownTool(call.name.clone()))?
            .clone();
        let started = Instant::now();
        let finish = |result: ToolResult, state: ExecutionState| -> Invoked {
            let json = serde_json::to_string(&result).expect("tool results serialize");
            let bytes = match state {
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
                error_kind: match state {
                    ExecutionState::TimedOut => Some("dispatch_hard_timeout"),
                    _ => kind.map(ErrorKind::as_str),
                },
                failure_kind: kind.map_or("none", ErrorKind::failure_kind),
                recovery_kind: kind.map_or("none", ErrorKind::recovery_kind),
                execution_state: state,
            };
            Invoked {
                result,
                json,
                telemetry,
            }
        };

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
            return Ok(finish(ToolResult::err(err), ExecutionState::Rejected));
        }
        let mut args = match call.arguments {
            Value::Null => Value::Object(Default::default()),
            other => other,
        };
        args::normalize_integers(&mut args);
        if let Err(e) = args::validate(spec.validator(), &spec.input_schema_value, &args) {
            return Ok(finish(ToolResult::err(e), ExecutionState::Rejected));
        }
        let recording =
            match recorder::begin(state, &spec, &call.principal, &call.wrapper, &args).await {
                Ok(r) => r,
                Err(e) => return Ok(finish(ToolResult::err(e), ExecutionState::Rejected)),
            };
        let ctx = ToolContext {
            state: state.clone(),
            principal: call.principal.clone(),
            window: call.window.clone(),
            clock: self.clock.clone(),
            invocation_id: recording.invocation_id,
            business: recording.business.clone(),
            recorder: recording.recorder.clone(),
        };
        let deadline = self.config.dispatch_deadline;
        let (result, execution) = match tokio::time::timeout(deadline, (spec.handler)(ctx, args))
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
        let duration_ms = started.elapsed().as_millis() as u64;
        recorder::end(state, &recording, &spec, &result, execution, duration_ms).await;
        let mut result = result;
        if let Some(recorder) = &recording.recorder {
            result.session_attention = crate::board::project_attention(
                state,
                recorder,
                &call.wrapper.ack_session_message_ids,
                recording.invocation_id,
                spec.meta.name,
            )
            .await;
        }
        Ok(finish(result, execution))
    }
}
