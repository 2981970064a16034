//! Structured validation: what a validation tool's run proved, as one [`ValidationFacts`]
//! built from the work row and the runner's [`ValidationAnswer`]. The same facts are the
//! tool's `validation` output and, without diagnostics, the `validation` field of the run's
//! `execution_finished` event, which the store appends in the transaction that ends the work
//! (so a background validation's evidence lands exactly once, whoever reads it later).
//!
//! Three facts stay separate: the real `outcome` of the validator, whether the caller's
//! declared expectation was met (`expectation_met`), and whether validation `passed` (a
//! passing outcome with complete evidence and, for `cargo_test`, a proven test count).

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use wc_runner_protocol::{
    DiagnosticCounts, ParserIdentity, TestCounts, ValidateOp, ValidationAnswer, Validator,
    WorkAnswer, WorkSpec,
};
use wc_store::work::WorkRow;

use super::{ExecOutput, ExecState, status_view};

/// The prefix of every validation target id: a domain-separated, opaque identity of what
/// a run covers (tool, cwd, normalized scope, purpose), never the command or a filter.
pub const TARGET_ID_PREFIX: &str = "validation_scope:v1:";

/// The real outcome of a validator run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// It exited 0 and its output names no failure.
    Passed,
    /// It exited non-zero, or its output names failures.
    Failed,
    /// It exited 0, but its output does not prove everything it should hold.
    Incomplete,
    /// It gave no answer: it timed out, was stopped, could not start or was lost.
    Unavailable,
}

/// `cargo_test`'s count assertion, as evaluated for one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct CountAssertion {
    /// The fewest tests the run had to prove ran.
    pub min_tests: u64,
    /// Tests the output proves ran (passed + failed); `null` when it proves no count.
    pub observed_tests: Option<u64>,
    /// Whether the count is proven and at least `min_tests`.
    pub met: bool,
}

/// What one validation run proved.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ValidationFacts {
    /// The run's target (`validation_scope:v1:<sha256>`): runs of one target are comparable.
    pub validation_target_id: String,
    /// The validator's real outcome.
    pub outcome: Outcome,
    /// Validation passed: outcome `passed`, complete evidence and a met count assertion.
    pub passed: bool,
    /// Whether the declared `result_expectation` was met (`null` while unknown).
    pub expectation_met: Option<bool>,
    /// The output proved every count given here.
    pub complete: bool,
    /// The parser that read the output (`null` without an answer).
    pub parser: Option<ParserIdentity>,
    /// Test counts (validators that run tests, when at least one summary was seen).
    pub tests: Option<TestCounts>,
    /// Compiler and linter diagnostics by level.
    pub diagnostics: Option<DiagnosticCounts>,
    /// Failing identities, `<tool>:<identity>` (a test, `build:<crate>`, `fmt:<file>`; a
    /// failed run that names none is `<tool>:exit_<code>`), at most 32.
    pub failures: Vec<String>,
    /// Failing identities in all.
    pub failures_total: u64,
    /// The count assertion of a `cargo_test` that made one.
    pub count_assertion: Option<CountAssertion>,
    /// The first diagnostics (file, line, code, bounded message); tool output only, never in
    /// the ledger.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shown_diagnostics: Option<Vec<wc_runner_protocol::Diagnostic>>,
}

/// The validate op and cwd of a work row, when it is validate work.
pub fn op_of(row: &WorkRow) -> Option<(ValidateOp, Option<String>)> {
    match &row.item.spec {
        WorkSpec::Validate(op) => Some((
            op.clone(),
            row.item.cwd.as_ref().map(|c| c.as_str().to_owned()),
        )),
        _ => None,
    }
}

/// The target id of `op` run in `cwd` for `purpose`: a SHA-256 over the normalized
/// structured scope (features sorted and deduplicated, Go's default package made explicit).
pub fn target_id(op: &ValidateOp, cwd: Option<&str>, purpose: Option<&str>) -> String {
    let mut scope = op.scope.clone();
    scope.features.sort();
    scope.features.dedup();
    if op.validator == Validator::GoTest && scope.package.is_none() {
        scope.package = Some("./...".into());
    }
    let normalized = json!({
        "tool": op.validator,
        "cwd": cwd.unwrap_or(""),
        "scope": scope,
        "purpose": purpose,
    });
    let mut h = Sha256::new();
    h.update(b"wc.validation_scope.v1\0");
    h.update(normalized.to_string().as_bytes());
    format!("{TARGET_ID_PREFIX}{}", hex::encode(h.finalize()))
}

