//! The validation state of a Workflow Session: a pure projection over the `validation` facts
//! of its retained `execution_finished` events ([`crate::execution::validation`]), read in
//! ledger order.
//!
//! Rules (the seed's "Continuation feedback" contract):
//! - a failing run of a target leaves its failure identities unresolved; a later complete,
//!   passing run of the same target resolves them — unless it ran zero tests (a zero-test
//!   success never resolves a test failure);
//! - a complete failing run of a target replaces that target's unresolved identities; an
//!   incomplete one only adds to them;
//! - a failure the caller declared (`result_expectation` `failure`/`observe`, met) is neutral:
//!   it neither passes nor fails nor resolves anything;
//! - the status is `failed` while any identity is unresolved, `passed` when the latest
//!   non-neutral run passed, `not_run` without runs, else `unavailable` (the latest run
//!   proved nothing: incomplete, timed out, lost);
//! - the delta compares the latest run with the one before it only when they are proven
//!   comparable, otherwise it names why not.

use serde::Serialize;
use serde_json::Value;
use wc_domain::EventKind;

use super::excerpt::BoundedList;
use super::feedback::LedgerEvent;
use super::handoff::ValidationEvidence;

/// Failure identities a summary lists.
pub const SUMMARY_FAILURES_MAX: usize = 32;

/// One retained validation run.
#[derive(Debug, Clone)]
pub struct Run<'a> {
    /// Its `execution_finished` event's position.
    pub seq: i64,
    /// The validation tool.
    pub tool: &'a str,
    /// Its job.
    pub job_id: Option<&'a str>,
    /// Its facts (`validation` of the event).
    pub facts: &'a Value,
    /// The declared expectation (`success` when not retained).
    pub declared: &'a str,
}

impl Run<'_> {
    fn target(&self) -> Option<&str> {
        self.facts["validation_target_id"].as_str()
    }

    fn passed(&self) -> bool {
        self.facts["passed"] == Value::Bool(true)
    }

    fn complete(&self) -> bool {
        self.facts["complete"] == Value::Bool(true)
    }

    fn outcome(&self) -> &str {
        self.facts["outcome"].as_str().unwrap_or("unavailable")
    }

    fn failures(&self) -> impl Iterator<Item = &str> {
        self.facts["failures"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
    }

    /// A failure the caller declared beforehand: neutral evidence.
    fn neutral(&self) -> bool {
        !self.passed()
            && self.declared != "success"
            && self.facts["expectation_met"] == Value::Bool(true)
    }

    fn runs_tests(&self) -> bool {
        matches!(self.tool, "cargo_test" | "go_test" | "pytest")
    }

    fn tests_ran(&self) -> Option<u64> {
        let t = &self.facts["tests"];
        Some(t["passed"].as_u64()? + t["failed"].as_u64()?)
    }

    fn count(&self, group: &str, name: &str) -> Option<i64> {
        self.facts[group][name]
            .as_u64()
            .and_then(|n| i64::try_from(n).ok())
    }
}

/// The validation runs of a ledger, in order.
pub fn runs<'a>(events: &[LedgerEvent<'a>]) -> Vec<Run<'a>> {
    events
        .iter()
        .filter(|e| e.kind == EventKind::ExecutionFinished)
        .filter_map(|e| {
            let facts = e.payload.get("validation")?;
            facts.is_object().then(|| Run {
                seq: e.seq,
                tool: e.payload["tool"].as_str().unwrap_or(""),
                job_id: e.payload["job_id"].as_str(),
                facts,
                declared: e.payload["expectation"]["declared"]
                    .as_str()
                    .unwrap_or("success"),
            })
        })
        .collect()
}

/// The status of a session's validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The latest run passed and nothing is unresolved.
    Passed,
    /// Failure identities are unresolved.
    Failed,
    /// No validation ran in the retained ledger.
    NotRun,
    /// The latest run proved nothing (incomplete, timed out, stopped, lost, or only declared
    /// failures ran).
    Unavailable,
}

