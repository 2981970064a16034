//! `runtime_status`: is the control plane healthy, and what does it run?

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wc_macros::tool;

use crate::kernel::context::ToolContext;
use crate::result::ToolError;

/// Arguments of `runtime_status` (none).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {}

/// Database facts.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Database {
    /// Whether the database answered.
    pub reachable: bool,
    /// Applied migration level, if it answered and was migrated.
    pub schema_level: Option<i32>,
    /// The level this server expects.
    pub expected_schema_level: i32,
}

/// Runner facts, for the runners serving projects this caller may use.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Runners {
    /// Runner agents currently connected.
    pub online: u32,
    /// Runner agents known (connected or not).
    pub known: u32,
    /// Work items of the caller's authority group those runners hold leases on now.
    pub work_in_flight: i64,
    /// Whether execution tools can run now (some runner is connected).
    pub execution_available: bool,
}

/// Output of `runtime_status`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// Server version.
    pub server_version: String,
    /// Database facts.
    pub database: Database,
    /// Runner facts.
    pub runners: Runners,
    /// Number of tools this caller may use.
    pub tools_visible: usize,
}

/// Report the server version, whether the database is reachable and at the expected schema level,
/// and how many runner agents serving your projects are online.
#[tool(reads, Discovery, "Runtime status", scopes(&[]))]
async fn runtime_status(ctx: ToolContext, _args: Args) -> Result<Output, ToolError> {
    let expected = wc_store::migrate::expected_level();
    let database = match wc_store::health::check(&ctx.deps.pool, Duration::from_secs(3)).await {
        Ok(h) => Database {
            reachable: true,
            schema_level: h.schema_level,
            expected_schema_level: expected,
        },
        Err(e) => {
            tracing::warn!(error = %e, "runtime_status: database unreachable");
            Database {
                reachable: false,
                schema_level: None,
                expected_schema_level: expected,
            }
        }
    };
    let runners = match (database.reachable, super::list_runners::visible(&ctx).await) {
        (true, Ok(list)) => {
            let online = list.iter().filter(|r| r.online).count() as u32;
            Runners {
                online,
                known: list.len() as u32,
                work_in_flight: list.iter().map(|r| r.work_in_flight).sum(),
                execution_available: online > 0,
            }
        }
        _ => Runners {
            online: 0,
            known: 0,
            work_in_flight: 0,
            execution_available: false,
        },
    };
    Ok(Output {
        server_version: crate::VERSION.to_owned(),
        database,
        runners,
        tools_visible: ctx.registry.visible(ctx.principal.scopes).count(),
    })
}
