//! `cargo_check_vs_direct`: `cargo_check` on an unchanged small crate through wc (a tool call
//! over MCP, through the queue to the embedded runner, the sandboxed job, the parser, the
//! result and its evidence) against `cargo check --message-format=json` run directly by this
//! benchmark in the same directory, in alternating order, several times. Both check the same
//! built crate, so what differs is what wc adds around the command.
//!
//! `cargo_check_vs_direct_edited`: the same after an edit of one module before every check
//! (unmeasured), so each check compiles the crate again: wc's fixed cost against a check
//! that does work.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use anyhow::Context;
use serde_json::{Value, json};

use super::mcp::{mcp_request, post_mcp};
use super::{median, round};
use crate::client::Client;

/// The crate's directory under the project root.
pub const CRATE_DIR: &str = "validate-crate";

/// Writes a small crate (three modules, a few dozen functions and tests) under `root`.
pub fn prepare(root: &Path) -> anyhow::Result<PathBuf> {
    let dir = root.join(CRATE_DIR);
    std::fs::create_dir_all(dir.join("src"))?;
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"bench_crate\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )?;
    let mut lib = String::from("pub mod a;\npub mod b;\npub mod c;\n");
    lib.push_str("pub fn total() -> u64 {\n    a::sum() + b::sum() + c::sum()\n}\n");
    std::fs::write(dir.join("src/lib.rs"), lib)?;
    for m in ["a", "b", "c"] {
        let mut text = String::new();
        for i in 0..40 {
            text.push_str(&format!(
                "pub fn f{i}(x: u64) -> u64 {{\n    x.wrapping_mul({i}).wrapping_add({m:?}.len() as u64)\n}}\n\n"
            ));
        }
        text.push_str("pub fn sum() -> u64 {\n    (0..40).map(|i| f0(i)).sum()\n}\n");
        std::fs::write(dir.join(format!("src/{m}.rs")), text)?;
    }
    Ok(dir)
}

/// One wc `cargo_check` of the crate; its elapsed time is measured by the caller.
async fn wc_check(client: &Client, url: &str, token: &str, project: &str) -> anyhow::Result<()> {
    let (mut headers, body) = mcp_request(
        "tools/call",
        Some("cargo_check"),
        json!({ "name": "cargo_check", "arguments": { "project": project, "cwd": CRATE_DIR } }),
    );
    headers.push(("authorization".to_owned(), format!("Bearer {token}")));
    let (reply, _) = post_mcp(client, url, &headers, body.into(), "tools/call").await?;
    let sc = &reply["result"]["structuredContent"];
    anyhow::ensure!(
        sc["success"] == true && sc["output"]["validation"]["passed"] == true,
        "cargo_check through wc did not pass: {reply}"
    );
    Ok(())
}

/// One direct `cargo check --message-format=json` of the crate, its output read whole.
async fn direct_check(dir: &Path) -> anyhow::Result<()> {
    let out = tokio::process::Command::new("cargo")
        .args(["check", "--message-format=json"])
        .env("CARGO_TERM_COLOR", "never")
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .await
        .context("cannot run cargo")?;
    anyhow::ensure!(
        out.status.success(),
        "cargo check failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// Rewrites module `c` with `n` in it: the next check compiles the crate again.
fn edit(dir: &Path, n: usize) -> anyhow::Result<()> {
    let path = dir.join("src/c.rs");
    let text = std::fs::read_to_string(&path)?;
    let kept = text
        .split("\npub const EDIT")
        .next()
        .unwrap_or(&text)
        .to_owned();
    std::fs::write(&path, format!("{kept}\npub const EDIT: u64 = {n};\n"))?;
    Ok(())
}

/// The scenario: one unmeasured check on each side (the crate is then built for both), then
/// `repetitions` rounds of one wc check and one direct check, the order alternating; with
/// `edited`, one module changes before every check.
pub async fn against_direct(
    base: &str,
    token: &str,
    project: &str,
    dir: &Path,
    repetitions: usize,
    edited: bool,
) -> anyhow::Result<Value> {
    let client = Client::new();
    let url = format!("{base}/mcp");
    direct_check(dir).await?;
    wc_check(&client, &url, token, project).await?;
    let (mut wc_ms, mut direct_ms) = (Vec::new(), Vec::new());
    for round_no in 0..repetitions {
        let order = if round_no % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for (i, wc_side) in order.into_iter().enumerate() {
            if edited {
                edit(dir, round_no * 2 + i)?;
            }
            let t = Instant::now();
            if wc_side {
                wc_check(&client, &url, token, project).await?;
                wc_ms.push(t.elapsed().as_secs_f64() * 1000.0);
            } else {
                direct_check(dir).await?;
                direct_ms.push(t.elapsed().as_secs_f64() * 1000.0);
            }
        }
    }
    let ratios: Vec<f64> = wc_ms.iter().zip(&direct_ms).map(|(w, d)| w / d).collect();
    let rounded = |v: &[f64]| v.iter().map(|x| round(*x)).collect::<Vec<_>>();
    Ok(json!({
        "scenario": if edited { "cargo_check_vs_direct_edited" } else { "cargo_check_vs_direct" },
        "repetitions": repetitions,
        "wc_median_ms": round(median(&wc_ms)),
        "direct_median_ms": round(median(&direct_ms)),
        "ratio_to_direct": round(median(&ratios)),
        "ratio_to_direct_by_round": rounded(&ratios),
        "wc_ms_by_round": rounded(&wc_ms),
        "direct_ms_by_round": rounded(&direct_ms),
    }))
}