/// Why two runs are not compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeltaReason {
    /// Fewer than two runs are retained.
    NoPreviousValidation,
    /// The runs cover different targets (tool, cwd, scope or purpose).
    ValidationScopeChanged,
    /// The earlier run's output did not prove its counts.
    PreviousEvidenceIncomplete,
    /// The latest run's output did not prove its counts.
    CurrentEvidenceIncomplete,
    /// Different parsers (or versions) read the runs.
    ParserChanged,
    /// A run has no parser identity (it gave no answer).
    ParserIdentityUnavailable,
    /// A test run proved no test counts.
    TestIdentityUnavailable,
    /// A run has no target identity.
    InsufficientScopeIdentity,
}

/// The latest run compared with the one before it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Delta {
    /// The runs are comparable.
    Available(Box<Compared>),
    /// They are not, for `reason_code`.
    Unavailable {
        /// Why.
        reason_code: DeltaReason,
    },
}

/// How two comparable runs differ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Compared {
    /// What both runs cover.
    pub comparison: Comparison,
    /// Passed tests, latest minus previous (negative when fewer pass).
    pub passed_delta: i64,
    /// Failed tests, latest minus previous.
    pub failed_delta: i64,
    /// Ignored or skipped tests, latest minus previous.
    pub ignored_delta: i64,
    /// Error diagnostics, latest minus previous.
    pub error_delta: i64,
    /// Warning diagnostics, latest minus previous.
    pub warning_delta: i64,
    /// Identities failing now that did not before.
    pub newly_failing: BoundedList<String>,
    /// Identities failing before that do not now.
    pub no_longer_failing: BoundedList<String>,
}

/// The identity both compared runs share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Comparison {
    /// `validation_scope:v1:<sha256>`.
    pub scope_identity: String,
    /// The earlier run's job.
    pub previous_job_id: Option<String>,
    /// The latest run's job.
    pub current_job_id: Option<String>,
}

/// A session's validation state.
#[derive(Debug, Clone)]
pub struct State<'a> {
    /// Every retained run, in order.
    pub runs: Vec<Run<'a>>,
    /// Unresolved failure identities, newest first.
    pub unresolved: Vec<String>,
    /// The status.
    pub status: Status,
}

/// Projects the validation state of `events`.
pub fn project<'a>(events: &[LedgerEvent<'a>]) -> State<'a> {
    let runs = runs(events);
    // (identity, target), oldest first.
    let mut unresolved: Vec<(String, String)> = Vec::new();
    let mut latest_counted: Option<&Run<'_>> = None;
    for run in runs.iter().filter(|r| !r.neutral()) {
        latest_counted = Some(run);
        let Some(target) = run.target() else { continue };
        match run.outcome() {
            "passed" if run.passed() && run.complete() => {
                let zero_tests = run.runs_tests() && run.tests_ran() == Some(0);
                if !zero_tests {
                    unresolved.retain(|(_, t)| t != target);
                }
            }
            "failed" => {
                if run.complete() {
                    unresolved.retain(|(_, t)| t != target);
                }
                for id in run.failures() {
                    unresolved.retain(|(i, _)| i != id);
                    unresolved.push((id.to_owned(), target.to_owned()));
                }
            }
            _ => {}
        }
    }
    let status = if !unresolved.is_empty() {
        Status::Failed
    } else {
        match latest_counted {
            _ if runs.is_empty() => Status::NotRun,
            Some(run) if run.passed() => Status::Passed,
            _ => Status::Unavailable,
        }
    };
    State {
        runs,
        unresolved: unresolved.into_iter().rev().map(|(i, _)| i).collect(),
        status,
    }
}

