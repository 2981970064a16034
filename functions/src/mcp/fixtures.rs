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
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities,
    CompleteRequestParams, CompleteResult, CompletionInfo, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, InputRequest, InputRequests, InputRequiredResult,
    InputResponses, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ProgressNotificationParam, Prompt, PromptArgument, PromptMessage, PromptsCapability,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Reference, Resource,
    ResourceContents, ResourceTemplate, ResourcesCapability, Role, ServerCapabilities,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::Sha256;

use super::WcMcp;
use super::handler::{audit_slot, is_modern, principal, server_meta};
use crate::audit::AuditNote;
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, Effect, ToolMeta, ToolSpec};
use crate::result::{ErrorKind, ToolError};

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
    ToolMeta {
        name,
        title,
        description,
        category: Category::Conformance,
        scopes: &[],
        effect: Effect::Reads,
        rest_operation: false,
    }
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

// ---------------------------------------------------------------------------------------------
// Input requests (SEP-2322)

/// A client capability an input request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    Elicitation,
    Sampling,
    Roots,
}

impl Need {
    fn name(self) -> &'static str {
        match self {
            Need::Elicitation => "elicitation",
            Need::Sampling => "sampling",
            Need::Roots => "roots",
        }
    }

    fn declared_by(self, caps: Option<&ClientCapabilities>) -> bool {
        caps.is_some_and(|c| match self {
            Need::Elicitation => c.elicitation.is_some(),
            Need::Sampling => c.sampling.is_some(),
            Need::Roots => c.roots.is_some(),
        })
    }

    /// Checks that `value` has the shape of this request's result.
    fn check(self, key: &str, value: &Value) -> Result<(), McpError> {
        let ok = match self {
            Need::Elicitation => {
                value
                    .get("action")
                    .and_then(Value::as_str)
                    .is_some_and(|a| matches!(a, "accept" | "decline" | "cancel"))
                    && value.get("content").is_none_or(Value::is_object)
            }
            Need::Sampling => {
                value.get("role").is_some_and(Value::is_string)
                    && value
                        .get("content")
                        .is_some_and(|c| c.is_object() || c.is_array())
            }
            Need::Roots => value.get("roots").is_some_and(Value::is_array),
        };
        if ok {
            Ok(())
        } else {
            let expected = match self {
                Need::Elicitation => "an ElicitResult ({action, content?})",
                Need::Sampling => "a CreateMessageResult ({role, content, model})",
                Need::Roots => "a ListRootsResult ({roots})",
            };
            Err(McpError::invalid_params(
                format!("inputResponses.{key} must be {expected}"),
                Some(json!({ "inputResponse": key })),
            ))
        }
    }
}

/// One input request of a flow, under its key.
pub(super) struct Ask {
    pub(super) key: &'static str,
    need: Need,
    pub(super) request: Value,
}

pub(super) fn elicit(
    key: &'static str,
    message: &str,
    properties: Value,
    required: &[&str],
) -> Ask {
    Ask {
        key,
        need: Need::Elicitation,
        request: json!({
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": message,
                "requestedSchema": {
                    "type": "object",
                    "properties": properties,
                    "required": required,
                }
            }
        }),
    }
}

fn sample(key: &'static str, text: &str, max_tokens: u32) -> Ask {
    Ask {
        key,
        need: Need::Sampling,
        request: json!({
            "method": "sampling/createMessage",
            "params": {
                "messages": [{ "role": "user", "content": { "type": "text", "text": text } }],
                "maxTokens": max_tokens,
            }
        }),
    }
}

fn list_roots(key: &'static str) -> Ask {
    Ask {
        key,
        need: Need::Roots,
        request: json!({ "method": "roots/list", "params": {} }),
    }
}

pub(super) fn ask_name(key: &'static str, message: &str) -> Ask {
    elicit(
        key,
        message,
        json!({ "name": { "type": "string" } }),
        &["name"],
    )
}

/// A multi round-trip exchange: rounds of input requests, then a final answer.
pub(super) struct Flow {
    /// Questions, round by round.
    pub(super) rounds: Vec<Vec<Ask>>,
    /// Whether questions the client has no capability for are left out; otherwise the whole
    /// call needs every capability (`-32021` names the missing ones).
    pub(super) optional: bool,
    /// The final answer from the collected responses.
    pub(super) finish: fn(&Map<String, Value>) -> String,
}

