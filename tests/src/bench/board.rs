//! Message-board scenarios: posts over stateless MCP on one hot session and on distinct
//! sessions, the same post straight through the store (the floor), the full
//! post → get assignment → complete cycle, and the latency from a post to a waiting observer's
//! return.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wc_store::Pool;
use wc_store::board::{self, Actor};

use super::mcp::{call_tool_ok, mcp_request, post_mcp};
use super::{OpFuture, Samples, drive, drive_paired, report};
use crate::client::Client;

/// Where the workers post.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// All on one session.
    Hot,
    /// Each worker on its own session.
    Distinct,
}

impl Target {
    fn pick(self, sessions: &[String], worker: usize) -> String {
        match self {
            Target::Hot => sessions[0].clone(),
            Target::Distinct => sessions[worker % sessions.len()].clone(),
        }
    }

    /// Suffix of the scenario name.
    pub fn as_str(self) -> &'static str {
        match self {
            Target::Hot => "hot",
            Target::Distinct => "distinct",
        }
    }
}

/// One MCP tool call; the tool's `output` on success.
async fn tool(
    client: &Client,
    url: &str,
    token: &str,
    name: &str,
    arguments: Value,
) -> anyhow::Result<Value> {
    let (mut headers, body) = mcp_request(
        "tools/call",
        Some(name),
        json!({ "name": name, "arguments": arguments }),
    );
    headers.push(("authorization".into(), format!("Bearer {token}")));
    let (v, _) = post_mcp(client, url, &headers, body.into(), "tools/call").await?;
    let sc = &v["result"]["structuredContent"];
    anyhow::ensure!(sc["success"] == json!(true), "{name} failed: {v}");
    Ok(sc["output"].clone())
}

/// The same post straight through the store: no HTTP, auth, recorder pair or audit row.
pub async fn post_floor(
    pool: Pool,
    sessions: Arc<Vec<String>>,
    target: Target,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<Value> {
    let (samples, _) = drive(concurrency, duration, store_post_op(pool, sessions, target)).await;
    Ok(report(
        &format!("board_post_store_{}", target.as_str()),
        concurrency,
        samples,
    ))
}

/// The post over MCP measured against the store's post in alternating slices
/// ([`drive_paired`]): the store's report line, and the MCP post's with `ratio_to_store` and
/// `ratio_to_store_by_round`.
pub async fn post_against_store(
    pool: Pool,
    base: &str,
    token: &str,
    sessions: Arc<Vec<String>>,
    target: Target,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<(Value, Value)> {
    let paired = drive_paired(
        concurrency,
        duration,
        store_post_op(pool, sessions.clone(), target),
        post_op(base, token, sessions, target),
    )
    .await;
    Ok(paired.reports(
        &format!("board_post_store_{}", target.as_str()),
        &format!("board_post_{}", target.as_str()),
        concurrency,
        "ratio_to_store",
    ))
}

/// `post_session_message` (a note) over stateless MCP: one `board_post_*` operation.
pub fn post_op(
    base: &str,
    token: &str,
    sessions: Arc<Vec<String>>,
    target: Target,
) -> impl Fn(usize) -> OpFuture + Send + Sync + 'static {
    let client = Client::new();
    let url = Arc::new(format!("{base}/mcp"));
    let token = Arc::new(token.to_owned());
    move |worker| {
        let (client, url, token) = (client.clone(), url.clone(), token.clone());
        let session = target.pick(&sessions, worker);
        Box::pin(async move {
            let (mut headers, body) = mcp_request(
                "tools/call",
                Some("post_session_message"),
                json!({
                    "name": "post_session_message",
                    "arguments": { "session_id": session, "kind": "note", "body": "benchmark note" },
                }),
            );
            headers.push(("authorization".into(), format!("Bearer {token}")));
            call_tool_ok(&client, &url, &headers, body.into()).await?;
            Ok(vec![])
        })
    }
}

fn store_post_op(
    pool: Pool,
    sessions: Arc<Vec<String>>,
    target: Target,
) -> impl Fn(usize) -> OpFuture + Send + Sync + 'static {
    move |worker| {
        let pool = pool.clone();
        let session = target.pick(&sessions, worker);
        Box::pin(async move {
            let m = wc_store::testing::note("benchmark note");
            let actor = Actor::new(uuid::Uuid::now_v7(), "post_session_message");
            board::post(&pool, &wc_domain::SessionId::parse(&session)?, m, actor)
                .await?
                .map_err(|r| anyhow::anyhow!("refused: {r:?}"))?;
            Ok(vec![])
        })
    }
}

