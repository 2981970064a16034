//! Bounded before authentication, fair between tenants: bodies are read only for
//! authenticated callers, within a byte budget and a deadline; concurrent requests are capped
//! with a typed refusal; one tenant's queue of long jobs cannot keep another tenant's short
//! command from running; open work is limited per caller and per project with typed,
//! retryable refusals; `list_runners` counts only the caller's own work.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use wc_e2e::server::{LocalOptions, LocalServer};
use wc_functions::AppState;
use wc_functions::config::{RequestLimits, ServerConfig, WorkQuotas};
use wc_store::credentials::{self, CredentialKind};
use wc_store::testing::TestDatabase;

use crate::common::*;

const FOUR_MIB: usize = 4 * 1024 * 1024;

/// `host:port` of a base URL `http://host:port`.
fn authority(base_url: &str) -> &str {
    base_url.trim_start_matches("http://")
}

/// Request head of a POST to `path` declaring `length` body bytes.
fn head(base_url: &str, path: &str, auth: Option<&str>, length: usize) -> String {
    let mut h = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {length}\r\n",
        authority(base_url)
    );
    if let Some(a) = auth {
        h.push_str(&format!("Authorization: {a}\r\n"));
    }
    h.push_str("\r\n");
    h
}

/// An HTTP/1.1 response read off a raw connection: status, headers (lowercased names), and
/// the JSON body.
#[derive(Debug)]
struct Raw {
    status: u16,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Raw {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one response (with a `Content-Length` body) from `stream`, failing after `limit`.
async fn read_response(stream: &mut (impl AsyncReadExt + Unpin), limit: Duration) -> Raw {
    let read = async {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_string();
                let mut lines = head.lines();
                let status: u16 = lines
                    .next()
                    .unwrap()
                    .split(' ')
                    .nth(1)
                    .unwrap()
                    .parse()
                    .unwrap();
                let headers: Vec<(String, String)> = lines
                    .filter_map(|l| l.split_once(':'))
                    .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
                    .collect();
                let length: usize = headers
                    .iter()
                    .find(|(n, _)| n == "content-length")
                    .map_or(0, |(_, v)| v.parse().unwrap());
                while buf.len() < end + 4 + length {
                    let n = stream.read(&mut chunk).await.unwrap();
                    assert!(n > 0, "connection closed inside the response body");
                    buf.extend_from_slice(&chunk[..n]);
                }
                let body =
                    serde_json::from_slice(&buf[end + 4..end + 4 + length]).unwrap_or(Value::Null);
                return Raw {
                    status,
                    headers,
                    body,
                };
            }
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "connection closed before a response");
            buf.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::time::timeout(limit, read)
        .await
        .expect("no response within the test's bound")
}

/// Resident set size of process `pid`, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/<pid>/status");
    kb * 1024
}

