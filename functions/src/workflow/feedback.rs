//! Continuation feedback (`continuation_feedback`): a deterministic description of the
//! previous attempt of a Workflow Session, for the window or Agent that continues it.
//!
//! [`build`] is a pure projection over a ledger window and evidence its caller already loaded:
//! no I/O, no clock, no ledger writes, no model. It never substitutes for a
//! `finish_coding_task` verdict.
//!
//! # The attempt window
//!
//! The attempt starts at the most recent retained `task_instruction` event (inclusive) and runs
//! to the newest event given. With no retained `task_instruction`, the attempt starts at
//! session start only when the given window provably begins there (retention did not truncate
//! the ledger and the slice starts at `retained_from_seq`); otherwise the boundary is
//! `unavailable` with `attempt_boundary_evicted`, and both `event_range.complete` and
//! `exploration.complete` are false. A truncated window is never presented as a complete
//! `session_start` attempt.
//!
//! # Ledger conventions read here
//!
//! - A `task_instruction` payload carries the stored excerpt as
//!   `{"excerpt": "<redacted text>", "truncated": bool}` (see
//!   [`SourceText::from_stored`]); the excerpt is redacted and bounded again here.
//! - Exploration evidence is the `"exploration_paths": ["<project-relative path>", ...]` array of
//!   a `tool_call_finished` payload whose `"success"` is `true`. The recorder attaches it only for
//!   focused reads, searches and LSP navigation; every other event, a failed call, and a
//!   non-string array element contribute nothing. Paths are taken newest event first, each
//!   event's array in its own order, keeping the first occurrence.
//! - `tool_call_finished` with `"success": false` counts as a failed tool call.
//! - One call may leave two pairs in one session: its recorder's (role `recorder`) and its
//!   business pair (role `business`), sharing an invocation id. The projections then count the
//!   business pair only ([`preferred`]): one call is one call, and the business pair is the
//!   authoritative fact about the work. The raw ledger keeps both; `event_range` counts raw
//!   events.
//!
//! # JSON shape
//!
//! ```text
//! {"status": "not_applicable", "reason_code": "fresh_session"}
//! | {
//!   "status": "available",
//!   "attempt": {
//!     "boundary": {"source": "task_instruction", "seq": n}
//!               | {"source": "session_start", "seq"?: n}
//!               | {"source": "unavailable", "reason_code": "attempt_boundary_evicted"},
//!     "event_range": {"from_seq": n | null, "to_seq": n | null, "events": n, "complete": bool},
//!     "instruction": {"text": str, "truncated": bool} | null,
//!     "activity": {
//!       "events_by_kind": {"<kind>": n, ...},
//!       "tool_calls": {"started": n, "finished": n, "failed": n, "by_tool": {"<tool>": n, ...}}
//!     },
//!     "changes": {"status": "available", "dirty": bool, "conflict": bool, "changed_paths": LIST<str>}
//!              | {"status": "not_requested" | "unavailable"},
//!     "validation": {"status": "failed", "failure_identities": LIST<str>}
//!                 | {"status": "passed" | "not_run" | "not_requested" | "unavailable"},
//!     "jobs": {"active": n, "recovering": n, "blocking": n},
//!     "open_risks": n,
//!     "exploration": {"items": [str], "total": n, "returned": n, "truncated": bool,
//!                     "limit": 3 | 12 | 100, "complete": bool}
//!   },
//!   "suggested_actions": LIST<{"action": ACTION, "target"?: str}>,
//!   "basis": {"complete": bool, "reason_codes": [REASON, ...]}
//! }
//! LIST<T> = {"items": [T, ...], "total": n, "returned": n, "truncated": bool}
//! ```
//!
//! `by_tool` counts finished calls per tool name. `ACTION` and `REASON` are the vocabularies of
//! [`ActionKind`](super::handoff::ActionKind) and [`ReasonCode`]; the actions follow the same
//! derivation as the handoff brief's next actions, so the first names the first unresolved
//! failure identity when there is one.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use wc_domain::{EventKind, EventRole, Lifecycle};

use super::excerpt::{self, BoundedList, Excerpt, INSTRUCTION_EXCERPT_CHARS, SourceText};
use super::handoff::{
    Basis, CollaborationCounts, Facts, JobCounts, NEXT_ACTIONS_MAX, NextAction, ReasonCode,
    ValidationEvidence, ValidationView, WorkspaceEvidence, WorkspaceView,
};

