//! Fixtures of the official MCP conformance suite (`@modelcontextprotocol/conformance`),
//! registered only in the test-only `--conformance-fixtures` mode (never on by default).
//!
//! The suite calls fixtures by name; each here behaves as its scenario describes:
//!
//! - **Kernel tools** (`test_simple_text`, `test_error_handling`, `json_schema_2020_12_tool`,
//!   `test_header_param`, …) are ordinary [`ToolSpec`]s and take the normal MCP path, so the
//!   suite checks wc's real tool rendering (`{success, output, error}` as structured content
//!   and as JSON text).
//! - **Content tools** (`test_image_content`, `test_audio_content`, `test_embedded_resource`,
//!   `test_multiple_content_types`) run through the kernel too; their output carries MCP
//!   content blocks, which [`call_tool`] puts in the MCP `content` in place of the JSON text.
//! - **Input-required tools** (`test_input_required_result_*`, `test_missing_capability`,
//!   `test_streaming_elicitation`) ask the client for input with SEP-2322 `InputRequiredResult`s:
//!   the stateless way to elicit, sample and list roots. Everything a later round needs travels
//!   in an HMAC-sealed `requestState` bound to the caller and the tool, so no round keeps state
//!   on the server. They are listed as kernel tools, but their rounds are MCP protocol, so
//!   [`call_tool`] answers them before the kernel is reached (older protocol versions, which
//!   have no input requests, get the kernel's refusal instead).
//! - **Task tools** (`greet`, `slow_compute`, `failing_job`, `protocol_error_job`,
//!   `confirm_delete`, `multi_input`, `test_tool_with_task`) are durable task rows like every
//!   wc task (`super::task_fixtures`); what runs behind them is a plan in the row.
//! - **Prompts, resources, a resource template and completion** (static data).
//!
//! What cannot work on a stateless, JSON-response server (server-to-client requests on the
//! 2025-11-25 wire, notifications during a call, resource subscriptions) is recorded
//! in `tests/suites/conformance-baseline.txt`, not faked here.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock,
    ProgressNotificationParam, PromptsCapability, ResourcesCapability, ServerCapabilities,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::WcMcp;
use super::handler::{audit_slot, is_modern, server_meta};
use crate::audit::AuditNote;
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, ToolMeta, ToolSpec};
use crate::result::{ErrorKind, ToolError};

mod catalog;
mod input;

pub(super) use catalog::{
    complete, get_prompt, list_prompts, list_resource_templates, list_resources, read_resource,
};
pub(super) use input::{Ask, Exchange, Flow, Round, ask_name, elicit, elicited, run_flow};
use input::{FLOWS, tool_flow};

/// A 1x1 red PNG.
const PNG_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
/// Eight samples of 8 kHz, 8-bit mono silence.
const WAV_BASE64: &str = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==";

/// How long fixture listings and reads may be cached: they change only with a deploy.
const FIXTURE_TTL_MS: u64 = 300_000;
/// How long a sealed `requestState` stays valid.
const STATE_TTL: Duration = Duration::from_secs(15 * 60);

// ---------------------------------------------------------------------------------------------
// Capabilities

/// Adds the capabilities the fixtures serve: prompts, resources (no subscriptions: nothing
/// could deliver the updates), completions and logging. Logging is for the 2025-11-25
/// `logging/setLevel` request only; no log notification is ever sent.
pub(super) fn advertise(capabilities: &mut ServerCapabilities) {
    capabilities.prompts = Some(PromptsCapability::default());
    capabilities.resources = Some(ResourcesCapability::default());
    capabilities.completions = Some(Map::new());
    capabilities.logging = Some(Map::new());
}

// ---------------------------------------------------------------------------------------------
// Kernel tools

pub(super) fn meta(name: &'static str, title: &'static str, description: &'static str) -> ToolMeta {
    ToolMeta::reads(Category::Conformance, name, title)
        .scopes(&[])
        .about(description)
}

/// Arguments of a fixture that takes none.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// Output of a fixture that answers with a sentence.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TextOutput {
    /// The answer.
    pub text: String,
}

impl TextOutput {
    fn new(text: impl Into<String>) -> Self {
        Self { text: text.into() }
    }
}

/// Output of a content tool: the MCP content blocks it returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ContentOutput {
    /// MCP content blocks (`text`, `image`, `audio`, `resource`).
    pub content: Vec<Value>,
}

