//! Results tell the truth: a command refused before start, one that outlived its timeout and
//! one that exited non-zero are failures, never `success: true`. The probe's exact cases,
//! against a real `wc-local` (its embedded runner running real processes) over HTTP, on REST
//! and on MCP.

use axum::http::Method;
use serde_json::{Value, json};
use wc_e2e::client::Client;
use wc_e2e::server::{LocalOptions, LocalServer, workspace_binary};
use wc_store::testing::TestDatabase;

use crate::common::{MODERN, output, rpc};

/// The project `wc-local` serves.
const P: &str = "agent:local:alpha";

/// A `wc-local` serving one project directory from its own database.
struct Local {
    server: LocalServer,
    client: Client,
    root: std::path::PathBuf,
    _db: TestDatabase,
    _dir: tempfile::TempDir,
}

impl Local {
    async fn start() -> Local {
        let db = TestDatabase::empty().await;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("proj");
        std::fs::create_dir_all(&root).unwrap();
        let mut opts = LocalOptions::in_dir(dir.path());
        opts.database_url = Some(db.url().expose().to_owned());
        opts.args = vec!["--project".into(), format!("alpha={}", root.display())];
        let server = LocalServer::spawn(&workspace_binary("wc-local"), &opts).unwrap();
        Local {
            server,
            client: Client::new(),
            root: root.canonicalize().unwrap(),
            _db: db,
            _dir: dir,
        }
    }

    /// `POST /api/actions/{tool}`: (status, body).
    async fn rest(&self, tool: &str, args: Value) -> (u16, Value) {
        let reply = self
            .client
            .post_json(
                &format!("{}/api/actions/{tool}", self.server.base_url),
                Some(&self.server.token),
                &args,
            )
            .await
            .unwrap();
        (reply.status, reply.json())
    }

    /// An MCP `tools/call` as a 2026-07-28 client sends it: the JSON-RPC result.
    async fn mcp(&self, tool: &str, args: Value) -> Value {
        let body = rpc(
            MODERN,
            1,
            "tools/call",
            json!({ "name": tool, "arguments": args }),
        );
        let auth = format!("Bearer {}", self.server.token);
        let reply = self
            .client
            .send(
                Method::POST,
                &format!("{}/mcp", self.server.base_url),
                &[
                    ("content-type", "application/json"),
                    ("accept", "application/json, text/event-stream"),
                    ("mcp-protocol-version", MODERN),
                    ("mcp-method", "tools/call"),
                    ("mcp-name", tool),
                    ("authorization", &auth),
                ],
                serde_json::to_vec(&body).unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(
            reply.status,
            200,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
        reply.json()["result"].clone()
    }

    /// `tool` on both surfaces: each must be a failure of `kind`. Returns the REST body, whose
    /// `output` a test may still read: an execution that ended without success carries it.
    async fn refused_on_both(&self, tool: &str, args: Value, kind: &str, status: u16) -> Value {
        let (got, body) = self.rest(tool, args.clone()).await;
        assert_eq!(body["success"], false, "REST {tool} {args}: {body}");
        assert_eq!(body["error"]["kind"], kind, "REST {tool} {args}: {body}");
        assert_eq!(got, status, "REST {tool} {args}: {body}");
        let result = self.mcp(tool, args.clone()).await;
        assert_eq!(result["isError"], true, "MCP {tool} {args}: {result}");
        let sc = &result["structuredContent"];
        assert_eq!(sc["success"], false, "MCP {tool} {args}: {result}");
        assert_eq!(sc["error"]["kind"], kind, "MCP {tool} {args}: {result}");
        body
    }
}

#[tokio::test]
async fn refused_timed_out_and_non_zero_runs_are_failures_on_rest_and_mcp() {
    let local = Local::start().await;

    // cwd `../..`: refused by name before anything is queued (nothing ran anywhere).
    for tool in ["run_shell", "run_process"] {
        let args = match tool {
            "run_shell" => json!({ "project": P, "command": "touch escaped", "cwd": "../.." }),
            _ => json!({ "project": P, "argv": ["touch", "escaped"], "cwd": "../.." }),
        };
        let body = local
            .refused_on_both(tool, args, "invalid_arguments", 400)
            .await;
        assert_eq!(body["error"]["pointer"], "/cwd", "{body}");
    }
    // The same escape through a symlink reaches the runner, which refuses it before start.
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), local.root.join("up")).unwrap();
    let body = local
        .refused_on_both(
            "run_shell",
            json!({ "project": P, "command": "touch escaped", "cwd": "up" }),
            "execution_rejected",
            200,
        )
        .await;
    assert_eq!(body["output"]["execution_state"], "rejected", "{body}");
    for dir in [
        local.root.parent().unwrap(),
        outside.path(),
        local.root.as_path(),
    ] {
        assert!(
            !dir.join("escaped").exists(),
            "a refused command ran in {}",
            dir.display()
        );
    }

    // A timeout: a failure that still says what the process wrote before it was stopped.
    let body = local
        .refused_on_both(
            "run_shell",
            json!({ "project": P, "command": "echo begun; exec sleep 30", "timeout_ms": 500 }),
            "timed_out",
            200,
        )
        .await;
    assert_eq!(body["output"]["stdout"], "begun\n", "{body}");
    assert_eq!(body["output"]["execution_state"], "timed_out", "{body}");

    // `exit 7`: a failure carrying the exit code and the output.
    let body = local
        .refused_on_both(
            "run_shell",
            json!({ "project": P, "command": "echo seven; exit 7" }),
            "exit_nonzero",
            200,
        )
        .await;
    assert_eq!(
        (&body["output"]["exit_code"], &body["output"]["stdout"]),
        (&json!(7), &json!("seven\n")),
        "{body}"
    );
    assert_eq!(body["error"]["exit_code"], 7, "{body}");

    // An expected failure is still a failure: result_expectation only classifies it.
    let body = local
        .refused_on_both(
            "run_shell",
            json!({ "project": P, "command": "exit 7", "result_expectation": "failure" }),
            "exit_nonzero",
            200,
        )
        .await;
    assert_eq!(body["output"]["expectation"]["matched"], true, "{body}");

    // And an ordinary run is still a success on both surfaces.
    let (status, body) = local
        .rest("run_shell", json!({ "project": P, "command": "echo fine" }))
        .await;
    assert_eq!((status, &body["success"]), (200, &json!(true)), "{body}");
    let result = local
        .mcp("run_shell", json!({ "project": P, "command": "echo fine" }))
        .await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(output(&result["structuredContent"])["stdout"], "fine\n");
}