/// Changed workspace paths kept in continuation feedback (the detailed view; the brief keeps
/// fewer).
pub const CHANGED_PATHS_MAX: usize = 50;

const TASK_INSTRUCTION: EventKind = EventKind::TaskInstruction;
const TOOL_CALL_STARTED: EventKind = EventKind::ToolCallStarted;
const TOOL_CALL_FINISHED: EventKind = EventKind::ToolCallFinished;
const RECORDER: EventRole = EventRole::Recorder;
const BUSINESS: EventRole = EventRole::Business;

fn is_call_event(event: &LedgerEvent<'_>) -> bool {
    event.kind == TOOL_CALL_STARTED || event.kind == TOOL_CALL_FINISHED
}

/// The events the projections read: all of `events` but the recorder's `tool_call_started` /
/// `tool_call_finished` of an invocation whose business pair is in `events` too, so a call
/// recorded in its own business session counts once, as its business facts.
pub fn preferred<'e, 'a>(events: &[&'e LedgerEvent<'a>]) -> Vec<&'e LedgerEvent<'a>> {
    let with_business: std::collections::BTreeSet<Uuid> = events
        .iter()
        .filter(|e| e.role == BUSINESS && is_call_event(e))
        .map(|e| e.invocation_id)
        .collect();
    events
        .iter()
        .copied()
        .filter(|e| {
            !(e.role == RECORDER && is_call_event(e) && with_business.contains(&e.invocation_id))
        })
        .collect()
}

/// One retained ledger event, borrowed from the caller's loaded rows.
#[derive(Debug, Clone, Copy)]
pub struct LedgerEvent<'a> {
    /// Position in the Session ledger.
    pub seq: i64,
    /// Event kind.
    pub kind: EventKind,
    /// Recorder or business.
    pub role: EventRole,
    /// The kernel invocation that wrote it.
    pub invocation_id: Uuid,
    /// Tool name, for tool-call events.
    pub tool_name: Option<&'a str>,
    /// Bounded, already-redacted payload.
    pub payload: &'a Value,
}

/// How many exploration paths to return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExplorationLimit {
    /// Minimal startup: 3 paths.
    Minimal,
    /// Standard startup: 12 paths.
    Standard,
    /// Full continuation feedback: 100 paths.
    Full,
}

impl ExplorationLimit {
    /// The number of paths this limit allows.
    pub const fn max_paths(self) -> usize {
        match self {
            Self::Minimal => 3,
            Self::Standard => 12,
            Self::Full => 100,
        }
    }
}

/// Everything continuation feedback is built from, already loaded by the caller.
#[derive(Debug, Clone, Copy)]
pub struct FeedbackInput<'a> {
    /// The Session was just created by this call: there is no previous attempt.
    pub fresh_session: bool,
    /// Retained events ordered by seq; for startup, the state before the new instruction.
    pub events: &'a [LedgerEvent<'a>],
    /// Events older than `retained_from_seq` were deleted by retention.
    pub retention_truncated: bool,
    /// Lowest seq still retained in the Session ledger.
    pub retained_from_seq: i64,
    /// Workspace evidence.
    pub workspace: &'a WorkspaceEvidence,
    /// Validation evidence.
    pub validation: &'a ValidationEvidence,
    /// The Session's open Jobs.
    pub jobs: JobCounts,
    /// Open risks of the attempt.
    pub open_risks: u64,
    /// Exploration paths to return.
    pub exploration_limit: ExplorationLimit,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "source", rename_all = "snake_case")]
