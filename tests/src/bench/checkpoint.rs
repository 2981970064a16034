//! `checkpoint_vs_git`: `create_checkpoint` and `restore_checkpoint` on the 20,000-file tree
//! of [`super::search::generate`], committed as the project's own repository, against the Git
//! commands that do the least of the same work, run by this benchmark in the project root:
//! `git stash create` (a commit of the tracked changes, HEAD and the index left alone) and a
//! restore through a temporary index (`git read-tree` of that commit's tree, then
//! `git checkout-index -a -f`). Before each restore, on either side, the same 10 files are
//! changed (unmeasured). The sides alternate round by round.
//!
//! wc does more than the floor: it also keeps untracked files, names the checkpoint under a
//! private ref, refuses a restore over an unexpected state, keeps the state it replaces, and
//! runs every Git command as a sandboxed job through the queue. The ratio is that cost.

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use serde_json::{Value, json};

use super::mcp::{mcp_request, post_mcp};
use super::{median, round};
use crate::client::Client;

/// Files changed before every restore.
pub(crate) const CHANGED_FILES: usize = 10;

/// Makes the tree under `root` and commits it as `root`'s repository.
pub fn prepare(root: &Path) -> anyhow::Result<super::search::Tree> {
    let tree = super::search::generate(&root.join(super::search::TREE_DIR))?;
    // The tree is the project's own repository, not one nested in it.
    std::fs::remove_dir_all(tree.root.join(".git"))?;
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "-A"],
        &[
            "-c",
            "user.name=Bench",
            "-c",
            "user.email=bench@example.com",
            "commit",
            "-q",
            "-m",
            "tree",
        ],
    ] {
        git(root, args, &[])?;
    }
    Ok(tree)
}

/// Runs `git args` in `dir` with `env`; what it printed, trimmed.
pub(crate) fn git(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<String> {
    let out = std::process::Command::new("git")
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir)
        .output()
        .context("cannot run git")?;
    anyhow::ensure!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Rewrites [`CHANGED_FILES`] text files of the tree, the first `.rs` file of as many crates
/// (a new line at their end, naming `mark`).
pub(crate) fn change(tree: &super::search::Tree, mark: usize) -> anyhow::Result<()> {
    for k in 0..CHANGED_FILES {
        let dir = tree.root.join(format!("crate{k:02}/src/mod00"));
        let mut files: Vec<_> = std::fs::read_dir(&dir)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect();
        files.sort();
        let file = files
            .first()
            .with_context(|| format!("no .rs file in {}", dir.display()))?;
        let mut text = std::fs::read_to_string(file)?;
        text.push_str(&format!("// change {mark}\n"));
        std::fs::write(file, text)?;
    }
    Ok(())
}

/// `tools/call` of `tool` over MCP, which must succeed; its output.
pub(crate) async fn call(
    client: &Client,
    url: &str,
    token: &str,
    tool: &str,
    arguments: Value,
) -> anyhow::Result<Value> {
    let (mut headers, body) = mcp_request(
        "tools/call",
        Some(tool),
        json!({ "name": tool, "arguments": arguments }),
    );
    headers.push(("authorization".to_owned(), format!("Bearer {token}")));
    let (reply, _) = post_mcp(client, url, &headers, body.into(), "tools/call").await?;
    let sc = &reply["result"]["structuredContent"];
    anyhow::ensure!(sc["success"] == true, "{tool} failed: {reply}");
    Ok(sc["output"].clone())
}

/// One side's timings, milliseconds per round.
#[derive(Default)]
struct Side {
    create: Vec<f64>,
    restore: Vec<f64>,
}

/// `checkpoint_vs_git` over the committed tree at `root` (the project root of the server at
/// `base`), `repetitions` rounds.
pub async fn against_git(
    base: &str,
    token: &str,
    project: &str,
    root: &Path,
    tree: &super::search::Tree,
    repetitions: usize,
) -> anyhow::Result<Value> {
    let client = Client::new();
    let url = format!("{base}/mcp");
    let (mut wc, mut floor) = (Side::default(), Side::default());
    let index = root.join(".git/bench-restore-index");
    let index = index.to_string_lossy().into_owned();
    let mut mark = 0;
    for round_no in 0..repetitions + 1 {
        let order = if round_no % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for wc_side in order {
            mark += 1;
            change(tree, mark)?;
            let t = Instant::now();
            let checkpoint = if wc_side {
                let made = call(
                    &client,
                    &url,
                    token,
                    "create_checkpoint",
                    json!({ "project": project }),
                )
                .await?;
                made["checkpoint"]["id"].clone()
            } else {
                json!(git(root, &["stash", "create"], &[])?)
            };
            let created_ms = t.elapsed().as_secs_f64() * 1000.0;
            mark += 1;
            change(tree, mark)?;
            if wc_side {
                // The state now is what a caller read before restoring: asked unmeasured.
                let now = call(
                    &client,
                    &url,
                    token,
                    "list_checkpoints",
                    json!({ "project": project, "limit": 1 }),
                )
                .await?;
                let t = Instant::now();
                let restored = call(
                    &client,
                    &url,
                    token,
                    "restore_checkpoint",
                    json!({ "project": project, "checkpoint": checkpoint,
                            "expected_state": now["current_state"] }),
                )
                .await?;
                anyhow::ensure!(
                    restored["files"].as_array().map(Vec::len) == Some(CHANGED_FILES),
                    "the restore changed other files than the {CHANGED_FILES} changed: {restored}"
                );
                let restored_ms = t.elapsed().as_secs_f64() * 1000.0;
                if round_no > 0 {
                    wc.create.push(created_ms);
                    wc.restore.push(restored_ms);
                }
            } else {
                let t = Instant::now();
                let commit = checkpoint.as_str().unwrap_or_default().to_owned();
                let tree_ref = format!("{commit}^{{tree}}");
                let env = [("GIT_INDEX_FILE", index.as_str())];
                git(root, &["read-tree", &tree_ref], &env)?;
                git(root, &["checkout-index", "-a", "-f"], &env)?;
                let restored_ms = t.elapsed().as_secs_f64() * 1000.0;
                std::fs::remove_file(&index).ok();
                if round_no > 0 {
                    floor.create.push(created_ms);
                    floor.restore.push(restored_ms);
                }
            }
        }
    }
    let ratio = |a: &[f64], b: &[f64]| {
        let r: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
        round(median(&r))
    };
    Ok(json!({
        "scenario": "checkpoint_vs_git",
        "repetitions": repetitions,
        "files": tree.text_files + tree.binary_files,
        "changed_files": CHANGED_FILES,
        "wc_create_median_ms": round(median(&wc.create)),
        "git_stash_create_median_ms": round(median(&floor.create)),
        "create_ratio": ratio(&wc.create, &floor.create),
        "wc_restore_median_ms": round(median(&wc.restore)),
        "git_read_tree_checkout_index_median_ms": round(median(&floor.restore)),
        "restore_ratio": ratio(&wc.restore, &floor.restore),
    }))
}
