//! The file tools over stateless MCP, through the Postgres queue to the embedded runner of
//! `wc-local` and back: `read_files` of one 4 KB file, and `apply_text_edits` of one file per
//! worker. The runner answers both in its own process (no job is started), so these round
//! trips are the queue's and the server's cost with little work at the end.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use wc_store::Pool;

use super::mcp::{call_tool_ok, mcp_request, post_mcp};
use super::{OpFuture, Samples, drive, percentile_ms, report, round, runner};
use crate::client::Client;

/// The file `read_files_roundtrip` reads, relative to the project root.
pub const READ_PATH: &str = "bench-files/read/sample.rs";

/// Size of that file in bytes.
pub const READ_BYTES: usize = 4096;

/// Directory of the files `apply_text_edits_roundtrip` edits, one per worker.
const EDIT_DIR: &str = "bench-files/edit";

/// The line an edit flips between its two states.
const EDIT_EVEN: &str = "state = even\n";
const EDIT_ODD: &str = "state = odd\n";

/// Exactly `bytes` of source-like text: numbered lines, each ending in a newline.
pub fn sample_text(bytes: usize) -> String {
    let mut text = String::with_capacity(bytes + 64);
    let mut n = 0;
    while text.len() < bytes {
        text.push_str(&format!(
            "    let value_{n} = compute_{n}(input, {n}); // keeps line {n}\n"
        ));
        n += 1;
    }
    text.truncate(bytes - 1);
    text.push('\n');
    text
}

/// Writes the file `read_files_roundtrip` reads under the project root `root`.
pub fn prepare_read(root: &Path) -> std::io::Result<()> {
    let path = root.join(READ_PATH);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, sample_text(READ_BYTES))
}

/// A tools/call with the bearer token: headers and body.
fn tool_call(token: &str, name: &str, arguments: Value) -> (Arc<Vec<(String, String)>>, Vec<u8>) {
    let (mut headers, body) = mcp_request(
        "tools/call",
        Some(name),
        json!({ "name": name, "arguments": arguments }),
    );
    headers.push(("authorization".to_owned(), format!("Bearer {token}")));
    (Arc::new(headers), body)
}

/// Adds `p90_ms` to a run's extra fields.
fn with_p90(samples: &mut Samples) {
    let mut sorted = samples.latencies.clone();
    sorted.sort_by(f64::total_cmp);
    samples
        .extra
        .insert("p90_ms".into(), json!(round(percentile_ms(&sorted, 0.90))));
}

/// The `tools/call` of `read_files` on [`READ_PATH`] in `project`.
fn read_call(token: &str, project: &str) -> (Arc<Vec<(String, String)>>, hyper::body::Bytes) {
    let (headers, body) = tool_call(
        token,
        "read_files",
        json!({ "project": project, "files": [{ "path": READ_PATH }] }),
    );
    (headers, hyper::body::Bytes::from(body))
}