/// One cycle: post a todo, get its assignment, complete it with a fresh key.
pub async fn post_complete(
    base: &str,
    token: &str,
    sessions: Arc<Vec<String>>,
    target: Target,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<Value> {
    let client = Client::new();
    let url = Arc::new(format!("{base}/mcp"));
    let token = Arc::new(token.to_owned());
    let (samples, counts) = drive(concurrency, duration, move |worker| {
        let (client, url, token) = (client.clone(), url.clone(), token.clone());
        let session = target.pick(&sessions, worker);
        async move {
            let posted = tool(
                &client,
                &url,
                &token,
                "post_session_message",
                json!({ "session_id": session, "kind": "todo", "body": "benchmark todo" }),
            )
            .await?;
            let todo = posted["message_id"].clone();
            let a = tool(
                &client,
                &url,
                &token,
                "get_session_assignment",
                json!({ "session_id": session, "message_id": todo }),
            )
            .await?;
            let done = tool(
                &client,
                &url,
                &token,
                "complete_session_message",
                json!({ "session_id": session, "message_id": todo,
                        "expected_assignment_fence": a["assignment_fence"],
                        "completion_key": uuid::Uuid::new_v4().to_string(),
                        "answer": "done" }),
            )
            .await?;
            anyhow::ensure!(
                done["state_changed"] == json!(true),
                "not completed: {done}"
            );
            Ok(vec![3])
        }
    })
    .await;
    let calls = counts.first().copied().unwrap_or(0);
    let calls_per_sec = calls as f64 / samples.elapsed.as_secs_f64();
    let mut line = report(
        &format!("board_post_complete_{}", target.as_str()),
        concurrency,
        samples,
    );
    line["tool_calls_per_sec"] = json!(super::round(calls_per_sec));
    Ok(line)
}

/// Latency from sending a post to the return of an observer already waiting on the session
/// (`wait_ms` 20 s), `rounds` times in sequence.
pub async fn observe_wake(
    base: &str,
    token: &str,
    session: &str,
    rounds: usize,
) -> anyhow::Result<Value> {
    let client = Client::new();
    let url = format!("{base}/mcp");
    let base_out = tool(
        &client,
        &url,
        token,
        "observe_session_messages",
        json!({ "session_id": session }),
    )
    .await?;
    let mut cursor = base_out["token"].as_str().unwrap_or_default().to_owned();
    let mut latencies = Vec::with_capacity(rounds);
    let start = Instant::now();
    for _ in 0..rounds {
        let observer = {
            let (client, url, token, session, cursor) = (
                client.clone(),
                url.clone(),
                token.to_owned(),
                session.to_owned(),
                cursor.clone(),
            );
            tokio::spawn(async move {
                let out = tool(
                    &client,
                    &url,
                    &token,
                    "observe_session_messages",
                    json!({ "session_id": session, "token": cursor, "wait_ms": 20000 }),
                )
                .await;
                (out, Instant::now())
            })
        };
        // Let the observer reach its wait before the post.
        tokio::time::sleep(Duration::from_millis(30)).await;
        let sent = Instant::now();
        tool(
            &client,
            &url,
            token,
            "post_session_message",
            json!({ "session_id": session, "kind": "note", "body": "wake" }),
        )
        .await?;
        let (out, returned) = observer.await?;
        let out = out?;
        anyhow::ensure!(
            out["messages"].as_array().is_some_and(|m| !m.is_empty()),
            "the observer returned without the post: {out}"
        );
        cursor = out["token"].as_str().unwrap_or_default().to_owned();
        latencies.push(returned.duration_since(sent).as_secs_f64());
    }
    Ok(report(
        "observe_wake",
        1,
        Samples {
            latencies,
            elapsed: start.elapsed(),
            extra: Default::default(),
        },
    ))
}
