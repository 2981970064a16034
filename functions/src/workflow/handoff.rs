//! The version-1 task handoff brief (`handoff_brief`): the compact, deterministic view of a
//! Workflow Session for a new window, a new Agent or a human receiver.
//!
//! [`build`] is a pure projection over evidence its caller already loaded: it performs no I/O,
//! reads no clock, appends nothing and calls no model, so the same [`BriefInput`] always yields
//! the same bytes. It does not decide that work is complete; it reports what the evidence shows
//! and what is missing.
//!
//! This module also owns the evidence and action vocabulary shared with
//! [`feedback`](super::feedback): [`WorkspaceEvidence`], [`ValidationEvidence`],
//! [`NextAction`] / [`ActionKind`] and [`ReasonCode`].
//!
//! # JSON shape
//!
//! ```text
//! {
//!   "version": 1,
//!   "deterministic": true,
//!   "llm_generated": false,
//!   "lifecycle": "active" | "finished" | "closed",
//!   "mode": "normal" | "read_only",
//!   "progress": {
//!     "state": "closed" | "blocked" | "needs_validation" | "insufficient_evidence" | "ready_to_continue",
//!     "blockers": ["workspace_conflict" | "blocking_job" | "recovering_job" | "validation_failed" | "open_risk", ...]
//!   },
//!   "instruction": {
//!     "root": {"text": str, "truncated": bool} | null,
//!     "latest": {"text": str, "truncated": bool} | null,
//!     "latest_is_root": bool
//!   },
//!   "workspace": {"status": "available", "dirty": bool, "conflict": bool, "changed_paths": LIST<str>}
//!              | {"status": "not_requested"} | {"status": "unavailable"},
//!   "validation": {"status": "failed", "failure_identities": LIST<str>}
//!               | {"status": "passed" | "not_run" | "not_requested" | "unavailable"},
//!   "recent_files": LIST<str>,
//!   "attention": {
//!     "jobs": {"active": n, "recovering": n, "blocking": n},
//!     "collaboration": {"open_questions": n, "open_todos": n, "unresolved_ack_required": n},
//!     "open_risks": n
//!   },
//!   "next_actions": LIST<{"action": ACTION, "target"?: str}>,
//!   "basis": {"complete": bool, "reason_codes": [REASON, ...]}
//! }
//! LIST<T> = {"items": [T, ...], "total": n, "returned": n, "truncated": bool}
//! ```
//!
//! `ACTION` is an [`ActionKind`]; `REASON` a [`ReasonCode`] (sorted, deduplicated;
//! `complete == reason_codes.is_empty()`). `blockers` lists, in the fixed order above, every
//! condition that makes the state `blocked` (empty otherwise).
//!
//! # Bounds
//!
//! Instruction excerpts keep at most [`INSTRUCTION_EXCERPT_CHARS`] characters after redaction;
//! lists keep at most [`CHANGED_PATHS_MAX`], [`RECENT_FILES_MAX`], [`FAILURE_IDENTITIES_MAX`]
//! and [`NEXT_ACTIONS_MAX`] items. The serialized brief is then held to [`MAX_BRIEF_BYTES`] by a
//! stable reduction: drop `recent_files` items from the end, then `changed_paths`, then
//! `failure_identities`, then `next_actions`, then shorten the latest instruction excerpt,
//! then the root one (when `latest_is_root` both shrink together, so the same excerpt is still
//! returned). Each reduction keeps `total`, updates `returned` and sets `truncated`. Lifecycle,
//! mode, progress, validation status, attention counts, basis and the flags are never removed.

use std::collections::BTreeSet;
use wc_domain::{Lifecycle, Mode};

use serde::Serialize;

use super::excerpt::{self, BoundedList, Excerpt, INSTRUCTION_EXCERPT_CHARS, SourceText};

/// The brief's format version.
pub const BRIEF_VERSION: u32 = 1;
/// Hard ceiling on `serde_json::to_vec(&brief).len()`.
pub const MAX_BRIEF_BYTES: usize = 8192;
/// Changed workspace paths kept in the brief.
pub const CHANGED_PATHS_MAX: usize = 12;
/// Recent exploration files kept in the brief.
pub const RECENT_FILES_MAX: usize = 8;
/// Unresolved validation failure identities kept (brief and continuation feedback).
pub const FAILURE_IDENTITIES_MAX: usize = 5;
/// Deterministic next actions kept (brief and continuation feedback).
pub const NEXT_ACTIONS_MAX: usize = 5;

/// What the caller knows about the workspace (Git state of the Project).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkspaceEvidence {
    /// The caller was asked not to look (`include_workspace=false`); never an implicit query.
    NotRequested,
    /// The caller looked and could not observe it, for the reason given (a closed code:
    /// `runner_unavailable`, `unsupported`, `not_a_repository`, `git_unavailable`,
    /// `timed_out`, `failed`, or `not_observed` where nothing looks).
    Unavailable {
        /// Why, as a code.
        reason: &'static str,
    },
    /// Observed workspace state.
    Available {
        /// Changed paths, in the caller's order.
        changed_paths: Vec<String>,
        /// A merge/rebase conflict is present.
        conflict: bool,
        /// The worktree has uncommitted changes (not a blocker by itself).
        dirty: bool,
    },
}

impl WorkspaceEvidence {
    fn changed_paths(&self) -> &[String] {
        match self {
            Self::Available { changed_paths, .. } => changed_paths,
            _ => &[],
        }
    }

    fn conflict(&self) -> bool {
        matches!(self, Self::Available { conflict: true, .. })
    }
}

/// What the caller knows about the latest validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValidationEvidence {
    /// The caller was asked not to look (`include_validation=false`); never shown as `not_run`.
    NotRequested,
    /// The caller looked and the evidence could not be read.
    Unavailable,
    /// Evidence was read and no validation ran in the Session.
    NotRun,
    /// The latest validation passed.
    Passed,
    /// Unresolved validation failures.
    Failed {
        /// Stable failure identities, most relevant first.
        failure_identities: Vec<String>,
    },
}

/// Job counts over the full bounded active Job aggregate (never a truncated recent list): the
/// session's queued and running work as of the snapshot. A Job's terminal evidence lands in
/// the transaction that ends it, so no terminal Job is ever pending materialization.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct JobCounts {
    /// Jobs not yet terminal (queued or running).
    pub active: u64,
    /// Running Jobs whose runner stopped reporting (their lease ran out; they end `lost`):
    /// what they did is unknown (a blocker).
    pub recovering: u64,
    /// Jobs asked to stop that have not ended yet: they may still change the project (a
    /// blocker).
    pub blocking: u64,
}

