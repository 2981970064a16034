//! Model-ergonomics telemetry: one bounded, content-free record per model-visible tool call,
//! stored as `summary.model_ergonomics` on the call's Action Audit event.

use serde::Serialize;

/// Current schema of the record.
pub const SCHEMA_VERSION: u32 = 6;

/// The closed set of execution states a call can end in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionState {
    /// Rejected before the tool ran (arguments, scope, wrapper metadata).
    Rejected,
    /// The tool ran to a result, successful or not.
    Completed,
    /// The dispatch deadline passed; whether the effect happened is unknown.
    TimedOut,
}

/// One record. It never holds arguments, outputs, error prose, paths, project ids or any
/// caller text: only names, counts, sizes and closed labels.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelErgonomics {
    /// Always [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Registered tool name.
    pub tool_name: &'static str,
    /// Tool category.
    pub tool_category: &'static str,
    /// Whether the result was a success.
    pub success: bool,
    /// Wall time from kernel entry to the shaped result.
    pub duration_ms: u64,
    /// UTF-8 bytes of the final result JSON; `null` for a rejection before any result.
    pub serialized_result_bytes: Option<u64>,
    /// Structured error kind, when the call failed.
    pub error_kind: Option<&'static str>,
    /// Coarse failure class (`none` on success).
    pub failure_kind: &'static str,
    /// Suggested recovery (`none` on success).
    pub recovery_kind: &'static str,
    /// How the call ended.
    pub execution_state: ExecutionState,
}

impl ModelErgonomics {
    /// The record of a call rejected by a surface before it reached the kernel (for example,
    /// malformed MCP wrapper metadata): no result, so no byte count.
    pub fn surface_rejection(
        spec: &crate::kernel::spec::ToolSpec,
        error_kind: &'static str,
        elapsed: std::time::Duration,
    ) -> Self {
        Self {
            schema_version: SCHEMA_VERSION,
            tool_name: spec.meta.name,
            tool_category: spec.meta.category.as_str(),
            success: false,
            duration_ms: elapsed.as_millis() as u64,
            serialized_result_bytes: None,
            error_kind: Some(error_kind),
            failure_kind: "invalid_request",
            recovery_kind: "fix_arguments",
            execution_state: ExecutionState::Rejected,
        }
    }
}
