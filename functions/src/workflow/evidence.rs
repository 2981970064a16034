//! Loading a session's evidence once, consistently, and turning it into the projections the
//! session tools return (continuation feedback, the handoff brief).

use serde_json::{Map, Value};
use uuid::Uuid;
use wc_domain::EventKind;
use wc_store::sessions::{EventRow, SessionRow};

use super::excerpt::SourceText;
use super::feedback::{self, ContinuationFeedback, ExplorationLimit, FeedbackInput, LedgerEvent};
use super::handoff::{self, BriefInput, CollaborationCounts, HandoffBrief, JobCounts};
use super::handoff::{ValidationEvidence, WorkspaceEvidence};
use super::validation;
use crate::result::{ErrorKind, ToolError};

/// Kind of the event that opens an attempt.
pub const TASK_INSTRUCTION: EventKind = EventKind::TaskInstruction;

/// A session and its retained events, read in one snapshot.
#[derive(Debug, Clone)]
pub struct Evidence {
    /// The session row.
    pub session: SessionRow,
    /// Retained events, ascending by seq.
    pub events: Vec<EventRow>,
    /// The message board's counts.
    pub board: wc_store::board::BoardCounts,
    /// The session's open work.
    pub work: wc_store::work::OpenWork,
}

impl Evidence {
    /// Reads the evidence of `id`; the caller has already authorized it.
    pub async fn load(
        pool: &wc_store::Pool,
        id: &wc_domain::SessionId,
    ) -> Result<Evidence, ToolError> {
        match wc_store::evidence::snapshot(pool, id).await? {
            Some((session, events, board, work)) => Ok(Evidence {
                session,
                events,
                board,
                work,
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
                kind: e.kind,
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
            jobs: self.jobs(),
            open_risks: open_risks(&ledger),
            exploration_limit: limit,
        })
    }

    /// The session's validation: projected from its retained ledger when `include`, else
    /// `not_requested` (never shown as `not_run`).
    pub fn validation(&self, include: bool) -> ValidationEvidence {
        if !include {
            return ValidationEvidence::NotRequested;
        }
        validation::project(&self.ledger(None)).evidence()
    }

    /// Job attention over all of the session's open work.
    pub fn jobs(&self) -> JobCounts {
        let n = |c: i64| u64::try_from(c).unwrap_or(0);
        JobCounts {
            active: n(self.work.active),
            recovering: n(self.work.recovering),
            blocking: n(self.work.stopping),
        }
    }

    /// The version-1 handoff brief.
    pub fn brief(
        &self,
        workspace: &WorkspaceEvidence,
        validation: &ValidationEvidence,
        snapshot_changed: bool,
    ) -> HandoffBrief {
        let ledger = self.ledger(None);
        let recent_files = recent_files(&ledger);
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
            jobs: self.jobs(),
            collaboration: CollaborationCounts {
                open_questions: self.board.open_questions.max(0) as u64,
                open_todos: self.board.open_todos.max(0) as u64,
                unresolved_ack_required: self.board.open_ack_required.max(0) as u64,
            },
            open_risks: open_risks(&ledger),
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
            e.kind == EventKind::ToolCallFinished
                && e.payload.get("success") == Some(&Value::Bool(true))
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

/// The change evidence of a one-file edit's output (`{path, changed}`): the file, when it
/// changed.
pub fn changed_file_facts(output: &Value) -> Map<String, Value> {
    let changed = (output["changed"] == true).then_some(&output["path"]);
    path_facts("changed_paths", changed.into_iter())
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

/// Tools whose success is a look at the workspace: after one, whatever an earlier lost run or
/// uncertain edit did is in view.
const WORKSPACE_LOOKS: [&str; 2] = ["git_status", "git_diff"];

/// Tools that change the project.
const PROJECT_CHANGES: [&str; 3] = ["apply_text_edits", "apply_patch", "git_commit"];

/// Open risks: executions whose outcome is unknown (`lost`) and project changes whose outcome
/// is unknown (a call that timed out or was lost), since the last successful look at the
/// workspace ([`WORKSPACE_LOOKS`]). Each is something that may have changed the project
/// unseen.
pub fn open_risks(ledger: &[LedgerEvent<'_>]) -> u64 {
    let mut open = 0;
    for e in ledger {
        let p = e.payload;
        let tool = p["tool"].as_str().unwrap_or("");
        match e.kind {
            EventKind::ExecutionFinished if p["execution_state"] == "lost" => open += 1,
            EventKind::ToolCallFinished
                if p["success"] == Value::Bool(true) && WORKSPACE_LOOKS.contains(&tool) =>
            {
                open = 0;
            }
            EventKind::ToolCallFinished if PROJECT_CHANGES.contains(&tool) => {
                let unknown = matches!(
                    p["error_kind"].as_str(),
                    Some("timed_out" | "lost" | "dispatch_timeout")
                ) || p["execution_state"] == "timed_out";
                if unknown {
                    open += 1;
                }
            }
            _ => {}
        }
    }
    open
}

/// Workspace evidence that was not looked at: `not_requested`, or `unavailable` when
/// requested but nothing here can look.
pub fn unobserved_workspace(include_workspace: bool) -> WorkspaceEvidence {
    if include_workspace {
        WorkspaceEvidence::Unavailable {
            reason: "not_observed",
        }
    } else {
        WorkspaceEvidence::NotRequested
    }
}
