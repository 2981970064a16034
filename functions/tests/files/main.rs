//! The file tools end to end: real Postgres, the real router on both surfaces, the real
//! runner agent in-process, a real project tree and Git repository made by each test.

#[path = "../common/mod.rs"]
mod common;

mod checkpoints;
mod cleanup;
mod edit;
mod evidence;
mod explore;
mod instances;
mod refusals;
mod telemetry;
mod validation;
mod worktrees;

use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::{Value, json};
use wc_functions::AppState;

/// The project every test works in.
const P: &str = "agent:local:alpha";

/// Project P served by a connected runner, its root holding [`fixture`].
async fn start() -> RunnerApp {
    let env = RunnerApp::start("alpha").await;
    fixture(&env.root());
    env
}

/// A small Rust crate in a Git repository: a `.gitignore`d build directory, a nested module,
/// a binary file, a symlink that points outside the root, and an instruction file.
fn fixture(root: &Path) {
    let write = |path: &str, text: &[u8]| {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write(
        "Cargo.toml",
        b"[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    write(".gitignore", b"/target\n");
    write("AGENTS.md", b"# Demo\nRun cargo test before committing.\n");
    write(
        "src/lib.rs",
        b"pub mod util;\n\npub fn answer() -> u32 {\n    42\n}\n",
    );
    write(
        "src/util/mod.rs",
        b"pub fn double(x: u32) -> u32 {\n    x * 2\n}\n",
    );
    write("target/debug/build.log", b"answer ignored\n");
    write("assets/logo.bin", b"\x89PNG\0\0\0binary answer");
    std::os::unix::fs::symlink("/etc", root.join("escape")).unwrap();
    git(root, &["init", "-q", "-b", "main"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "initial"]);
}

/// A new Workflow Session on the project with `instruction`; its id.
async fn session(env: &RunnerApp, instruction: &str) -> String {
    let s = env
        .mcp_ok(
            "start_session",
            json!({"project": P, "instruction": instruction}),
        )
        .await;
    s["session_id"].as_str().unwrap().to_owned()
}

/// Every payload of the session's ledger as stored, read from the database, one a line.
async fn stored_payloads(env: &RunnerApp, sid: &str) -> String {
    ledger(&env.db, sid)
        .await
        .iter()
        .map(|e| e.payload.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The session's handoff brief, its workspace observed.
async fn handoff(env: &RunnerApp, sid: &str) -> Value {
    let r = env
        .rest("session_handoff_summary", json!({"session_id": sid}))
        .await;
    output(&r)["handoff_brief"].clone()
}

/// The sha256 of `text`, lowercase hex.
fn sha(text: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text))
}

/// The sha256 of the file at `path`.
fn file_sha(path: &Path) -> String {
    sha(&std::fs::read(path).unwrap())
}

/// Runs `git args` in `root` with a fixed identity; panics when it fails.
fn git(root: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

impl RunnerApp {
    /// `tool` over REST with the shared key; the body, after checking that the HTTP status
    /// agrees with it (200 for a success, an error status for a refusal).
    async fn rest(&self, tool: &str, args: Value) -> Value {
        rest_checked(&self.st, &self.key, tool, args).await
    }
}

/// `tool` on the REST surface (its action, or callRuntimeTool), checking the HTTP status.
async fn rest_checked(st: &AppState, key: &str, tool: &str, args: Value) -> Value {
    let r = rest_call(st, key, tool, args).await;
    if r.body["success"] == true {
        assert_eq!(r.status.as_u16(), 200, "{tool}: {}", r.text());
    } else {
        assert!(
            r.status.is_client_error() || r.status.is_server_error(),
            "{tool}: a refusal answered HTTP {}: {}",
            r.status,
            r.text()
        );
    }
    r.body
}
