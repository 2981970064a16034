//! Where a call's work runs: the project or session it names ([`ProjectOrSession`]), the
//! project's connected runner ([`Target`]) and what an execution inherits from the session
//! ([`Setting`]).

use std::sync::Arc;

use chrono::Utc;
use schemars::JsonSchema;
use serde::Deserialize;
use uuid::Uuid;
use wc_domain::{ProjectId, ProjectOrigin, SessionId};
use wc_runner_protocol::WorkKind;
use wc_store::sessions::SessionRow;

use crate::kernel::context::ToolContext;
use crate::result::{ErrorKind, ToolError};
use crate::workflow::exec_context::ExecutionContext;

/// The arguments that say where a project tool works: a project, a Workflow Session (whose
/// project it is, whose defaults apply and whose ledger records the call), or both. Flattened
/// into a tool's arguments; at least one is required.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(extend("anyOf" = [
    {"required": ["project"], "properties": {"project": {"type": "string"}}},
    {"required": ["session_id"], "properties": {"session_id": {"type": "string"}}}
]))]
pub struct ProjectOrSession {
    /// Project id (`agent:<runner>:<name>`); default: the session's.
    pub project: Option<ProjectId>,
    /// Workflow Session to work in: its project, defaults and ledger.
    pub session_id: Option<SessionId>,
}

impl ProjectOrSession {
    /// The session's project, in `session`.
    pub fn of_session(session: &SessionId) -> ProjectOrSession {
        ProjectOrSession {
            project: None,
            session_id: Some(session.clone()),
        }
    }

    /// The session (authorized by the kernel) and where its work runs: the project (the
    /// argument, else the session's) with its connected runner.
    pub async fn resolve(
        &self,
        ctx: &ToolContext,
    ) -> Result<(Option<Arc<SessionRow>>, Target), ToolError> {
        let session = self
            .session_id
            .as_ref()
            .map(|id| ctx.business_session(id))
            .transpose()?;
        let project = request_project(self.project.as_ref(), session.as_ref())?;
        let target = resolve_target(ctx, &project).await?;
        Ok((session, target))
    }
}

/// Where a project's work runs.
#[derive(Debug, Clone)]
pub struct Target {
    /// Canonical project id, `agent:<client_id>:<name>`.
    pub project_id: ProjectId,
    /// The runner.
    pub client_id: String,
    /// The runner-local project id.
    pub local: String,
    /// How the project came to be served (one being opened: as what it is opened).
    pub origin: ProjectOrigin,
    /// The kinds of work its runner's instance executes.
    pub work_kinds: Vec<WorkKind>,
    /// The runner's current instance (the owner of any shell opened now).
    pub instance_id: Uuid,
}

fn unknown_project(project: &ProjectId) -> ToolError {
    ToolError::new(
        ErrorKind::UnknownProject,
        "no such project is visible to this caller",
    )
    .with("project", project.as_str())
}

/// Resolves `project` to its runner, refusing projects the caller cannot see and runners
/// that are not connected (nothing is queued for a host nobody serves).
pub async fn resolve_target(ctx: &ToolContext, project: &ProjectId) -> Result<Target, ToolError> {
    if !ctx.principal.projects.allows(project) {
        return Err(unknown_project(project));
    }
    let client = ctx.deps.client().await?;
    let Some(p) = wc_store::projects::get(&client, project).await? else {
        return Err(unknown_project(project));
    };
    let runner = wc_store::runners::get(&client, &p.client_id).await?;
    on_runner(ctx, runner, p.id, &p.client_id, p.name, p.origin)
}

