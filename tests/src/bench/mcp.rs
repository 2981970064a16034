//! Stateless MCP requests and the `/healthz` baseline over HTTP keep-alive.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::{drive, report};
use crate::client::Client;

/// Headers and body of a stateless 2026-07-28 MCP request.
pub fn mcp_request(
    method: &str,
    name: Option<&str>,
    params: Value,
) -> (Vec<(String, String)>, Vec<u8>) {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": { "name": "wc-bench", "version": "1" },
    });
    let mut headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        (
            "accept".to_owned(),
            "application/json, text/event-stream".to_owned(),
        ),
        ("mcp-protocol-version".to_owned(), "2026-07-28".to_owned()),
        ("mcp-method".to_owned(), method.to_owned()),
    ];
    if let Some(n) = name {
        headers.push(("mcp-name".to_owned(), n.to_owned()));
    }
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    (headers, serde_json::to_vec(&body).expect("json"))
}

/// One MCP request shape, measured.
pub struct McpCall {
    /// Scenario name.
    pub scenario: &'static str,
    /// JSON-RPC method.
    pub method: &'static str,
    /// Tool name, for tools/call.
    pub name: Option<&'static str>,
    /// Params (without `_meta`).
    pub params: Value,
}

/// Runs one MCP request shape.
pub async fn mcp_scenario(
    call: McpCall,
    base: &str,
    token: &str,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<Value> {
    let client = Client::new();
    let url = Arc::new(format!("{base}/mcp"));
    let (mut headers, body) = mcp_request(call.method, call.name, call.params);
    headers.push(("authorization".to_owned(), format!("Bearer {token}")));
    let headers = Arc::new(headers);
    let body = hyper::body::Bytes::from(body);
    let reply_bytes = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let seen = reply_bytes.clone();
    let method = call.method;
    let (mut samples, _) = drive(concurrency, duration, move |_| {
        let client = client.clone();
        let url = url.clone();
        let headers = headers.clone();
        let body = body.clone();
        let seen = seen.clone();
        async move {
            let (_, len) = post_mcp(&client, &url, &headers, body, method).await?;
            seen.store(len as u64, std::sync::atomic::Ordering::Relaxed);
            Ok(vec![])
        }
    })
    .await;
    samples.extra.insert(
        "reply_bytes".into(),
        json!(reply_bytes.load(std::sync::atomic::Ordering::Relaxed)),
    );
    Ok(report(call.scenario, concurrency, samples))
}

/// Sends one MCP POST and checks that it answered 200 with a result that is neither a
/// JSON-RPC error nor a failed tool call; returns the reply and its size.
pub async fn post_mcp(
    client: &Client,
    url: &str,
    headers: &[(String, String)],
    body: hyper::body::Bytes,
    method: &str,
) -> anyhow::Result<(Value, usize)> {
    let h: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let r = client.send(hyper::Method::POST, url, &h, body).await?;
    anyhow::ensure!(
        r.status == 200,
        "{method} answered {}: {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
    let v: Value = serde_json::from_slice(&r.body)?;
    anyhow::ensure!(v.get("error").is_none(), "{method} failed: {v}");
    // A tool result says twice whether it succeeded; both must, before anyone reads its output.
    anyhow::ensure!(
        v["result"]["isError"] != json!(true)
            && v["result"]
                .get("structuredContent")
                .is_none_or(|sc| sc["success"] == json!(true)),
        "{method} failed: {v}"
    );
    Ok((v, r.body.len()))
}

/// Protocol revisions whose tool list [`tools_list_size`] weighs, oldest first.
const LISTED_REVISIONS: [&str; 3] = ["2025-06-18", "2025-11-25", "2026-07-28"];

/// How many of the largest tools a [`tools_list_size`] line names.
const LARGEST_NAMED: usize = 5;

/// `tools_list_size`: the tool list a model reads, on each protocol revision, as a caller
/// holding every scope gets it: the reply's bytes, the `tools` array's, how many tools, bytes
/// per tool and the largest tools. Weighed once, not timed.
pub async fn tools_list_size(base: &str, token: &str) -> anyhow::Result<Value> {
    let client = Client::new();
    let url = format!("{base}/mcp");
    let mut by_revision = serde_json::Map::new();
    for revision in LISTED_REVISIONS {
        let (mut headers, body) = if revision == "2026-07-28" {
            mcp_request("tools/list", None, json!({}))
        } else {
            // An older revision's stateless request: no `_meta`, no `Mcp-Method`.
            let headers = vec![
                ("content-type".to_owned(), "application/json".to_owned()),
                (
                    "accept".to_owned(),
                    "application/json, text/event-stream".to_owned(),
                ),
                ("mcp-protocol-version".to_owned(), revision.to_owned()),
            ];
            let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {} });
            (headers, serde_json::to_vec(&body)?)
        };
        headers.push(("authorization".to_owned(), format!("Bearer {token}")));
        let (reply, reply_bytes) =
            post_mcp(&client, &url, &headers, body.into(), "tools/list").await?;
        let tools = reply["result"]["tools"]
            .as_array()
            .ok_or_else(|| anyhow::anyhow!("{revision}: tools/list has no tools: {reply}"))?;
        let tools_bytes = serde_json::to_vec(tools)?.len();
        let mut sizes: Vec<(usize, &str)> = tools
            .iter()
            .map(|t| (t.to_string().len(), t["name"].as_str().unwrap_or_default()))
            .collect();
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        sizes.truncate(LARGEST_NAMED);
        by_revision.insert(
            revision.to_owned(),
            json!({
                "reply_bytes": reply_bytes,
                "tools_bytes": tools_bytes,
                "tools": tools.len(),
                "bytes_per_tool": tools_bytes / tools.len().max(1),
                "largest": sizes,
            }),
        );
    }
    Ok(json!({ "scenario": "tools_list_size", "by_revision": by_revision }))
}

