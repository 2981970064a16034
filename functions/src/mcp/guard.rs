//! JSON-RPC shape checks in front of the MCP service, so that every malformed message gets a
//! JSON-RPC error (rmcp answers a body it cannot deserialize with a plain-text 415):
//!
//! - `-32700` parse error (HTTP 400, `id` null): not JSON.
//! - `-32600` invalid request (HTTP 400): not one JSON-RPC 2.0 object; an `id` that is not a
//!   string or an integer rmcp can hold (a float, more than 64 bits signed, a lone surrogate);
//!   a wrong `jsonrpc`; a `method` that is not a string; `params` that are not structured. The
//!   `id` is echoed when it could be read, else `null`.
//! - `-32602` invalid params (the `id` echoed; HTTP 200 like any other error response to a
//!   request, HTTP 400 for a notification, which has no response): `params` as an array, nested
//!   deeper than the parser's 128 levels, holding a lone surrogate or an out-of-range number;
//!   `tools/call` without a string `name` or with `arguments` that are not an object.
//!
//! Nothing here builds a tree: the envelope's members are borrowed, and the rest of the message
//! is walked once by a visitor that keeps nothing.

use std::fmt;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// JSON-RPC: invalid JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: invalid method parameters.
pub const INVALID_PARAMS: i64 = -32602;

/// A JSON-RPC error response with `status`, echoing `id`.
pub(super) fn rpc_error(
    status: StatusCode,
    id: Value,
    code: i64,
    message: &str,
    data: Option<Value>,
) -> Response {
    let mut error = json!({ "code": code, "message": message });
    if let Some(data) = data {
        error["data"] = data;
    }
    (
        status,
        axum::Json(json!({ "jsonrpc": "2.0", "id": id, "error": error })),
    )
        .into_response()
}

/// A rejected message: the id to echo, the JSON-RPC error code and the message.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    /// Request id to echo (`null` when unknown).
    pub id: Value,
    /// [`PARSE_ERROR`], [`INVALID_REQUEST`] or [`INVALID_PARAMS`].
    pub code: i64,
    /// What was wrong.
    pub message: String,
}

impl Rejection {
    /// The HTTP status of the error response: a request with an id gets its invalid-params
    /// error as any other response (200); everything else is a malformed message (400).
    pub fn status(&self) -> StatusCode {
        if self.code == INVALID_PARAMS && !self.id.is_null() {
            StatusCode::OK
        } else {
            StatusCode::BAD_REQUEST
        }
    }
}

fn reject(id: Value, code: i64, message: &str) -> Rejection {
    Rejection {
        id,
        code,
        message: message.to_owned(),
    }
}

/// The top-level members of a JSON-RPC message, borrowed from the body without building a
/// tree: parsing into `RawValue`s checks the syntax of the whole document, cheaply.
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

/// The members of `tools/call` params the protocol needs before any tool is looked up.
#[derive(serde::Deserialize)]
struct CallParams<'a> {
    #[serde(borrow)]
    name: Option<&'a RawValue>,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
}

/// A JSON value walked and dropped: reading it applies every check of a full parse (nesting
/// depth, string escapes, number range) and keeps nothing.
struct Walked;

impl<'de> Deserialize<'de> for Walked {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Walked, D::Error> {
        d.deserialize_any(WalkVisitor)
    }
}

struct WalkVisitor;