type FlowEntry = (&'static str, &'static str, &'static str, fn() -> Flow);

/// Input-required tools: name, title, description and flow.
const FLOWS: [FlowEntry; 10] = [
    (
        "test_input_required_result_elicitation",
        "Input required: elicitation",
        "Asks the user's name with an elicitation input request, then greets them.",
        || Flow {
            rounds: vec![vec![ask_name("user_name", "What is your name?")]],
            optional: false,
            finish: |a| format!("Hello, {}!", elicited(a, "user_name", "name")),
        },
    ),
    (
        "test_input_required_result_sampling",
        "Input required: sampling",
        "Asks the client's model a question with a sampling input request.",
        || Flow {
            rounds: vec![vec![sample(
                "capital_question",
                "What is the capital of France?",
                100,
            )]],
            optional: false,
            finish: |a| format!("LLM response: {}", sampled(a, "capital_question")),
        },
    ),
    (
        "test_input_required_result_list_roots",
        "Input required: roots",
        "Asks the client for its roots with a roots/list input request.",
        || Flow {
            rounds: vec![vec![list_roots("client_roots")]],
            optional: false,
            finish: |a| format!("Client roots: {}", roots(a, "client_roots")),
        },
    ),
    (
        "test_input_required_result_request_state",
        "Input required: request state",
        "Asks for a confirmation and verifies the echoed requestState.",
        || Flow {
            rounds: vec![vec![elicit(
                "confirm",
                "Please confirm",
                json!({ "ok": { "type": "boolean" } }),
                &["ok"],
            )]],
            optional: false,
            finish: |a| format!("state-ok: confirmed={}", elicited(a, "confirm", "ok")),
        },
    ),
    (
        "test_input_required_result_multiple_inputs",
        "Input required: multiple inputs",
        "Asks for a name, a generated greeting and the client's roots in one round.",
        || Flow {
            rounds: vec![vec![
                ask_name("user_name", "What is your name?"),
                sample("greeting", "Generate a greeting", 50),
                list_roots("client_roots"),
            ]],
            optional: false,
            finish: |a| {
                format!(
                    "name={}; greeting={}; roots={}",
                    elicited(a, "user_name", "name"),
                    sampled(a, "greeting"),
                    roots(a, "client_roots")
                )
            },
        },
    ),
    (
        "test_input_required_result_multi_round",
        "Input required: multiple rounds",
        "Asks for a name, then for a favourite colour, then answers.",
        || Flow {
            rounds: vec![
                vec![ask_name("step1", "Step 1: What is your name?")],
                vec![elicit(
                    "step2",
                    "Step 2: What is your favorite color?",
                    json!({ "color": { "type": "string" } }),
                    &["color"],
                )],
            ],
            optional: false,
            finish: |a| {
                format!(
                    "{}'s favorite color is {}",
                    elicited(a, "step1", "name"),
                    elicited(a, "step2", "color")
                )
            },
        },
    ),
    (
        "test_input_required_result_tampered_state",
        "Input required: tampered state",
        "Asks for a confirmation; a requestState that fails verification is refused.",
        || Flow {
            rounds: vec![vec![elicit(
                "confirm",
                "Please confirm",
                json!({ "ok": { "type": "boolean" } }),
                &["ok"],
            )]],
            optional: false,
            finish: |a| format!("state-ok: confirmed={}", elicited(a, "confirm", "ok")),
        },
    ),
    (
        "test_input_required_result_capabilities",
        "Input required: client capabilities",
        "Asks only what the client declared it can answer: a name, a model answer, its roots.",
        || Flow {
            rounds: vec![vec![
                ask_name("user_name", "What is your name?"),
                sample("capital_question", "What is the capital of France?", 100),
                list_roots("client_roots"),
            ]],
            optional: true,
            finish: |a| {
                let keys: Vec<&str> = a.keys().map(String::as_str).collect();
                if keys.is_empty() {
                    "The client declared no capability to ask with".to_owned()
                } else {
                    format!("Answered: {}", keys.join(", "))
                }
            },
        },
    ),
    (
        "test_missing_capability",
        "Needs sampling",
        "Needs the client's sampling capability; without it the call is refused with -32021.",
        || Flow {
            rounds: vec![vec![sample(
                "capital_question",
                "What is the capital of France?",
                100,
            )]],
            optional: false,
            finish: |a| format!("LLM response: {}", sampled(a, "capital_question")),
        },
    ),
    (
        "test_streaming_elicitation",
        "Elicitation without streaming",
        "Asks the user's name; the question travels in the result (SEP-2322), never as a \
         request on the response stream.",
        || Flow {
            rounds: vec![vec![ask_name("user_name", "What is your name?")]],
            optional: false,
            finish: |a| format!("Hello, {}!", elicited(a, "user_name", "name")),
        },
    ),
];

fn tool_flow(name: &str) -> Option<Flow> {
    FLOWS
        .iter()
        .find(|(n, ..)| *n == name)
        .map(|(.., flow)| flow())
}

/// The prompt that needs input before it can be rendered.
const INPUT_PROMPT: &str = "test_input_required_result_prompt";

fn prompt_flow() -> Flow {
    Flow {
        rounds: vec![vec![elicit(
            "user_context",
            "What context should the prompt use?",
            json!({ "context": { "type": "string" } }),
            &["context"],
        )]],
        optional: false,
        finish: |a| elicited(a, "user_context", "context"),
    }
}

/// A string field of an accepted elicitation, or what the user did instead.
pub(super) fn elicited(answers: &Map<String, Value>, key: &str, field: &str) -> String {
    let Some(answer) = answers.get(key) else {
        return "(not asked)".into();
    };
    match answer.get("action").and_then(Value::as_str) {
        Some("accept") => match answer.pointer(&format!("/content/{field}")) {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => "(not given)".into(),
        },
        Some(action) => format!("({action})"),
        None => "(no answer)".into(),
    }
}

/// The text of a sampling answer.
fn sampled(answers: &Map<String, Value>, key: &str) -> String {
    let content = answers.get(key).and_then(|a| a.get("content"));
    let first = match content {
        Some(Value::Array(items)) => items.first(),
        other => other,
    };
    first
        .and_then(|c| c.get("text"))
        .and_then(Value::as_str)
        .unwrap_or("(no text)")
        .to_owned()
}

/// The root URIs of a roots answer.
fn roots(answers: &Map<String, Value>, key: &str) -> String {
    let uris: Vec<&str> = answers
        .get(key)
        .and_then(|a| a.get("roots"))
        .and_then(Value::as_array)
        .map(|roots| {
            roots
                .iter()
                .filter_map(|r| r.get("uri").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    if uris.is_empty() {
        "(none)".into()
    } else {
        uris.join(", ")
    }
}

/// One request of an exchange.
pub(super) struct Exchange<'a> {
    /// `tools/call` or `prompts/get`.
    pub(super) surface: &'static str,
    /// Tool or prompt name.
    pub(super) name: &'a str,
    pub(super) input_responses: Option<&'a InputResponses>,
    pub(super) request_state: Option<&'a str>,
}

/// What `requestState` carries between rounds: everything the server needs, nothing kept.
#[derive(Debug, Default, Serialize, Deserialize)]
struct FlowState {
    /// The round being answered.
    round: usize,
    /// Responses collected so far, by key.
    answers: Map<String, Value>,
    /// When this state stops being accepted (Unix milliseconds).
    expires_at_ms: u64,
}

pub(super) enum Round {
    /// Ask the client (again).
    Ask(InputRequiredResult),
    /// Every answer is in.
    Done(Map<String, Value>),
}

type HmacSha256 = Hmac<Sha256>;

/// HMAC-SHA-256 keyed for sealing `requestState`. The key is drawn once per process: fixtures
/// run on one wc-local, and a state that outlives its process is simply refused (the client
/// starts over).
fn state_mac() -> &'static HmacSha256 {
    static MAC: OnceLock<HmacSha256> = OnceLock::new();
    MAC.get_or_init(|| {
        use rand::RngCore;
        let mut key = [0u8; 32];
        rand::rng().fill_bytes(&mut key);
        <HmacSha256 as KeyInit>::new_from_slice(&key).expect("HMAC takes any key length")
    })
}

/// The MAC of the length-prefixed `parts` (so no two part lists share an input), ready to
/// finalize or verify.
fn state_tag(parts: &[&[u8]]) -> HmacSha256 {
    let mut mac = state_mac().clone();
    for part in parts {
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part);
    }
    mac
}

const STATE_DOMAIN: &[u8] = b"wc.conformance.request-state.v1";

/// `base64url(state).base64url(tag)`, the tag also covering `binding` (not stored).
fn seal_state(state: &FlowState, binding: &str) -> Result<String, McpError> {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let payload =
        serde_json::to_vec(state).map_err(|e| McpError::internal_error(e.to_string(), None))?;
    let tag = state_tag(&[STATE_DOMAIN, binding.as_bytes(), &payload]).finalize();
    Ok(format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(&payload),
        URL_SAFE_NO_PAD.encode(tag.into_bytes())
    ))
}

