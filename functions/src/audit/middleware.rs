use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::Response;
use http_body_util::BodyExt;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use wc_store::ChangeOutcome;
use wc_store::audit::{self, Affinity, NewActionEvent};

use super::{AuditNote, AuditSlot, valid_session_id};
use crate::AppState;
use crate::auth::Principal;
use crate::http::RequestId;

/// The explicit audit session named by the request, if any (header first, then query).
fn explicit_session(parts: &Parts) -> Option<String> {
    let from_header = ["x-action-session-id", "x-webcodex-session-id"]
        .iter()
        .find_map(|h| {
            parts
                .headers
                .get(*h)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
                .map(str::to_owned)
        });
    let from_query = || {
        parts.uri.query().and_then(|q| {
            q.split('&').find_map(|pair| {
                let (k, v) = pair.split_once('=')?;
                (k == "action_session_id").then(|| v.to_owned())
            })
        })
    };
    let id = from_header.or_else(from_query)?;
    if valid_session_id(&id) {
        Some(id)
    } else {
        tracing::warn!("ignoring a malformed audit session id");
        None
    }
}

/// What an audit row needs from the request, gathered before it is handed on.
struct Pending {
    principal: Arc<Principal>,
    affinity: Affinity,
    endpoint: String,
    method: String,
    request_id: Option<String>,
    slot: AuditSlot,
    started: Instant,
}

fn prepare(state: &AppState, req: Request) -> (Request, Option<Pending>) {
    let Some(principal) = req.extensions().get::<Arc<Principal>>().cloned() else {
        return (req, None);
    };
    let (parts, body) = req.into_parts();
    let affinity = match explicit_session(&parts) {
        Some(id) => Affinity::Explicit {
            id,
            idle: state.deps.config.audit_idle_timeout,
        },
        None => Affinity::Reuse {
            idle: state.deps.config.audit_idle_timeout,
        },
    };
    let pending = Pending {
        principal,
        affinity,
        endpoint: parts.uri.path().chars().take(200).collect(),
        method: parts.method.as_str().to_owned(),
        request_id: parts
            .extensions
            .get::<RequestId>()
            .map(|r| r.as_str().to_owned()),
        slot: AuditSlot::default(),
        started: Instant::now(),
    };
    let mut rebuilt = Request::from_parts(parts, body);
    rebuilt.extensions_mut().insert(pending.slot.clone());
    (rebuilt, Some(pending))
}

async fn persist(state: &AppState, pending: &Pending, status: u16, note: Classified) {
    let event = NewActionEvent {
        endpoint: pending.endpoint.clone(),
        http_method: pending.method.clone(),
        action_name: note.action_name.chars().take(128).collect(),
        operation: note.operation,
        status_code: i32::from(status),
        success: note.success && (200..300).contains(&status),
        duration_ms: pending.started.elapsed().as_millis() as i64,
        request_id: pending.request_id.clone(),
        summary: note.summary,
        principal_kind: Some(pending.principal.kind.as_str().to_owned()),
        principal_user_id: pending.principal.oauth.as_ref().map(|o| o.subject.clone()),
        oauth_client_id: pending
            .principal
            .oauth
            .as_ref()
            .and_then(|o| o.client_id.clone()),
    };
    let fingerprint = super::caller_fingerprint(&pending.principal);
    match audit::record(&state.deps.pool, &fingerprint, &pending.affinity, event).await {
        Ok(ChangeOutcome::Applied { .. }) => {}
        Ok(ChangeOutcome::Conflict { attempts }) => {
            tracing::warn!(attempts, "audit event dropped: session stayed contended");
        }
        Err(e) => tracing::warn!(error = %e, "audit event dropped: write failed"),
    }
}

/// How a request is classified for its audit row.
struct Classified {
    action_name: String,
    operation: String,
    success: bool,
    summary: Value,
}

fn tool_summary(transport: &str, note: &AuditNote) -> Value {
    let mut summary = json!({ "transport": transport });
    if let Some(m) = &note.model_ergonomics {
        summary["model_ergonomics"] = serde_json::to_value(m).unwrap_or(Value::Null);
    }
    if let Some((k, v)) = &note.extra {
        summary[k.as_str()] = v.clone();
    }
    summary
}

/// Audit middleware of the REST tool routes: the handler fills the slot.
pub async fn audit_rest(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let (req, pending) = prepare(&state, req);
    let Some(pending) = pending else {
        return next.run(req).await;
    };
    let resp = next.run(req).await;
    let status = resp.status().as_u16();
    let classified = match pending.slot.take() {
        Some(note) => Classified {
            operation: if note.action_name == "toolsList" {
                "rest_tools_list"
            } else {
                "rest_tool_call"
            }
            .to_owned(),
            success: note.success,
            summary: tool_summary("rest", &note),
            action_name: note.action_name,
        },
        None => Classified {
            action_name: "invalid".into(),
            operation: "rest_rejected".into(),
            success: false,
            summary: json!({ "transport": "rest" }),
        },
    };
    persist(&state, &pending, status, classified).await;
    resp
}

/// The parts of a JSON-RPC request the audit row needs.
#[derive(Deserialize)]
struct RpcRequest<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    method: Option<String>,
    params: Option<RpcParams>,
}

#[derive(Deserialize)]
struct RpcParams {
    name: Option<String>,
    #[serde(rename = "_meta")]
    meta: Option<Value>,
}

#[derive(Deserialize)]
struct RpcResponse<'a> {
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ToolsListResult<'a> {
    #[serde(borrow)]
    tools: &'a RawValue,
}