fn wc_local() -> PathBuf {
    wc_e2e::server::workspace_binary("wc-local")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_slow_unauthenticated_uploads_are_refused_unread_and_memory_stays_bounded() {
    let db = TestDatabase::new().await;
    let dir = tempfile::tempdir().unwrap();
    let mut opts = LocalOptions::in_dir(dir.path());
    opts.database_url = Some(db.url().expose().to_owned());
    opts.args = vec!["--no-runner".into()];
    let server = LocalServer::spawn(&wc_local(), &opts).unwrap();
    let base = server.base_url.clone();
    let pid = server.pid();
    // Warm up the paths the uploads take, so the baseline includes their one-time costs.
    let http = wc_e2e::client::Client::new();
    for _ in 0..5 {
        http.get(
            &format!("{base}/api/whoami"),
            Some("wcsk_not-a-real-token-at-all-000"),
        )
        .await
        .unwrap();
        http.get(&format!("{base}/api/whoami"), Some(&server.token))
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let baseline = rss(pid);

    // Every surface, without a token or with a wrong one.
    let targets = [
        ("/mcp", None),
        ("/mcp", Some("Bearer wcsk_not-a-real-token-at-all-000")),
        ("/api/actions/run_shell", None),
        (
            "/api/tools/call",
            Some("Bearer wcsk_not-a-real-token-at-all-001"),
        ),
        ("/api/audit/sessions", None),
        (
            "/runner/v1/poll",
            Some("Bearer wcrk_not-a-real-token-at-all-002"),
        ),
    ];
    let (done_tx, done_rx) = tokio::sync::watch::channel(false);
    let mut uploads = Vec::new();
    for n in 0..100 {
        let (path, auth) = targets[n % targets.len()];
        let base = base.clone();
        let mut done = done_rx.clone();
        uploads.push(tokio::spawn(async move {
            let mut stream = TcpStream::connect(authority(&base)).await.unwrap();
            stream
                .write_all(head(&base, path, auth, FOUR_MIB).as_bytes())
                .await
                .unwrap();
            // One kilobyte of the body, then wait for the answer before sending more: a
            // server that needed the body first would never answer.
            stream.write_all(&[b' '; 1024]).await.unwrap();
            let (mut rd, mut wr) = stream.into_split();
            let answer = read_response(&mut rd, Duration::from_secs(60)).await;
            // Then keep uploading the rest of the declared body, slowly, until told to stop
            // (never the last byte): what an attacker holding memory would do.
            let chunk = vec![b' '; 16 * 1024];
            let mut sent = 1024;
            while sent + chunk.len() < FOUR_MIB && !*done.borrow() {
                if wr.write_all(&chunk).await.is_err() {
                    break;
                }
                sent += chunk.len();
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(5)) => {}
                    _ = done.changed() => break,
                }
            }
            // Hold the connection until the memory was measured.
            while !*done.borrow() {
                if done.changed().await.is_err() {
                    break;
                }
            }
            (path, answer)
        }));
    }
    // Measure while the uploads are open and trickling.
    let mut peak = 0;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        peak = peak.max(rss(pid));
    }
    done_tx.send(true).unwrap();
    for u in uploads {
        let (path, answer) = u.await.unwrap();
        assert_eq!(answer.status, 401, "{path}: {answer:?}");
        let kind = answer.body["error"]["kind"].as_str().unwrap_or_default();
        assert!(
            kind == "unauthorized" || kind == "invalid_token",
            "{path}: {answer:?}"
        );
        assert!(answer.body["error"]["request_id"].is_string(), "{answer:?}");
    }
    let growth = peak.saturating_sub(baseline);
    println!(
        "wc-local RSS: baseline {} MB, peak during 100 slow unauthenticated uploads {} MB (growth {} MB)",
        baseline / 1_000_000,
        peak / 1_000_000,
        growth / 1_000_000
    );
    assert!(
        growth < 64 * 1024 * 1024,
        "RSS grew by {growth} bytes (baseline {baseline}, peak {peak})"
    );
    // Still serving.
    let me = http
        .get(&format!("{base}/api/whoami"), Some(&server.token))
        .await
        .unwrap();
    assert_eq!(me.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authenticated_uploads_stay_within_the_body_budget_and_memory_does_not_grow_with_their_number()
 {
    let db = TestDatabase::new().await;
    let dir = tempfile::tempdir().unwrap();
    let mut opts = LocalOptions::in_dir(dir.path());
    opts.database_url = Some(db.url().expose().to_owned());
    opts.args = vec!["--no-runner".into()];
    // A budget of eight full bodies.
    opts.env = vec![(
        "WC_MAX_BODY_BYTES_IN_FLIGHT".into(),
        (8 * FOUR_MIB).to_string(),
    )];
    let server = LocalServer::spawn(&wc_local(), &opts).unwrap();
    let base = server.base_url.clone();
    let pid = server.pid();
    let auth = format!("Bearer {}", server.token);
    // A 4 MiB REST tool call (whitespace after a complete value is still one JSON value),
    // read whole and answered. (The MCP surface's library copies a body once more into
    // buffers of its own, which the allocator keeps for reuse; REST parses the bytes read
    // here.)
    let upload = |base: String, auth: String, size: usize| async move {
        let body = json!({"tool": "list_projects", "arguments": {}}).to_string();
        let padded = format!("{body}{}", " ".repeat(size - body.len()));
        let stream = TcpStream::connect(authority(&base)).await.unwrap();
        let (mut rd, mut wr) = stream.into_split();
        let head = head(&base, "/api/tools/call", Some(&auth), padded.len());
        // A refused upload is answered before its body is read; the writer then just stops.
        let writer = tokio::spawn(async move {
            if wr.write_all(head.as_bytes()).await.is_ok() {
                let _ = wr.write_all(padded.as_bytes()).await;
            }
            wr
        });
        let answer = read_response(&mut rd, Duration::from_secs(60)).await;
        drop(writer.await);
        answer
    };
    // The same sixteen calls at once with small bodies first, so the baseline includes what
    // serving them costs once (pool connections, prepared statements, worker stacks).
    let warm: Vec<_> = (0..16)
        .map(|_| tokio::spawn(upload(base.clone(), auth.clone(), 1024)))
        .collect();
    for w in warm {
        assert_eq!(w.await.unwrap().status, 200);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut statuses = Vec::new();
    let mut peak = 0;
    let mut rounds = Vec::new();
    let baseline = rss(pid);
    for round in 0..4 {
        let batch: Vec<_> = (0..16)
            .map(|_| tokio::spawn(upload(base.clone(), auth.clone(), FOUR_MIB)))
            .collect();
        for b in batch {
            statuses.push(b.await.unwrap().status);
        }
        let now = rss(pid);
        rounds.push(now);
        peak = peak.max(now);
        println!("round {round}: RSS {} MB", now / 1_000_000);
    }
    // Sixteen at once against a budget of eight: some are refused, typed, none fails otherwise.
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 503),
        "{statuses:?}"
    );
    assert!(statuses.contains(&200), "{statuses:?}");
    assert!(
        statuses.contains(&503),
        "the budget refused nothing: {statuses:?}"
    );
    // The allocator gives freed memory back after its purge delay (mimalloc: one second),
    // when it next runs: wait past it and serve a few small requests.
    let http = wc_e2e::client::Client::new();
    let mut after = u64::MAX;
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(1200)).await;
        for _ in 0..10 {
            http.get(&format!("{base}/api/whoami"), Some(&server.token))
                .await
                .unwrap();
        }
        after = after.min(rss(pid));
        println!("idle: RSS {} MB", rss(pid) / 1_000_000);
    }
    println!(
        "wc-local RSS: baseline {} MB, peak {} MB, after {} MB; statuses 200×{} 503×{}",
        baseline / 1_000_000,
        peak / 1_000_000,
        after / 1_000_000,
        statuses.iter().filter(|s| **s == 200).count(),
        statuses.iter().filter(|s| **s == 503).count(),
    );
    // The budget bounds what is held at once (eight bodies, 32 MiB) whatever the load: 256 MiB
    // went through. The body buffers are unmapped when their requests end; what stays is
    // what the allocator keeps for reuse (connection buffers), the same after the fourth
    // round as after the first.
    assert!(
        peak.saturating_sub(baseline) < 64 * 1024 * 1024,
        "peak {peak} over baseline {baseline}"
    );
    assert!(
        after.saturating_sub(baseline) < 48 * 1024 * 1024,
        "after {after} over baseline {baseline}"
    );
    assert!(
        rounds[3].saturating_sub(rounds[0]) < 16 * 1024 * 1024,
        "memory grew with the number of uploads: {rounds:?}"
    );
}