/// Session message-board counts; informative, never blockers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CollaborationCounts {
    /// Open questions addressed to this Session.
    pub open_questions: u64,
    /// Open todos.
    pub open_todos: u64,
    /// Messages that require an acknowledgement not yet given.
    pub unresolved_ack_required: u64,
}

/// Everything the brief is built from, already loaded by the caller.
#[derive(Debug, Clone, Copy)]
pub struct BriefInput<'a> {
    /// Session lifecycle.
    pub lifecycle: Lifecycle,
    /// Session mode.
    pub mode: Mode,
    /// The root task instruction, if the Session has one.
    pub root_instruction: Option<SourceText<'a>>,
    /// The latest retained `task_instruction`; `None` when none is retained.
    pub latest_instruction: Option<SourceText<'a>>,
    /// Workspace evidence.
    pub workspace: &'a WorkspaceEvidence,
    /// Validation evidence.
    pub validation: &'a ValidationEvidence,
    /// The attempt's exploration workset, newest first; duplicates allowed (first kept).
    pub recent_files: &'a [String],
    /// Job counts.
    pub jobs: JobCounts,
    /// Message-board counts.
    pub collaboration: CollaborationCounts,
    /// Open risks recorded for the Session.
    pub open_risks: u64,
    /// The attempt-boundary instruction was evicted by ledger retention.
    pub attempt_boundary_evicted: bool,
    /// The Session changed while the caller assembled its snapshots.
    pub snapshot_changed: bool,
}

/// The overall progress verdict, chosen by fixed precedence (see [`build`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProgressState {
    /// The Session is no longer mutable.
    Closed,
    /// Something must be resolved before continuing.
    Blocked,
    /// The workspace changed without a proven validation pass.
    NeedsValidation,
    /// Critical evidence is missing.
    InsufficientEvidence,
    /// Nothing known stands in the way.
    ReadyToContinue,
}

/// A condition that makes the progress state `blocked`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Blocker {
    /// The workspace has a conflict.
    WorkspaceConflict,
    /// A blocking Job is outstanding.
    BlockingJob,
    /// A Job is being recovered.
    RecoveringJob,
    /// The latest validation failed.
    ValidationFailed,
    /// A risk is open.
    OpenRisk,
}

/// Why evidence behind a projection is incomplete. Declared in alphabetical order so the
/// derived ordering is the sorted order of the wire spellings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasonCode {
    /// The attempt-boundary instruction was evicted by retention.
    AttemptBoundaryEvicted,
    /// The Session changed while its snapshots were being read.
    SessionChangedDuringSnapshot,
    /// Validation evidence was not requested.
    ValidationNotRequested,
    /// Validation evidence could not be read.
    ValidationUnavailable,
    /// Workspace evidence was not requested.
    WorkspaceNotRequested,
    /// Workspace evidence could not be read.
    WorkspaceUnavailable,
}

/// The fixed vocabulary of suggested next actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    /// The Session is not mutable: continue in a new Session (it may read this one).
    StartNewSession,
    /// Resolve the workspace conflict.
    ResolveWorkspaceConflict,
    /// Inspect blocking or recovering Jobs.
    InspectJobs,
    /// Fix a validation failure; `target` names the failure identity when known.
    FixValidationFailure,
    /// Review open risks.
    ReviewOpenRisks,
    /// Run validation over the current changes.
    RunValidation,
    /// Observe the workspace again (it was unavailable).
    InspectWorkspace,
    /// Read validation evidence again (it was unavailable).
    InspectValidation,
    /// Confirm the task instruction (the attempt boundary was evicted).
    ConfirmTaskInstruction,
    /// Answer open questions.
    AnswerQuestions,
    /// Acknowledge messages that require it.
    AcknowledgeMessages,
    /// Review open todos.
    ReviewTodos,
    /// Continue the task.
    ContinueTask,
}

/// One suggested action: `{"action": ..., "target"?: ...}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NextAction {
    /// What to do.
    pub action: ActionKind,
    /// The concrete object, when the action has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

impl NextAction {
    fn new(action: ActionKind) -> Self {
        Self {
            action,
            target: None,
        }
    }
}

/// `{"complete": bool, "reason_codes": [...]}` with sorted, deduplicated codes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(super) struct Basis {
    complete: bool,
    reason_codes: Vec<ReasonCode>,
}

impl Basis {
    pub(super) fn new(codes: BTreeSet<ReasonCode>) -> Self {
        Self {
            complete: codes.is_empty(),
            reason_codes: codes.into_iter().collect(),
        }
    }

    /// Codes for missing workspace/validation evidence and an evicted boundary.
    pub(super) fn evidence_codes(
        workspace: &WorkspaceEvidence,
        validation: &ValidationEvidence,
        attempt_boundary_evicted: bool,
    ) -> BTreeSet<ReasonCode> {
        let mut codes = BTreeSet::new();
        match workspace {
            WorkspaceEvidence::NotRequested => codes.insert(ReasonCode::WorkspaceNotRequested),
            WorkspaceEvidence::Unavailable { .. } => codes.insert(ReasonCode::WorkspaceUnavailable),
            WorkspaceEvidence::Available { .. } => false,
        };
        match validation {
            ValidationEvidence::NotRequested => codes.insert(ReasonCode::ValidationNotRequested),
            ValidationEvidence::Unavailable => codes.insert(ReasonCode::ValidationUnavailable),
            _ => false,
        };
        if attempt_boundary_evicted {
            codes.insert(ReasonCode::AttemptBoundaryEvicted);
        }
        codes
    }
}

/// The workspace as projected: tagged by `status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub(super) enum WorkspaceView {
    Available {
        dirty: bool,
        conflict: bool,
        changed_paths: BoundedList<String>,
    },
    NotRequested,
    Unavailable {
        reason: &'static str,
    },
}

impl WorkspaceView {
    pub(super) fn new(evidence: &WorkspaceEvidence, max_paths: usize) -> Self {
        match evidence {
            WorkspaceEvidence::NotRequested => Self::NotRequested,
            WorkspaceEvidence::Unavailable { reason } => Self::Unavailable { reason },
            WorkspaceEvidence::Available {
                changed_paths,
                conflict,
                dirty,
            } => Self::Available {
                dirty: *dirty,
                conflict: *conflict,
                changed_paths: BoundedList::new(changed_paths.iter().cloned(), max_paths),
            },
        }
    }
}

/// Validation as projected: tagged by `status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub(super) enum ValidationView {
    Passed,
    Failed {
        failure_identities: BoundedList<String>,
    },
    NotRun,
    NotRequested,
    Unavailable,
}

