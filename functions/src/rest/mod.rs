//! The REST / GPT Actions surface: `GET /openapi.json`, `POST /api/actions/{tool}` for the
//! tools with a named operation, and `POST /api/tools/list` / `POST /api/tools/call` reaching
//! every tool. Every call goes through the same kernel as MCP and answers the same
//! `{success, output, error}` body, with an HTTP status chosen by the error kind (an
//! execution that ended without success is a carried-out request: 200 with `success: false`).

pub mod openapi;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router, routing::get, routing::post};
use serde_json::{Map, Value, json};

use crate::AppState;
use crate::audit::{AuditNote, AuditSlot};
use crate::auth::Principal;
use crate::kernel::ToolCall;
use crate::kernel::ports::CallAudit;
use crate::kernel::wrapper::WrapperMeta;
use crate::result::{ErrorKind, ToolError, ToolResult};

/// Tool routes (the caller must already be authenticated and audited).
pub fn tool_routes() -> Router<AppState> {
    Router::new()
        .route("/api/actions/{tool}", post(action))
        .route("/api/tools/list", post(tools_list))
        .route("/api/tools/call", post(tools_call))
}

/// Public routes.
pub fn public_routes() -> Router<AppState> {
    Router::new().route("/openapi.json", get(openapi::serve))
}

fn status_of(result: &ToolResult) -> StatusCode {
    match &result.error {
        None => StatusCode::OK,
        Some(e) => {
            StatusCode::from_u16(e.kind.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
        }
    }
}

fn respond(result: &ToolResult) -> Response {
    with_challenge(
        result,
        (status_of(result), Json(result.to_value())).into_response(),
    )
}

/// A kernel result, sent as the JSON the kernel already serialized.
fn respond_invoked(invoked: crate::kernel::Invoked) -> Response {
    let resp = (
        status_of(&invoked.result),
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        invoked.json,
    )
        .into_response();
    with_challenge(&invoked.result, resp)
}

/// A 403 `insufficient_scope` carries the bearer challenge naming the scope (RFC 6750 §3), so
/// an OAuth client can ask for it; a 401 `invalid_token` the challenge a refused token gets.
fn with_challenge(result: &ToolResult, mut resp: Response) -> Response {
    let refusal = match &result.error {
        Some(e) if e.kind == ErrorKind::InsufficientScope => e
            .details
            .get("scope")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<crate::auth::Scope>().ok())
            .map(crate::auth::AuthError::InsufficientScope),
        Some(e) if e.kind == ErrorKind::InvalidToken => Some(crate::auth::AuthError::Invalid),
        _ => None,
    };
    if let Some(challenge) = refusal.and_then(|r| r.challenge(None))
        && let Ok(v) = axum::http::HeaderValue::from_str(&challenge)
    {
        resp.headers_mut()
            .insert(axum::http::header::WWW_AUTHENTICATE, v);
    }
    resp
}

fn failure(kind: ErrorKind, message: impl Into<String>) -> Response {
    respond(&ToolResult::err(ToolError::new(kind, message)))
}

/// The request body as a JSON object.
fn object_body(body: &Bytes) -> Result<Map<String, Value>, ToolError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ToolError::new(
            ErrorKind::InvalidArguments,
            "the request body must be a JSON object",
        )),
        Err(e) => Err(ToolError::new(
            ErrorKind::InvalidArguments,
            format!("the request body is not valid JSON: {e}"),
        )),
    }
}

/// REST reserves one wrapper field, `recording_session_id`.
fn take_recording(map: &mut Map<String, Value>) -> Result<WrapperMeta, ToolError> {
    let mut only = Map::new();
    if let Some(v) = map.remove("recording_session_id") {
        only.insert("recording_session_id".into(), v);
    }
    crate::kernel::wrapper::split(&mut only)
        .map_err(|e| ToolError::new(ErrorKind::InvalidArguments, format!("invalid {e}")))
}

async fn run(
    state: &AppState,
    principal: Principal,
    slot: Option<AuditSlot>,
    name: &str,
    args: Value,
    wrapper: WrapperMeta,
) -> Response {
    let Some(spec) = state.runtime.get(name).cloned() else {
        return failure(
            ErrorKind::UnknownTool,
            format!(
                "no tool named \"{}\"; POST /api/tools/list lists them",
                crate::telemetry::loggable(name)
            ),
        );
    };
    let call = ToolCall {
        spec,
        arguments: args,
        wrapper,
        principal: Arc::new(principal),
        window: None,
        audit: slot.map(|s| Arc::new(s) as Arc<dyn CallAudit>),
        task: None,
        progress: None,
    };
    respond_invoked(state.runtime.invoke(&state.deps, call).await)
}

