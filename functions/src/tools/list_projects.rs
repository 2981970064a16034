//! `list_projects`: the projects this caller may work on.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::Serialize;
use wc_domain::{ProjectId, ProjectOrigin};
use wc_macros::{tool, tool_args};

use crate::kernel::context::ToolContext;
use crate::result::ToolError;

/// Most projects one call returns.
pub const MAX_LIMIT: u32 = 500;

#[tool_args]
pub struct Args {
    /// Most projects to return (default 100, at most 500).
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<u32>,
}

/// One project.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ListedProject {
    /// Canonical id (`agent:<client>:<name>`).
    pub id: ProjectId,
    /// Short name.
    pub name: String,
    /// Runner client that serves it.
    pub client_id: String,
    /// When it was last registered.
    pub registered_at: DateTime<Utc>,
    /// `configured` on its runner, or opened by a caller: a `checkout`, or a managed
    /// `worktree`.
    pub origin: ProjectOrigin,
    /// Opened: the checkout it came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// Output of `list_projects`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// Visible projects, by id.
    pub projects: Vec<ListedProject>,
    /// How many were returned.
    pub returned: usize,
    /// Whether more exist than were returned.
    pub truncated: bool,
}

/// List the projects this caller may work on, with their canonical ids (agent:<client>:<name>) and
/// the runner that serves each.
#[tool(reads, Discovery, "List projects")]
async fn list_projects(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let limit = args.limit.unwrap_or(100).min(MAX_LIMIT) as usize;
    let client = ctx.deps.client().await?;
    let mut visible: Vec<ListedProject> = wc_store::projects::list(&client)
        .await?
        .into_iter()
        .filter(|p| ctx.principal.projects.allows(&p.id))
        .map(|p| ListedProject {
            id: p.id,
            name: p.name,
            client_id: p.client_id,
            registered_at: p.updated_at,
            origin: p.origin,
            source: p.source_path,
        })
        .collect();
    let truncated = visible.len() > limit;
    visible.truncate(limit);
    Ok(Output {
        returned: visible.len(),
        projects: visible,
        truncated,
    })
}