/// `read_files_roundtrip` at one concurrency: every call reads the whole of [`READ_PATH`]
/// (written by [`prepare_read`]); the line carries p90 and the queue breakdown of
/// [`runner::breakdown`].
pub async fn read_roundtrip(
    base: &str,
    token: &str,
    project: &str,
    pool: &Pool,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<Value> {
    let client = Client::new();
    let url = Arc::new(format!("{base}/mcp"));
    let (headers, body) = read_call(token, project);
    // One checked call first: the reply must hold the file, whole.
    let (reply, _) = post_mcp(&client, &url, &headers, body.clone(), "tools/call").await?;
    read_whole(&reply)?;
    let since = chrono::Utc::now();
    let clock = runner::CallClock::default();
    let calls = clock.clone();
    let (mut samples, _) = drive(concurrency, duration, move |_| {
        let (client, url, headers, body) =
            (client.clone(), url.clone(), headers.clone(), body.clone());
        let calls = calls.clone();
        async move {
            let sent = chrono::Utc::now();
            call_tool_ok(&client, &url, &headers, body).await?;
            record(&calls, sent);
            Ok(vec![])
        }
    })
    .await;
    samples.extra.insert("file_bytes".into(), json!(READ_BYTES));
    finish(&mut samples, pool, since, concurrency, &clock).await?;
    Ok(report("read_files_roundtrip", concurrency, samples))
}

/// Whether `reply` holds the whole of [`READ_PATH`].
fn read_whole(reply: &Value) -> anyhow::Result<()> {
    let file = &reply["result"]["structuredContent"]["output"]["files"][0];
    anyhow::ensure!(
        file["size"] == json!(READ_BYTES)
            && file["content"]["text"].as_str().map(str::len) == Some(READ_BYTES),
        "read_files did not answer the {READ_BYTES}-byte file: {reply}"
    );
    Ok(())
}

/// One `read_files` of [`READ_PATH`] (written by [`prepare_read`]) on the server at `base`,
/// which must answer the file whole: the operation of a paired `read_files_roundtrip`.
pub fn read_op(
    base: &str,
    token: &str,
    project: &str,
) -> impl Fn(usize) -> OpFuture + Send + Sync + 'static {
    let client = Client::new();
    let url = Arc::new(format!("{base}/mcp"));
    let (headers, body) = read_call(token, project);
    move |_| {
        let (client, url, headers, body) =
            (client.clone(), url.clone(), headers.clone(), body.clone());
        Box::pin(async move {
            let (reply, _) = post_mcp(&client, &url, &headers, body, "tools/call").await?;
            read_whole(&reply)?;
            Ok(vec![])
        })
    }
}

/// Adds the call that went out at `sent` and has just been answered to `calls`.
fn record(calls: &runner::CallClock, sent: chrono::DateTime<chrono::Utc>) {
    let answered = chrono::Utc::now();
    calls
        .lock()
        .expect("call clock")
        .push(runner::CallTimes { sent, answered });
}

/// Adds p90, the queue breakdown of [`runner::breakdown`] and, for a single caller, each
/// stage's p50 ([`runner::stages`]) to a run's line.
async fn finish(
    samples: &mut Samples,
    pool: &Pool,
    since: chrono::DateTime<chrono::Utc>,
    concurrency: usize,
    clock: &runner::CallClock,
) -> anyhow::Result<()> {
    with_p90(samples);
    samples.extra.extend(runner::breakdown(pool, since).await?);
    if concurrency == 1 {
        let calls = clock.lock().expect("call clock").clone();
        if let Some(stages) = runner::stages(pool, since, &calls).await? {
            samples.extra.insert("stages_p50_ms".into(), stages);
        }
    }
    Ok(())
}