/// Arguments of `test_header_param`: one string mirrored into the `Mcp-Param-Region` header.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HeaderArgs {
    /// A region name; clients send it in the `Mcp-Param-Region` header too (SEP-2243).
    #[schemars(extend("x-mcp-header" = "Region"))]
    pub region: String,
}

/// Arguments of `json_schema_2020_12_tool`: any object its (hand-written) schema allows.
#[derive(Debug, Deserialize)]
#[serde(transparent)]
pub struct ContactArgs(pub Map<String, Value>);

impl JsonSchema for ContactArgs {
    fn schema_name() -> Cow<'static, str> {
        "ContactArgs".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        // The suite's schema, verbatim: it checks that every keyword survives the listing.
        json_schema!({
            "type": "object",
            "$defs": {
                "address": {
                    "$anchor": "addressDef",
                    "type": "object",
                    "properties": {
                        "street": { "type": "string" },
                        "city": { "type": "string" }
                    }
                }
            },
            "properties": {
                "name": { "type": "string" },
                "address": { "$ref": "#/$defs/address" },
                "contactMethod": { "type": "string", "enum": ["phone", "email"] },
                "phone": { "type": "string" },
                "email": { "type": "string" }
            },
            "allOf": [{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }],
            "if": {
                "properties": { "contactMethod": { "const": "phone" } },
                "required": ["contactMethod"]
            },
            "then": { "required": ["phone"] },
            "else": { "required": ["email"] },
            "additionalProperties": false
        })
    }
}

/// Every fixture tool.
pub fn tools() -> Vec<ToolSpec> {
    let mut json_schema_tool = ToolSpec::new(
        meta(
            "json_schema_2020_12_tool",
            "JSON Schema 2020-12 tool",
            "Tool with JSON Schema 2020-12 features ($defs, $anchor, allOf/anyOf, if/then/else).",
        ),
        contact,
    );
    // `schema_for` drops `$schema`; this fixture exists to show that it is preserved.
    Arc::make_mut(&mut json_schema_tool.input_schema).insert(
        "$schema".into(),
        json!("https://json-schema.org/draft/2020-12/schema"),
    );
    let mut specs = vec![
        ToolSpec::new(
            meta(
                "test_simple_text",
                "Simple text",
                "Returns a simple text response.",
            ),
            simple_text,
        ),
        ToolSpec::new(
            meta(
                "test_error_handling",
                "Error handling",
                "Always fails, to test error reporting.",
            ),
            error_handling,
        ),
        ToolSpec::new(
            meta(
                "test_logging_tool",
                "Logging tool",
                "Would log during execution; logs are sent only when a request sets a log level.",
            ),
            logging_tool,
        ),
        ToolSpec::new(
            meta(
                "test_tool_with_logging",
                "Tool with logging",
                "Sends three info log lines while running (2025-11-25).",
            ),
            tool_with_logging,
        ),
        ToolSpec::new(
            meta(
                "test_tool_with_progress",
                "Tool with progress",
                "Sends progress 0, 50 and 100 of 100 while running, given a progress token.",
            ),
            tool_with_progress,
        ),
        ToolSpec::new(
            meta(
                "test_header_param",
                "Header parameter",
                "Echoes a region that clients also send in the Mcp-Param-Region header.",
            ),
            header_param,
        ),
        json_schema_tool,
        ToolSpec::new(
            meta(
                "test_image_content",
                "Image content",
                "Returns a PNG image.",
            ),
            image_content,
        ),
        ToolSpec::new(
            meta("test_audio_content", "Audio content", "Returns a WAV clip."),
            audio_content,
        ),
        ToolSpec::new(
            meta(
                "test_embedded_resource",
                "Embedded resource",
                "Returns an embedded text resource.",
            ),
            embedded_resource,
        ),
        ToolSpec::new(
            meta(
                "test_multiple_content_types",
                "Multiple content types",
                "Returns text, an image and an embedded resource.",
            ),
            multiple_content_types,
        ),
    ];
    specs.extend(super::task_fixtures::tools());
    specs.extend(FLOWS.iter().map(|&(name, title, description, _)| {
        ToolSpec::new(meta(name, title, description), needs_input_requests)
    }));
    specs
}

/// The text `test_simple_text` answers with.
pub const SIMPLE_TEXT: &str = "This is a simple text response for testing.";

async fn simple_text(_: ToolContext, _: NoArgs) -> Result<TextOutput, ToolError> {
    Ok(TextOutput::new(SIMPLE_TEXT))
}