enum Boundary {
    TaskInstruction {
        seq: i64,
    },
    SessionStart {
        #[serde(skip_serializing_if = "Option::is_none")]
        seq: Option<i64>,
    },
    Unavailable {
        reason_code: ReasonCode,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct EventRange {
    from_seq: Option<i64>,
    to_seq: Option<i64>,
    events: usize,
    complete: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
struct ToolCalls {
    started: u64,
    finished: u64,
    failed: u64,
    by_tool: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
struct Activity {
    events_by_kind: BTreeMap<String, u64>,
    tool_calls: ToolCalls,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct Exploration {
    #[serde(flatten)]
    paths: BoundedList<String>,
    limit: usize,
    complete: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct Attempt {
    boundary: Boundary,
    event_range: EventRange,
    instruction: Option<Excerpt>,
    activity: Activity,
    changes: WorkspaceView,
    validation: ValidationView,
    jobs: JobCounts,
    open_risks: u64,
    exploration: Exploration,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum NotApplicableReason {
    FreshSession,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
enum Projection {
    NotApplicable {
        reason_code: NotApplicableReason,
    },
    Available {
        attempt: Box<Attempt>,
        suggested_actions: BoundedList<NextAction>,
        basis: Basis,
    },
}

/// Built continuation feedback; serialize it (or call [`ContinuationFeedback::to_json`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ContinuationFeedback(Projection);

impl ContinuationFeedback {
    /// False for a fresh Session (`not_applicable`).
    pub fn is_applicable(&self) -> bool {
        matches!(self.0, Projection::Available { .. })
    }

    /// The feedback as a JSON value (the shape in the module documentation).
    pub fn to_json(&self) -> Value {
        // Every map key is a string, so serialization cannot fail; `Null` is unreachable but
        // keeps this path free of panics.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// Builds continuation feedback for the previous (latest) attempt of a Session.
pub fn build(input: &FeedbackInput<'_>) -> ContinuationFeedback {
    if input.fresh_session {
        return ContinuationFeedback(Projection::NotApplicable {
            reason_code: NotApplicableReason::FreshSession,
        });
    }

    // Sorting a copy keeps the projection deterministic even if a caller hands the rows over
    // out of order.
    let mut events: Vec<&LedgerEvent<'_>> = input.events.iter().collect();
    events.sort_by_key(|e| e.seq);

    let instruction_at = events.iter().rposition(|e| e.kind == TASK_INSTRUCTION);
    let starts_at_session_start = !input.retention_truncated
        && events
            .first()
            .is_none_or(|e| e.seq <= input.retained_from_seq);
    let (boundary, window, complete) = match instruction_at {
        Some(i) => (
            Boundary::TaskInstruction { seq: events[i].seq },
            &events[i..],
            true,
        ),
        None if starts_at_session_start => (
            Boundary::SessionStart {
                seq: events.first().map(|e| e.seq),
            },
            &events[..],
            true,
        ),
        None => (
            Boundary::Unavailable {
                reason_code: ReasonCode::AttemptBoundaryEvicted,
            },
            &events[..],
            false,
        ),
    };
    let evicted = !complete;

    let instruction = instruction_at
        .and_then(|i| SourceText::from_stored(events[i].payload))
        .map(|s| s.excerpt(INSTRUCTION_EXCERPT_CHARS));

    let limit = input.exploration_limit.max_paths();
    let attempt = Attempt {
        boundary,
        event_range: EventRange {
            from_seq: window.first().map(|e| e.seq),
            to_seq: window.last().map(|e| e.seq),
            events: window.len(),
            complete,
        },
        instruction,
        activity: activity(&preferred(window)),
        changes: WorkspaceView::new(input.workspace, CHANGED_PATHS_MAX),
        validation: ValidationView::new(input.validation),
        jobs: input.jobs,
        open_risks: input.open_risks,
        exploration: Exploration {
            paths: BoundedList::new(
                exploration_paths(&preferred(window))
                    .into_iter()
                    .map(str::to_owned),
                limit,
            ),
            limit,
            complete,
        },
    };

    // Feedback describes an attempt, not the Session's lifecycle or message board, so only the
    // evidence facts feed the shared action derivation.
    let facts = Facts {
        lifecycle: Lifecycle::Active,
        workspace: input.workspace,
        validation: input.validation,
        jobs: input.jobs,
        collaboration: CollaborationCounts::default(),
        open_risks: input.open_risks,
        attempt_boundary_evicted: evicted,
    };
    let (state, _) = facts.progress();
    ContinuationFeedback(Projection::Available {
        attempt: Box::new(attempt),
        suggested_actions: BoundedList::new(facts.actions(state), NEXT_ACTIONS_MAX),
        basis: Basis::new(Basis::evidence_codes(
            input.workspace,
            input.validation,
            evicted,
        )),
    })
}

fn success(event: &LedgerEvent<'_>) -> Option<bool> {
    event.payload.get("success").and_then(Value::as_bool)
}

fn activity(window: &[&LedgerEvent<'_>]) -> Activity {
    let mut out = Activity::default();
    for event in window {
        *out.events_by_kind
            .entry(event.kind.as_str().to_owned())
            .or_default() += 1;
        match event.kind {
            TOOL_CALL_STARTED => out.tool_calls.started += 1,
            TOOL_CALL_FINISHED => {
                out.tool_calls.finished += 1;
                if success(event) == Some(false) {
                    out.tool_calls.failed += 1;
                }
                if let Some(tool) = event.tool_name {
                    *out.tool_calls.by_tool.entry(tool.to_owned()).or_default() += 1;
                }
            }
            _ => {}
        }
    }
    out
}

/// The attempt's exploration workset, newest first, deduplicated.
fn exploration_paths<'a>(window: &[&'a LedgerEvent<'a>]) -> Vec<&'a str> {
    let observed = window
        .iter()
        .rev()
        .filter(|e| e.kind == TOOL_CALL_FINISHED && success(e) == Some(true))
        .filter_map(|e| e.payload.get("exploration_paths").and_then(Value::as_array))
        .flatten()
        .filter_map(Value::as_str);
    excerpt::first_occurrences(observed)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// One owned event: seq, kind, tool, payload, role, invocation.
    type Row = (i64, EventKind, Option<&'static str>, Value, EventRole, Uuid);

    /// Owned events a test can borrow [`LedgerEvent`]s from.
    struct Ledger(Vec<Row>);

    impl Ledger {
        fn new() -> Self {
            Self(vec![(
                1,
                EventKind::SessionContextUpdated,
                None,
                json!({}),
                BUSINESS,
                Uuid::now_v7(),
            )])
        }

        /// An event of its own invocation, recorded by a recorder.
        fn push(&mut self, kind: EventKind, tool: Option<&'static str>, payload: Value) {
            self.push_as(kind, tool, payload, RECORDER, Uuid::now_v7());
        }

        fn push_as(
            &mut self,
            kind: EventKind,
            tool: Option<&'static str>,
            payload: Value,
            role: EventRole,
            invocation: Uuid,
        ) {
            let seq = self.0.last().map_or(1, |e| e.0 + 1);
            self.0.push((seq, kind, tool, payload, role, invocation));
        }

        fn instruction(&mut self, text: &str) {
            self.push(
                TASK_INSTRUCTION,
                None,
                json!({"excerpt": text, "truncated": false}),
            );
        }

        fn explored(&mut self, success: bool, paths: &[&str]) {
            self.push(TOOL_CALL_STARTED, Some("read_files"), json!({}));
            self.push(
                TOOL_CALL_FINISHED,
                Some("read_files"),
                json!({"success": success, "exploration_paths": paths}),
            );
        }

        fn events(&self) -> Vec<LedgerEvent<'_>> {
            self.0
                .iter()
                .map(
                    |(seq, kind, tool_name, payload, role, invocation)| LedgerEvent {
                        seq: *seq,
                        kind: *kind,
                        role: *role,
                        invocation_id: *invocation,
                        tool_name: *tool_name,
                        payload,
                    },
                )
                .collect()
        }

        /// Drops events older than `from`, as retention would.
        fn retain_from(&mut self, from: i64) {
            self.0.retain(|e| e.0 >= from);
        }
    }

    const PASSED: ValidationEvidence = ValidationEvidence::Passed;

    fn clean() -> WorkspaceEvidence {
        WorkspaceEvidence::Available {
            changed_paths: vec![],
            conflict: false,
            dirty: false,
        }
    }

    fn input<'a>(
        events: &'a [LedgerEvent<'a>],
        workspace: &'a WorkspaceEvidence,
        validation: &'a ValidationEvidence,
    ) -> FeedbackInput<'a> {
        FeedbackInput {
            fresh_session: false,
            events,
            retention_truncated: false,
            retained_from_seq: 1,
            workspace,
            validation,
            jobs: JobCounts::default(),
            open_risks: 0,
            exploration_limit: ExplorationLimit::Full,
        }
    }

    #[test]
    fn a_fresh_session_is_not_applicable() {
        let ws = clean();
        let mut i = input(&[], &ws, &PASSED);
        i.fresh_session = true;
        let f = build(&i);
        assert!(!f.is_applicable());
        assert_eq!(
            f.to_json(),
            json!({"status": "not_applicable", "reason_code": "fresh_session"})
        );
    }

    #[test]
    fn the_boundary_is_the_latest_task_instruction() {
        let mut ledger = Ledger::new();
        ledger.instruction("first task");
        ledger.explored(true, &["old.rs"]);
        ledger.instruction("second task with password=hunter2hunter2");
        ledger.explored(true, &["src/new.rs"]);
        ledger.explored(false, &["src/failed.rs"]);
        let events = ledger.events();
        let ws = clean();
        let v = build(&input(&events, &ws, &PASSED)).to_json();
        let attempt = &v["attempt"];
        assert_eq!(v["status"], "available");
        assert_eq!(
            attempt["boundary"],
            json!({"source": "task_instruction", "seq": 5})
        );
        assert_eq!(
            attempt["event_range"],
            json!({"from_seq": 5, "to_seq": 9, "events": 5, "complete": true})
        );
        let text = attempt["instruction"]["text"].as_str().unwrap_or_default();
        assert!(
            text.starts_with("second task") && !text.contains("hunter2hunter2"),
            "{text}"
        );
        assert_eq!(attempt["instruction"]["truncated"], true);
        assert_eq!(
            attempt["activity"],
            json!({
                "events_by_kind": {"task_instruction": 1, "tool_call_started": 2, "tool_call_finished": 2},
                "tool_calls": {"started": 2, "finished": 2, "failed": 1, "by_tool": {"read_files": 2}}
            })
        );
        assert_eq!(attempt["exploration"]["items"], json!(["src/new.rs"]));
        assert_eq!(attempt["exploration"]["complete"], true);
        assert_eq!(v["basis"], json!({"complete": true, "reason_codes": []}));
        assert_eq!(
            v["suggested_actions"]["items"],
            json!([{"action": "continue_task"}])
        );
    }

    #[test]
    fn a_call_recorded_in_its_own_business_session_counts_once_as_its_business_facts() {
        let mut ledger = Ledger::new();
        ledger.instruction("both pairs");
        // One invocation, recorded in this session as recorder and as business session: the
        // business pair nests inside the recorder's. The recorder's finished says nothing of
        // what was explored; the business pair's is the fact.
        let both = Uuid::now_v7();
        let read = Some("read_files");
        ledger.push_as(TOOL_CALL_STARTED, read, json!({}), RECORDER, both);
        ledger.push_as(TOOL_CALL_STARTED, read, json!({}), BUSINESS, both);
        ledger.push_as(
            TOOL_CALL_FINISHED,
            read,
            json!({"success": false, "exploration_paths": ["src/business.rs"]}),
            BUSINESS,
            both,
        );
        ledger.push_as(
            TOOL_CALL_FINISHED,
            read,
            json!({"success": true, "exploration_paths": ["src/recorder.rs"]}),
            RECORDER,
            both,
        );
        // Another call recorded only by its recorder still counts.
        ledger.explored(true, &["src/alone.rs"]);
        let events = ledger.events();
        let ws = clean();
        let v = build(&input(&events, &ws, &PASSED)).to_json();
        let attempt = &v["attempt"];
        assert_eq!(
            attempt["activity"],
            json!({
                "events_by_kind": {"task_instruction": 1, "tool_call_started": 2, "tool_call_finished": 2},
                "tool_calls": {"started": 2, "finished": 2, "failed": 1, "by_tool": {"read_files": 2}}
            })
        );
        assert_eq!(attempt["exploration"]["items"], json!(["src/alone.rs"]));
        // The range is raw ledger: every event is still there.
        assert_eq!(attempt["event_range"]["events"], 7);
    }

    #[test]
    fn without_an_instruction_a_complete_ledger_starts_at_session_start() {
        let mut ledger = Ledger::new();
        ledger.explored(true, &["a.rs"]);
        let events = ledger.events();
        let ws = clean();
        let v = build(&input(&events, &ws, &PASSED)).to_json();
        assert_eq!(
            v["attempt"]["boundary"],
            json!({"source": "session_start", "seq": 1})
        );
        assert_eq!(v["attempt"]["event_range"]["complete"], true);
        assert_eq!(v["attempt"]["instruction"], Value::Null);
    }

    #[test]
    fn an_evicted_boundary_is_reported_and_never_passed_off_as_session_start() {
        let mut ledger = Ledger::new();
        ledger.instruction("the task");
        for n in 0..5 {
            ledger.explored(true, &[["a.rs", "b.rs", "c.rs", "d.rs", "e.rs"][n]]);
        }
        ledger.retain_from(5);
        let events = ledger.events();
        let ws = clean();
        let mut i = input(&events, &ws, &PASSED);
        i.retention_truncated = true;
        i.retained_from_seq = 5;
        let v = build(&i).to_json();
        let attempt = &v["attempt"];
        assert_eq!(
            attempt["boundary"],
            json!({"source": "unavailable", "reason_code": "attempt_boundary_evicted"})
        );
        assert_eq!(attempt["event_range"]["complete"], false);
        assert_eq!(attempt["event_range"]["from_seq"], 5);
        assert_eq!(attempt["instruction"], Value::Null);
        assert_eq!(attempt["exploration"]["complete"], false);
        assert_eq!(
            attempt["exploration"]["items"],
            json!(["e.rs", "d.rs", "c.rs", "b.rs"])
        );
        assert_eq!(
            v["basis"],
            json!({"complete": false, "reason_codes": ["attempt_boundary_evicted"]})
        );
        assert_eq!(
            v["suggested_actions"]["items"],
            json!([{"action": "confirm_task_instruction"}])
        );

        // A caller-narrowed slice cannot prove the session start either.
        let mut i = input(&events, &ws, &PASSED);
        i.retained_from_seq = 1;
        assert_eq!(
            build(&i).to_json()["attempt"]["boundary"]["source"],
            "unavailable"
        );
    }

    #[test]
    fn exploration_is_deduplicated_newest_first_and_bounded_by_limit() {
        let mut ledger = Ledger::new();
        ledger.instruction("explore");
        let paths: Vec<String> = (0..150).map(|n| format!("src/m{n:03}.rs")).collect();
        // Oldest first in the ledger, each path observed twice.
        for pair in paths.chunks(2) {
            let pair: Vec<&str> = pair.iter().map(String::as_str).collect();
            ledger.explored(true, &pair);
            ledger.explored(true, &pair);
        }
        // Only successful tool_call_finished payloads count.
        ledger.push(
            EventKind::ExecutionFinished,
            None,
            json!({"exploration_paths": ["diff.rs"]}),
        );
        ledger.push(
            TOOL_CALL_FINISHED,
            Some("list_project_files"),
            json!({"success": true}),
        );
        ledger.push(
            TOOL_CALL_FINISHED,
            Some("read_files"),
            json!({"success": true, "exploration_paths": [7, "src/m149.rs"]}),
        );
        let events = ledger.events();
        let ws = clean();
        let newest_first: Vec<String> = {
            let mut out = vec!["src/m149.rs".to_owned()];
            for pair in paths.chunks(2).rev() {
                for p in pair {
                    if !out.contains(p) {
                        out.push(p.clone());
                    }
                }
            }
            out
        };
        for (limit, n) in [
            (ExplorationLimit::Minimal, 3),
            (ExplorationLimit::Standard, 12),
            (ExplorationLimit::Full, 100),
        ] {
            let mut i = input(&events, &ws, &PASSED);
            i.exploration_limit = limit;
            let v = build(&i).to_json();
            let e = &v["attempt"]["exploration"];
            assert_eq!(e["items"], json!(newest_first[..n]), "{limit:?}");
            assert_eq!(e["total"], 150);
            assert_eq!(e["returned"], n);
            assert_eq!(e["truncated"], true);
            assert_eq!(e["limit"], n);
            assert_eq!(e["complete"], true);
        }
    }

    #[test]
    fn validation_not_requested_is_not_fabricated_as_not_run() {
        let ledger = Ledger::new();
        let events = ledger.events();
        let ws = WorkspaceEvidence::NotRequested;
        let v = build(&input(&events, &ws, &ValidationEvidence::NotRequested)).to_json();
        assert_eq!(
            v["attempt"]["validation"],
            json!({"status": "not_requested"})
        );
        assert_eq!(v["attempt"]["changes"], json!({"status": "not_requested"}));
        assert_eq!(
            v["basis"],
            json!({"complete": false, "reason_codes": ["validation_not_requested", "workspace_not_requested"]})
        );
    }

    #[test]
    fn the_first_suggested_action_names_the_first_failure() {
        let ledger = Ledger::new();
        let events = ledger.events();
        let ws = WorkspaceEvidence::Available {
            changed_paths: (0..60).map(|n| format!("f{n}.rs")).collect(),
            conflict: false,
            dirty: true,
        };
        let failed = ValidationEvidence::Failed {
            failure_identities: (0..7).map(|n| format!("cargo_test:t{n}")).collect(),
        };
        let v = build(&input(&events, &ws, &failed)).to_json();
        assert_eq!(
            v["suggested_actions"]["items"][0],
            json!({"action": "fix_validation_failure", "target": "cargo_test:t0"})
        );
        let fi = &v["attempt"]["validation"]["failure_identities"];
        assert_eq!(
            (fi["total"].as_u64(), fi["returned"].as_u64()),
            (Some(7), Some(5))
        );
        let cp = &v["attempt"]["changes"]["changed_paths"];
        assert_eq!(
            (cp["total"].as_u64(), cp["returned"].as_u64()),
            (Some(60), Some(CHANGED_PATHS_MAX as u64))
        );
    }
}