/// A state with `limits`, served over TCP, and a shared key.
async fn served(db: &TestDatabase, limits: RequestLimits) -> (AppState, String, String) {
    let st = state_with(
        db,
        ServerConfig {
            requests: limits,
            ..ServerConfig::default()
        },
    );
    let base = serve(st.clone()).await;
    let key = full_key(db).await;
    (st, base, key)
}

#[tokio::test]
async fn a_slow_authenticated_body_is_408_with_the_json_error_body() {
    let db = TestDatabase::new().await;
    let (_st, base, key) = served(
        &db,
        RequestLimits {
            body_timeout: Duration::from_millis(300),
            ..RequestLimits::default()
        },
    )
    .await;
    for path in ["/mcp", "/api/tools/call"] {
        let mut stream = TcpStream::connect(authority(&base)).await.unwrap();
        stream
            .write_all(head(&base, path, Some(&format!("Bearer {key}")), 1000).as_bytes())
            .await
            .unwrap();
        stream.write_all(b"{\"jsonrpc\"").await.unwrap();
        let r = read_response(&mut stream, Duration::from_secs(30)).await;
        assert_eq!(r.status, 408, "{path}: {r:?}");
        assert_eq!(r.body["error"]["kind"], "request_timeout", "{r:?}");
        assert!(
            r.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("300 ms"),
            "{r:?}"
        );
        assert!(r.body["error"]["request_id"].is_string(), "{r:?}");
    }
    // An undeclared (chunked) body that stalls is timed out the same way.
    let mut stream = TcpStream::connect(authority(&base)).await.unwrap();
    let chunked = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nAuthorization: Bearer {key}\r\n\
         Transfer-Encoding: chunked\r\n\r\n5\r\n{{\"jso\r\n",
        authority(&base)
    );
    stream.write_all(chunked.as_bytes()).await.unwrap();
    let r = read_response(&mut stream, Duration::from_secs(30)).await;
    assert_eq!(r.status, 408, "{r:?}");
}

#[tokio::test]
async fn an_oversized_undeclared_body_is_refused_while_reading_and_only_for_a_known_caller() {
    let db = TestDatabase::new().await;
    let st = state_with(
        &db,
        ServerConfig {
            max_body_bytes: 4096,
            ..ServerConfig::default()
        },
    );
    let base = serve(st).await;
    let key = full_key(&db).await;
    let chunked = |auth: &str| {
        let data = " ".repeat(3000);
        format!(
            "POST /api/tools/call HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             {auth}Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{data}\r\n{:x}\r\n{data}\r\n0\r\n\r\n",
            authority(&base),
            data.len(),
            data.len()
        )
    };
    let mut stream = TcpStream::connect(authority(&base)).await.unwrap();
    stream
        .write_all(chunked(&format!("Authorization: Bearer {key}\r\n")).as_bytes())
        .await
        .unwrap();
    let r = read_response(&mut stream, Duration::from_secs(30)).await;
    assert_eq!(r.status, 413, "{r:?}");
    assert_eq!(r.body["error"]["kind"], "payload_too_large");
    let mut stream = TcpStream::connect(authority(&base)).await.unwrap();
    stream.write_all(chunked("").as_bytes()).await.unwrap();
    let r = read_response(&mut stream, Duration::from_secs(30)).await;
    assert_eq!(r.status, 401, "{r:?}");
}

#[tokio::test]
async fn requests_beyond_the_concurrency_cap_are_refused_typed_and_runners_keep_their_own() {
    let db = TestDatabase::new().await;
    let (_st, base, key) = served(
        &db,
        RequestLimits {
            max_concurrent_requests: 2,
            body_timeout: Duration::from_secs(3),
            ..RequestLimits::default()
        },
    )
    .await;
    // Two authenticated requests whose bodies have not arrived hold both places.
    let mut holders = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(authority(&base)).await.unwrap();
        s.write_all(head(&base, "/mcp", Some(&format!("Bearer {key}")), 100).as_bytes())
            .await
            .unwrap();
        holders.push(s);
    }
    let http = wc_e2e::client::Client::new();
    // Wait until both are admitted: a third request is then refused.
    let refused = eventually("a third request is refused", async || {
        let r = http
            .get(&format!("{base}/api/whoami"), Some(&key))
            .await
            .unwrap();
        (r.status == 503).then_some(r)
    })
    .await;
    let body = refused.json();
    assert_eq!(body["error"]["kind"], "unavailable", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2 concurrent requests"),
        "{body}"
    );
    assert!(body["error"]["request_id"].is_string());
    assert_eq!(
        refused
            .headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    // The runner API is admitted apart: a runner still reaches authentication.
    let runner = http
        .post_json(
            &format!("{base}/runner/v1/poll"),
            Some("wcrk_not-a-real-token-at-all-000"),
            &json!({}),
        )
        .await
        .unwrap();
    assert_eq!(runner.status, 401);
    // The holders end (their bodies time out: 408), and the places are free again.
    for mut h in holders {
        let r = read_response(&mut h, Duration::from_secs(30)).await;
        assert_eq!(r.status, 408, "{r:?}");
    }
    let r = http
        .get(&format!("{base}/api/whoami"), Some(&key))
        .await
        .unwrap();
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn bodies_beyond_the_byte_budget_are_refused_typed_before_they_are_read() {
    let db = TestDatabase::new().await;
    let st = state_with(
        &db,
        ServerConfig {
            max_body_bytes: 4096,
            requests: RequestLimits {
                max_body_bytes_in_flight: 8192,
                body_timeout: Duration::from_secs(3),
                ..RequestLimits::default()
            },
            ..ServerConfig::default()
        },
    );
    let base = serve(st.clone()).await;
    let key = full_key(&db).await;
    let auth = format!("Bearer {key}");
    // Two uploads of a full body each, not yet complete, hold the whole budget.
    let mut holders = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(authority(&base)).await.unwrap();
        s.write_all(head(&base, "/mcp", Some(&auth), 4096).as_bytes())
            .await
            .unwrap();
        s.write_all(b"{").await.unwrap();
        holders.push(s);
    }
    eventually("the holders reserve their bodies", async || {
        (st.admission.body_bytes_held() >= 8192).then_some(())
    })
    .await;
    let mut third = TcpStream::connect(authority(&base)).await.unwrap();
    third
        .write_all(head(&base, "/mcp", Some(&auth), 10).as_bytes())
        .await
        .unwrap();
    let r = read_response(&mut third, Duration::from_secs(30)).await;
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(r.body["error"]["kind"], "unavailable");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("8192"),
        "{r:?}"
    );
    assert_eq!(r.header("retry-after"), Some("1"));
    for mut h in holders {
        assert_eq!(
            read_response(&mut h, Duration::from_secs(30)).await.status,
            408
        );
    }
    // Everything was given back.
    assert_eq!(st.admission.body_bytes_held(), 0);
}