/// `GET /healthz`.
pub async fn healthz_scenario(
    base: &str,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<Value> {
    let client = Client::new();
    let url = Arc::new(format!("{base}/healthz"));
    let (samples, _) = drive(concurrency, duration, move |_| {
        let client = client.clone();
        let url = url.clone();
        async move {
            let r = client.get(&url, None).await?;
            anyhow::ensure!(r.status == 200, "healthz answered {}", r.status);
            Ok(vec![])
        }
    })
    .await;
    Ok(report("http_healthz", concurrency, samples))
}

/// A `tools/call` reply, read only as far as its verdict: everything else is checked to be
/// well-formed JSON and skipped, not built into values (the scenarios that only need to know
/// that a call succeeded should not spend the shared cores on materializing its output).
#[derive(serde::Deserialize)]
struct ToolVerdict {
    error: Option<serde::de::IgnoredAny>,
    result: Option<VerdictResult>,
}

#[derive(serde::Deserialize)]
struct VerdictResult {
    #[serde(rename = "isError")]
    is_error: Option<bool>,
    #[serde(rename = "structuredContent")]
    structured: Option<VerdictContent>,
}

#[derive(serde::Deserialize)]
struct VerdictContent {
    success: bool,
}

/// Sends one MCP `tools/call` and checks that it answered 200 with a successful tool result;
/// returns the reply's size. A failure is reported with the whole reply.
pub async fn call_tool_ok(
    client: &Client,
    url: &str,
    headers: &[(String, String)],
    body: hyper::body::Bytes,
) -> anyhow::Result<usize> {
    let h: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let r = client.send(hyper::Method::POST, url, &h, body).await?;
    let verdict: Option<ToolVerdict> = serde_json::from_slice(&r.body).ok();
    let ok = r.status == 200
        && verdict.is_some_and(|v| {
            v.error.is_none()
                && v.result.is_some_and(|res| {
                    res.is_error != Some(true) && res.structured.is_some_and(|c| c.success)
                })
        });
    anyhow::ensure!(
        ok,
        "tools/call answered {}: {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
    Ok(r.body.len())
}