impl ValidationView {
    pub(super) fn new(evidence: &ValidationEvidence) -> Self {
        match evidence {
            ValidationEvidence::NotRequested => Self::NotRequested,
            ValidationEvidence::Unavailable => Self::Unavailable,
            ValidationEvidence::NotRun => Self::NotRun,
            ValidationEvidence::Passed => Self::Passed,
            ValidationEvidence::Failed { failure_identities } => Self::Failed {
                failure_identities: BoundedList::new(
                    failure_identities.iter().cloned(),
                    FAILURE_IDENTITIES_MAX,
                ),
            },
        }
    }
}

/// The facts progress and actions are derived from, shared with continuation feedback.
pub(super) struct Facts<'a> {
    pub(super) lifecycle: Lifecycle,
    pub(super) workspace: &'a WorkspaceEvidence,
    pub(super) validation: &'a ValidationEvidence,
    pub(super) jobs: JobCounts,
    pub(super) collaboration: CollaborationCounts,
    pub(super) open_risks: u64,
    pub(super) attempt_boundary_evicted: bool,
}

impl<'a> Facts<'a> {
    /// The facts of a brief's input.
    fn of(input: &BriefInput<'a>) -> Facts<'a> {
        Facts {
            lifecycle: input.lifecycle,
            workspace: input.workspace,
            validation: input.validation,
            jobs: input.jobs,
            collaboration: input.collaboration,
            open_risks: input.open_risks,
            attempt_boundary_evicted: input.attempt_boundary_evicted,
        }
    }

    /// Every blocker present, in [`Blocker`] order.
    fn blockers(&self) -> Vec<Blocker> {
        let mut out = Vec::new();
        if self.workspace.conflict() {
            out.push(Blocker::WorkspaceConflict);
        }
        if self.jobs.blocking > 0 {
            out.push(Blocker::BlockingJob);
        }
        if self.jobs.recovering > 0 {
            out.push(Blocker::RecoveringJob);
        }
        if matches!(self.validation, ValidationEvidence::Failed { .. }) {
            out.push(Blocker::ValidationFailed);
        }
        if self.open_risks > 0 {
            out.push(Blocker::OpenRisk);
        }
        out
    }

    /// Changes exist and no validation pass proves them.
    fn unvalidated_changes(&self) -> bool {
        !self.workspace.changed_paths().is_empty()
            && !matches!(self.validation, ValidationEvidence::Passed)
    }

    fn evidence_missing(&self) -> bool {
        matches!(self.workspace, WorkspaceEvidence::Unavailable { .. })
            || matches!(self.validation, ValidationEvidence::Unavailable)
            || self.attempt_boundary_evicted
    }

    /// The state by fixed precedence, with the blockers behind a `blocked` state.
    pub(super) fn progress(&self) -> (ProgressState, Vec<Blocker>) {
        if self.lifecycle != Lifecycle::Active {
            return (ProgressState::Closed, Vec::new());
        }
        let blockers = self.blockers();
        let state = if !blockers.is_empty() {
            ProgressState::Blocked
        } else if self.unvalidated_changes() {
            ProgressState::NeedsValidation
        } else if self.evidence_missing() {
            ProgressState::InsufficientEvidence
        } else {
            ProgressState::ReadyToContinue
        };
        (state, blockers)
    }

    /// Every applicable action in a fixed order: blockers, validation, evidence gaps,
    /// collaboration, then `continue_task` when nothing stands in the way. A non-active
    /// Session only suggests starting a new one.
    pub(super) fn actions(&self, state: ProgressState) -> Vec<NextAction> {
        if state == ProgressState::Closed {
            return vec![NextAction::new(ActionKind::StartNewSession)];
        }
        let failures = match self.validation {
            ValidationEvidence::Failed { failure_identities } => Some(failure_identities),
            _ => None,
        };
        let fix = NextAction {
            action: ActionKind::FixValidationFailure,
            target: failures.and_then(|f| f.first().cloned()),
        };
        let collaboration = &self.collaboration;
        let candidates = [
            (
                self.workspace.conflict(),
                NextAction::new(ActionKind::ResolveWorkspaceConflict),
            ),
            (
                self.jobs.blocking > 0 || self.jobs.recovering > 0,
                NextAction::new(ActionKind::InspectJobs),
            ),
            (failures.is_some(), fix),
            (
                self.open_risks > 0,
                NextAction::new(ActionKind::ReviewOpenRisks),
            ),
            (
                failures.is_some() || self.unvalidated_changes(),
                NextAction::new(ActionKind::RunValidation),
            ),
            (
                matches!(self.workspace, WorkspaceEvidence::Unavailable { .. }),
                NextAction::new(ActionKind::InspectWorkspace),
            ),
            (
                matches!(self.validation, ValidationEvidence::Unavailable),
                NextAction::new(ActionKind::InspectValidation),
            ),
            (
                self.attempt_boundary_evicted,
                NextAction::new(ActionKind::ConfirmTaskInstruction),
            ),
            (
                collaboration.open_questions > 0,
                NextAction::new(ActionKind::AnswerQuestions),
            ),
            (
                collaboration.unresolved_ack_required > 0,
                NextAction::new(ActionKind::AcknowledgeMessages),
            ),
            (
                collaboration.open_todos > 0,
                NextAction::new(ActionKind::ReviewTodos),
            ),
            (
                state == ProgressState::ReadyToContinue,
                NextAction::new(ActionKind::ContinueTask),
            ),
        ];
        candidates
            .into_iter()
            .filter_map(|(applies, action)| applies.then_some(action))
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct Progress {
    state: ProgressState,
    blockers: Vec<Blocker>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct Instructions {
    root: Option<Excerpt>,
    latest: Option<Excerpt>,
    latest_is_root: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct Attention {
    jobs: JobCounts,
    collaboration: CollaborationCounts,
    open_risks: u64,
}

/// A built handoff brief; serialize it (or call [`HandoffBrief::to_json`]) to return it.
///
/// The fields are private so the byte bound established by [`build`] cannot be undone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HandoffBrief {
    version: u32,
    deterministic: bool,
    llm_generated: bool,
    lifecycle: Lifecycle,
    mode: Mode,
    progress: Progress,
    instruction: Instructions,
    workspace: WorkspaceView,
    validation: ValidationView,
    recent_files: BoundedList<String>,
    attention: Attention,
    next_actions: BoundedList<NextAction>,
    basis: Basis,
}

impl HandoffBrief {
    /// The progress verdict.
    pub fn progress_state(&self) -> ProgressState {
        self.progress.state
    }

    /// Whether no evidence was omitted or unavailable.
    pub fn basis_complete(&self) -> bool {
        self.basis.complete
    }

    /// The brief as a JSON value (the shape in the module documentation).
    pub fn to_json(&self) -> serde_json::Value {
        // Every map key in the brief is a string field name, so serialization cannot fail;
        // `Null` is unreachable but keeps this path free of panics.
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// Length of the serialized brief in bytes.
    pub fn serialized_len(&self) -> usize {
        // An (unreachable) serialization failure counts as over budget, which only shrinks.
        serde_json::to_vec(self).map_or(usize::MAX, |bytes| bytes.len())
    }

    fn fits(&self) -> bool {
        self.serialized_len() <= MAX_BRIEF_BYTES
    }

    fn changed_paths_mut(&mut self) -> Option<&mut BoundedList<String>> {
        match &mut self.workspace {
            WorkspaceView::Available { changed_paths, .. } => Some(changed_paths),
            _ => None,
        }
    }

    fn failure_identities_mut(&mut self) -> Option<&mut BoundedList<String>> {
        match &mut self.validation {
            ValidationView::Failed { failure_identities } => Some(failure_identities),
            _ => None,
        }
    }

    /// Applies the stable reduction order until the brief fits [`MAX_BRIEF_BYTES`].
    fn fit_to_budget(&mut self) {
        while !self.fits() && self.recent_files.pop() {}
        while !self.fits() && self.changed_paths_mut().is_some_and(BoundedList::pop) {}
        while !self.fits() && self.failure_identities_mut().is_some_and(BoundedList::pop) {}
        while !self.fits() && self.next_actions.pop() {}
        if self.fits() {
            return;
        }
        if self.instruction.latest_is_root {
            // Shrinking only `latest` would make it differ from `root`; cutting both keeps
            // "the same excerpt" true and frees twice the bytes per character.
            self.shrink_excerpts_to_fit(|i| [i.root.as_mut(), i.latest.as_mut()]);
        } else {
            self.shrink_excerpts_to_fit(|i| [i.latest.as_mut(), None]);
            self.shrink_excerpts_to_fit(|i| [i.root.as_mut(), None]);
        }
    }

    /// Cuts the selected excerpts to the longest common prefix length that fits (binary
    /// search: the size only falls as characters go).
    fn shrink_excerpts_to_fit(
        &mut self,
        select: impl Fn(&mut Instructions) -> [Option<&mut Excerpt>; 2],
    ) {
        if self.fits() {
            return;
        }
        let originals: Vec<Option<Excerpt>> = select(&mut self.instruction)
            .into_iter()
            .map(|e| e.map(|e| e.clone()))
            .collect();
        let Some(len) = originals
            .iter()
            .flatten()
            .map(|e| excerpt::char_len(&e.text))
            .max()
        else {
            return;
        };
        let set = |brief: &mut Self, chars: usize| {
            for (slot, original) in select(&mut brief.instruction).into_iter().zip(&originals) {
                if let (Some(slot), Some(original)) = (slot, original) {
                    *slot = original.clone();
                    excerpt::shrink(slot, chars);
                }
            }
        };
        // Invariant: `lo` characters fit; more than `hi` do not.
        let (mut lo, mut hi) = (0, len);
        set(self, 0);
        if !self.fits() {
            return;
        }
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            set(self, mid);
            if self.fits() {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        set(self, lo);
    }
}

/// Builds the version-1 handoff brief.
///
/// `progress.state` is chosen in this order: a non-active lifecycle is `closed`; a workspace
/// conflict, a blocking or recovering Job, a failed validation or an open risk is `blocked`;
/// changed paths without a validation `passed` are `needs_validation`; unavailable workspace
/// or validation evidence, or an evicted attempt boundary, is `insufficient_evidence`;
/// otherwise `ready_to_continue`. A dirty worktree, questions, todos and active Jobs
/// never block.
///
/// Next actions come from [`ActionKind`] in this order, each only when it applies:
/// `start_new_session` (alone, for a non-active Session), `resolve_workspace_conflict`,
/// `inspect_jobs`, `fix_validation_failure` (target: the first failure identity),
/// `review_open_risks`, `run_validation` (failed, or changes without a pass),
/// `inspect_workspace`, `inspect_validation`, `confirm_task_instruction` (evicted boundary),
/// `answer_questions`, `acknowledge_messages`, `review_todos`, and `continue_task` when the
/// state is `ready_to_continue`.
///
/// The serialized result is always at most [`MAX_BRIEF_BYTES`] bytes.
pub fn build(input: &BriefInput<'_>) -> HandoffBrief {
    let facts = Facts::of(input);
    let (state, blockers) = facts.progress();

    let root = input
        .root_instruction
        .map(|s| s.excerpt(INSTRUCTION_EXCERPT_CHARS));
    let latest_is_root = matches!(
        (input.root_instruction, input.latest_instruction),
        (Some(root), Some(latest)) if root.text == latest.text
    );
    let latest = if latest_is_root {
        root.clone()
    } else {
        input
            .latest_instruction
            .map(|s| s.excerpt(INSTRUCTION_EXCERPT_CHARS))
    };

    let mut codes = Basis::evidence_codes(
        input.workspace,
        input.validation,
        input.attempt_boundary_evicted,
    );
    if input.snapshot_changed {
        codes.insert(ReasonCode::SessionChangedDuringSnapshot);
    }

    let recent = excerpt::first_occurrences(input.recent_files.iter().map(String::as_str));
    let mut brief = HandoffBrief {
        version: BRIEF_VERSION,
        deterministic: true,
        llm_generated: false,
        lifecycle: input.lifecycle,
        mode: input.mode,
        progress: Progress { state, blockers },
        instruction: Instructions {
            root,
            latest,
            latest_is_root,
        },
        workspace: WorkspaceView::new(input.workspace, CHANGED_PATHS_MAX),
        validation: ValidationView::new(input.validation),
        recent_files: BoundedList::new(recent.into_iter().map(str::to_owned), RECENT_FILES_MAX),
        attention: Attention {
            jobs: input.jobs,
            collaboration: input.collaboration,
            open_risks: input.open_risks,
        },
        next_actions: BoundedList::new(facts.actions(state), NEXT_ACTIONS_MAX),
        basis: Basis::new(codes),
    };
    brief.fit_to_budget();
    brief
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    const NO_WORKSPACE: WorkspaceEvidence = WorkspaceEvidence::NotRequested;

    fn clean_workspace() -> WorkspaceEvidence {
        WorkspaceEvidence::Available {
            changed_paths: vec![],
            conflict: false,
            dirty: false,
        }
    }

    fn changed(paths: &[&str]) -> WorkspaceEvidence {
        WorkspaceEvidence::Available {
            changed_paths: paths.iter().map(|p| p.to_string()).collect(),
            conflict: false,
            dirty: true,
        }
    }

    fn input<'a>(
        workspace: &'a WorkspaceEvidence,
        validation: &'a ValidationEvidence,
    ) -> BriefInput<'a> {
        BriefInput {
            lifecycle: Lifecycle::Active,
            mode: Mode::Normal,
            root_instruction: Some(SourceText::raw("add a cache to the resolver")),
            latest_instruction: None,
            workspace,
            validation,
            recent_files: &[],
            jobs: JobCounts::default(),
            collaboration: CollaborationCounts::default(),
            open_risks: 0,
            attempt_boundary_evicted: false,
            snapshot_changed: false,
        }
    }

    fn json_of(input: &BriefInput<'_>) -> Value {
        build(input).to_json()
    }

    #[test]
    fn ready_to_continue_with_complete_evidence() {
        let ws = clean_workspace();
        let v = json_of(&input(&ws, &ValidationEvidence::Passed));
        assert_eq!(v["version"], 1);
        assert_eq!(v["deterministic"], true);
        assert_eq!(v["llm_generated"], false);
        assert_eq!(
            v["progress"],
            json!({"state": "ready_to_continue", "blockers": []})
        );
        assert_eq!(v["basis"], json!({"complete": true, "reason_codes": []}));
        assert_eq!(
            v["next_actions"]["items"],
            json!([{"action": "continue_task"}])
        );
        assert_eq!(v["workspace"]["status"], "available");
        assert_eq!(v["validation"], json!({"status": "passed"}));
    }

    #[test]
    fn a_non_active_lifecycle_is_closed_before_anything_else() {
        let ws = WorkspaceEvidence::Available {
            changed_paths: vec!["a.rs".into()],
            conflict: true,
            dirty: true,
        };
        let failed = ValidationEvidence::Failed {
            failure_identities: vec!["t::x".into()],
        };
        for lifecycle in [Lifecycle::Finished, Lifecycle::Closed] {
            let mut i = input(&ws, &failed);
            i.lifecycle = lifecycle;
            i.open_risks = 2;
            let v = json_of(&i);
            assert_eq!(v["progress"], json!({"state": "closed", "blockers": []}));
            assert_eq!(
                v["next_actions"]["items"],
                json!([{"action": "start_new_session"}])
            );
        }
    }

    #[test]
    fn each_blocker_blocks_and_outranks_needs_validation() {
        let ws_changed = changed(&["src/a.rs"]);
        let ws_conflict = WorkspaceEvidence::Available {
            changed_paths: vec!["src/a.rs".into()],
            conflict: true,
            dirty: true,
        };
        let not_run = ValidationEvidence::NotRun;
        let failed = ValidationEvidence::Failed {
            failure_identities: vec!["cargo_test:wc::parser::rejects".into(), "b".into()],
        };
        let cases: Vec<(BriefInput<'_>, &str)> = vec![
            (input(&ws_conflict, &not_run), "workspace_conflict"),
            (
                BriefInput {
                    jobs: JobCounts {
                        blocking: 1,
                        ..JobCounts::default()
                    },
                    ..input(&ws_changed, &not_run)
                },
                "blocking_job",
            ),
            (
                BriefInput {
                    jobs: JobCounts {
                        recovering: 1,
                        ..JobCounts::default()
                    },
                    ..input(&ws_changed, &not_run)
                },
                "recovering_job",
            ),
            (input(&ws_changed, &failed), "validation_failed"),
            (
                BriefInput {
                    open_risks: 1,
                    ..input(&ws_changed, &not_run)
                },
                "open_risk",
            ),
        ];
        for (i, blocker) in cases {
            let v = json_of(&i);
            assert_eq!(v["progress"]["state"], "blocked", "{blocker}");
            assert_eq!(v["progress"]["blockers"], json!([blocker]));
        }
        let v = json_of(&input(&ws_changed, &failed));
        assert_eq!(
            v["next_actions"]["items"][0],
            json!({"action": "fix_validation_failure", "target": "cargo_test:wc::parser::rejects"})
        );
    }

    #[test]
    fn blocked_outranks_insufficient_evidence() {
        let mut i = input(
            &WorkspaceEvidence::Unavailable {
                reason: "timed_out",
            },
            &ValidationEvidence::Unavailable,
        );
        i.open_risks = 1;
        i.attempt_boundary_evicted = true;
        assert_eq!(build(&i).progress_state(), ProgressState::Blocked);
    }

    #[test]
    fn changes_without_a_pass_need_validation() {
        let ws = changed(&["src/a.rs"]);
        for validation in [
            ValidationEvidence::NotRun,
            ValidationEvidence::NotRequested,
            ValidationEvidence::Unavailable,
        ] {
            let v = json_of(&input(&ws, &validation));
            assert_eq!(v["progress"]["state"], "needs_validation", "{validation:?}");
            assert!(
                v["next_actions"]["items"]
                    .as_array()
                    .is_some_and(|a| a.contains(&json!({"action": "run_validation"})))
            );
        }
        let v = json_of(&input(&ws, &ValidationEvidence::Passed));
        assert_eq!(v["progress"]["state"], "ready_to_continue");
    }

    #[test]
    fn missing_critical_evidence_is_insufficient() {
        let ws = clean_workspace();
        let unavailable_ws = WorkspaceEvidence::Unavailable {
            reason: "timed_out",
        };
        let cases = [
            input(&unavailable_ws, &ValidationEvidence::Passed),
            input(&ws, &ValidationEvidence::Unavailable),
            BriefInput {
                attempt_boundary_evicted: true,
                ..input(&ws, &ValidationEvidence::Passed)
            },
        ];
        for i in cases {
            assert_eq!(
                build(&i).progress_state(),
                ProgressState::InsufficientEvidence
            );
        }
        // Not requested is the caller's choice, not missing evidence.
        let i = input(&NO_WORKSPACE, &ValidationEvidence::NotRequested);
        assert_eq!(build(&i).progress_state(), ProgressState::ReadyToContinue);
        assert!(!build(&i).basis_complete());
    }

    #[test]
    fn dirty_worktree_questions_todos_and_active_jobs_do_not_block() {
        let ws = WorkspaceEvidence::Available {
            changed_paths: vec![],
            conflict: false,
            dirty: true,
        };
        let mut i = input(&ws, &ValidationEvidence::Passed);
        i.collaboration = CollaborationCounts {
            open_questions: 2,
            open_todos: 3,
            unresolved_ack_required: 1,
        };
        i.jobs = JobCounts {
            active: 4,
            ..JobCounts::default()
        };
        let v = json_of(&i);
        assert_eq!(v["progress"]["state"], "ready_to_continue");
        assert_eq!(
            v["next_actions"]["items"],
            json!([
                {"action": "answer_questions"},
                {"action": "acknowledge_messages"},
                {"action": "review_todos"},
                {"action": "continue_task"}
            ])
        );
        assert_eq!(
            v["attention"],
            json!({
                "jobs": {"active": 4, "recovering": 0, "blocking": 0},
                "collaboration": {"open_questions": 2, "open_todos": 3, "unresolved_ack_required": 1},
                "open_risks": 0
            })
        );
    }

    #[test]
    fn credentials_never_survive_in_excerpts() {
        let ws = clean_workspace();
        let mut i = input(&ws, &ValidationEvidence::Passed);
        i.root_instruction = Some(SourceText::raw(
            "deploy with token=7f3c9a1b2d4e5f60718293a4b5c6d7e8 to /srv/app",
        ));
        i.latest_instruction = Some(SourceText::raw(
            "curl -H 'Authorization: Bearer abcdef0123456789abcdef' https://x && cargo test",
        ));
        let v = json_of(&i);
        let s = v.to_string();
        assert!(!s.contains("7f3c9a1b2d4e5f60718293a4b5c6d7e8"), "{s}");
        assert!(!s.contains("abcdef0123456789abcdef"), "{s}");
        assert_eq!(v["instruction"]["root"]["truncated"], true);
        assert_eq!(v["instruction"]["latest"]["truncated"], true);
        // Paths and commands stay readable.
        assert!(s.contains("/srv/app") && s.contains("cargo test"), "{s}");
    }

    #[test]
    fn excerpts_hold_600_scalar_values_of_multibyte_text() {
        let ws = clean_workspace();
        let long = "漢字🦀é".repeat(500);
        let exact = "🦀".repeat(600);
        let mut i = input(&ws, &ValidationEvidence::Passed);
        i.root_instruction = Some(SourceText::raw(&exact));
        i.latest_instruction = Some(SourceText::raw(&long));
        let v = json_of(&i);
        let root = &v["instruction"]["root"];
        let latest = &v["instruction"]["latest"];
        assert_eq!(root["text"].as_str().map(|t| t.chars().count()), Some(600));
        assert_eq!(root["truncated"], false);
        assert_eq!(
            latest["text"].as_str().map(|t| t.chars().count()),
            Some(600)
        );
        assert_eq!(latest["truncated"], true);
        assert_eq!(v["instruction"]["latest_is_root"], false);
    }

    #[test]
    fn latest_equal_to_root_returns_the_same_excerpt() {
        let ws = clean_workspace();
        let mut i = input(&ws, &ValidationEvidence::Passed);
        i.latest_instruction = i.root_instruction;
        let v = json_of(&i);
        assert_eq!(v["instruction"]["latest"], v["instruction"]["root"]);
        assert_eq!(v["instruction"]["latest_is_root"], true);
        i.latest_instruction = None;
        let v = json_of(&i);
        assert_eq!(v["instruction"]["latest"], Value::Null);
        assert_eq!(v["instruction"]["latest_is_root"], false);
    }

    #[test]
    fn not_requested_is_never_shown_as_not_run() {
        let v = json_of(&input(&NO_WORKSPACE, &ValidationEvidence::NotRequested));
        assert_eq!(v["validation"], json!({"status": "not_requested"}));
        assert_eq!(v["workspace"], json!({"status": "not_requested"}));
        let ws = clean_workspace();
        let v = json_of(&input(&ws, &ValidationEvidence::NotRun));
        assert_eq!(v["validation"], json!({"status": "not_run"}));
        assert_eq!(v["basis"]["complete"], true);
    }

    #[test]
    fn reason_codes_are_sorted_fixed_spellings() {
        let mut i = input(
            &WorkspaceEvidence::Unavailable {
                reason: "timed_out",
            },
            &ValidationEvidence::NotRequested,
        );
        i.snapshot_changed = true;
        i.attempt_boundary_evicted = true;
        let v = json_of(&i);
        assert_eq!(
            v["basis"],
            json!({
                "complete": false,
                "reason_codes": [
                    "attempt_boundary_evicted",
                    "session_changed_during_snapshot",
                    "validation_not_requested",
                    "workspace_unavailable"
                ]
            })
        );
    }

    #[test]
    fn reason_code_declaration_order_is_alphabetical() {
        let all = [
            ReasonCode::AttemptBoundaryEvicted,
            ReasonCode::SessionChangedDuringSnapshot,
            ReasonCode::ValidationNotRequested,
            ReasonCode::ValidationUnavailable,
            ReasonCode::WorkspaceNotRequested,
            ReasonCode::WorkspaceUnavailable,
        ];
        let spelled: Vec<String> = all
            .iter()
            .map(|c| {
                serde_json::to_value(c)
                    .map(|v| v.to_string())
                    .unwrap_or_default()
            })
            .collect();
        let mut sorted = spelled.clone();
        sorted.sort();
        assert_eq!(spelled, sorted);
    }

    #[test]
    fn lists_are_bounded_and_recent_files_deduplicated() {
        let paths: Vec<String> = (0..20).map(|n| format!("src/m{n}.rs")).collect();
        let ws = WorkspaceEvidence::Available {
            changed_paths: paths.clone(),
            conflict: false,
            dirty: true,
        };
        let failed = ValidationEvidence::Failed {
            failure_identities: (0..9).map(|n| format!("t{n}")).collect(),
        };
        let recent: Vec<String> = ["b.rs", "a.rs", "b.rs", "c.rs"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut i = input(&ws, &failed);
        i.recent_files = &recent;
        let v = json_of(&i);
        assert_eq!(
            v["recent_files"],
            json!({"items": ["b.rs", "a.rs", "c.rs"], "total": 3, "returned": 3, "truncated": false})
        );
        let cp = &v["workspace"]["changed_paths"];
        assert_eq!(
            (cp["total"].as_u64(), cp["returned"].as_u64()),
            (Some(20), Some(12))
        );
        assert_eq!(cp["truncated"], true);
        let fi = &v["validation"]["failure_identities"];
        assert_eq!(
            (fi["total"].as_u64(), fi["returned"].as_u64()),
            (Some(9), Some(5))
        );
    }

    fn failure_identities(brief: &HandoffBrief) -> BoundedList<String> {
        match &brief.validation {
            ValidationView::Failed { failure_identities } => failure_identities.clone(),
            _ => BoundedList::new([], 0),
        }
    }

    fn changed_paths(brief: &HandoffBrief) -> BoundedList<String> {
        match &brief.workspace {
            WorkspaceView::Available { changed_paths, .. } => changed_paths.clone(),
            _ => BoundedList::new([], 0),
        }
    }

    #[test]
    fn a_maximal_input_is_reduced_in_order_to_the_byte_budget() {
        // Control characters escape to six bytes each, so two 600-character excerpts plus the
        // fixed parts overflow the budget and force every reduction step up to the latest
        // excerpt.
        let path = "ディレクトリ/".repeat(30);
        let paths: Vec<String> = (0..5000).map(|n| format!("{path}{n}")).collect();
        let root = "\u{1}".repeat(10_000);
        let latest = "\u{2}".repeat(10_000);
        let ws = WorkspaceEvidence::Available {
            changed_paths: paths.clone(),
            conflict: true,
            dirty: true,
        };
        let failed = ValidationEvidence::Failed {
            failure_identities: paths.clone(),
        };
        let mut i = input(&ws, &failed);
        i.recent_files = &paths;
        i.root_instruction = Some(SourceText::raw(&root));
        i.latest_instruction = Some(SourceText::raw(&latest));
        let many = u64::MAX;
        i.jobs = JobCounts {
            active: many,
            recovering: many,
            blocking: many,
        };
        i.collaboration = CollaborationCounts {
            open_questions: many,
            open_todos: many,
            unresolved_ack_required: many,
        };
        i.open_risks = many;
        i.snapshot_changed = true;
        let brief = build(&i);
        assert!(brief.serialized_len() <= MAX_BRIEF_BYTES);
        for list in [
            &brief.recent_files,
            &failure_identities(&brief),
            &changed_paths(&brief),
        ] {
            assert_eq!(
                (list.total(), list.returned(), list.truncated()),
                (5000, 0, true)
            );
        }
        assert_eq!(brief.next_actions.returned(), 0);
        assert!(brief.next_actions.total() > 0);
        let chars = |e: &Option<Excerpt>| {
            e.as_ref()
                .map(|e| (excerpt::char_len(&e.text), e.truncated))
        };
        let (latest_len, latest_truncated) = chars(&brief.instruction.latest).unwrap_or_default();
        assert!(latest_len < 600 && latest_truncated, "{latest_len}");
        assert_eq!(chars(&brief.instruction.root), Some((600, true)));
        let v = brief.to_json();
        assert_eq!(v["progress"]["state"], "blocked");
        assert_eq!(v["attention"]["open_risks"], many);
        assert_eq!(v["validation"]["status"], "failed");
        assert_eq!(v["basis"]["complete"], false);
    }

    // ---- property test -------------------------------------------------------------------

    #[derive(Debug, Clone)]
    struct Owned {
        lifecycle: Lifecycle,
        mode: Mode,
        root: Option<(String, bool)>,
        latest: Option<(String, bool)>,
        latest_same_as_root: bool,
        workspace: WorkspaceEvidence,
        validation: ValidationEvidence,
        recent_files: Vec<String>,
        jobs: JobCounts,
        collaboration: CollaborationCounts,
        open_risks: u64,
        evicted: bool,
        changed_during: bool,
    }

    impl Owned {
        fn input(&self) -> BriefInput<'_> {
            fn src(t: &(String, bool)) -> SourceText<'_> {
                SourceText {
                    text: &t.0,
                    already_truncated: t.1,
                }
            }
            let root = self.root.as_ref().map(src);
            BriefInput {
                lifecycle: self.lifecycle,
                mode: self.mode,
                root_instruction: root,
                latest_instruction: if self.latest_same_as_root {
                    root
                } else {
                    self.latest.as_ref().map(src)
                },
                workspace: &self.workspace,
                validation: &self.validation,
                recent_files: &self.recent_files,
                jobs: self.jobs,
                collaboration: self.collaboration,
                open_risks: self.open_risks,
                attempt_boundary_evicted: self.evicted,
                snapshot_changed: self.changed_during,
            }
        }
    }

    /// Text mixing ASCII, multibyte, astral and JSON-escaped characters, occasionally
    /// carrying a credential.
    fn text(max: usize) -> impl Strategy<Value = String> {
        prop_oneof![
            3 => proptest::string::string_regex(&format!("[a-z/._ é漢🦀\"\\\\\u{1}\n]{{0,{max}}}"))
                .expect("valid regex"),
            1 => (0..max, proptest::char::any()).prop_map(|(n, c)| c.to_string().repeat(n)),
            1 => heavy(max),
            1 => Just("token=7f3c9a1b2d4e5f60718293a4 and Bearer abcdef0123456789abcdef".to_owned()),
        ]
    }

    /// Long text of characters that serialize to many bytes (escaped controls, quotes,
    /// astral and CJK characters), at least half of `max` long.
    fn heavy(max: usize) -> impl Strategy<Value = String> {
        let unit = prop_oneof![Just("\u{1}"), Just("\""), Just("🦀"), Just("漢\u{7}")];
        (max / 2..=max, unit).prop_map(|(n, u)| u.repeat(n).chars().take(n).collect())
    }

    fn many(max_items: usize, max_len: usize) -> impl Strategy<Value = Vec<String>> {
        prop_oneof![
            3 => proptest::collection::vec(text(max_len), 0..24),
            1 => (0..max_items, text(max_len)).prop_map(|(n, t)| {
                (0..n).map(|i| format!("{t}{}", i % 97)).collect()
            }),
        ]
    }

    fn owned() -> impl Strategy<Value = Owned> {
        let lifecycle = prop_oneof![
            Just(Lifecycle::Active),
            Just(Lifecycle::Finished),
            Just(Lifecycle::Closed)
        ];
        let mode = prop_oneof![Just(Mode::Normal), Just(Mode::ReadOnly)];
        let instruction = || proptest::option::of((text(10_000), any::<bool>()));
        let workspace = prop_oneof![
            Just(WorkspaceEvidence::NotRequested),
            Just(WorkspaceEvidence::Unavailable {
                reason: "git_unavailable"
            }),
            (many(3000, 300), any::<bool>(), any::<bool>()).prop_map(
                |(changed_paths, conflict, dirty)| WorkspaceEvidence::Available {
                    changed_paths,
                    conflict,
                    dirty
                }
            ),
        ];
        let validation = prop_oneof![
            Just(ValidationEvidence::NotRequested),
            Just(ValidationEvidence::Unavailable),
            Just(ValidationEvidence::NotRun),
            Just(ValidationEvidence::Passed),
            many(50, 2000)
                .prop_map(|failure_identities| ValidationEvidence::Failed { failure_identities }),
        ];
        let count = || prop_oneof![Just(0u64), 0..5u64, Just(u64::MAX)];
        let jobs = (count(), count(), count()).prop_map(|(a, r, b)| JobCounts {
            active: a,
            recovering: r,
            blocking: b,
        });
        let collaboration = (count(), count(), count()).prop_map(|(q, t, a)| CollaborationCounts {
            open_questions: q,
            open_todos: t,
            unresolved_ack_required: a,
        });
        (
            (lifecycle, mode, instruction(), instruction(), any::<bool>()),
            (workspace, validation, many(3000, 300)),
            (jobs, collaboration, count(), any::<bool>(), any::<bool>()),
        )
            .prop_map(
                |(
                    (lifecycle, mode, root, latest, latest_same_as_root),
                    (workspace, validation, recent_files),
                    (jobs, collaboration, open_risks, evicted, changed_during),
                )| Owned {
                    lifecycle,
                    mode,
                    root,
                    latest,
                    latest_same_as_root,
                    workspace,
                    validation,
                    recent_files,
                    jobs,
                    collaboration,
                    open_risks,
                    evicted,
                    changed_during,
                },
            )
    }

    /// Items removed by byte-budget reduction (beyond the list's own maximum).
    fn budget_cut<T>(list: &BoundedList<T>, max: usize) -> bool {
        list.returned() < list.total().min(max)
    }

    fn empty_or_absent<T>(list: Option<&BoundedList<T>>) -> bool {
        list.is_none_or(|l| l.returned() == 0)
    }

    /// Every property of one built brief: the byte bound, determinism, list invariants, the
    /// reduction order and the untouchable parts.
    fn check(input: &BriefInput<'_>) -> Result<(), TestCaseError> {
        let brief = build(input);
        let bytes = serde_json::to_vec(&brief).expect("serializes");
        prop_assert!(bytes.len() <= MAX_BRIEF_BYTES, "{} bytes", bytes.len());
        prop_assert_eq!(
            &bytes,
            &serde_json::to_vec(&build(input)).expect("serializes")
        );

        let changed = match &brief.workspace {
            WorkspaceView::Available { changed_paths, .. } => Some(changed_paths),
            _ => None,
        };
        let failures = match &brief.validation {
            ValidationView::Failed { failure_identities } => Some(failure_identities),
            _ => None,
        };
        let lists = [
            (Some(&brief.recent_files), RECENT_FILES_MAX),
            (changed, CHANGED_PATHS_MAX),
            (failures, FAILURE_IDENTITIES_MAX),
        ];
        for (list, max) in lists {
            if let Some(l) = list {
                prop_assert!(l.returned() <= l.total().min(max));
                prop_assert_eq!(l.returned(), l.items().len());
                prop_assert_eq!(l.truncated(), l.returned() < l.total());
            }
        }
        let actions = &brief.next_actions;
        prop_assert!(actions.returned() <= actions.total().min(NEXT_ACTIONS_MAX));

        // A later list is only cut once every earlier one is empty.
        let recent_empty = brief.recent_files.returned() == 0;
        if changed.is_some_and(|l| budget_cut(l, CHANGED_PATHS_MAX)) {
            prop_assert!(recent_empty);
        }
        if failures.is_some_and(|l| budget_cut(l, FAILURE_IDENTITIES_MAX)) {
            prop_assert!(recent_empty && empty_or_absent(changed));
        }
        let lists_empty = recent_empty && empty_or_absent(changed) && empty_or_absent(failures);
        if budget_cut(actions, NEXT_ACTIONS_MAX) {
            prop_assert!(lists_empty);
        }
        let natural = |s: Option<SourceText<'_>>| s.map(|s| s.excerpt(INSTRUCTION_EXCERPT_CHARS));
        let (root, latest) = (&brief.instruction.root, &brief.instruction.latest);
        let shortened = |got: &Option<Excerpt>, want: Option<Excerpt>| {
            prop_assert_eq!(got.is_some(), want.is_some());
            if let (Some(got), Some(want)) = (got, want) {
                prop_assert!(want.text.starts_with(&got.text));
                if got.text.len() < want.text.len() {
                    prop_assert!(got.truncated);
                    return Ok(true);
                }
                prop_assert_eq!(got, &want);
            }
            Ok(false)
        };
        let root_cut = shortened(root, natural(input.root_instruction))?;
        let latest_cut = if brief.instruction.latest_is_root {
            prop_assert_eq!(latest, root);
            root_cut
        } else {
            shortened(latest, natural(input.latest_instruction))?
        };
        if root_cut || latest_cut {
            prop_assert!(lists_empty && actions.returned() == 0);
        }
        if root_cut && !brief.instruction.latest_is_root {
            prop_assert!(latest.as_ref().is_none_or(|l| l.text.is_empty()));
        }

        // Reduction never touches the verdict or the fixed parts.
        let v = brief.to_json();
        prop_assert_eq!(&v["version"], &json!(1));
        prop_assert_eq!(&v["deterministic"], &json!(true));
        prop_assert_eq!(&v["llm_generated"], &json!(false));
        let facts = Facts::of(input);
        prop_assert_eq!(brief.progress_state(), facts.progress().0);
        prop_assert_eq!(brief.basis.complete, brief.basis.reason_codes.is_empty());
        prop_assert!(brief.basis.reason_codes.windows(2).all(|w| w[0] < w[1]));
        Ok(())
    }

    /// Inputs at or beyond every bound: thousands of long, escape-heavy multibyte items and
    /// 10 KB instructions, so every reduction step, including excerpt shortening, is reached.
    fn maximal() -> impl Strategy<Value = Owned> {
        let big_list = || {
            (0..4000usize, heavy(300))
                .prop_map(|(n, t)| (0..n).map(|i| format!("{t}{i}")).collect::<Vec<_>>())
        };
        // Six-byte escapes make two excerpts alone nearly fill the budget.
        let escaped = (5_000..=10_000usize).prop_map(|n| "\u{1}".repeat(n));
        let text = prop_oneof![3 => escaped, 1 => heavy(10_000)];
        let instruction = move || proptest::option::weighted(0.9, (text.clone(), any::<bool>()));
        let count = || prop_oneof![Just(0u64), Just(u64::MAX)];
        (
            (instruction(), instruction(), any::<bool>(), any::<bool>()),
            (big_list(), big_list(), big_list()),
            (count(), count(), count(), any::<bool>(), any::<bool>()),
        )
            .prop_map(
                |(
                    (root, latest, latest_same_as_root, conflict),
                    (changed_paths, failure_identities, recent_files),
                    (risks, questions, blocking, evicted, changed_during),
                )| Owned {
                    lifecycle: Lifecycle::Active,
                    mode: Mode::Normal,
                    root,
                    latest,
                    latest_same_as_root,
                    workspace: WorkspaceEvidence::Available {
                        changed_paths,
                        conflict,
                        dirty: true,
                    },
                    validation: ValidationEvidence::Failed { failure_identities },
                    recent_files,
                    jobs: JobCounts {
                        active: blocking,
                        recovering: blocking,
                        blocking,
                    },
                    collaboration: CollaborationCounts {
                        open_questions: questions,
                        open_todos: questions,
                        unresolved_ack_required: questions,
                    },
                    open_risks: risks,
                    evicted,
                    changed_during,
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn the_brief_is_bounded_ordered_and_deterministic(o in owned()) {
            check(&o.input())?;
        }

        #[test]
        fn maximal_briefs_are_reduced_in_order(o in maximal()) {
            check(&o.input())?;
        }
    }
}