impl<'de> Visitor<'de> for WalkVisitor {
    type Value = Walked;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Walked, E> {
        Ok(Walked)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Walked, E> {
        Ok(Walked)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Walked, E> {
        Ok(Walked)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Walked, E> {
        Ok(Walked)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Walked, E> {
        Ok(Walked)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Walked, E> {
        Ok(Walked)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Walked, A::Error> {
        while seq.next_element::<Walked>()?.is_some() {}
        Ok(Walked)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Walked, A::Error> {
        while map.next_entry::<Walked, Walked>()?.is_some() {}
        Ok(Walked)
    }
}

fn walk(raw: &str) -> Result<(), serde_json::Error> {
    serde_json::from_str::<Walked>(raw).map(|_| ())
}

fn first_byte(raw: &RawValue) -> u8 {
    raw.get().as_bytes().first().copied().unwrap_or(b' ')
}

/// The id as rmcp can hold it: a string, or an integer of at most 64 bits (signed).
fn request_id(raw: &RawValue) -> Option<Value> {
    match first_byte(raw) {
        b'"' => serde_json::from_str::<String>(raw.get())
            .ok()
            .map(Value::String),
        b'n' => Some(Value::Null),
        b'-' | b'0'..=b'9' => raw.get().parse::<i64>().ok().map(Value::from),
        _ => None,
    }
}

/// Checks one request body.
pub fn check(body: &Bytes) -> Result<(), Rejection> {
    // Valid JSON first, then the shape.
    let outer: &RawValue = serde_json::from_slice(body)
        .map_err(|e| reject(Value::Null, PARSE_ERROR, &format!("parse error: {e}")))?;
    if first_byte(outer) != b'{' {
        return Err(reject(
            Value::Null,
            INVALID_REQUEST,
            "invalid request: expected one JSON-RPC 2.0 object (batches are not supported)",
        ));
    }
    let msg: Envelope<'_> = serde_json::from_str(outer.get()).map_err(|e| {
        reject(
            Value::Null,
            INVALID_REQUEST,
            &format!("invalid request: {e}"),
        )
    })?;
    let id = match msg.id {
        None => Value::Null,
        Some(raw) => request_id(raw).ok_or_else(|| {
            reject(
                Value::Null,
                INVALID_REQUEST,
                "invalid request: id must be a string or an integer of at most 64 bits",
            )
        })?,
    };
    if msg.jsonrpc.map(RawValue::get) != Some("\"2.0\"") {
        return Err(reject(
            id,
            INVALID_REQUEST,
            "invalid request: jsonrpc must be \"2.0\"",
        ));
    }
    let method = match msg.method {
        Some(m) => Some(serde_json::from_str::<String>(m.get()).map_err(|_| {
            reject(
                id.clone(),
                INVALID_REQUEST,
                "invalid request: method must be a string",
            )
        })?),
        None => None,
    };
    let is_response = msg.result.is_some() || msg.error.is_some();
    if method.is_none() && !is_response {
        return Err(reject(
            id,
            INVALID_REQUEST,
            "invalid request: method must be a string",
        ));
    }
    for member in [msg.result, msg.error].into_iter().flatten() {
        walk(member.get()).map_err(|e| {
            reject(
                id.clone(),
                INVALID_REQUEST,
                &format!("invalid request: {e}"),
            )
        })?;
    }
    let Some(params) = msg.params else {
        if method.as_deref() == Some("tools/call") {
            return Err(reject(
                id,
                INVALID_PARAMS,
                "invalid params: tools/call needs params with name, a string naming the tool",
            ));
        }
        return Ok(());
    };
    match first_byte(params) {
        b'{' => {}
        b'[' => {
            return Err(reject(
                id,
                INVALID_PARAMS,
                "invalid params: params must be an object of named parameters, not an array",
            ));
        }
        _ => {
            return Err(reject(
                id,
                INVALID_REQUEST,
                "invalid request: params must be an object",
            ));
        }
    }
    // The whole message as rmcp will parse it (its depth counts from the top); every member
    // but `params` was read above, so what fails here is in `params`.
    walk(outer.get())
        .map_err(|e| reject(id.clone(), INVALID_PARAMS, &format!("invalid params: {e}")))?;
    if method.as_deref() == Some("tools/call") {
        check_call(params).map_err(|m| reject(id, INVALID_PARAMS, m))?;
    }
    Ok(())
}

/// `tools/call` params: `name` a string, `arguments` (when given) an object.
fn check_call(params: &RawValue) -> Result<(), &'static str> {
    let call: CallParams<'_> = serde_json::from_str(params.get())
        .map_err(|_| "invalid params: tools/call params must be an object")?;
    if call.name.is_none_or(|n| first_byte(n) != b'"') {
        return Err("invalid params: tools/call needs name, a string naming the tool");
    }
    if let Some(args) = call.arguments
        && !matches!(first_byte(args), b'{' | b'n')
    {
        return Err("invalid params: tools/call arguments must be an object");
    }
    Ok(())
}

/// The request's parts and its whole body (already buffered by the body limit), or the
/// JSON-RPC parse error an unreadable body gets.
pub(super) async fn buffered(req: Request) -> Result<(Parts, Bytes), Response> {
    let (parts, body) = req.into_parts();
    match body.collect().await {
        Ok(c) => Ok((parts, c.to_bytes())),
        Err(_) => Err(rpc_error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            PARSE_ERROR,
            "parse error: unreadable body",
            None,
        )),
    }
}

/// Middleware form of [`check`]. The body was already buffered by the body limit.
pub async fn jsonrpc_guard(req: Request, next: Next) -> Response {
    if req.method() != axum::http::Method::POST {
        return next.run(req).await;
    }
    let (parts, bytes) = match buffered(req).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    if let Err(r) = check(&bytes) {
        return rpc_error(r.status(), r.id, r.code, &r.message, None);
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

    fn rejection(body: &str) -> Rejection {
        check(&Bytes::from(body.to_owned())).expect_err(body)
    }

    #[test]
    fn what_rmcp_cannot_parse_is_a_json_rpc_error_here() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{{"x":{}1{}}}}}"#,
            "[".repeat(130),
            "]".repeat(130)
        );
        for (body, code, id) in [
            (deep.as_str(), INVALID_PARAMS, json!(5)),
            (
                r#"{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"cursor":"\ud800"}}"#,
                INVALID_PARAMS,
                json!(6),
            ),
            (
                r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":[]}"#,
                INVALID_PARAMS,
                json!(7),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
                INVALID_REQUEST,
                Value::Null,
            ),
            (
                r#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"ping"}"#,
                INVALID_REQUEST,
                Value::Null,
            ),
            (
                r#"{"jsonrpc":"2.0","id":"\udc00","method":"ping"}"#,
                INVALID_REQUEST,
                Value::Null,
            ),
            (
                r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"arguments":{}}}"#,
                INVALID_PARAMS,
                json!(8),
            ),
            (
                r#"{"jsonrpc":"2.0","id":"n","method":"tools/call","params":{"name":7}}"#,
                INVALID_PARAMS,
                json!("n"),
            ),
            (
                r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"x","arguments":[1]}}"#,
                INVALID_PARAMS,
                json!(9),
            ),
            (
                r#"{"jsonrpc":"2.0","id":10,"method":"tools/call"}"#,
                INVALID_PARAMS,
                json!(10),
            ),
        ] {
            let r = rejection(body);
            assert_eq!((r.code, &r.id), (code, &id), "{body}: {r:?}");
        }
        // At the parser's limit, the message passes through.
        let deepest = format!(
            r#"{{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{{"x":{}1{}}}}}"#,
            "[".repeat(125),
            "]".repeat(125)
        );
        assert_eq!(check(&Bytes::from(deepest)), Ok(()));
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"ping"}"#),
            None
        );
        assert_eq!(
            code(
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":null}}"#
            ),
            None
        );
    }

    #[test]
    fn invalid_params_of_a_request_is_an_ordinary_response_and_the_rest_is_400() {
        let params = rejection(r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":[]}"#);
        assert_eq!(params.status(), StatusCode::OK);
        let note = rejection(r#"{"jsonrpc":"2.0","method":"notifications/x","params":[]}"#);
        assert_eq!(note.status(), StatusCode::BAD_REQUEST);
        let request = rejection(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#);
        assert_eq!(request.status(), StatusCode::BAD_REQUEST);
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
