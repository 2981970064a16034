//! `work_on_project`: start a fresh Workflow Session on a project, or resume exactly the one
//! named by `session_id`. Never selects a session any other way.
//!
//! It also opens a project: `client_id` + `path` open a checkout on that runner's host, as
//! itself or (`mode=worktree`) as a new managed worktree, before the session is created on
//! it ([`crate::execution::workspace`]). `mode` carries both seed spellings: the session's
//! mode (`normal`, `read_only`) or `worktree`, which opens a worktree for a normal session.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use wc_domain::{
    EventKind, EventRole, HostPath, Key, Lifecycle, Mode, ProjectId, Revision, SessionId,
};
use wc_macros::tool;
use wc_runner_protocol::OpenAs;
use wc_store::sessions::{self, Decision, NewEvent, NewSession, SessionChange, SessionRow};

use crate::auth::Scope;
use crate::execution::workspace::{self, OpenRequest, Workspace};
use crate::kernel::context::ToolContext;
use crate::kernel::spec::BusinessPair;
use crate::result::{ErrorKind, ToolError};
use crate::workflow::evidence::{self, Evidence};
use crate::workflow::excerpt::{excerpt, shrink_to_bytes};
use crate::workflow::exec_context::ExecutionContext;
use crate::workflow::feedback::ExplorationLimit;
use crate::workflow::{authority, feedback, mutation};

/// Characters of an instruction kept in the ledger (redacted).
pub const STORED_INSTRUCTION_CHARS: usize = 2_000;
/// Bytes of UTF-8 an instruction excerpt may take in the ledger (rows hold at most 8 KiB of
/// JSON, and 2,000 four-byte characters would not leave room for the rest).
pub const STORED_INSTRUCTION_BYTES: usize = 6_000;

/// Arguments of `work_on_project`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("anyOf" = [
    { "required": ["project"], "properties": { "project": { "type": "string" } } },
    { "required": ["session_id"], "properties": { "session_id": { "type": "string" } } },
    { "required": ["client_id", "path"],
      "properties": { "client_id": { "type": "string" }, "path": { "type": "string" } } },
]))]
#[schemars(extend("allOf" = [
    { "type": "object", "not": { "anyOf": [ { "required": ["session_id", "path"] }, { "required": ["session_id", "client_id"] } ] },
      "x-problem": "session_id resumes the session's own project; client_id and path open a new one: give one or the other" },
    { "type": "object", "not": { "anyOf": [ { "required": ["project", "path"] }, { "required": ["project", "client_id"] } ] },
      "x-problem": "give project, or client_id and path to open a checkout, not both" },
    { "type": "object", "not": { "type": "object", "required": ["base_ref"],
               "not": { "anyOf": [ { "required": ["session_id"] },
                                   { "required": ["mode"], "properties": { "mode": { "const": "worktree" } } } ] } },
      "x-problem": "base_ref is the commit a managed worktree starts at: give it with mode=worktree (or session_id to check a worktree's base)" },
    { "type": "object", "not": { "type": "object", "required": ["mode"], "properties": { "mode": { "const": "worktree" } },
               "not": { "anyOf": [ { "required": ["path"] }, { "required": ["session_id"] } ] } },
      "x-problem": "mode=worktree opens path as a new managed worktree: give client_id and path (or session_id to resume one)" },
]))]
pub struct Args {
    /// Project id (`agent:<client>:<name>`). To start, this or `client_id` + `path`; when
    /// resuming it must equal the session's project.
    pub project: Option<ProjectId>,
    /// A runner (list_runners) whose host holds `path`: to start on a checkout that is not a
    /// project yet.
    pub client_id: Option<Key<64>>,
    /// A checkout on that runner's host, opened as a project (with `mode=worktree`, as a new
    /// managed worktree of it). The runner's operator decides which directories may open.
    pub path: Option<HostPath>,
    /// With `mode=worktree`: the branch, tag or commit the worktree starts at (default: the
    /// checkout's HEAD). On resume: must name the worktree's base commit.
    pub base_ref: Option<Revision>,
    /// The task, in plain words (at most 16,000 characters).
    #[schemars(length(min = 1, max = 16000))]
    pub instruction: String,
    /// Resume exactly this session; omit to start a fresh one.
    pub session_id: Option<SessionId>,
    /// `normal` (default) or `read_only`: the session's mode (on resume, changes it).
    /// `worktree`: open `path` as a new managed worktree, or resume one, in a normal session.
    pub mode: Option<StartMode>,
    /// Include the workflow guidance (default true; false only if you already hold it).
    pub include_workflow_guidance: Option<bool>,
    /// Include the project's instructions (default true; false only if you already hold them).
    pub include_project_instructions: Option<bool>,
}