// ---------------------------------------------------------------------------------------------
// Work between tenants

const A: &str = "agent:local:alpha";
const B: &str = "agent:local:beta";

/// `POST /api/actions/{tool}` with `key`; the `{success, output, error}` body and the status.
async fn act(st: &AppState, key: &str, tool: &str, args: Value) -> (StatusCode, Value) {
    let r = rest_call(st, key, tool, args).await;
    (r.status, r.body)
}

/// Queues a long job (`sleep 60`) in project A for `key`'s caller.
async fn queue_sleep(st: &AppState, key: &str) -> (StatusCode, Value) {
    act(
        st,
        key,
        "run_job",
        json!({ "project": A, "command": "sleep 60" }),
    )
    .await
}

async fn open_work(db: &TestDatabase, project: &str) -> (i64, i64) {
    let c = db.pool().get().await.unwrap();
    let r = c
        .query_one(
            "SELECT count(*) FILTER (WHERE state = 'queued'), count(*) FILTER (WHERE state = 'leased') \
             FROM runner_work WHERE project_id = $1",
            &[&project],
        )
        .await
        .unwrap();
    (r.get(0), r.get(1))
}

/// Two tenants (their own authority groups), each with a project-scoped credential for its
/// own project; both projects are served by one runner with the default four slots.
struct Tenants {
    db: TestDatabase,
    st: AppState,
    a: String,
    b: String,
    _roots: (tempfile::TempDir, tempfile::TempDir),
    runner: TestRunner,
}

