//! Loading a session's evidence once, consistently, and turning it into the projections the
//! session tools return (continuation feedback, the handoff brief).

use serde_json::{Map, Value};
use uuid::Uuid;
use wc_store::sessions::{EventRow, SessionRow};

use super::excerpt::SourceText;
use super::feedback::{self, ContinuationFeedback, ExplorationLimit, FeedbackInput, LedgerEvent};
use super::handoff::{self, BriefInput, CollaborationCounts, HandoffBrief, JobCounts};
use super::handoff::{ValidationEvidence, WorkspaceEvidence};
use crate::result::{ErrorKind, ToolError};

/// Kind of the event that opens an attempt.
pub const TASK_INSTRUCTION: &str = "task_instruction";

/// A session and its retained events, read in one snapshot.
#[derive(Debug, Clone)]
pub struct Evidence {
    /// The session row.
    pub session: SessionRow,
    /// Retained events, ascending by seq.
    pub events: Vec<EventRow>,
    /// The message board's counts.
    pub board: wc_store::board::BoardCounts,
}

impl Evidence {
    /// Reads the evidence of `id`; the caller has already authorized it.
    pub async fn load(
        pool: &wc_store::Pool,
        id: &wc_domain::SessionId,
    ) -> Result<Evidence, ToolError> {
        match wc_store::evidence::snapshot(pool, id).await? {
            Some((session, events, board)) => Ok(Evidence {
                session,
                events,
                board,
            }),
            None => Err(ToolError::new(
                ErrorKind::UnknownSessionId,
                "the session no longer exists",
            )),
        }
    }

    /// The ledger as the projections see it, leaving out the events of `exclude` (the calling
    /// invocation's own bookkeeping is not evidence about the work).
    pub fn ledger(&self, exclude: Option<Uuid>) -> Vec<LedgerEvent<'_>> {
        self.events
            .iter()
            .filter(|e| Some(e.invocation_id) != exclude)
            .map(|e| LedgerEvent {
                seq: e.seq,
                kind: &e.kind,
                role: e.role,
                invocation_id: e.invocation_id,
                tool_name: e.tool_name.as_deref(),
                payload: &e.payload,
            })
            .collect()
    }

    /// The newest retained task instruction payload.
    pub fn latest_instruction(&self) -> Option<&Value> {
        self.events
            .iter()
            .rev()
            .find(|e| e.kind == TASK_INSTRUCTION)
            .map(|e| &e.payload)
    }

    /// Whether the current attempt's opening instruction was evicted by retention.
    pub fn boundary_evicted(&self) -> bool {
        self.session.retention_truncated() && self.latest_instruction().is_none()
    }

    /// Continuation feedback about the attempt in this evidence.
    pub fn feedback(
        &self,
        exclude: Option<Uuid>,
        workspace: &WorkspaceEvidence,
        validation: &ValidationEvidence,
        limit: ExplorationLimit,
    ) -> ContinuationFeedback {
        let ledger = self.ledger(exclude);
        feedback::build(&FeedbackInput {
            fresh_session: false,
            events: &ledger,
            retention_truncated: self.session.retention_truncated(),
            retained_from_seq: self.session.retained_from_seq,
            workspace,
            validation,
            exploration_limit: limit,
        })
    }

    /// The version-1 handoff brief.
    pub fn brief(
        &self,
        workspace: &WorkspaceEvidence,
        validation: &ValidationEvidence,
        snapshot_changed: bool,
    ) -> HandoffBrief {
        let recent_files = recent_files(&self.ledger(None));
        handoff::build(&BriefInput {
            lifecycle: self.session.lifecycle,
            mode: self.session.mode,
            root_instruction: self
                .session
                .root_instruction
                .as_ref()
                .and_then(SourceText::from_stored),
            latest_instruction: self.latest_instruction().and_then(SourceText::from_stored),
            workspace,
            validation,
            recent_files: &recent_files,
            jobs: JobCounts::default(),
            collaboration: CollaborationCounts {
                open_questions: self.board.open_questions.max(0) as u64,
                open_todos: self.board.open_todos.max(0) as u64,
                unresolved_ack_required: self.board.open_ack_required.max(0) as u64,
            },
            open_risks: 0,
            attempt_boundary_evicted: self.boundary_evicted(),
            snapshot_changed,
        })
    }
}

/// Exploration paths recorded by successful calls, newest first, each call counted once as its
/// business facts ([`feedback::preferred`]).
fn recent_files(ledger: &[LedgerEvent<'_>]) -> Vec<String> {
    let events: Vec<&LedgerEvent<'_>> = ledger.iter().collect();
    feedback::preferred(&events)
        .into_iter()
        .rev()
        .filter(|e| {
            e.kind == "tool_call_finished" && e.payload.get("success") == Some(&Value::Bool(true))
        })
        .filter_map(|e| e.payload.get("exploration_paths").and_then(Value::as_array))
        .flatten()
        .filter_map(|p| p.as_str().map(str::to_owned))
        .collect()
}

/// Most paths one call records under one key.
pub const MAX_PATHS_PER_CALL: usize = 32;

/// The exploration evidence of a successful focused read or search, as `tool_call_finished`
/// fields: `{"exploration_paths": [...]}` ([`path_facts`]).
pub fn exploration_facts<'a>(paths: impl Iterator<Item = &'a Value>) -> Map<String, Value> {
    path_facts("exploration_paths", paths)
}

/// Paths as `tool_call_finished` fields: `{key: [...]}` holding the first
/// [`MAX_PATHS_PER_CALL`] distinct values that are valid project-relative paths and that
/// redaction leaves as they are (a path that looks like a secret is not evidence). Nothing else
/// of the call is kept.
pub fn path_facts<'a>(key: &str, paths: impl Iterator<Item = &'a Value>) -> Map<String, Value> {
    let mut kept: Vec<&str> = Vec::new();
    for path in paths.filter_map(Value::as_str) {
        if kept.len() == MAX_PATHS_PER_CALL {
            break;
        }
        let valid = wc_domain::RelativePath::parse(path).is_ok_and(|p| !p.is_root());
        if valid && crate::redaction::redact(path) == path && !kept.contains(&path) {
            kept.push(path);
        }
    }
    let mut facts = Map::new();
    facts.insert(key.to_owned(), Value::from(kept));
    facts
}

/// Workspace and validation evidence until a runner can observe them: requested ones are
/// honestly unavailable, unrequested ones are reported as not requested.
pub fn unobserved(
    include_workspace: bool,
    include_validation: bool,
) -> (WorkspaceEvidence, ValidationEvidence) {
    (
        if include_workspace {
            WorkspaceEvidence::Unavailable
        } else {
            WorkspaceEvidence::NotRequested
        },
        if include_validation {
            ValidationEvidence::Unavailable
        } else {
            ValidationEvidence::NotRequested
        },
    )
}