async fn action(
    State(state): State<AppState>,
    Path(tool): Path<String>,
    Extension(principal): Extension<Principal>,
    slot: Option<Extension<AuditSlot>>,
    body: Bytes,
) -> Response {
    // Only tools with a named operation have an action route; the rest go through tools/call.
    if !state
        .runtime
        .get(&tool)
        .is_some_and(|s| openapi::is_named(s.meta.name))
    {
        return failure(
            ErrorKind::UnknownTool,
            format!(
                "no action named \"{}\"; use POST /api/tools/call",
                crate::telemetry::loggable(&tool)
            ),
        );
    }
    let mut args = match object_body(&body) {
        Ok(m) => m,
        Err(e) => return respond(&ToolResult::err(e)),
    };
    let wrapper = match take_recording(&mut args) {
        Ok(w) => w,
        Err(e) => return respond(&ToolResult::err(e)),
    };
    run(
        &state,
        principal,
        slot.map(|s| s.0),
        &tool,
        Value::Object(args),
        wrapper,
    )
    .await
}

/// The `tool` of a tools/call envelope, if it is a string of 1-128 characters. Characters, not
/// bytes: the published schema's `maxLength` counts characters, so a name of 128 multi-byte
/// characters is schema-valid and gets the unknown-tool answer, not a 400.
fn tool_name(value: Option<Value>) -> Option<String> {
    match value {
        Some(Value::String(t)) if !t.is_empty() && t.chars().count() <= 128 => Some(t),
        _ => None,
    }
}

async fn tools_call(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    slot: Option<Extension<AuditSlot>>,
    body: Bytes,
) -> Response {
    let mut envelope = match object_body(&body) {
        Ok(m) => m,
        Err(e) => return respond(&ToolResult::err(e)),
    };
    let Some(tool) = tool_name(envelope.remove("tool")) else {
        return failure(
            ErrorKind::InvalidArguments,
            "tool must be a tool name (1-128 characters)",
        );
    };
    let mut args = match envelope.remove("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(_) => return failure(ErrorKind::InvalidArguments, "arguments must be an object"),
    };
    // listRuntimeTools publishes `recording_session_id` in every tool's input schema, so it may
    // come among the arguments (as on MCP and the action routes) or next to them; not both.
    if let Some(inner) = args.remove("recording_session_id") {
        if envelope.contains_key("recording_session_id") {
            return failure(
                ErrorKind::InvalidArguments,
                "recording_session_id is given both in arguments and next to them",
            );
        }
        envelope.insert("recording_session_id".into(), inner);
    }
    let args = Value::Object(args);
    let wrapper = match take_recording(&mut envelope) {
        Ok(w) => w,
        Err(e) => return respond(&ToolResult::err(e)),
    };
    if let Some(extra) = envelope.keys().next() {
        return failure(
            ErrorKind::InvalidArguments,
            format!("unknown field {extra:?}; expected tool, arguments, recording_session_id"),
        );
    }
    run(&state, principal, slot.map(|s| s.0), &tool, args, wrapper).await
}

async fn tools_list(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    slot: Option<Extension<AuditSlot>>,
    body: Bytes,
) -> Response {
    let args = match object_body(&body) {
        Ok(m) => m,
        Err(e) => return respond(&ToolResult::err(e)),
    };
    if let Some(extra) = args.keys().next() {
        return failure(
            ErrorKind::InvalidArguments,
            format!("unknown field {extra:?}; tools/list takes no arguments"),
        );
    }
    let tools: Vec<Value> = state
        .runtime
        .registry()
        .visible(principal.scopes)
        .map(|s| {
            json!({
                "name": s.meta.name,
                "title": s.meta.title,
                "description": s.meta.description,
                "category": s.meta.category.as_str(),
                "scopes": s.meta.scopes.iter().map(|x| x.as_str()).collect::<Vec<_>>(),
                "read_only": s.meta.read_only(),
                "consequential": s.meta.is_consequential(),
                "input_schema": openapi::rest_input_schema(s),
            })
        })
        .collect();
    if let Some(Extension(slot)) = slot {
        slot.note(AuditNote {
            action_name: "toolsList".into(),
            success: true,
            model_ergonomics: None,
            extra: None,
        });
    }
    let count = tools.len();
    respond(&ToolResult::ok(json!({ "tools": tools, "count": count })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_are_bounded_in_characters_like_the_schema() {
        let name = |s: &str| tool_name(Some(Value::String(s.to_owned())));
        assert_eq!(name("runtime_status").as_deref(), Some("runtime_status"));
        // 128 four-byte characters: 512 bytes, yet within maxLength 128.
        let wide = "\u{1D57F}".repeat(128);
        assert_eq!(name(&wide), Some(wide.clone()));
        assert_eq!(name(&format!("{wide}x")), None);
        assert_eq!(name(""), None);
        assert_eq!(tool_name(Some(json!(5))), None);
        assert_eq!(tool_name(None), None);
    }
}