/// The facts of validate work `row` (ended or not) given the runner's answer, when it is
/// validate work; `None` for any other work.
pub fn facts(row: &WorkRow, answer: Option<&Value>) -> Option<ValidationFacts> {
    let (op, cwd) = op_of(row)?;
    let view = status_view(row);
    let purpose = view.purpose.as_deref();
    let answer = answer
        .and_then(|a| serde_json::from_value::<WorkAnswer>(a.clone()).ok())
        .and_then(|a| match a {
            WorkAnswer::Validate(v) => Some(v),
            _ => None,
        });
    let min_tests = row.expectation.min_tests;
    Some(build(
        &op,
        target_id(&op, cwd.as_deref(), purpose),
        &view,
        answer,
        min_tests,
    ))
}

fn build(
    op: &ValidateOp,
    validation_target_id: String,
    view: &ExecOutput,
    answer: Option<ValidationAnswer>,
    min_tests: Option<u64>,
) -> ValidationFacts {
    let tool = op.validator.as_str();
    let Some(a) = answer else {
        return ValidationFacts {
            validation_target_id,
            outcome: Outcome::Unavailable,
            passed: false,
            expectation_met: view.expectation.matched,
            complete: false,
            parser: None,
            tests: None,
            diagnostics: None,
            failures: Vec::new(),
            failures_total: 0,
            count_assertion: min_tests.map(|min_tests| CountAssertion {
                min_tests,
                observed_tests: None,
                met: false,
            }),
            shown_diagnostics: None,
        };
    };
    let exited_ok = view.execution_state == ExecState::Succeeded;
    let mut failures: Vec<String> = a.failures.iter().map(|f| format!("{tool}:{f}")).collect();
    let mut failures_total = a.failures_total;
    let outcome = if !exited_ok || a.failures_total > 0 {
        if failures.is_empty() {
            let code = view
                .exit_code
                .map_or("signal".to_owned(), |c| format!("exit_{c}"));
            failures.push(format!("{tool}:{code}"));
            failures_total = 1;
        }
        Outcome::Failed
    } else if a.complete {
        Outcome::Passed
    } else {
        Outcome::Incomplete
    };
    let count_assertion = min_tests.map(|min_tests| {
        let observed_tests = a.tests.filter(|_| a.complete).map(|t| t.passed + t.failed);
        CountAssertion {
            min_tests,
            observed_tests,
            met: observed_tests.is_some_and(|n| n >= min_tests),
        }
    });
    ValidationFacts {
        validation_target_id,
        outcome,
        passed: outcome == Outcome::Passed && count_assertion.is_none_or(|c| c.met),
        expectation_met: view.expectation.matched,
        complete: a.complete,
        parser: Some(a.parser),
        tests: a.tests,
        diagnostics: Some(a.diagnostics),
        failures,
        failures_total,
        count_assertion,
        shown_diagnostics: Some(a.shown_diagnostics),
    }
}

/// The facts as the ledger keeps them: no diagnostic text.
pub fn ledger_value(mut facts: ValidationFacts) -> Value {
    facts.shown_diagnostics = None;
    serde_json::to_value(facts).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wc_runner_protocol::ValidationScope;

    fn op(validator: Validator, scope: ValidationScope) -> ValidateOp {
        ValidateOp { validator, scope }
    }

    #[test]
    fn target_ids_cover_tool_cwd_normalized_scope_and_purpose() {
        let scope = |features: &[&str]| ValidationScope {
            features: features.iter().map(|f| (*f).to_owned()).collect(),
            ..Default::default()
        };
        let a = target_id(&op(Validator::CargoTest, scope(&["b", "a"])), None, None);
        assert!(a.starts_with(TARGET_ID_PREFIX) && a.len() == TARGET_ID_PREFIX.len() + 64);
        assert_eq!(
            a,
            target_id(
                &op(Validator::CargoTest, scope(&["a", "b", "a"])),
                None,
                None
            )
        );
        for other in [
            target_id(&op(Validator::CargoCheck, scope(&["a", "b"])), None, None),
            target_id(&op(Validator::CargoTest, scope(&["a"])), None, None),
            target_id(
                &op(Validator::CargoTest, scope(&["a", "b"])),
                Some("x"),
                None,
            ),
            target_id(
                &op(Validator::CargoTest, scope(&["a", "b"])),
                None,
                Some("p"),
            ),
        ] {
            assert_ne!(a, other);
        }
        let go = |package: Option<&str>| ValidationScope {
            package: package.map(str::to_owned),
            ..Default::default()
        };
        assert_eq!(
            target_id(&op(Validator::GoTest, go(None)), None, None),
            target_id(&op(Validator::GoTest, go(Some("./..."))), None, None)
        );
    }
}