impl Tenants {
    async fn start(config: ServerConfig) -> Tenants {
        let TestApp { db, st, .. } = TestApp::with_config(&[A, B], config).await;
        let scopes = ["project:read", "project:write"];
        let a = credential_in_group(
            &db,
            CredentialKind::Project,
            &scopes,
            &[A],
            Some("tenant-a"),
        )
        .await;
        let b = credential_in_group(
            &db,
            CredentialKind::Project,
            &scopes,
            &[B],
            Some("tenant-b"),
        )
        .await;
        let roots = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let runner = TestRunner::start(
            &db,
            &st,
            "local",
            &[("alpha", roots.0.path()), ("beta", roots.1.path())],
        )
        .await;
        Tenants {
            db,
            st,
            a,
            b,
            _roots: roots,
            runner,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_tenants_echo_runs_while_the_first_has_fifty_long_jobs_queued() {
    let t = Tenants::start(ServerConfig::default()).await;
    for n in 0..50 {
        let (status, body) = queue_sleep(&t.st, &t.a).await;
        assert_eq!(status, StatusCode::OK, "job {n}: {body}");
    }
    // Tenant a's jobs fill what a tenant may take of the runner: three of four slots.
    eventually("three of a's jobs start", async || {
        (open_work(&t.db, A).await.1 >= 3).then_some(())
    })
    .await;
    let started = Instant::now();
    let (status, body) = act(
        &t.st,
        &t.b,
        "run_shell",
        json!({ "project": B, "command": "echo hello from b" }),
    )
    .await;
    let latency = started.elapsed();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["success"], true, "{body}");
    assert_eq!(body["output"]["execution_state"], "succeeded", "{body}");
    assert!(
        body["output"]["stdout"]
            .as_str()
            .unwrap()
            .contains("hello from b"),
        "{body}"
    );
    // Ordering, not time: b's command reached its end while a still had work queued, and a
    // never held more than its share.
    let (queued, leased) = open_work(&t.db, A).await;
    assert!(queued >= 40, "a's queue: {queued} queued");
    assert_eq!(leased, 3, "a holds three slots");
    println!(
        "tenant b's echo answered in {} ms with 50 of tenant a's long jobs queued",
        latency.as_millis()
    );

    // Each tenant's list_runners counts its own work in flight only.
    let (_, listed) = act(&t.st, &t.a, "list_runners", json!({})).await;
    assert_eq!(
        output(&listed)["runners"][0]["work_in_flight"],
        3,
        "{listed}"
    );
    let (_, listed) = act(&t.st, &t.b, "list_runners", json!({})).await;
    assert_eq!(
        output(&listed)["runners"][0]["work_in_flight"],
        0,
        "{listed}"
    );
    let (_, status_b) = act(&t.st, &t.b, "runtime_status", json!({})).await;
    assert_eq!(
        output(&status_b)["runners"]["work_in_flight"],
        0,
        "{status_b}"
    );
    t.runner.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_work_beyond_a_callers_or_a_projects_limit_is_refused_typed_with_a_retry_after() {
    let t = Tenants::start(ServerConfig {
        work: WorkQuotas {
            max_open_per_caller: 3,
            max_open_per_project: 4,
            ..WorkQuotas::default()
        },
        ..ServerConfig::default()
    })
    .await;
    // A shared key in a third group can reach project A as well.
    let op = full_key(&t.db).await;
    for _ in 0..3 {
        let (status, body) = queue_sleep(&t.st, &t.a).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (status, body) = queue_sleep(&t.st, &t.a).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["success"], false);
    assert_eq!(body["error"]["kind"], "rate_limited", "{body}");
    assert_eq!(body["error"]["retry_after_ms"], 5000, "{body}");
    assert_eq!(body["error"]["limit"], 3, "{body}");
    assert_eq!(body["error"]["open_work"], 3, "{body}");
    // On MCP the refusal is the same typed tool error, with isError.
    let r = tools_call(
        &t.st,
        LEGACY[0],
        Some(&t.a),
        "run_job",
        json!({ "project": A, "command": "sleep 60" }),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let result = r.result();
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(
        result["structuredContent"]["error"]["kind"], "rate_limited",
        "{result}"
    );
    assert_eq!(
        result["structuredContent"]["error"]["retry_after_ms"], 5000,
        "{result}"
    );
    // A synchronous command is refused the same way, before anything is queued.
    let (_, body) = act(
        &t.st,
        &t.a,
        "run_shell",
        json!({ "project": A, "command": "echo no" }),
    )
    .await;
    assert_eq!(body["error"]["kind"], "rate_limited", "{body}");
    // Another caller fits once more in project A, then the project is full.
    let (status, body) = queue_sleep(&t.st, &op).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = queue_sleep(&t.st, &op).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["error"]["kind"], "queue_full", "{body}");
    assert_eq!(body["error"]["retry_after_ms"], 5000, "{body}");
    assert_eq!(body["error"]["limit"], 4, "{body}");
    // Project B is another queue: tenant b is not affected.
    let (_, body) = act(
        &t.st,
        &t.b,
        "run_shell",
        json!({ "project": B, "command": "echo yes" }),
    )
    .await;
    assert_eq!(body["success"], true, "{body}");
    let (queued, leased) = open_work(&t.db, A).await;
    assert_eq!(queued + leased, 4, "refusals queued nothing");
    // Once a's work ends, a may queue again. Each job is stopped by its own caller (the
    // other caller's stop_job does not see it).
    let c = t.db.pool().get().await.unwrap();
    let ids: Vec<String> = c
        .query(
            "SELECT id::text FROM runner_work WHERE project_id = $1 AND state IN ('queued', 'leased')",
            &[&A],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    for id in ids {
        let (_, by_a) = act(&t.st, &t.a, "stop_job", json!({ "job_id": id })).await;
        let (_, by_op) = act(&t.st, &op, "stop_job", json!({ "job_id": id })).await;
        assert!(
            (by_a["success"] == true) != (by_op["success"] == true),
            "exactly one owner stops {id}: {by_a} {by_op}"
        );
    }
    eventually("the stopped work ends", async || {
        (open_work(&t.db, A).await == (0, 0)).then_some(())
    })
    .await;
    let (status, body) = act(
        &t.st,
        &t.a,
        "run_shell",
        json!({ "project": A, "command": "echo again" }),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["success"], true, "{body}");
    t.runner.stop().await.unwrap();
}

#[tokio::test]
async fn a_delivered_work_id_over_its_callers_share_of_the_runner_is_answered_rate_limited() {
    let db = TestDatabase::new().await;
    let base = serve(state(&db)).await;
    let secret = runner_token(&db, "host").await;
    let api = RunnerApi::new(&base, &secret);
    let call = |op: &'static str, body: Value| {
        let api = api.clone();
        async move { api.post(op, &body).await }
    };
    // Two slots: with one reserved, a caller runs one item at a time on this runner.
    let instance = uuid::Uuid::now_v7();
    let r = call(
        "register",
        json!({
            "protocol_version": wc_runner_protocol::PROTOCOL_VERSION,
            "instance_id": instance,
            "projects": ["web"],
            "agent_version": "test",
            "queue": "sqs",
            "max_concurrency": 2,
        }),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let sqs = || wc_store::work::QueueRoute::Sqs {
        queue_url: "http://sqs.local/q".into(),
    };
    let queue = |owner: char| {
        // A valid item (the runner API hands it to a claimant), its id the row's.
        let w = wc_store::work::NewWork {
            owner_authority_fingerprint: owner.to_string().repeat(64),
            ..wc_store::testing::runner_work::new_work("host", sqs())
        };
        let pool = db.pool().clone();
        async move { wc_store::testing::runner_work::enqueue(&pool, &w).await }
    };
    let (a1, a2, b1) = (queue('a').await, queue('a').await, queue('b').await);
    let claim = |id: uuid::Uuid| call("claim", json!({ "instance_id": instance, "work_id": id }));
    let r = claim(a1).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["status"], "claimed");
    let r = claim(a2).await;
    assert_eq!(r.status, 429, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["error"]["kind"], "rate_limited");
    assert!(r.headers.contains_key("retry-after"));
    // Another caller's delivery takes the reserved slot.
    let r = claim(b1).await;
    assert_eq!(
        r.json()["status"],
        "claimed",
        "{}",
        String::from_utf8_lossy(&r.body)
    );
}

// ---------------------------------------------------------------------------------------------
// One caller at every bound, another unaffected

/// The authority group of the credential `key`.
async fn hog_group(db: &TestDatabase, key: &str) -> String {
    let client = db.pool().get().await.unwrap();
    let digest = wc_functions::auth::token::digest(key);
    credentials::find_active_by_digest(&client, &digest)
        .await
        .unwrap()
        .expect("the credential")
        .authority_group
}

/// `GET /api/whoami` with `key`.
fn whoami(key: &str) -> axum::http::Request<axum::body::Body> {
    axum::http::Request::get("/api/whoami")
        .header("authorization", format!("Bearer {key}"))
        .body(axum::body::Body::empty())
        .unwrap()
}

/// A `subscriptions/listen` for `task_ids` by `key`: the whole reply (the stream ends by itself,
/// when the tasks end or after `listen_max`).
async fn listen(st: &AppState, key: &str, task_ids: Value) -> Reply {
    let mut body = rpc(
        MODERN,
        31,
        "subscriptions/listen",
        json!({ "notifications": { "taskIds": task_ids } }),
    );
    body["params"]["_meta"] = declaring();
    send(st, mcp_request(MODERN, Some(key), &body)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_caller_at_every_bound_leaves_another_callers_calls_untouched() {
    let config = ServerConfig {
        requests: RequestLimits {
            max_concurrent_requests_per_caller: 3,
            max_listen_streams_per_caller: 2,
            ..RequestLimits::default()
        },
        work: WorkQuotas {
            max_open_per_caller: 4,
            max_shells_per_caller: 2,
            ..WorkQuotas::default()
        },
        listen_max: Duration::from_secs(4),
        ..ServerConfig::default()
    };
    let env = RunnerApp::start_with("alpha", config).await;
    let (db, st) = (&env.db, &env.st);
    let scopes = ALL_SCOPES;
    let hog = credential_in_group(db, CredentialKind::Project, &scopes, &[A], None).await;
    let other = credential_in_group(db, CredentialKind::Project, &scopes, &[A], None).await;
    let session = async |key: &str| -> String {
        let args = json!({ "project": A, "instruction": "bounds" });
        let r = mcp_tool(st, key, "start_session", args).await;
        output(&r)["session_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{r}"))
            .to_owned()
    };
    let shell = async |key: &str, s: &str| -> Value {
        mcp_tool(st, key, "open_session_shell", json!({ "session_id": s })).await
    };
    // The other caller's calls, all of which must succeed whatever the hog holds.
    let other_calls = async || {
        let s = session(&other).await;
        let r = shell(&other, &s).await;
        assert_eq!(r["success"], true, "the other caller's shell: {r}");
        let r = mcp_tool(
            st,
            &other,
            "close_session_shell",
            json!({ "session_id": s, "shell_id": r["output"]["shell_id"] }),
        )
        .await;
        assert_eq!(r["success"], true, "{r}");
        let r = mcp_tool(
            st,
            &other,
            "run_process",
            json!({ "project": A, "argv": ["echo", "fine"] }),
        )
        .await;
        assert_eq!(
            output(&r)["stdout"],
            "fine\n",
            "the other caller's job: {r}"
        );
        let who = send(st, whoami(&other)).await;
        assert_eq!(who.status, 200, "{}", who.text());
    };

    // Shells: two open, the third refused typed.
    for _ in 0..2 {
        let s = session(&hog).await;
        assert_eq!(shell(&hog, &s).await["success"], true);
    }
    let s = session(&hog).await;
    let r = shell(&hog, &s).await;
    assert_eq!(r["error"]["kind"], "limit_exceeded", "{r}");
    assert_eq!(r["error"]["open_shells"], 2, "{r}");
    other_calls().await;

    // Work: four long jobs queued or running (two are tasks), the fifth refused typed.
    let mut tasks = Vec::new();
    for n in 0..4 {
        let args = json!({ "project": A, "command": "sleep 30" });
        if n < 2 {
            let made = call_as_task(st, &hog, "run_job", args).await;
            tasks.push(made["taskId"].as_str().unwrap().to_owned());
        } else {
            let r = mcp_tool(st, &hog, "run_job", args).await;
            assert_eq!(r["success"], true, "{r}");
        }
    }
    let r = mcp_tool(
        st,
        &hog,
        "run_job",
        json!({ "project": A, "command": "sleep 30" }),
    )
    .await;
    assert_eq!(r["error"]["kind"], "rate_limited", "{r}");
    other_calls().await;

    // Listen streams: two held open, the third refused; then its requests: a third in
    // progress, the fourth refused.
    let streams: Vec<_> = (0..2)
        .map(|_| {
            let (st, hog, ids) = (st.clone(), hog.clone(), json!(tasks));
            tokio::spawn(async move { listen(&st, &hog, ids).await })
        })
        .collect();
    let group = hog_group(db, &hog).await;
    eventually("both streams are open", async || {
        (st.admission.caller_load(&group) == (2, 2)).then_some(())
    })
    .await;
    let refused = listen(st, &hog, json!(tasks)).await;
    assert_eq!(refused.status, 429, "{}", refused.text());
    let body: Value = serde_json::from_str(&refused.text()).unwrap();
    assert_eq!(body["error"]["kind"], "rate_limited", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("listen"),
        "{body}"
    );
    assert_eq!(refused.headers["retry-after"], "1");
    // A call that waits for new messages holds its place for as long as it waits.
    let seen = mcp_tool(
        st,
        &hog,
        "observe_session_messages",
        json!({ "session_id": s }),
    )
    .await;
    let token = output(&seen)["token"].as_str().expect("a token").to_owned();
    let slow = {
        let (st, hog, s) = (st.clone(), hog.clone(), s.clone());
        tokio::spawn(async move {
            let args = json!({ "session_id": s, "token": token, "wait_ms": 3000 });
            mcp_tool(&st, &hog, "observe_session_messages", args).await
        })
    };
    eventually("the slow call is in progress", async || {
        (st.admission.caller_load(&group) == (3, 2)).then_some(())
    })
    .await;
    let refused = send(st, whoami(&hog)).await;
    assert_eq!(refused.status, 429, "{}", refused.text());
    let body: Value = serde_json::from_str(&refused.text()).unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("requests in progress"),
        "{body}"
    );
    other_calls().await;
    for s in streams {
        assert_eq!(
            s.await.unwrap().status,
            200,
            "a held listen stream ends normally"
        );
    }
    assert_eq!(slow.await.unwrap()["success"], true);
    // Its places are given back as its streams end.
    let who = send(st, whoami(&hog)).await;
    assert_eq!(who.status, 200, "{}", who.text());
}