/// Opens a sealed state: refuses anything forged, altered, bound to another caller or flow,
/// or expired.
fn open_state(sealed: &str, binding: &str) -> Result<FlowState, &'static str> {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let (payload, tag) = sealed.split_once('.').ok_or("malformed")?;
    let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| "malformed")?;
    let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| "malformed")?;
    // Constant-time comparison; a tag of another length fails too.
    state_tag(&[STATE_DOMAIN, binding.as_bytes(), &payload])
        .verify_slice(&tag)
        .map_err(|_| "integrity check failed")?;
    let state: FlowState = serde_json::from_slice(&payload).map_err(|_| "malformed")?;
    if state.expires_at_ms < now_ms() {
        return Err("expired");
    }
    Ok(state)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Runs one round of `flow`: verifies the echoed state, takes the responses it asked for,
/// and either asks again (the rest of this round, or the next round) or finishes.
pub(super) fn run_flow(
    flow: &Flow,
    exchange: &Exchange<'_>,
    ctx: &RequestContext<RoleServer>,
) -> Result<Round, McpError> {
    let caps = ctx.client_capabilities();
    let asked = |ask: &Ask| !flow.optional || ask.need.declared_by(caps.as_ref());
    if !flow.optional {
        let mut missing = Map::new();
        for ask in flow.rounds.iter().flatten() {
            if !ask.need.declared_by(caps.as_ref()) {
                missing.insert(ask.need.name().to_owned(), json!({}));
            }
        }
        if !missing.is_empty() {
            let required: ClientCapabilities = serde_json::from_value(Value::Object(missing))
                .map_err(|e| McpError::internal_error(e.to_string(), None))?;
            return Err(McpError::missing_required_client_capability(required));
        }
    }

    // The state is bound to the caller and to this tool or prompt: it cannot be replayed by
    // anyone else or against anything else.
    let who = principal(ctx)?;
    let binding = format!(
        "{}\n{}\n{}",
        who.fingerprint("wc.conformance.request-state"),
        exchange.surface,
        exchange.name
    );
    let mut state = match exchange.request_state {
        None => FlowState::default(),
        Some(sealed) => open_state(sealed, &binding)
            .and_then(|s| {
                if s.round < flow.rounds.len() {
                    Ok(s)
                } else {
                    Err("malformed")
                }
            })
            .map_err(|why| {
                McpError::invalid_params(
                    format!("requestState refused: {why}"),
                    Some(json!({ "requestState": why })),
                )
            })?,
    };

    let empty = InputResponses::new();
    let responses = exchange.input_responses.unwrap_or(&empty);
    // Responses count only for questions of the current round; anything else is ignored.
    let mut pending: Vec<&Ask> = Vec::new();
    for ask in flow.rounds[state.round].iter().filter(|a| asked(a)) {
        if state.answers.contains_key(ask.key) {
            continue;
        }
        match responses.get(ask.key) {
            Some(value) => {
                ask.need.check(ask.key, value)?;
                state.answers.insert(ask.key.to_owned(), value.clone());
            }
            None => pending.push(ask),
        }
    }
    while pending.is_empty() {
        state.round += 1;
        let Some(round) = flow.rounds.get(state.round) else {
            return Ok(Round::Done(state.answers));
        };
        pending = round.iter().filter(|a| asked(a)).collect();
    }

    let mut requests = InputRequests::new();
    for ask in pending {
        let request: InputRequest = serde_json::from_value(ask.request.clone())
            .map_err(|e| McpError::internal_error(format!("fixture input request: {e}"), None))?;
        requests.insert(ask.key.to_owned(), request);
    }
    state.expires_at_ms = now_ms() + STATE_TTL.as_millis() as u64;
    let sealed = seal_state(&state, &binding)?;
    Ok(Round::Ask(
        InputRequiredResult::new(Some(requests), Some(sealed)).with_meta(server_meta()),
    ))
}

