//! `list_tools`: the tools the caller may use.

use schemars::JsonSchema;
use serde::Serialize;
use wc_macros::{tool, tool_args};

use crate::kernel::context::ToolContext;
use crate::result::ToolError;

#[tool_args]
pub struct Args {
    /// Only tools of this category.
    #[schemars(length(min = 1, max = 64))]
    pub category: Option<String>,
}

/// One listed tool.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ListedTool {
    /// Wire name.
    pub name: String,
    /// Title.
    pub title: String,
    /// Category.
    pub category: String,
    /// Scopes needed.
    pub scopes: Vec<String>,
    /// Whether it only reads.
    pub read_only: bool,
    /// Whether its effect is consequential.
    pub consequential: bool,
}

/// Output of `list_tools`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The tools, in name order.
    pub tools: Vec<ListedTool>,
    /// How many.
    pub count: usize,
}

/// List the runtime tools this caller may use, with their titles, categories, required scopes and
/// whether they change anything.
#[tool(reads, Discovery, "List tools", scopes(&[]))]
async fn list_tools(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let tools: Vec<ListedTool> = ctx
        .registry
        .visible(ctx.principal.scopes)
        .filter(|s| {
            args.category
                .as_deref()
                .is_none_or(|c| s.meta.category.as_str() == c)
        })
        .map(|s| ListedTool {
            name: s.meta.name.to_owned(),
            title: s.meta.title.to_owned(),
            category: s.meta.category.as_str().to_owned(),
            scopes: s
                .meta
                .scopes
                .iter()
                .map(|sc| sc.as_str().to_owned())
                .collect(),
            read_only: s.meta.read_only(),
            consequential: s.meta.is_consequential(),
        })
        .collect();
    Ok(Output {
        count: tools.len(),
        tools,
    })
}