impl State<'_> {
    /// The evidence the handoff brief and continuation feedback take.
    pub fn evidence(&self) -> ValidationEvidence {
        match self.status {
            Status::Passed => ValidationEvidence::Passed,
            Status::NotRun => ValidationEvidence::NotRun,
            Status::Unavailable => ValidationEvidence::Unavailable,
            Status::Failed => ValidationEvidence::Failed {
                failure_identities: self.unresolved.clone(),
            },
        }
    }

    /// The latest run compared with the one before it.
    pub fn delta(&self) -> Delta {
        let unavailable = |reason_code| Delta::Unavailable { reason_code };
        let [.., prev, cur] = self.runs.as_slice() else {
            return unavailable(DeltaReason::NoPreviousValidation);
        };
        let (Some(target), Some(prev_target)) = (cur.target(), prev.target()) else {
            return unavailable(DeltaReason::InsufficientScopeIdentity);
        };
        if target != prev_target {
            return unavailable(DeltaReason::ValidationScopeChanged);
        }
        if !prev.complete() {
            return unavailable(DeltaReason::PreviousEvidenceIncomplete);
        }
        if !cur.complete() {
            return unavailable(DeltaReason::CurrentEvidenceIncomplete);
        }
        let (p, c) = (&prev.facts["parser"], &cur.facts["parser"]);
        if !p.is_object() || !c.is_object() {
            return unavailable(DeltaReason::ParserIdentityUnavailable);
        }
        if p != c {
            return unavailable(DeltaReason::ParserChanged);
        }
        if cur.runs_tests() && (cur.tests_ran().is_none() || prev.tests_ran().is_none()) {
            return unavailable(DeltaReason::TestIdentityUnavailable);
        }
        let d = |group: &str, name: &str| {
            cur.count(group, name).unwrap_or(0) - prev.count(group, name).unwrap_or(0)
        };
        let before: Vec<&str> = prev.failures().collect();
        let now: Vec<&str> = cur.failures().collect();
        Delta::Available(Box::new(Compared {
            comparison: Comparison {
                scope_identity: target.to_owned(),
                previous_job_id: prev.job_id.map(str::to_owned),
                current_job_id: cur.job_id.map(str::to_owned),
            },
            passed_delta: d("tests", "passed"),
            failed_delta: d("tests", "failed"),
            ignored_delta: d("tests", "ignored"),
            error_delta: d("diagnostics", "errors"),
            warning_delta: d("diagnostics", "warnings"),
            newly_failing: BoundedList::new(
                now.iter()
                    .filter(|f| !before.contains(f))
                    .map(|f| (*f).to_owned()),
                SUMMARY_FAILURES_MAX,
            ),
            no_longer_failing: BoundedList::new(
                before
                    .iter()
                    .filter(|f| !now.contains(f))
                    .map(|f| (*f).to_owned()),
                SUMMARY_FAILURES_MAX,
            ),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use uuid::Uuid;
    use wc_domain::EventRole;

    struct Ledger(Vec<Value>);

    impl Ledger {
        fn run(mut self, tool: &str, target: &str, facts: Value) -> Self {
            let mut v = json!({
                "validation_target_id": target, "complete": true,
                "parser": {"name": "cargo-libtest", "version": 1}, "expectation_met": true,
            });
            v.as_object_mut()
                .unwrap()
                .extend(facts.as_object().unwrap().clone());
            self.0.push(json!({
                "tool": tool, "job_id": format!("j{}", self.0.len()),
                "expectation": {"declared": "success"}, "validation": v,
            }));
            self
        }

        fn declared(mut self, declared: &str) -> Self {
            self.0.last_mut().unwrap()["expectation"]["declared"] = json!(declared);
            self
        }

        fn events(&self) -> Vec<LedgerEvent<'_>> {
            self.0
                .iter()
                .enumerate()
                .map(|(i, payload)| LedgerEvent {
                    seq: i as i64,
                    kind: EventKind::ExecutionFinished,
                    role: EventRole::Business,
                    invocation_id: Uuid::nil(),
                    tool_name: None,
                    payload,
                })
                .collect()
        }
    }

    fn failing(ids: &[&str], passed: u64) -> Value {
        json!({"outcome": "failed", "passed": false, "failures": ids,
               "tests": {"passed": passed, "failed": ids.len(), "ignored": 0}})
    }

    fn passing(passed: u64) -> Value {
        json!({"outcome": "passed", "passed": true, "failures": [],
               "tests": {"passed": passed, "failed": 0, "ignored": 0}})
    }

    #[test]
    fn fail_then_fix_resolves_and_signs_the_delta() {
        let l = Ledger(vec![])
            .run("cargo_test", "T", failing(&["cargo_test:a"], 3))
            .run("cargo_test", "T", passing(4));
        let s = project(&l.events());
        assert_eq!(s.status, Status::Passed);
        assert!(s.unresolved.is_empty());
        let Delta::Available(c) = s.delta() else {
            panic!("{:?}", s.delta());
        };
        let Compared {
            passed_delta,
            failed_delta,
            no_longer_failing,
            comparison,
            ..
        } = *c;
        assert_eq!((passed_delta, failed_delta), (1, -1));
        assert_eq!(
            serde_json::to_value(&no_longer_failing).unwrap()["items"],
            json!(["cargo_test:a"])
        );
        assert_eq!(comparison.scope_identity, "T");
        assert_eq!(comparison.current_job_id.as_deref(), Some("j1"));
    }

    #[test]
    fn a_zero_test_success_or_another_target_never_resolves_a_failure() {
        let l = Ledger(vec![])
            .run("cargo_test", "T", failing(&["cargo_test:a"], 0))
            .run("cargo_test", "T", passing(0))
            .run("cargo_test", "U", passing(5));
        let s = project(&l.events());
        assert_eq!(s.status, Status::Failed);
        assert_eq!(s.unresolved, ["cargo_test:a"]);
        assert_eq!(
            s.delta(),
            Delta::Unavailable {
                reason_code: DeltaReason::ValidationScopeChanged
            }
        );
    }

    #[test]
    fn a_declared_failure_is_neutral_and_a_complete_failure_replaces_its_targets_identities() {
        let l = Ledger(vec![])
            .run(
                "cargo_test",
                "T",
                failing(&["cargo_test:a", "cargo_test:b"], 0),
            )
            .run("cargo_test", "T", failing(&["cargo_test:b"], 1))
            .run("cargo_test", "V", failing(&["cargo_test:x"], 0))
            .declared("failure");
        let s = project(&l.events());
        assert_eq!(s.unresolved, ["cargo_test:b"]);
        let only_declared = Ledger(vec![])
            .run("cargo_test", "V", failing(&["cargo_test:x"], 0))
            .declared("failure");
        assert_eq!(project(&only_declared.events()).status, Status::Unavailable);
        assert_eq!(project(&Ledger(vec![]).events()).status, Status::NotRun);
    }

    #[test]
    fn incomplete_or_differently_parsed_runs_are_not_compared() {
        let incomplete = Ledger(vec![]).run("cargo_test", "T", passing(1)).run(
            "cargo_test",
            "T",
            json!({"outcome": "incomplete", "passed": false, "complete": false}),
        );
        let s = project(&incomplete.events());
        assert_eq!(s.status, Status::Unavailable);
        assert_eq!(
            s.delta(),
            Delta::Unavailable {
                reason_code: DeltaReason::CurrentEvidenceIncomplete
            }
        );
        let parsed = Ledger(vec![]).run("cargo_test", "T", passing(1)).run(
            "cargo_test",
            "T",
            json!({"outcome": "passed", "passed": true, "failures": [],
                "tests": {"passed": 1, "failed": 0, "ignored": 0},
                "parser": {"name": "cargo-libtest", "version": 2}}),
        );
        assert_eq!(
            project(&parsed.events()).delta(),
            Delta::Unavailable {
                reason_code: DeltaReason::ParserChanged
            }
        );
        let one = Ledger(vec![]).run("cargo_test", "T", passing(1));
        assert_eq!(
            project(&one.events()).delta(),
            Delta::Unavailable {
                reason_code: DeltaReason::NoPreviousValidation
            }
        );
    }
}