// ---------------------------------------------------------------------------------------------
// Prompts

fn argument(name: &str, description: &str) -> PromptArgument {
    PromptArgument::new(name)
        .with_description(description)
        .with_required(true)
}

/// The fixture prompts.
pub(super) fn list_prompts() -> ListPromptsResult {
    let prompts = vec![
        Prompt::new(
            "test_simple_prompt",
            Some("A simple prompt without arguments"),
            None,
        ),
        Prompt::new(
            "test_prompt_with_arguments",
            Some("A prompt with two required arguments"),
            Some(vec![
                argument("arg1", "First test argument"),
                argument("arg2", "Second test argument"),
            ]),
        ),
        Prompt::new(
            "test_prompt_with_embedded_resource",
            Some("A prompt that embeds a resource"),
            Some(vec![argument(
                "resourceUri",
                "URI of the resource to embed",
            )]),
        ),
        Prompt::new(
            "test_prompt_with_image",
            Some("A prompt with an image"),
            None,
        ),
        Prompt::new(
            INPUT_PROMPT,
            Some("A prompt that asks the user for context first (SEP-2322, 2026-07-28 and later)"),
            None,
        ),
    ];
    let mut result = ListPromptsResult::with_all_items(prompts);
    result.ttl_ms = Some(FIXTURE_TTL_MS);
    result.cache_scope = Some(CacheScope::Public);
    result
}

