//! How an execution outcome compares with the caller's declared expectation. Pure: the real
//! outcome is an input and is never changed; the result adds only classification.

use schemars::JsonSchema;
use serde::Serialize;
use wc_runner_protocol::{Termination, WorkOutcome};

pub use wc_domain::ResultExpectation;

use super::ExecState;

/// The expectation and how the outcome compares with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ExpectationView {
    /// Declared expectation.
    pub declared: ResultExpectation,
    /// Exit codes the caller accepts as success besides 0.
    pub accepted_exit_codes: Vec<i32>,
    /// Whether the outcome satisfied the declaration; `null` while it is not known yet.
    pub matched: Option<bool>,
    /// Whether the outcome needs attention: true when it did not match, including every
    /// outcome that is not a completed process (rejected, spawn failure, timeout, cancellation,
    /// lost) — those never satisfy any expectation.
    pub actionable: bool,
}

/// Whether an exit status counts as success: 0, or one of the call's `accepted_exit_codes`.
/// The one rule behind both `success` (`settle`) and the expectation's `matched`.
pub fn exit_counts_as_success(code: i32, accepted: &[i32]) -> bool {
    code == 0 || accepted.contains(&code)
}

/// Compares `outcome` (in caller-facing `state`) with the declaration. The tool result's
/// `success` never depends on this: a declaration classifies the outcome for the ledger and the
/// caller, it does not turn a failed run into a successful call.
pub fn classify(
    declared: ResultExpectation,
    accepted: &[i32],
    state: ExecState,
    outcome: Option<&WorkOutcome>,
) -> ExpectationView {
    let matched = (!state.is_pending()).then(|| match outcome {
        Some(o) if o.termination == Termination::Exited => {
            let ok = o
                .exit_code
                .is_some_and(|c| exit_counts_as_success(c, accepted));
            match declared {
                ResultExpectation::Success => ok,
                ResultExpectation::Failure => !ok && o.exit_code.is_some(),
                ResultExpectation::Observe => true,
            }
        }
        // Killed by a signal, timed out, cancelled, rejected, not started, lost: fail closed.
        _ => false,
    });
    ExpectationView {
        declared,
        accepted_exit_codes: accepted.to_vec(),
        matched,
        actionable: matched == Some(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exited(code: i32) -> WorkOutcome {
        WorkOutcome {
            exit_code: Some(code),
            duration_ms: 1,
            ..WorkOutcome::ended(Termination::Exited)
        }
    }

    fn ended(t: Termination) -> WorkOutcome {
        WorkOutcome {
            termination: t,
            exit_code: None,
            ..exited(0)
        }
    }

    #[test]
    fn declarations_match_only_completed_results() {
        use ResultExpectation::*;
        let cases = [
            (Success, vec![], exited(0), Some(true)),
            (Success, vec![], exited(1), Some(false)),
            (Success, vec![1], exited(1), Some(true)),
            (Failure, vec![], exited(1), Some(true)),
            (Failure, vec![], exited(0), Some(false)),
            (Failure, vec![1], exited(1), Some(false)),
            (Observe, vec![], exited(7), Some(true)),
            (Observe, vec![], ended(Termination::TimedOut), Some(false)),
            (
                Failure,
                vec![],
                ended(Termination::SpawnFailed),
                Some(false),
            ),
            (Failure, vec![], ended(Termination::Rejected), Some(false)),
            (Observe, vec![], ended(Termination::Cancelled), Some(false)),
        ];
        for (declared, accepted, outcome, want) in cases {
            let got = classify(declared, &accepted, ExecState::Failed, Some(&outcome));
            assert_eq!(got.matched, want, "{declared:?} {accepted:?} {outcome:?}");
            assert_eq!(got.actionable, want == Some(false));
        }
    }

    #[test]
    fn unknown_outcomes_fail_closed_and_pending_ones_are_undecided() {
        let lost = classify(ResultExpectation::Observe, &[], ExecState::Lost, None);
        assert_eq!((lost.matched, lost.actionable), (Some(false), true));
        let running = classify(ResultExpectation::Success, &[], ExecState::Running, None);
        assert_eq!((running.matched, running.actionable), (None, false));
    }
}
