//! JSON-RPC shape checks in front of the MCP service: malformed JSON is `-32700`, anything
//! that is not a single JSON-RPC 2.0 message is `-32600`, both with HTTP 400 and before any
//! handler runs. Nesting depth is bounded by the parser (no stack overflow on deep input).

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use serde_json::value::RawValue;
use serde_json::{Value, json};

fn rpc_error(id: Value, code: i64, message: String) -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(
            json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } }),
        ),
    )
        .into_response()
}

/// A rejected message: the id to echo, the JSON-RPC error code and the message.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    /// Request id to echo (`null` when unknown).
    pub id: Value,
    /// `-32700` (parse error) or `-32600` (invalid request).
    pub code: i64,
    /// What was wrong.
    pub message: String,
}

fn reject(id: Value, code: i64, message: &str) -> Rejection {
    Rejection {
        id,
        code,
        message: message.to_owned(),
    }
}

/// The top-level members of a JSON-RPC message, borrowed from the body without building a
/// tree: parsing into `RawValue`s still checks the whole document (syntax, depth), cheaply.
#[derive(serde::Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: Option<&'a RawValue>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
}

fn first_byte(raw: &RawValue) -> u8 {
    raw.get().as_bytes().first().copied().unwrap_or(b' ')
}

/// Checks one request body.
pub fn check(body: &Bytes) -> Result<(), Rejection> {
    // Valid JSON first (depth-bounded by the parser), then the shape.
    let outer: &RawValue = serde_json::from_slice(body)
        .map_err(|e| reject(Value::Null, -32700, &format!("parse error: {e}")))?;
    if first_byte(outer) != b'{' {
        return Err(reject(
            Value::Null,
            -32600,
            "invalid request: expected one JSON-RPC 2.0 object (batches are not supported)",
        ));
    }
    let msg: Envelope<'_> = serde_json::from_str(outer.get())
        .map_err(|e| reject(Value::Null, -32600, &format!("invalid request: {e}")))?;
    let id = match msg.id {
        None => Value::Null,
        Some(raw) => match first_byte(raw) {
            b'"' | b'-' | b'0'..=b'9' | b'n' => {
                serde_json::from_str(raw.get()).unwrap_or(Value::Null)
            }
            _ => {
                return Err(reject(
                    Value::Null,
                    -32600,
                    "invalid request: id must be a string or a number",
                ));
            }
        },
    };
    if msg.jsonrpc.map(RawValue::get) != Some("\"2.0\"") {
        return Err(reject(
            id,
            -32600,
            "invalid request: jsonrpc must be \"2.0\"",
        ));
    }
    let has_method = msg.method.is_some_and(|m| first_byte(m) == b'"');
    let is_response = msg.result.is_some() || msg.error.is_some();
    if !has_method && !is_response {
        return Err(reject(
            id,
            -32600,
            "invalid request: method must be a string",
        ));
    }
    if let Some(params) = msg.params
        && !matches!(first_byte(params), b'{' | b'[')
    {
        return Err(reject(
            id,
            -32600,
            "invalid request: params must be an object",
        ));
    }
    Ok(())
}

/// Middleware form of [`check`]. The body was already buffered by the body limit.
pub async fn jsonrpc_guard(req: Request, next: Next) -> Response {
    if req.method() != axum::http::Method::POST {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let bytes = match body.collect().await {
        Ok(c) => c.to_bytes(),
        Err(_) => return rpc_error(Value::Null, -32700, "parse error: unreadable body".into()),
    };
    if let Err(r) = check(&bytes) {
        return rpc_error(r.id, r.code, r.message);
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(body: &str) -> Option<i64> {
        check(&Bytes::from(body.to_owned())).err().map(|r| r.code)
    }

    #[test]
    fn shapes() {
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#), None);
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            None
        );
        assert_eq!(code("{bad"), Some(-32700));
        assert_eq!(code(&"[".repeat(100_000)), Some(-32700));
        assert_eq!(
            code(r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#),
            Some(-32600)
        );
        assert_eq!(
            code(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#),
            Some(-32600)
        );
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1}"#), Some(-32600));
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#),
            Some(-32600)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#),
            Some(-32600)
        );
    }

    #[test]
    fn the_id_is_echoed_when_known() {
        let r = check(&Bytes::from_static(
            br#"{"jsonrpc":"1.0","id":"a","method":"ping"}"#,
        ))
        .unwrap_err();
        assert_eq!(r.id, Value::String("a".into()));
    }
}