fn string_argument<'a>(
    params: &'a GetPromptRequestParams,
    name: &str,
) -> Result<&'a str, McpError> {
    params
        .arguments
        .as_ref()
        .and_then(|a| a.get(name))
        .and_then(Value::as_str)
        .ok_or_else(|| {
            McpError::invalid_params(
                format!("prompt {} needs the string argument {name}", params.name),
                Some(json!({ "argument": name })),
            )
        })
}

/// One fixture prompt.
pub(super) fn get_prompt(
    params: GetPromptRequestParams,
    ctx: &RequestContext<RoleServer>,
) -> Result<GetPromptResponse, McpError> {
    let messages = match params.name.as_str() {
        "test_simple_prompt" => vec![PromptMessage::new_text(
            Role::User,
            "This is a simple prompt for testing.",
        )],
        "test_prompt_with_arguments" => {
            let arg1 = string_argument(&params, "arg1")?;
            let arg2 = string_argument(&params, "arg2")?;
            vec![PromptMessage::new_text(
                Role::User,
                format!("Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"),
            )]
        }
        "test_prompt_with_embedded_resource" => {
            let uri = string_argument(&params, "resourceUri")?;
            vec![
                PromptMessage::new(
                    Role::User,
                    ContentBlock::resource(
                        ResourceContents::text("Embedded resource content for testing.", uri)
                            .with_mime_type("text/plain"),
                    ),
                ),
                PromptMessage::new_text(Role::User, "Please process the embedded resource above."),
            ]
        }
        "test_prompt_with_image" => vec![
            PromptMessage::new(Role::User, ContentBlock::image(PNG_BASE64, "image/png")),
            PromptMessage::new_text(Role::User, "Please analyze the image above."),
        ],
        INPUT_PROMPT => {
            if !is_modern(ctx) {
                return Err(McpError::invalid_request(
                    "this prompt asks for input with SEP-2322 input requests, which need protocol \
                     version 2026-07-28 or later",
                    None,
                ));
            }
            let exchange = Exchange {
                surface: "prompts/get",
                name: &params.name,
                input_responses: params.input_responses.as_ref(),
                request_state: params.request_state.as_deref(),
            };
            let flow = prompt_flow();
            match run_flow(&flow, &exchange, ctx)? {
                Round::Ask(ask) => return Ok(GetPromptResponse::InputRequired(ask)),
                Round::Done(answers) => vec![PromptMessage::new_text(
                    Role::User,
                    format!("Use this context: {}", (flow.finish)(&answers)),
                )],
            }
        }
        other => {
            return Err(McpError::invalid_params(
                format!("unknown prompt: {other}"),
                Some(json!({ "name": other })),
            ));
        }
    };
    Ok(GetPromptResponse::Complete(GetPromptResult::new(messages)))
}

