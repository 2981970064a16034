//! Projects a caller opens through a runner: a checkout as itself, or a managed worktree the
//! runner makes of it. The runner alone reads the path and the revision (its filesystem
//! policy, its worktree store); the server picks only the new project's runner-local id,
//! records the runner's answer with who opened it, and never builds a host path.

use schemars::JsonSchema;
use serde::Serialize;
use wc_domain::{HostPath, ProjectId, ProjectOrigin, Revision};
use wc_runner_protocol::{ObserveProjectOp, OpenAs, OpenProjectOp, OpenedProject};
use wc_store::projects::{self, Opened};

use super::operation;
use super::target::on_runner;
use crate::auth::ProjectGrants;
use crate::kernel::context::ToolContext;
use crate::result::{ErrorKind, ToolError};
use crate::workflow::authority;

/// An opened project as `work_on_project` reports it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Workspace {
    /// `checkout` (the checkout itself), `worktree` (a managed worktree of it), or
    /// `configured` (the checkout was already a project of its runner).
    pub origin: ProjectOrigin,
    /// Its root on the runner's host.
    pub root: Option<String>,
    /// The checkout it was opened from.
    pub source: Option<String>,
    /// A worktree: the exact commit it was made at.
    pub base_commit: Option<String>,
    /// The commit its HEAD is at, as the runner saw it during this call.
    pub head: Option<String>,
    /// This call made the project (false: it existed).
    pub created: bool,
    /// Why the runner could not look at it during this call, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unobserved: Option<String>,
}

/// What a caller asks to open.
pub struct OpenRequest<'a> {
    /// The runner whose host holds the checkout.
    pub client_id: &'a str,
    /// The checkout, on that host.
    pub path: &'a HostPath,
    /// As itself, or as a new managed worktree.
    pub open_as: OpenAs,
    /// The revision a worktree starts at.
    pub base_ref: Option<&'a Revision>,
}

/// Opens `req` through its runner and records the project; the project and how it is now.
/// Only a caller whose credential reaches every project may open one: a new project is not in
/// any credential's list.
pub async fn open(
    ctx: &ToolContext,
    req: OpenRequest<'_>,
) -> Result<(ProjectId, Workspace), ToolError> {
    if !matches!(ctx.principal.projects, ProjectGrants::All) {
        return Err(ToolError::new(
            ErrorKind::InsufficientScope,
            "this credential reaches only the projects it names; opening a checkout makes a new project, which needs a credential that reaches every project",
        ));
    }
    let prefix = match req.open_as {
        OpenAs::Checkout => "co",
        OpenAs::Worktree => "wt",
    };
    let local = format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    let asked = ProjectId::of_runner(req.client_id, &local).map_err(|e| {
        ToolError::new(ErrorKind::InvalidArguments, e.to_string()).with("pointer", "/client_id")
    })?;
    let origin = match req.open_as {
        OpenAs::Checkout => ProjectOrigin::Checkout,
        OpenAs::Worktree => ProjectOrigin::Worktree,
    };
    let runner = wc_store::runners::get(&ctx.deps.client().await?, req.client_id).await?;
    if runner.is_none() {
        return Err(ToolError::new(
            ErrorKind::UnknownRunner,
            "no runner has this client id (list_runners names them); nothing was opened",
        )
        .with("client_id", req.client_id.to_owned()));
    }
    let target = on_runner(ctx, runner, asked, req.client_id, local, origin)?;
    let op = OpenProjectOp {
        path: req.path.as_str().to_owned(),
        open_as: req.open_as,
        base_ref: req.base_ref.map(|r| r.as_str().to_owned()),
    };
    let answer: OpenedProject = operation::run(ctx, &target, ctx.tool, op).await?;
    let id = ProjectId::of_runner(req.client_id, &answer.project).map_err(ToolError::internal)?;
    let client = ctx.deps.client().await?;
    let row = projects::record_opened(
        &client,
        &Opened {
            id: &id,
            name: &answer.project,
            client_id: req.client_id,
            origin,
            root: &answer.root,
            source_path: &answer.source,
            base_commit: answer.base_commit.as_deref(),
            opened_by_kind: ctx.principal.kind.as_str(),
            opened_by_authority: &authority::fingerprint(&ctx.principal),
        },
    )
    .await?;
    Ok((
        row.id,
        Workspace {
            origin: row.origin,
            root: Some(answer.root),
            source: Some(answer.source),
            base_commit: answer.base_commit,
            head: answer.head,
            created: answer.created,
            unobserved: None,
        },
    ))
}

/// The opened project `project` as its runner sees it now (`None` for a configured project
/// when no `base_ref` is asked about). `base_ref` must name the managed worktree's base
/// commit; without one, a runner that cannot look is reported, not an error.
pub async fn observe(
    ctx: &ToolContext,
    project: &ProjectId,
    base_ref: Option<&Revision>,
) -> Result<Option<Workspace>, ToolError> {
    let client = ctx.deps.client().await?;
    let row = match ctx.principal.projects.allows(project) {
        true => projects::get(&client, project).await?,
        false => None,
    };
    let Some(row) = row else {
        return Err(
            ToolError::new(ErrorKind::UnknownProject, "the session's project is gone")
                .with("project", project.as_str()),
        );
    };
    match (row.origin, base_ref) {
        (ProjectOrigin::Configured, None) => return Ok(None),
        (ProjectOrigin::Worktree, _) => {}
        (_, Some(_)) => {
            return Err(ToolError::new(
                ErrorKind::InvalidArguments,
                "base_ref and mode=worktree resume a managed worktree; this session's project is not one",
            )
            .with("pointer", "/base_ref")
            .with("project", project.as_str()));
        }
        (ProjectOrigin::Checkout, None) => {}
    }
    let op = ObserveProjectOp {
        base_ref: base_ref.map(|r| r.as_str().to_owned()),
    };
    // The row read above says where it is served: no second read of it.
    let runner = wc_store::runners::get(&client, &row.client_id).await?;
    drop(client);
    let target = on_runner(ctx, runner, row.id, &row.client_id, row.name, row.origin);
    let observed = match target {
        Ok(target) => operation::run(ctx, &target, ctx.tool, op).await,
        Err(e) => Err(e),
    };
    let mut workspace = Workspace {
        origin: row.origin,
        root: row.root,
        source: row.source_path,
        base_commit: row.base_commit,
        head: None,
        created: false,
        unobserved: None,
    };
    match observed {
        Ok(seen) => {
            if let Some(asked) = &seen.base_ref_commit
                && workspace.base_commit.as_ref() != Some(asked)
            {
                return Err(ToolError::new(
                    ErrorKind::BaseMismatch,
                    "base_ref names another commit than the managed worktree was made at; nothing was resumed",
                )
                .with("base_commit", workspace.base_commit.clone().unwrap_or_default())
                .with("base_ref_commit", asked.clone()));
            }
            workspace.head = seen.head;
        }
        // A base that cannot be checked is not taken on trust.
        Err(e) if base_ref.is_some() => return Err(e),
        Err(e) => workspace.unobserved = Some(e.message),
    }
    Ok(Some(workspace))
}