/// Where work for `project_id`, the runner-local project `local` of `runner` (client
/// `client_id`, as read), runs, refusing a runner that is not connected. A project a caller
/// is opening has no row yet: its work goes to the runner by this target.
pub fn on_runner(
    ctx: &ToolContext,
    runner: Option<wc_store::runners::Runner>,
    project_id: ProjectId,
    client_id: &str,
    local: String,
    origin: ProjectOrigin,
) -> Result<Target, ToolError> {
    let Some(runner) = runner.filter(|r| is_online(ctx, r)) else {
        return Err(ToolError::new(
            ErrorKind::RunnerUnavailable,
            "no runner serving this project is connected; nothing was started",
        )
        .with("project", project_id.as_str())
        .with("runner", client_id.to_owned()));
    };
    Ok(Target {
        project_id,
        client_id: client_id.to_owned(),
        local,
        origin,
        work_kinds: announced_kinds(runner.work_kinds.as_deref()),
        // An online runner has registered an instance.
        instance_id: runner.instance_id.unwrap_or_default(),
    })
}

/// The kinds a runner's instance announced (those this build knows); an instance that
/// registered before runners announced kinds executes processes, shells and scripts.
fn announced_kinds(names: Option<&[String]>) -> Vec<WorkKind> {
    match names {
        None => WorkKind::UNANNOUNCED.to_vec(),
        Some(names) => WorkKind::ALL
            .iter()
            .copied()
            .filter(|k| names.iter().any(|n| n == k.as_str()))
            .collect(),
    }
}

/// Whether a runner counts as connected: registered, not revoked, seen within a lease.
pub fn is_online(ctx: &ToolContext, r: &wc_store::runners::Runner) -> bool {
    let lease = chrono::Duration::from_std(ctx.deps.config.runner_lease)
        .unwrap_or(chrono::Duration::seconds(60));
    r.revoked_at.is_none()
        && r.instance_id.is_some()
        && r.last_seen_at.is_some_and(|t| Utc::now() - t < lease)
}

/// The project of an execution request: the argument, else the session's.
pub fn request_project(
    project: Option<&ProjectId>,
    session: Option<&Arc<SessionRow>>,
) -> Result<ProjectId, ToolError> {
    project
        .cloned()
        .or_else(|| session.map(|s| s.project.clone()))
        .ok_or_else(|| {
            ToolError::new(
                ErrorKind::InvalidArguments,
                "project is required (or give session_id to run in that session's project)",
            )
            .with("pointer", "/project")
            .with("rule", "required")
        })
}

/// What every execution tool settles before looking at its own arguments: the session it
/// works in (if named), where the work would run, and the session's execution defaults.
pub struct Setting {
    /// The business session named by `session_id`.
    pub session: Option<Arc<SessionRow>>,
    /// The project's runner.
    pub target: Target,
    /// The session's execution defaults (empty without a session).
    pub defaults: ExecutionContext,
}

/// Settles the [`Setting`] of the call: the session named by `session_id` (authorized by the
/// kernel), the project (the argument, else the session's) and its connected runner — an
/// unknown project is the answer before any detail — then refuses a named remote resource.
/// (A `purpose` is checked by its type, [`super::Purpose`], as it is parsed.)
pub async fn setting(ctx: &ToolContext, at: &ProjectOrSession) -> Result<Setting, ToolError> {
    let (session, target) = at.resolve(ctx).await?;
    let defaults = self::defaults(session.as_ref());
    refuse_resource(&defaults, ctx.tool)?;
    Ok(Setting {
        session,
        target,
        defaults,
    })
}

/// The session's execution defaults, when a session was named.
pub fn defaults(session: Option<&Arc<SessionRow>>) -> ExecutionContext {
    session
        .and_then(|s| serde_json::from_value(s.execution_context.clone()).ok())
        .unwrap_or_default()
}

/// Refuses a named remote resource: remote execution is not available in this build, and
/// falling back to the project host would run the work somewhere the caller did not choose.
pub fn refuse_resource(ctx: &ExecutionContext, tool: &str) -> Result<(), ToolError> {
    match &ctx.resource {
        None => Ok(()),
        Some(name) => Err(ToolError::new(
            ErrorKind::Unsupported,
            format!(
                "the session names the remote resource {name:?}; {tool} does not run on named resources, and it is never silently run on the project host instead (clear the resource with update_session_context)"
            ),
        )
        .with("resource", name.clone())),
    }
}