// ---------------------------------------------------------------------------------------------
// Resources

const TEXT_URI: &str = "test://static-text";
const BINARY_URI: &str = "test://static-binary";
const TEMPLATE: &str = "test://template/{id}/data";

/// The fixture resources.
pub(super) fn list_resources() -> ListResourcesResult {
    let mut result = ListResourcesResult::with_all_items(vec![
        Resource::new(TEXT_URI, "static-text")
            .with_description("A static text resource")
            .with_mime_type("text/plain"),
        Resource::new(BINARY_URI, "static-binary")
            .with_description("A static binary resource (a PNG image)")
            .with_mime_type("image/png"),
    ]);
    result.ttl_ms = Some(FIXTURE_TTL_MS);
    result.cache_scope = Some(CacheScope::Public);
    result
}

/// The fixture resource template.
pub(super) fn list_resource_templates() -> ListResourceTemplatesResult {
    let mut result = ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new(TEMPLATE, "template-data")
            .with_description("Data for an id, substituted into the URI")
            .with_mime_type("application/json"),
    ]);
    result.ttl_ms = Some(FIXTURE_TTL_MS);
    result.cache_scope = Some(CacheScope::Public);
    result
}

/// The id in a `test://template/{id}/data` URI.
fn template_id(uri: &str) -> Option<&str> {
    uri.strip_prefix("test://template/")?
        .strip_suffix("/data")
        .filter(|id| !id.is_empty() && !id.contains('/'))
}

/// Reads a fixture resource. An unknown URI is "resource not found" with the URI in `data`
/// (rmcp sends it as `-32602` to 2026-07-28 peers, SEP-2164, and as `-32002` before).
pub(super) fn read_resource(
    params: &ReadResourceRequestParams,
) -> Result<ReadResourceResponse, McpError> {
    let uri = params.uri.as_str();
    let contents = match uri {
        TEXT_URI => ResourceContents::text("This is the content of the static text resource.", uri)
            .with_mime_type("text/plain"),
        BINARY_URI => ResourceContents::blob(PNG_BASE64, uri).with_mime_type("image/png"),
        _ => match template_id(uri) {
            Some(id) => ResourceContents::text(
                json!({ "id": id, "templateTest": true, "data": format!("Data for ID: {id}") })
                    .to_string(),
                uri,
            )
            .with_mime_type("application/json"),
            None => {
                return Err(McpError::resource_not_found(
                    "Resource not found",
                    Some(json!({ "uri": uri })),
                ));
            }
        },
    };
    let mut result = ReadResourceResult::new(vec![contents]);
    result.ttl_ms = Some(FIXTURE_TTL_MS);
    result.cache_scope = Some(CacheScope::Public);
    Ok(ReadResourceResponse::Complete(result))
}

// ---------------------------------------------------------------------------------------------
// Completion