/// Whether the server at `base` offers the tool `name` to this token (`tools/list`).
pub async fn has_tool(base: &str, token: &str, name: &str) -> anyhow::Result<bool> {
    let client = Client::new();
    let (mut headers, body) = mcp_request("tools/list", None, json!({}));
    headers.push(("authorization".to_owned(), format!("Bearer {token}")));
    let url = format!("{base}/mcp");
    let (reply, _) = post_mcp(&client, &url, &headers, body.into(), "tools/list").await?;
    let tools = reply["result"]["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    Ok(tools.iter().any(|t| t["name"] == json!(name)))
}

/// The SHA-256 a successful `apply_text_edits` reply gives for the file's new content.
fn edited_sha256(reply: &Value) -> Option<String> {
    reply["result"]["structuredContent"]["output"]["sha256"]
        .as_str()
        .map(str::to_owned)
}

/// One worker's file: its path, the SHA-256 of its content as the last edit left it, and
/// whether the flipped line now reads even.
struct EditedFile {
    path: String,
    sha256: String,
    even: bool,
}

/// `apply_text_edits_roundtrip` at one concurrency. Each worker edits its own file under
/// [`EDIT_DIR`] (4 KB and a line flipping between `state = even` and `state = odd`), passing
/// the SHA-256 the previous edit answered as `expected_sha256`: a caller that keeps its
/// content's hash needs no read before an edit, and the runner still compares before it
/// writes. The first hash comes from one `read_files` per worker before the clock starts.
pub async fn edit_roundtrip(
    base: &str,
    token: &str,
    project: &str,
    root: &Path,
    pool: &Pool,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<Value> {
    let client = Client::new();
    let url = Arc::new(format!("{base}/mcp"));
    std::fs::create_dir_all(root.join(EDIT_DIR))?;
    let mut files = Vec::with_capacity(concurrency);
    for worker in 0..concurrency {
        let path = format!("{EDIT_DIR}/c{concurrency}-w{worker}.txt");
        std::fs::write(
            root.join(&path),
            format!("{}{EDIT_EVEN}", sample_text(READ_BYTES)),
        )?;
        let (headers, body) = tool_call(
            token,
            "read_files",
            json!({ "project": project, "files": [{ "path": path }] }),
        );
        let (reply, _) = post_mcp(&client, &url, &headers, body.into(), "tools/call").await?;
        let sha256 = reply["result"]["structuredContent"]["output"]["files"][0]["sha256"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("read_files gave no sha256: {reply}"))?
            .to_owned();
        files.push(Mutex::new(EditedFile {
            path,
            sha256,
            even: true,
        }));
    }
    let files = Arc::new(files);
    let (token, project) = (token.to_owned(), project.to_owned());
    let since = chrono::Utc::now();
    let clock = runner::CallClock::default();
    let calls = clock.clone();
    let (mut samples, _) = drive(concurrency, duration, move |worker| {
        let (client, url, files) = (client.clone(), url.clone(), files.clone());
        let (token, project, calls) = (token.clone(), project.clone(), calls.clone());
        async move {
            // Each worker runs its calls one after another: the lock is never contended.
            let (path, sha256, even) = {
                let f = files[worker].lock().expect("edited file state");
                (f.path.clone(), f.sha256.clone(), f.even)
            };
            let (old, new) = if even {
                (EDIT_EVEN, EDIT_ODD)
            } else {
                (EDIT_ODD, EDIT_EVEN)
            };
            let (headers, body) = tool_call(
                &token,
                "apply_text_edits",
                json!({
                    "project": project,
                    "path": path,
                    "edits": [{ "old_text": old, "new_text": new }],
                    "expected_sha256": sha256,
                }),
            );
            let sent = chrono::Utc::now();
            let (reply, _) = post_mcp(&client, &url, &headers, body.into(), "tools/call").await?;
            record(&calls, sent);
            anyhow::ensure!(
                reply["result"]["structuredContent"]["success"] == json!(true),
                "apply_text_edits failed: {reply}"
            );
            let sha256 = edited_sha256(&reply)
                .ok_or_else(|| anyhow::anyhow!("apply_text_edits gave no sha256: {reply}"))?;
            let mut f = files[worker].lock().expect("edited file state");
            f.sha256 = sha256;
            f.even = !even;
            Ok(vec![])
        }
    })
    .await;
    finish(&mut samples, pool, since, concurrency, &clock).await?;
    Ok(report("apply_text_edits_roundtrip", concurrency, samples))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_text_has_the_size_asked_and_ends_a_line() {
        for bytes in [1, 2, 100, READ_BYTES] {
            let text = sample_text(bytes);
            assert_eq!(text.len(), bytes);
            assert!(text.ends_with('\n'));
        }
    }

    #[test]
    fn an_edit_reply_gives_the_new_sha256_of_its_output() {
        let reply = json!({ "result": { "structuredContent": { "output": { "sha256": "ab" } } } });
        assert_eq!(edited_sha256(&reply).as_deref(), Some("ab"));
        assert_eq!(edited_sha256(&json!({ "result": {} })), None);
    }
}
