//! The OpenAPI 3.1 document for GPT Actions, built from the same tool specs as MCP.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::AppState;
use crate::kernel::Registry;
use crate::kernel::spec::{ToolSpec, error_schema};
use crate::kernel::wrapper::{self, Surface};

/// Most operations in the document: a surface a model can hold in mind.
pub const MAX_OPERATIONS: usize = 30;
/// The tools with an operation of their own: GPT Actions hold [`MAX_OPERATIONS`], two of them
/// the generic `listRuntimeTools` and `callRuntimeTool`, through which every other tool is
/// called. Which tools get the rest is this surface's choice, not theirs.
pub const NAMED_OPERATIONS: [&str; MAX_OPERATIONS - 2] = [
    "apply_patch",
    "apply_text_edits",
    "close_session",
    "finish_coding_task",
    "git_commit",
    "git_diff",
    "git_status",
    "job_log",
    "job_status",
    "list_jobs",
    "list_project_files",
    "list_projects",
    "list_tools",
    "post_session_message",
    "project_overview",
    "read_files",
    "run_job",
    "run_process",
    "run_script",
    "run_shell",
    "runtime_status",
    "search_project_texts",
    "session_handoff_summary",
    "session_summary",
    "start_session",
    "stop_job",
    "update_session_context",
    "work_on_project",
];

/// Whether `tool` has an operation of its own.
pub fn is_named(tool: &str) -> bool {
    NAMED_OPERATIONS.contains(&tool)
}

/// Longest operation description.
pub const MAX_DESCRIPTION: usize = 300;

/// `snake_case` → `camelCase`.
pub fn camel_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn bounded(text: &str) -> String {
    if text.chars().count() <= MAX_DESCRIPTION {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(MAX_DESCRIPTION - 1).collect();
    cut.push('…');
    cut
}

/// A tool's REST input schema: its own arguments plus the reserved `recording_session_id`.
pub fn rest_input_schema(spec: &ToolSpec) -> Value {
    let mut schema = (*spec.input_schema).clone();
    let props = schema
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(props) = props {
        for (k, v) in wrapper::schema_properties(Surface::Rest) {
            props.entry(k).or_insert(v);
        }
    }
    Value::Object(schema)
}

/// The body of `callRuntimeTool`: a tool's name and its arguments, which the tool's own input
/// schema checks when it is called. That schema is listed by `listRuntimeTools` and, for each
/// tool without an operation of its own, published as `components.schemas.<tool>Arguments`
/// ([`argument_schemas`]). The body does not combine them: one branch per tool is more than
/// generators canonicalize (they give up past 30 branches), and the surface outgrows that.
fn call_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "tool": {
                "type": "string", "minLength": 1, "maxLength": 128,
                "description": "A tool listRuntimeTools lists.",
            },
            "arguments": {
                "anyOf": [{ "type": "object" }, { "type": "null" }],
                "description": "The tool's arguments, as its input schema says (listRuntimeTools; components.schemas.<tool>Arguments). null is {}.",
            },
            "recording_session_id": wrapper::schema_properties(Surface::Rest)["recording_session_id"].clone(),
        },
        "required": ["tool"],
        "additionalProperties": false,
    })
}

/// The input schema of every tool without an operation of its own, by `<camelName>Arguments`.
fn argument_schemas(runtime: &Registry) -> Map<String, Value> {
    runtime
        .specs()
        .iter()
        .filter(|spec| !is_named(spec.meta.name))
        .map(|spec| {
            let mut schema = (*spec.input_schema).clone();
            schema.insert(
                "description".into(),
                Value::from(format!(
                    "Arguments of {} (callRuntimeTool).",
                    spec.meta.name
                )),
            );
            (
                format!("{}Arguments", camel_case(spec.meta.name)),
                Value::Object(schema),
            )
        })
        .collect()
}

fn result_schema(output: Value) -> Value {
    json!({
        "type": "object",
        "properties": {
            "success": { "type": "boolean" },
            "output": output,
            "error": error_schema(),
            "session_attention": { "$ref": "#/components/schemas/SessionAttention" },
        },
        "required": ["success"],
    })
}