/// Completes the arguments of `test_prompt_with_arguments` and the template's `id`.
pub(super) fn complete(params: &CompleteRequestParams) -> Result<CompleteResult, McpError> {
    let candidates: &[&str] = match (&params.r#ref, params.argument.name.as_str()) {
        (Reference::Prompt(p), "arg1" | "arg2") if p.name == "test_prompt_with_arguments" => {
            &["paris", "park", "party", "test-value"]
        }
        (Reference::Resource(r), "id") if r.uri == TEMPLATE => &["123", "456", "789"],
        _ => {
            return Err(McpError::invalid_params(
                "nothing to complete for this reference and argument",
                None,
            ));
        }
    };
    let prefix = params.argument.value.as_str();
    let values: Vec<String> = candidates
        .iter()
        .filter(|c| c.starts_with(prefix))
        .map(|c| (*c).to_owned())
        .collect();
    let completion =
        CompletionInfo::with_all_values(values).map_err(|e| McpError::internal_error(e, None))?;
    Ok(CompleteResult::new(completion))
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
                .all(|s| s.meta.scopes.is_empty() && !s.meta.rest_operation)
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

    #[test]
    fn every_input_request_is_a_valid_mcp_request() {
        let flows = FLOWS.iter().map(|(.., flow)| flow()).chain([prompt_flow()]);
        for flow in flows {
            for ask in flow.rounds.iter().flatten() {
                serde_json::from_value::<InputRequest>(ask.request.clone())
                    .unwrap_or_else(|e| panic!("{}: {e}", ask.key));
            }
        }
    }

    #[test]
    fn sealed_state_opens_only_unaltered_and_for_its_binding() {
        let state = FlowState {
            round: 1,
            answers: json!({ "step1": { "action": "accept", "content": { "name": "Alice" } } })
                .as_object()
                .unwrap()
                .clone(),
            expires_at_ms: now_ms() + 60_000,
        };
        let sealed = seal_state(&state, "me\ntools/call\nx").unwrap();
        let opened = open_state(&sealed, "me\ntools/call\nx").unwrap();
        assert_eq!(opened.round, 1);
        assert_eq!(opened.answers, state.answers);

        assert!(open_state(&format!("{sealed}-TAMPERED"), "me\ntools/call\nx").is_err());
        let (payload, tag) = sealed.split_once('.').unwrap();
        let forged = format!("{}.{tag}", payload.replacen('e', "f", 1));
        assert!(open_state(&forged, "me\ntools/call\nx").is_err());
        assert_eq!(
            open_state(&sealed, "someone else\ntools/call\nx").err(),
            Some("integrity check failed")
        );
        assert_eq!(
            open_state(&sealed, "me\ntools/call\ny").err(),
            Some("integrity check failed")
        );

        let expired = FlowState {
            expires_at_ms: now_ms() - 1,
            ..FlowState::default()
        };
        let sealed = seal_state(&expired, "me").unwrap();
        assert_eq!(open_state(&sealed, "me").err(), Some("expired"));
    }

    #[test]
    fn input_responses_are_checked_against_what_was_asked() {
        let accept = json!({ "action": "accept", "content": { "name": "Alice" } });
        assert!(Need::Elicitation.check("k", &accept).is_ok());
        assert!(Need::Elicitation.check("k", &json!(12345)).is_err());
        assert!(
            Need::Elicitation
                .check("k", &json!({ "action": "maybe" }))
                .is_err()
        );
        let sampled = json!({
            "role": "assistant",
            "content": { "type": "text", "text": "Paris" },
            "model": "m"
        });
        assert!(Need::Sampling.check("k", &sampled).is_ok());
        assert!(Need::Sampling.check("k", &accept).is_err());
        assert!(Need::Roots.check("k", &json!({ "roots": [] })).is_ok());
        assert!(Need::Roots.check("k", &json!({})).is_err());
    }

    #[test]
    fn resources_read_known_uris_and_refuse_others_with_the_uri() {
        let read = |uri: &str| read_resource(&ReadResourceRequestParams::new(uri));
        for uri in [TEXT_URI, BINARY_URI, "test://template/123/data"] {
            assert!(read(uri).is_ok(), "{uri}");
        }
        let Ok(ReadResourceResponse::Complete(result)) = read("test://template/123/data") else {
            panic!("the template did not read");
        };
        assert!(
            serde_json::to_string(&result)
                .unwrap()
                .contains("Data for ID: 123")
        );
        for uri in [
            "test://nonexistent",
            "test://template//data",
            "test://template/1/2/data",
        ] {
            let err = read(uri).expect_err(uri);
            assert_eq!(err.data, Some(json!({ "uri": uri })));
        }
    }

    #[test]
    fn completion_filters_by_prefix() {
        let params: CompleteRequestParams = serde_json::from_value(json!({
            "ref": { "type": "ref/prompt", "name": "test_prompt_with_arguments" },
            "argument": { "name": "arg1", "value": "par" }
        }))
        .unwrap();
        let result = complete(&params).unwrap();
        assert_eq!(result.completion.values, ["paris", "park", "party"]);
        let params: CompleteRequestParams = serde_json::from_value(json!({
            "ref": { "type": "ref/prompt", "name": "no_such_prompt" },
            "argument": { "name": "arg1", "value": "" }
        }))
        .unwrap();
        assert!(complete(&params).is_err());
    }
}
