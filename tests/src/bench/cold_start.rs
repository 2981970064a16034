//! Start-up of the Lambda binaries: from process start (local HTTP mode,
//! `WC_LAMBDA_LOCAL_LISTEN`, the same start-up as under the Lambda runtime) to the first
//! answered request, median of `rounds` starts, and each binary's size.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::mcp::mcp_request;
use super::round;
use crate::client::Client;

/// The first request a binary is asked to answer.
#[derive(Debug, Clone, Copy)]
pub enum Probe {
    /// MCP `tools/list` with the token (credential lookup, audit row).
    McpToolsList,
    /// `GET /healthz` (a database round trip).
    Healthz,
    /// `POST /api/audit/sessions` with the token.
    AuditSessions,
    /// `POST /runner/v1/poll` without a runner token (answered 401 by the runner API).
    RunnerPoll,
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

async fn ask(client: &Client, base: &str, token: &str, probe: Probe) -> anyhow::Result<u16> {
    let auth = format!("Bearer {token}");
    let r = match probe {
        Probe::McpToolsList => {
            let (mut headers, body) = mcp_request("tools/list", None, json!({}));
            headers.push(("authorization".into(), auth));
            let h: Vec<(&str, &str)> = headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            client
                .send(
                    hyper::Method::POST,
                    &format!("{base}/mcp"),
                    &h,
                    hyper::body::Bytes::from(body),
                )
                .await?
        }
        Probe::Healthz => client.get(&format!("{base}/healthz"), None).await?,
        Probe::AuditSessions => {
            client
                .post_json(
                    &format!("{base}/api/audit/sessions"),
                    Some(token),
                    &json!({}),
                )
                .await?
        }
        Probe::RunnerPoll => {
            client
                .post_json(&format!("{base}/runner/v1/poll"), None, &json!({}))
                .await?
        }
    };
    Ok(r.status)
}

/// Starts `bin` `rounds` times against `database_url`; one report line.
pub async fn cold_start(
    name: &str,
    bin: &Path,
    database_url: &str,
    token: &str,
    probe: Probe,
    rounds: usize,
) -> anyhow::Result<Value> {
    let size = std::fs::metadata(bin)?.len();
    let mut times = Vec::with_capacity(rounds);
    let mut status = 0;
    for _ in 0..rounds {
        let port = free_port()?;
        let base = format!("http://127.0.0.1:{port}");
        let client = Client::new();
        let started = Instant::now();
        let mut child = Command::new(bin)
            .env("DATABASE_URL", database_url)
            .env("WC_LAMBDA_LOCAL_LISTEN", format!("127.0.0.1:{port}"))
            .env("WC_NOTIFY", "0")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let answered = loop {
            if let Ok(s) = ask(&client, &base, token, probe).await {
                break Some(s);
            }
            if started.elapsed() > Duration::from_secs(10) {
                break None;
            }
            tokio::time::sleep(Duration::from_micros(500)).await;
        };
        let elapsed = started.elapsed();
        let _ = child.kill();
        let _ = child.wait();
        status = answered.ok_or_else(|| anyhow::anyhow!("{name} did not answer within 10 s"))?;
        times.push(elapsed.as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    Ok(json!({
        "scenario": "cold_start",
        "binary": name,
        "build": bin.parent().and_then(|d| d.file_name()).map(|d| d.to_string_lossy().into_owned()),
        "rounds": rounds,
        "median_ms": round(times[times.len() / 2]),
        "min_ms": round(times[0]),
        "max_ms": round(times[times.len() - 1]),
        "first_status": status,
        "sslmode": database_url
            .split(['?', '&'])
            .find_map(|p| p.strip_prefix("sslmode="))
            .unwrap_or("prefer"),
        "binary_bytes": size,
        "binary_mb": round(size as f64 / 1_048_576.0),
    }))
}