fn error_responses() -> Map<String, Value> {
    let tool_failure = |description: &str| json!({ "description": description, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/ToolResult" } } } });
    let http_failure = |description: &str| json!({ "description": description, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/ErrorBody" } } } });
    // Statuses answered by a tool result or, before any tool runs, by the HTTP layer (an
    // unreadable body is a 400, a caught panic a 500, an unreachable credential store a 503,
    // all with the plain error body). anyOf, not oneOf: a failed tool result is an error body too.
    let either = json!({ "anyOf": [
        { "$ref": "#/components/schemas/ToolResult" },
        { "$ref": "#/components/schemas/ErrorBody" },
    ] });
    let either_failure = |description: &str| json!({ "description": description, "content": { "application/json": { "schema": either } } });
    let mut m = Map::new();
    m.insert(
        "400".into(),
        either_failure("Invalid arguments (error.kind invalid_arguments), or an unreadable body"),
    );
    m.insert(
        "401".into(),
        http_failure("Missing or invalid bearer token"),
    );
    m.insert(
        "403".into(),
        tool_failure("The caller lacks a required scope"),
    );
    m.insert(
        "404".into(),
        tool_failure("Unknown tool, project or session"),
    );
    m.insert("409".into(), tool_failure("A concurrent change won; retry"));
    m.insert("413".into(), http_failure("Request body too large"));
    m.insert("500".into(), either_failure("Internal error"));
    m.insert(
        "503".into(),
        either_failure("Temporarily unavailable; retry"),
    );
    m.insert(
        "504".into(),
        tool_failure("The tool did not finish within the dispatch deadline"),
    );
    m
}

fn operation(
    id: String,
    summary: &str,
    description: &str,
    consequential: bool,
    body: Value,
    ok: Value,
) -> Value {
    let mut responses = error_responses();
    responses.insert(
        "200".into(),
        json!({ "description": "The tool result. An execution that ran, or that its runner refused, but did not succeed also answers 200: success false, error.kind naming how it ended, and output with its exit code, signal and output", "content": { "application/json": { "schema": ok } } }),
    );
    json!({
        "post": {
            "operationId": id,
            "summary": summary,
            "description": bounded(description),
            "x-openai-isConsequential": consequential,
            "requestBody": { "required": true, "content": { "application/json": { "schema": body } } },
            "responses": responses,
        }
    })
}

/// Builds the document. `server` is the public base URL (`None` gives a relative server).
pub fn document(runtime: &Registry, server: Option<&str>) -> Value {
    let mut paths = Map::new();
    paths.insert(
        "/api/tools/list".into(),
        operation(
            "listRuntimeTools".into(),
            "List runtime tools",
            "List every runtime tool this caller may use, with its input schema. Tools without an operation of their own are called with callRuntimeTool.",
            false,
            json!({ "type": "object", "properties": {}, "additionalProperties": false }),
            result_schema(json!({ "type": "object" })),
        ),
    );
    paths.insert(
        "/api/tools/call".into(),
        operation(
            "callRuntimeTool".into(),
            "Call a runtime tool",
            "Call any runtime tool by name with its arguments (see listRuntimeTools). Returns {success, output, error}.",
            true,
            call_schema(),
            // Every tool's output is an object; its shape is the tool's (listRuntimeTools).
            result_schema(json!({ "type": "object" })),
        ),
    );
    for spec in runtime.specs().iter().filter(|s| is_named(s.meta.name)) {
        paths.insert(
            format!("/api/actions/{}", spec.meta.name),
            operation(
                camel_case(spec.meta.name),
                spec.meta.title,
                spec.meta.description,
                spec.meta.is_consequential(),
                rest_input_schema(spec),
                result_schema(Value::Object((*spec.output_schema).clone())),
            ),
        );
    }
    let mut schemas = argument_schemas(runtime);
    schemas.insert(
        "ToolResult".into(),
        result_schema(json!({ "type": "object" })),
    );
    schemas.insert(
        "SessionAttention".into(),
        Value::Object(crate::kernel::spec::schema_for::<
            crate::board::SessionAttention,
        >()),
    );
    schemas.insert(
        "ErrorBody".into(),
        json!({
            "type": "object",
            "properties": {
                "error": {
                    "type": "object",
                    "properties": {
                        "kind": { "type": "string" },
                        "message": { "type": "string" },
                        "request_id": { "type": "string" },
                    },
                    "required": ["kind", "message"],
                }
            },
            "required": ["error"],
        }),
    );
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "wc",
            "version": crate::VERSION,
            "description": "Drive coding work on build hosts: projects, Workflow Sessions and runtime tools. Every call returns {success, output, error}.",
        },
        "servers": [{ "url": server.unwrap_or("/") }],
        "security": [{ "bearerAuth": [] }],
        "paths": paths,
        "components": {
            "securitySchemes": { "bearerAuth": { "type": "http", "scheme": "bearer" } },
            "schemas": schemas,
        },
    })
}

/// `GET /openapi.json`: the document is built once per process, on first use.
pub async fn serve(State(state): State<AppState>) -> Response {
    let doc = state.openapi.get_or_init(|| {
        let doc = document(
            state.runtime.registry(),
            state.deps.config.public_url.as_deref(),
        );
        axum::body::Bytes::from(serde_json::to_vec(&doc).expect("openapi serializes"))
    });
    ([(header::CONTENT_TYPE, "application/json")], doc.clone()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_operation_is_a_tool_in_the_document() {
        let specs = crate::tools::all();
        let registry = Registry::new(crate::tools::all());
        let doc = document(&registry, None);
        for name in NAMED_OPERATIONS {
            assert!(
                specs.iter().any(|s| s.meta.name == name),
                "{name} is no tool"
            );
            let path = format!("/api/actions/{name}");
            assert!(doc["paths"].get(&path).is_some(), "{path}");
        }
    }

    #[test]
    fn every_tool_without_an_operation_publishes_its_arguments_beside_a_plain_call_body() {
        let runtime = Registry::new(crate::tools::all());
        let doc = document(&runtime, None);
        let schemas = &doc["components"]["schemas"];
        for spec in runtime.specs() {
            let published = &schemas[format!("{}Arguments", camel_case(spec.meta.name))];
            if is_named(spec.meta.name) {
                assert!(published.is_null(), "{}", spec.meta.name);
                continue;
            }
            // The schema the tool checks its arguments with, word for word.
            let mut schema = published.as_object().unwrap().clone();
            schema.remove("description");
            assert_eq!(schema, *spec.input_schema, "{}", spec.meta.name);
        }
        // The body names a tool and carries an object: the tool's own schema decides the rest.
        let body = &doc["paths"]["/api/tools/call"]["post"]["requestBody"]["content"]["application/json"]
            ["schema"];
        let check = jsonschema::validator_for(body).unwrap();
        assert!(check.is_valid(&json!({"tool": "git_log", "arguments": {"project": "agent:r:p"}})));
        assert!(check.is_valid(&json!({"tool": "list_runners"})));
        assert!(!check.is_valid(&json!({"tool": ""})));
        assert!(!check.is_valid(&json!({"tool": "git_log", "arguments": []})));
        assert!(!check.is_valid(&json!({"tool": "git_log", "x": 1})));
    }

    #[test]
    fn camel_case_names() {
        assert_eq!(camel_case("list_projects"), "listProjects");
        assert_eq!(camel_case("runtime_status"), "runtimeStatus");
        assert_eq!(camel_case("x"), "x");
    }

    /// Every documented failure status admits every body the server can send with it: a tool
    /// result, and for 400/500/503 also the HTTP layer's plain error body.
    #[test]
    fn error_statuses_document_every_body_they_can_carry() {
        let runtime = Registry::new(crate::tools::all());
        let doc = document(&runtime, None);
        let tool_failure =
            json!({"success": false, "error": {"kind": "internal", "message": "internal error"}});
        let http_failure =
            json!({"error": {"kind": "internal", "message": "internal error", "request_id": "r"}});
        for (path, item) in doc["paths"].as_object().unwrap() {
            for status in ["400", "403", "404", "409", "500", "503", "504"] {
                let mut at = doc.clone();
                let pointer = format!(
                    "#/paths/{}/post/responses/{status}/content/application~1json/schema",
                    path.replace('~', "~0").replace('/', "~1")
                );
                assert!(
                    item["post"]["responses"][status].is_object(),
                    "{path} {status}"
                );
                at["$ref"] = json!(pointer);
                let v = jsonschema::validator_for(&at).unwrap();
                assert!(v.is_valid(&tool_failure), "{path} {status}: tool result");
                let plain = matches!(status, "400" | "500" | "503");
                assert_eq!(
                    v.is_valid(&http_failure),
                    plain,
                    "{path} {status}: error body"
                );
            }
        }
    }

    /// A run that exited non-zero answers 200 with `success: false`, its error and its
    /// execution view: that body must be what the document promises for 200.
    #[test]
    fn a_failed_execution_answered_200_is_a_documented_200_body() {
        use crate::execution::{self, ExecOutput, ExecState, ResultExpectation};
        use crate::result::ToolResult;
        let runtime = Registry::new(crate::tools::all());
        let doc = document(&runtime, None);
        let out = ExecOutput {
            job_id: wc_domain::WorkId::parse("0190b6a0-0000-7000-8000-000000000000").unwrap(),
            project: wc_domain::ProjectId::parse("agent:local:alpha").unwrap(),
            tool: "run_shell".into(),
            execution_state: ExecState::Failed,
            exit_code: Some(7),
            signal: None,
            stdout: Some("seven\n".into()),
            stderr: Some(String::new()),
            stdout_truncated: false,
            stderr_truncated: false,
            stdout_bytes: 6,
            stderr_bytes: 0,
            duration_ms: Some(3),
            error: None,
            expectation: execution::classify(
                ResultExpectation::Success,
                &[],
                ExecState::Failed,
                None,
            ),
            purpose: None,
            notices: Vec::new(),
        };
        let error = execution::settle(out).expect_err("exit 7 is a failure");
        assert_eq!(error.kind.http_status(), 200);
        let body = ToolResult::err(error).into_value();
        for path in [
            "/api/actions/run_shell",
            "/api/actions/run_process",
            "/api/actions/job_status",
            "/api/tools/call",
        ] {
            let mut at = doc.clone();
            at["$ref"] = json!(format!(
                "#/paths/{}/post/responses/200/content/application~1json/schema",
                path.replace('/', "~1")
            ));
            let v = jsonschema::validator_for(&at).unwrap();
            assert!(v.is_valid(&body), "{path}: {body}");
        }
    }

    #[test]
    fn long_descriptions_are_cut_to_the_bound() {
        let long = "é".repeat(400);
        let cut = bounded(&long);
        assert_eq!(cut.chars().count(), MAX_DESCRIPTION);
    }
}
