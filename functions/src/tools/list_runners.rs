//! `list_runners`: the build-host runners serving the caller's projects, whether they are
//! connected, and the work they hold.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wc_domain::ProjectId;
use wc_macros::tool;

use crate::execution;
use crate::kernel::context::ToolContext;
use crate::result::ToolError;
use crate::workflow::authority;

/// Most runners listed.
pub const MAX_RUNNERS: i64 = 100;

/// Arguments of `list_runners` (none).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {}

/// One runner.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunnerView {
    /// Stable client id (`agent:<client_id>:<project>`).
    pub client_id: String,
    /// Connected: registered, not revoked, seen within a lease.
    pub online: bool,
    /// The current process.
    pub instance_id: Option<String>,
    /// When that process registered.
    pub instance_started_at: Option<DateTime<Utc>>,
    /// Last poll or heartbeat.
    pub last_seen_at: Option<DateTime<Utc>>,
    /// Agent version.
    pub agent_version: Option<String>,
    /// `api_poll` or `sqs`.
    pub queue: Option<String>,
    /// Work items it runs at once.
    pub max_concurrency: Option<i32>,
    /// Project ids it serves (canonical).
    pub projects: Vec<ProjectId>,
    /// Work of the caller's authority group it holds leases on now (other callers' work is
    /// not counted).
    pub work_in_flight: i64,
}

/// Output of `list_runners`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// Runners, by client id.
    pub runners: Vec<RunnerView>,
    /// Whether any runner is connected (execution tools can run).
    pub execution_available: bool,
}

/// The runners visible to the caller: all for unrestricted principals; otherwise those whose
/// projects the caller may use (and only those projects).
pub async fn visible(ctx: &ToolContext) -> Result<Vec<RunnerView>, ToolError> {
    let client = ctx.deps.client().await?;
    let only: Option<Vec<String>> = ctx.principal.projects.ids().map(|ids| {
        ids.iter()
            .filter_map(|p| p.runner_parts().map(|(c, _)| c.to_owned()))
            .collect()
    });
    // Work in flight is counted for the caller's authority group only: other callers' work
    // on a shared runner is theirs to see.
    let owner = authority::fingerprint(&ctx.principal);
    let runners =
        wc_store::runners::list(&client, only.as_deref(), Some(&owner), MAX_RUNNERS).await?;
    Ok(runners
        .into_iter()
        .map(|r| RunnerView {
            online: execution::is_online(ctx, &r),
            projects: r
                .projects
                .iter()
                .filter_map(|p| ProjectId::of_runner(&r.client_id, p).ok())
                .filter(|p| ctx.principal.projects.allows(p))
                .collect(),
            client_id: r.client_id,
            instance_id: r.instance_id.map(|i| i.to_string()),
            instance_started_at: r.instance_started_at,
            last_seen_at: r.last_seen_at,
            agent_version: r.agent_version,
            queue: r.queue,
            max_concurrency: r.max_concurrency,
            work_in_flight: r.work_in_flight,
        })
        .collect())
}

/// List the build-host runners serving your projects: connected or not, last heartbeat, projects
/// and work in flight.
#[tool(reads, Discovery, "List runners")]
async fn list_runners(ctx: ToolContext, _args: Args) -> Result<Output, ToolError> {
    let runners = visible(&ctx).await?;
    Ok(Output {
        execution_available: runners.iter().any(|r| r.online),
        runners,
    })
}