fn protocol_era(meta: Option<&Value>) -> &'static str {
    let modern = meta
        .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
        .and_then(Value::as_str)
        .is_some_and(|v| v >= "2026-07-28");
    if modern { "stateless_2026" } else { "legacy" }
}

async fn buffer(body: Body) -> Option<Bytes> {
    body.collect().await.ok().map(|c| c.to_bytes())
}

/// Audit middleware of `/mcp`: classifies the JSON-RPC request, measures the final result,
/// and writes one row per executed request (notifications have none).
pub async fn audit_mcp(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let (req, pending) = prepare(&state, req);
    let Some(pending) = pending else {
        return next.run(req).await;
    };
    // The body limit middleware has already buffered the body: this copies bytes, no I/O.
    let (parts, body) = req.into_parts();
    let request_bytes = buffer(body).await.unwrap_or_default();
    let req = Request::from_parts(parts, Body::from(request_bytes.clone()));
    let rpc: Option<RpcRequest<'_>> = serde_json::from_slice(&request_bytes).ok();

    let resp = next.run(req).await;
    let status = resp.status().as_u16();
    let is_notification = rpc
        .as_ref()
        .is_some_and(|r| r.id.is_none() && r.method.is_some());
    if is_notification || pending.method != "POST" {
        return resp;
    }
    // A tool call's outcome is in the slot (the kernel's telemetry, or the surface's refusal);
    // its reply, which can be large, passes through untouched.
    let is_tool_call = rpc.as_ref().and_then(|r| r.method.as_deref()) == Some("tools/call");
    if is_tool_call {
        let classified = classify_tool_call(&state, &pending, rpc.as_ref());
        persist(&state, &pending, status, classified).await;
        return resp;
    }
    // A stream (a `subscriptions/listen`) passes through as it comes: it is recorded when it
    // starts, a success when it was opened, since it can last as long as its bound.
    let streams = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if streams {
        let method = rpc.as_ref().and_then(|r| r.method.as_deref()).unwrap_or("");
        let classified = classify_other(method, status == 200);
        persist(&state, &pending, status, classified).await;
        return resp;
    }
    let (resp_parts, resp_body) = resp.into_parts();
    let response_bytes = buffer(resp_body).await.unwrap_or_default();
    let parsed: Option<RpcResponse<'_>> = serde_json::from_slice(&response_bytes).ok();
    let rpc_ok = parsed
        .as_ref()
        .is_some_and(|r| r.error.is_none() && r.result.is_some());

    let method = rpc.as_ref().and_then(|r| r.method.clone());
    let classified = match method.as_deref() {
        Some("tools/list") => {
            let mut summary = json!({ "transport": "mcp" });
            if let Some(result) = parsed.as_ref().and_then(|r| r.result) {
                let tools = serde_json::from_str::<ToolsListResult<'_>>(result.get()).ok();
                let tool_count = tools
                    .as_ref()
                    .and_then(|t| {
                        serde_json::from_str::<Vec<serde::de::IgnoredAny>>(t.tools.get()).ok()
                    })
                    .map_or(0, |v| v.len());
                summary["tool_surface"] = json!({
                    "schema_version": 1,
                    "protocol_era": protocol_era(rpc.as_ref().and_then(|r| r.params.as_ref()).and_then(|p| p.meta.as_ref())),
                    "compact_schemas": super::COMPACT_SCHEMAS,
                    "tool_count": tool_count,
                    "serialized_tools_bytes": tools.map_or(0, |t| t.tools.get().len()),
                    "serialized_result_bytes": result.get().len(),
                    "gateway_tool_included": super::GATEWAY_TOOL_INCLUDED,
                });
            }
            Classified {
                action_name: "toolsList".into(),
                operation: "mcp_tools_list".into(),
                success: rpc_ok,
                summary,
            }
        }
        Some("tools/call") => classify_tool_call(&state, &pending, rpc.as_ref()),
        Some(other) => classify_other(other, rpc_ok),
        None => Classified {
            action_name: "invalid".into(),
            operation: "mcp_invalid_request".into(),
            success: false,
            summary: json!({ "transport": "mcp" }),
        },
    };
    persist(&state, &pending, status, classified).await;
    Response::from_parts(resp_parts, Body::from(response_bytes))
}

/// The audit row of any other method.
fn classify_other(method: &str, success: bool) -> Classified {
    Classified {
        action_name: method.chars().take(64).collect(),
        operation: format!(
            "mcp_{}",
            method
                .replace(['/', '.'], "_")
                .chars()
                .take(48)
                .collect::<String>()
        ),
        success,
        summary: json!({ "transport": "mcp" }),
    }
}

/// The audit row of a `tools/call`, from what the handler noted.
fn classify_tool_call(
    state: &AppState,
    pending: &Pending,
    rpc: Option<&RpcRequest<'_>>,
) -> Classified {
    let name = rpc
        .and_then(|r| r.params.as_ref())
        .and_then(|p| p.name.clone())
        .unwrap_or_default();
    match pending.slot.take() {
        Some(note) => Classified {
            summary: tool_summary("mcp", &note),
            success: note.success,
            action_name: note.action_name,
            operation: "mcp_tools_call".into(),
        },
        // Refused before a registered tool was identified (unknown tool, bad params). The name
        // is caller text: keep it only when it names a registered tool.
        None => Classified {
            action_name: if state.runtime.get(&name).is_some() {
                name
            } else {
                "unknown_tool".into()
            },
            operation: "mcp_tools_call".into(),
            success: false,
            summary: json!({ "transport": "mcp" }),
        },
    }
}
