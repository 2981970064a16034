//! `shell_exec_true` against `run_shell_true`: `true` in an open persistent shell of the
//! worker's session (one tool call over MCP, the queue to the embedded runner, a frame written
//! to the shell and its completion token read back) against `run_shell` of `true` in the same
//! session (the same call and queue, then a fresh sandboxed `sh` per call), in alternating
//! slices ([`drive_paired`]). One session and one shell per worker.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::mcp::{call_tool_ok, mcp_request, post_mcp};
use super::sessions::start_sessions;
use super::{OpFuture, drive_paired};
use crate::client::Client;

/// A tools/call of `name` with the bearer token: headers and body.
fn tool_call(token: &str, name: &str, arguments: Value) -> (Vec<(String, String)>, Vec<u8>) {
    let (mut headers, body) = mcp_request(
        "tools/call",
        Some(name),
        json!({ "name": name, "arguments": arguments }),
    );
    headers.push(("authorization".to_owned(), format!("Bearer {token}")));
    (headers, body)
}

/// One prepared call per worker, sent again and again.
type Calls = Arc<Vec<(Vec<(String, String)>, hyper::body::Bytes)>>;

fn op(url: Arc<String>, calls: Calls) -> impl Fn(usize) -> OpFuture + Send + Sync + 'static {
    let client = Client::new();
    move |worker| {
        let (client, url, calls) = (client.clone(), url.clone(), calls.clone());
        Box::pin(async move {
            let (headers, body) = &calls[worker];
            call_tool_ok(&client, &url, headers, body.clone()).await?;
            Ok(vec![])
        })
    }
}

/// The scenario at one concurrency: `run_shell_true`'s line, and `shell_exec_true`'s with
/// `ratio_to_run_shell` (operations per second of the shell over those of `run_shell`) and
/// `p50_ratio_to_run_shell`.
pub async fn against_run_shell(
    base: &str,
    token: &str,
    project: &str,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<(Value, Value)> {
    let client = Client::new();
    let url = Arc::new(format!("{base}/mcp"));
    let sessions = start_sessions(base, token, project, concurrency).await?;
    let (mut execs, mut shells) = (Vec::new(), Vec::new());
    for session in &sessions {
        let (headers, body) = tool_call(
            token,
            "open_session_shell",
            json!({ "session_id": session }),
        );
        let (reply, _) = post_mcp(&client, &url, &headers, body.into(), "tools/call").await?;
        let shell = reply["result"]["structuredContent"]["output"]["shell_id"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("open_session_shell failed: {reply}"))?
            .to_owned();
        let (h, b) = tool_call(
            token,
            "session_shell_exec",
            json!({ "session_id": session, "shell_id": shell, "command": "true" }),
        );
        execs.push((h, hyper::body::Bytes::from(b)));
        let (h, b) = tool_call(
            token,
            "run_shell",
            json!({ "session_id": session, "command": "true" }),
        );
        shells.push((h, hyper::body::Bytes::from(b)));
    }
    let paired = drive_paired(
        concurrency,
        duration,
        op(url.clone(), Arc::new(shells)),
        op(url, Arc::new(execs)),
    )
    .await;
    Ok(paired.reports(
        "run_shell_true",
        "shell_exec_true",
        concurrency,
        "ratio_to_run_shell",
    ))
}