/// `work_on_project`'s `mode`: the session's mode, or a managed worktree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StartMode {
    /// A session that may change the project.
    Normal,
    /// A session that only reads.
    ReadOnly,
    /// A normal session on a managed worktree: opened from `path`, or resumed.
    Worktree,
}

impl StartMode {
    /// The session mode it asks for.
    fn session_mode(self) -> Mode {
        match self {
            StartMode::ReadOnly => Mode::ReadOnly,
            StartMode::Normal | StartMode::Worktree => Mode::Normal,
        }
    }
}

/// Output of `work_on_project`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The session id.
    pub session_id: SessionId,
    /// The project.
    pub project: ProjectId,
    /// `created` or `resumed`.
    pub started: String,
    /// Mode.
    pub mode: Mode,
    /// Lifecycle.
    pub lifecycle: Lifecycle,
    /// Execution defaults of the session.
    pub execution_context: ExecutionContext,
    /// Events ever appended to the session.
    pub events_observed: i64,
    /// The opened checkout or managed worktree the session works in, as its runner saw it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<Workspace>,
    /// Feedback about the previous attempt (`not_applicable` for a fresh session).
    #[schemars(with = "serde_json::Map<String, Value>")]
    pub continuation_feedback: Value,
    /// How to work with wc, when requested.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Map<String, Value>>")]
    pub workflow_guidance: Option<Value>,
    /// The project's instructions, when requested.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Map<String, Value>>")]
    pub project_instructions: Option<Value>,
}

fn instruction_payload(instruction: &str) -> Value {
    let mut e = excerpt(instruction, STORED_INSTRUCTION_CHARS);
    shrink_to_bytes(&mut e, STORED_INSTRUCTION_BYTES);
    json!({ "excerpt": e.text, "truncated": e.truncated, "chars": instruction.chars().count() })
}

/// The instruction of a fresh session: its stored excerpt and the `task_instruction` event
/// that opens its ledger, as written by `tool`.
pub(crate) fn instruction_event(
    ctx: &ToolContext,
    tool: &str,
    instruction: &str,
) -> (Value, NewEvent) {
    let payload = instruction_payload(instruction);
    let event = NewEvent {
        kind: EventKind::TaskInstruction,
        call_id: uuid::Uuid::now_v7(),
        invocation_id: ctx.invocation_id,
        role: EventRole::Business,
        tool_name: Some(tool.into()),
        payload: payload.clone(),
    };
    (payload, event)
}

/// Creates a fresh Workflow Session on `project`, owned by the caller's authority, its ledger
/// opened by `event`. The one place a session is created: `work_on_project` and
/// `start_session` share its project and mode rules.
pub(crate) async fn create(
    ctx: &ToolContext,
    project: ProjectId,
    mode: Option<Mode>,
    root_instruction: Value,
    event: NewEvent,
) -> Result<SessionRow, ToolError> {
    let client = ctx.deps.client().await?;
    let known = wc_store::projects::get(&client, &project).await?.is_some();
    if !known || !ctx.principal.projects.allows(&project) {
        return Err(ToolError::new(
            ErrorKind::UnknownProject,
            "no such project is visible to this caller",
        )
        .with("project", project.as_str()));
    }
    drop(client);
    let new = NewSession {
        id: SessionId::generate(),
        project,
        owner_authority_fingerprint: authority::fingerprint(&ctx.principal),
        mode: mode.unwrap_or(Mode::Normal),
        root_instruction: Some(root_instruction),
    };
    Ok(sessions::create(&ctx.deps.pool, &new, &[event]).await?)
}