async fn error_handling(_: ToolContext, _: NoArgs) -> Result<TextOutput, ToolError> {
    Err(ToolError::new(
        ErrorKind::InvalidArguments,
        "This tool intentionally returns an error for testing",
    ))
}

async fn logging_tool(_: ToolContext, _: NoArgs) -> Result<TextOutput, ToolError> {
    Ok(TextOutput::new("Logging tool executed"))
}

async fn tool_with_logging(_: ToolContext, _: NoArgs) -> Result<TextOutput, ToolError> {
    Ok(TextOutput::new(
        "Tool execution completed (its log lines went out on this request's stream)",
    ))
}

async fn tool_with_progress(_: ToolContext, _: NoArgs) -> Result<TextOutput, ToolError> {
    Ok(TextOutput::new(
        "Tool execution completed (its progress went out on this request's stream)",
    ))
}

async fn header_param(_: ToolContext, args: HeaderArgs) -> Result<TextOutput, ToolError> {
    Ok(TextOutput::new(format!("region={}", args.region)))
}

async fn contact(_: ToolContext, args: ContactArgs) -> Result<TextOutput, ToolError> {
    Ok(TextOutput::new(format!(
        "contact with {} field(s) accepted",
        args.0.len()
    )))
}

fn image_block() -> Value {
    json!({ "type": "image", "data": PNG_BASE64, "mimeType": "image/png" })
}

async fn image_content(_: ToolContext, _: NoArgs) -> Result<ContentOutput, ToolError> {
    Ok(ContentOutput {
        content: vec![image_block()],
    })
}

async fn audio_content(_: ToolContext, _: NoArgs) -> Result<ContentOutput, ToolError> {
    Ok(ContentOutput {
        content: vec![json!({ "type": "audio", "data": WAV_BASE64, "mimeType": "audio/wav" })],
    })
}

async fn embedded_resource(_: ToolContext, _: NoArgs) -> Result<ContentOutput, ToolError> {
    Ok(ContentOutput {
        content: vec![json!({
            "type": "resource",
            "resource": {
                "uri": "test://embedded-resource",
                "mimeType": "text/plain",
                "text": "This is an embedded resource content."
            }
        })],
    })
}

async fn multiple_content_types(_: ToolContext, _: NoArgs) -> Result<ContentOutput, ToolError> {
    Ok(ContentOutput {
        content: vec![
            json!({ "type": "text", "text": "Multiple content types test:" }),
            image_block(),
            json!({
                "type": "resource",
                "resource": {
                    "uri": "test://mixed-content-resource",
                    "mimeType": "application/json",
                    "text": "{\"test\":\"data\",\"value\":123}"
                }
            }),
        ],
    })
}

/// The kernel side of an input-required tool: reached only where input requests do not exist
/// (REST, MCP before 2026-07-28).
async fn needs_input_requests(_: ToolContext, _: NoArgs) -> Result<TextOutput, ToolError> {
    Err(ToolError::new(
        ErrorKind::InvalidArguments,
        "this tool asks the client for input with SEP-2322 input requests; call it over MCP \
         with protocol version 2026-07-28 or later (this stateless server cannot send \
         server-to-client requests on older versions)",
    ))
}

// ---------------------------------------------------------------------------------------------
// The MCP side of fixture tools

/// Whether a fixture tool returns its output's content blocks as MCP content.
fn is_content_tool(name: &str) -> bool {
    matches!(
        name,
        "test_image_content"
            | "test_audio_content"
            | "test_embedded_resource"
            | "test_multiple_content_types"
    )
}

