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
    /// The edit surface (`canonical` or `advanced`) of an edit tool's call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edit_surface: Option<&'static str>,
    /// How an edit tool's call ended ([`edit_outcome`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edit_outcome: Option<&'static str>,
    /// The conflict an edit was refused for, from the closed set [`EDIT_CONFLICT_KINDS`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edit_conflict_kind: Option<&'static str>,
}

/// The edit conflicts telemetry records; any other failure records none.
pub const EDIT_CONFLICT_KINDS: [&str; 5] = [
    "multiple_matches",
    "match_not_found",
    "occurrence_out_of_range",
    "overlapping_edits",
    "sha256_mismatch",
];

/// The closed classification of an edit call, from its structured result only: `rejected`
/// (refused before the tool ran), `uncertain` (the dispatch deadline passed, or the build host
/// did not answer in time: whether it wrote is unknown), `applied`, `unchanged` (success that
/// changed nothing), `conflict` (a conflict kind), or `failed`.
pub fn edit_outcome(execution: ExecutionState, result: &crate::result::ToolResult) -> &'static str {
    use crate::result::ErrorKind;
    match (execution, &result.error) {
        (ExecutionState::Rejected, _) => "rejected",
        (ExecutionState::TimedOut, _) => "uncertain",
        (ExecutionState::Completed, None) => {
            let changed = result.output.as_ref().and_then(|o| o.get("changed"));
            if changed == Some(&serde_json::Value::Bool(false)) {
                "unchanged"
            } else {
                "applied"
            }
        }
        (ExecutionState::Completed, Some(e)) => match e.kind {
            ErrorKind::TimedOut | ErrorKind::Lost | ErrorKind::DispatchTimeout => "uncertain",
            k if EDIT_CONFLICT_KINDS.contains(&k.as_str()) => "conflict",
            _ => "failed",
        },
    }
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
            edit_surface: spec.edit_surface.map(|s| s.as_str()),
            edit_outcome: spec.edit_surface.map(|_| "rejected"),
            edit_conflict_kind: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::result::{ErrorKind, ToolError, ToolResult};

    #[test]
    fn an_edit_is_classified_from_its_structured_result_only() {
        let done = |output| ToolResult::ok(output);
        let failed = |kind| ToolResult::err(ToolError::new(kind, "any words at all"));
        let completed = ExecutionState::Completed;
        assert_eq!(
            edit_outcome(completed, &done(json!({"changed": true}))),
            "applied"
        );
        assert_eq!(
            edit_outcome(completed, &done(json!({"changed": false}))),
            "unchanged"
        );
        assert_eq!(
            edit_outcome(completed, &done(json!({"files": []}))),
            "applied"
        );
        for kind in [ErrorKind::Sha256Mismatch, ErrorKind::MultipleMatches] {
            assert_eq!(edit_outcome(completed, &failed(kind)), "conflict");
        }
        assert_eq!(
            edit_outcome(completed, &failed(ErrorKind::PatchDoesNotApply)),
            "failed"
        );
        assert_eq!(
            edit_outcome(completed, &failed(ErrorKind::TimedOut)),
            "uncertain"
        );
        let refused = failed(ErrorKind::InvalidArguments);
        assert_eq!(edit_outcome(ExecutionState::Rejected, &refused), "rejected");
        let late = failed(ErrorKind::DispatchTimeout);
        assert_eq!(edit_outcome(ExecutionState::TimedOut, &late), "uncertain");
        for kind in EDIT_CONFLICT_KINDS {
            assert!(ErrorKind::ALL.iter().any(|k| k.as_str() == kind), "{kind}");
        }
    }
}
