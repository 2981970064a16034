//! `validation_summary`: the latest validation state of a Workflow Session — status, the
//! latest run, its unresolved failure identities and the validation delta — projected from
//! the evidence its validation runs left in the ledger ([`crate::workflow::validation`]).

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};
use wc_domain::{ProjectId, SessionId};
use wc_macros::{tool, tool_args};

use crate::kernel::context::ToolContext;
use crate::result::ToolError;
use crate::workflow::evidence::Evidence;
use crate::workflow::excerpt::BoundedList;
use crate::workflow::validation::{self, SUMMARY_FAILURES_MAX, Status};

#[tool_args]
pub struct Args {
    /// The session.
    pub session_id: SessionId,
}

/// Output of `validation_summary`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The session.
    pub session_id: SessionId,
    /// Its project.
    pub project: ProjectId,
    /// `passed` (the latest run passed, nothing unresolved), `failed` (failure identities
    /// unresolved), `not_run`, or `unavailable` (the latest run proved nothing: incomplete,
    /// timed out, stopped or lost).
    pub status: Status,
    /// The latest run: tool, job_id, outcome, passed, expectation_met, complete, parser,
    /// tests, diagnostics, failures, count_assertion, validation_target_id; `null` without runs.
    #[schemars(with = "Option<serde_json::Map<String, Value>>")]
    pub latest: Value,
    /// Unresolved failure identities, newest first (`<tool>:<identity>`), at most 32.
    #[schemars(with = "serde_json::Map<String, Value>")]
    pub unresolved_failures: Value,
    /// The latest run compared with the one before it: `{"status": "available",
    /// "comparison": {"scope_identity", ...}, "passed_delta", "failed_delta", ...}` or
    /// `{"status": "unavailable", "reason_code": ...}`.
    #[schemars(with = "serde_json::Map<String, Value>")]
    pub validation_delta: Value,
    /// Validation runs in the retained ledger.
    pub runs_retained: usize,
}

/// A Workflow Session's validation: status, latest run, unresolved failure identities, and
/// validation_delta against the previous run when comparable (else why not). Runs nothing.
#[tool(reads, Session, "Validation summary", session = Reads)]
async fn validation_summary(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let session = ctx.business_session(&args.session_id)?;
    let evidence = Evidence::load(&ctx.deps.pool, &session.id).await?;
    let ledger = evidence.ledger(Some(ctx.invocation_id));
    let state = validation::project(&ledger);
    let latest = state.runs.last().map_or(Value::Null, |run| {
        let mut v = json!({"tool": run.tool, "job_id": run.job_id, "seq": run.seq});
        if let (Value::Object(out), Value::Object(facts)) = (&mut v, run.facts) {
            out.extend(facts.clone());
        }
        v
    });
    Ok(Output {
        session_id: session.id.clone(),
        project: session.project.clone(),
        status: state.status,
        latest,
        unresolved_failures: serde_json::to_value(BoundedList::new(
            state.unresolved.iter().cloned(),
            SUMMARY_FAILURES_MAX,
        ))
        .map_err(ToolError::internal)?,
        validation_delta: serde_json::to_value(state.delta()).map_err(ToolError::internal)?,
        runs_retained: state.runs.len(),
    })
}