/// `tools/call` in fixtures mode: input-required tools are answered here, content tools get
/// their content blocks, and everything else takes the normal kernel path unchanged.
pub(super) async fn call_tool(
    handler: &WcMcp,
    params: CallToolRequestParams,
    ctx: RequestContext<RoleServer>,
) -> Result<CallToolResponse, McpError> {
    if let Some(answer) = super::task_fixtures::call(handler, &params, &ctx).await {
        return answer;
    }
    if is_modern(&ctx)
        && let Some(flow) = tool_flow(&params.name)
    {
        let exchange = Exchange {
            surface: "tools/call",
            name: &params.name,
            input_responses: params.input_responses.as_ref(),
            request_state: params.request_state.as_deref(),
        };
        let round = run_flow(&flow, &exchange, &ctx)?;
        if let Some(slot) = audit_slot(&ctx) {
            let stage = match round {
                Round::Ask(_) => "input_required",
                Round::Done(_) => "complete",
            };
            slot.note(AuditNote {
                action_name: params.name.to_string(),
                success: true,
                model_ergonomics: None,
                extra: Some(("result_type".into(), json!(stage))),
            });
        }
        return Ok(match round {
            Round::Ask(ask) => CallToolResponse::InputRequired(ask),
            Round::Done(answers) => {
                let text = (flow.finish)(&answers);
                let mut result = CallToolResult::structured(json!({
                    "success": true,
                    "output": { "text": text },
                }));
                result.content = vec![ContentBlock::text(text)];
                result.meta = Some(server_meta());
                CallToolResponse::Complete(result)
            }
        });
    }
    match &*params.name {
        "test_tool_with_progress" => announce_progress(&params, &ctx).await,
        "test_tool_with_logging" if !is_modern(&ctx) => announce_logs(&ctx).await,
        _ => {}
    }
    let content_tool = is_content_tool(&params.name);
    let response = handler.call_kernel_tool(params, ctx).await?;
    if !content_tool {
        return Ok(response);
    }
    let CallToolResponse::Complete(mut result) = response else {
        return Ok(response);
    };
    if result.is_error != Some(true)
        && let Some(blocks) = result
            .structured_content
            .as_ref()
            .and_then(|v| v.pointer("/output/content"))
        && let Ok(blocks) = serde_json::from_value::<Vec<ContentBlock>>(blocks.clone())
    {
        result.content = blocks;
    }
    Ok(CallToolResponse::Complete(result))
}

/// `test_tool_with_progress`: 0, 50 and 100 of 100, 50 ms apart, on the request's own stream,
/// when the request carries a progress token.
async fn announce_progress(params: &CallToolRequestParams, ctx: &RequestContext<RoleServer>) {
    let Some(token) = super::handler::progress_token(params, ctx) else {
        return;
    };
    for (i, done) in [0.0, 50.0, 100.0].into_iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let note = ProgressNotificationParam::new(token.clone(), done).with_total(100.0);
        if ctx.peer.notify_progress(note).await.is_err() {
            return;
        }
    }
}

/// `test_tool_with_logging` (2025-11-25; logging is gone from 2026-07-28): three info lines,
/// 50 ms apart. A stateless server cannot remember `logging/setLevel`, so it logs at the
/// level a server picks when none is set.
#[expect(
    deprecated,
    reason = "logging exists only before 2026-07-28 (SEP-2577)"
)]
async fn announce_logs(ctx: &RequestContext<RoleServer>) {
    use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
    let lines = [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ];
    for (i, line) in lines.into_iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut note = LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(line));
        note.logger = Some("wc".into());
        if ctx.peer.notify_logging_message(note).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::Registry;

    #[test]
    fn fixture_tools_register_beside_the_real_ones() {
        let mut specs = crate::tools::all();
        specs.extend(tools());
        let runtime = Registry::new(specs);
        for (name, ..) in FLOWS {
            assert!(runtime.get(name).is_some(), "{name} is not registered");
        }
        assert!(
            runtime
                .specs()
                .iter()
                .filter(|s| s.meta.category == Category::Conformance)
                .all(|s| s.meta.scopes.is_empty() && !crate::rest::openapi::is_named(s.meta.name))
        );
    }

    #[test]
    fn every_fixture_input_schema_compiles() {
        // As for the real tools (`tools::tests`): a schema that does not compile fails here,
        // not on the first call.
        for spec in &tools() {
            let _ = spec.validator();
        }
    }

    #[test]
    fn the_json_schema_fixture_keeps_every_2020_12_keyword() {
        let spec = tools()
            .into_iter()
            .find(|s| s.meta.name == "json_schema_2020_12_tool")
            .unwrap();
        let schema = Value::Object((*spec.input_schema).clone());
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        assert_eq!(schema["$defs"]["address"]["$anchor"], "addressDef");
        assert_eq!(schema["properties"]["address"]["$ref"], "#/$defs/address");
        assert!(schema["allOf"][0]["anyOf"].is_array());
        for keyword in ["if", "then", "else"] {
            assert!(schema.get(keyword).is_some(), "{keyword} was dropped");
        }
        assert_eq!(schema["additionalProperties"], false);
    }

    #[test]
    fn the_header_fixture_annotates_a_string_property() {
        let spec = tools()
            .into_iter()
            .find(|s| s.meta.name == "test_header_param")
            .unwrap();
        let region = &spec.input_schema["properties"]["region"];
        assert_eq!(region["x-mcp-header"], "Region");
        assert_eq!(region["type"], "string");
    }
}