/// Start a fresh Workflow Session on a project with a task instruction, or resume the one named by
/// session_id. Returns the id to pass as recording_session_id, and feedback about the previous
/// attempt.
// Resuming is work in the session: it keeps the call as its own, as it keeps execution.
#[tool(changes, Session, "Work on a project", session = Changes,
    scopes(&[Scope::ProjectRead, Scope::ProjectWrite]), with_business_pair(BusinessPair::Always),
)]
async fn work_on_project(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let (payload, event) = instruction_event(&ctx, "work_on_project", &args.instruction);
    let resumed = match &args.session_id {
        Some(id) => Some(ctx.business_session(id)?),
        None => None,
    };
    let mut workspace = None;
    let (row, started, continuation_feedback) = match &resumed {
        Some(session) => {
            // Snapshot before the new instruction, so the feedback describes the previous attempt.
            // The runner looks at an opened project again; a base that does not match
            // refuses the resume before anything is written.
            workspace = workspace::observe(&ctx, &session.project, args.base_ref.as_ref()).await?;
            if args.mode == Some(StartMode::Worktree)
                && workspace
                    .as_ref()
                    .is_none_or(|w| w.origin != wc_domain::ProjectOrigin::Worktree)
            {
                return Err(ToolError::new(
                    ErrorKind::InvalidArguments,
                    "mode=worktree resumes a session on a managed worktree; this session's project is not one (omit mode)",
                )
                .with("pointer", "/mode"));
            }
            let before = Evidence::load(&ctx.deps.pool, &session.id).await?;
            let (workspace, validation) = (
                evidence::unobserved_workspace(true),
                before.validation(true),
            );
            let feedback = before.feedback(
                Some(ctx.invocation_id),
                &workspace,
                &validation,
                ExplorationLimit::Standard,
            );
            let mode = args
                .mode
                .filter(|m| *m != StartMode::Worktree)
                .map(StartMode::session_mode);
            let ((), row) = mutation::mutate(&ctx.deps.pool, &session.id, move |row| {
                if !row.is_active() {
                    return Decision::Leave(Err(mutation::closed(row)));
                }
                let change = SessionChange {
                    mode: mode.filter(|m| *m != row.mode),
                    ..Default::default()
                };
                Decision::Write(change, vec![event.clone()], Ok(()))
            })
            .await?;
            (row, "resumed", feedback.to_json())
        }
        None => {
            let project = match (&args.project, &args.client_id, &args.path) {
                (Some(project), _, _) => project.clone(),
                (None, Some(client_id), Some(path)) => {
                    let open_as = match args.mode {
                        Some(StartMode::Worktree) => OpenAs::Worktree,
                        _ => OpenAs::Checkout,
                    };
                    let request = OpenRequest {
                        client_id: client_id.as_str(),
                        path,
                        open_as,
                        base_ref: args.base_ref.as_ref(),
                    };
                    let (project, opened) = workspace::open(&ctx, request).await?;
                    workspace = Some(opened);
                    project
                }
                _ => {
                    return Err(ToolError::new(
                        ErrorKind::InvalidArguments,
                        "project is required to start a session (or client_id and path to open a checkout, or session_id to resume one)",
                    )
                    .with("pointer", "/project")
                    .with("rule", "required"));
                }
            };
            let mode = args.mode.map(StartMode::session_mode);
            let row = create(&ctx, project, mode, payload, event).await?;
            let fresh = feedback::build(&feedback::FeedbackInput {
                fresh_session: true,
                events: &[],
                retention_truncated: false,
                retained_from_seq: 1,
                workspace: &crate::workflow::handoff::WorkspaceEvidence::NotRequested,
                validation: &crate::workflow::handoff::ValidationEvidence::NotRequested,
                jobs: Default::default(),
                open_risks: 0,
                exploration_limit: ExplorationLimit::Standard,
            });
            (row, "created", fresh.to_json())
        }
    };
    let execution_context: ExecutionContext =
        serde_json::from_value(row.execution_context.clone()).unwrap_or_default();
    // Read on the build host after the session is settled; never a precondition of it.
    let project_instructions = if args.include_project_instructions.unwrap_or(true) {
        Some(crate::execution::instructions::read(&ctx, &row.project).await)
    } else {
        None
    };
    Ok(Output {
        session_id: row.id,
        project: row.project,
        started: started.to_owned(),
        mode: row.mode,
        lifecycle: row.lifecycle,
        execution_context,
        events_observed: row.events_observed,
        workspace,
        continuation_feedback,
        workflow_guidance: args
            .include_workflow_guidance
            .unwrap_or(true)
            .then(crate::materials::workflow_guidance),
        project_instructions,
    })
}
