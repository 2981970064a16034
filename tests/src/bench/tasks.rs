//! `tasks_get` against `job_status`: the poll a task client makes (`tasks/get` of a working
//! `run_job` task: the task row, then its work row, on any instance) against the poll a
//! client without tasks makes of the same job (`job_status` through the kernel), in
//! alternating slices ([`drive_paired`]). One long job per worker, started as a task and
//! cancelled when the scenario ends.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::mcp::{mcp_request, post_mcp};
use super::{OpFuture, drive_paired};
use crate::client::Client;

/// `_meta` client capabilities declaring the tasks extension.
fn declaring(mut body: Vec<u8>) -> Vec<u8> {
    let mut v: Value = serde_json::from_slice(&body).expect("request json");
    v["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({ "extensions": { "io.modelcontextprotocol/tasks": {} } });
    body = serde_json::to_vec(&v).expect("json");
    body
}

/// A request of `method` with the bearer token, declaring the extension when `tasks`.
fn request(
    token: &str,
    method: &str,
    name: Option<&str>,
    params: Value,
    tasks: bool,
) -> (Vec<(String, String)>, hyper::body::Bytes) {
    let (mut headers, body) = mcp_request(method, name, params);
    headers.push(("authorization".to_owned(), format!("Bearer {token}")));
    let body = if tasks { declaring(body) } else { body };
    (headers, body.into())
}

type Calls = Arc<Vec<(Vec<(String, String)>, hyper::body::Bytes)>>;

/// Sends worker `w`'s request and checks that it answered: a task still `working`, or a
/// successful tool result.
fn op(
    url: Arc<String>,
    calls: Calls,
    method: &'static str,
) -> impl Fn(usize) -> OpFuture + Send + Sync + 'static {
    let client = Client::new();
    move |worker| {
        let (client, url, calls) = (client.clone(), url.clone(), calls.clone());
        Box::pin(async move {
            let (headers, body) = &calls[worker];
            let (reply, _) = post_mcp(&client, &url, headers, body.clone(), method).await?;
            if method == "tasks/get" {
                anyhow::ensure!(
                    reply["result"]["status"] == "working",
                    "the task is no longer working: {reply}"
                );
            }
            Ok(vec![])
        })
    }
}

/// The scenario at one concurrency: `job_status_poll`'s line, and `tasks_get`'s with
/// `ratio_to_job_status` (its operations per second over `job_status`'s) and
/// `p50_ratio_to_job_status`.
pub async fn against_job_status(
    base: &str,
    token: &str,
    project: &str,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<(Value, Value)> {
    let client = Client::new();
    let url = Arc::new(format!("{base}/mcp"));
    let (mut gets, mut statuses, mut ids) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..concurrency {
        let (h, b) = request(
            token,
            "tools/call",
            Some("run_job"),
            json!({ "name": "run_job", "arguments": { "project": project, "command": "sleep 3600" } }),
            true,
        );
        let (reply, _) = post_mcp(&client, &url, &h, b, "tools/call").await?;
        let task = reply["result"]["taskId"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("run_job did not become a task: {reply}"))?
            .to_owned();
        // The job id, from the task's first poll of the job itself.
        let (h, b) = request(
            token,
            "tools/call",
            Some("list_jobs"),
            json!({ "name": "list_jobs", "arguments": { "project": project, "limit": 1 } }),
            false,
        );
        let (listed, _) = post_mcp(&client, &url, &h, b, "tools/call").await?;
        let job = listed["result"]["structuredContent"]["output"]["jobs"][0]["job_id"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("no job listed: {listed}"))?
            .to_owned();
        gets.push(request(
            token,
            "tasks/get",
            Some(&task),
            json!({ "taskId": task }),
            true,
        ));
        statuses.push(request(
            token,
            "tools/call",
            Some("job_status"),
            json!({ "name": "job_status", "arguments": { "job_id": job } }),
            false,
        ));
        ids.push(task);
    }
    let paired = drive_paired(
        concurrency,
        duration,
        op(url.clone(), Arc::new(statuses), "tools/call"),
        op(url.clone(), Arc::new(gets), "tasks/get"),
    )
    .await;
    for task in &ids {
        let (h, b) = request(
            token,
            "tasks/cancel",
            Some(task),
            json!({ "taskId": task }),
            true,
        );
        post_mcp(&client, &url, &h, b, "tasks/cancel").await?;
    }
    Ok(paired.reports(
        "job_status_poll",
        "tasks_get",
        concurrency,
        "ratio_to_job_status",
    ))
}
