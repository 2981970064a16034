//! `diff_summary_vs_git`: `git_diff_summary` (the work tree against HEAD, untracked files left
//! out) on the 20,000-file tree of [`super::search::generate`], committed as the project's
//! repository with [`super::checkpoint::CHANGED_FILES`] files changed, against
//! `git diff --numstat HEAD` run by this benchmark in the project root. The sides alternate
//! round by round.
//!
//! wc does more than the floor: it also reports each file's status and rename origin, pages and
//! bounds the answer, excludes hidden paths, and runs Git as a sandboxed job through the queue.
//! The ratio is that cost.

use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};

use super::checkpoint::{CHANGED_FILES, call, change, git};
use super::search::Tree;
use super::{median, round};
use crate::client::Client;

/// `diff_summary_vs_git` over the committed tree at `root` (the project root of the server
/// at `base`), `repetitions` rounds.
pub async fn against_git(
    base: &str,
    token: &str,
    project: &str,
    root: &Path,
    tree: &Tree,
    repetitions: usize,
) -> anyhow::Result<Value> {
    let client = Client::new();
    let url = format!("{base}/mcp");
    change(tree, 0)?;
    let (mut wc, mut floor) = (Vec::new(), Vec::new());
    for round_no in 0..repetitions + 1 {
        let order = if round_no % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for wc_side in order {
            let t = Instant::now();
            let files = if wc_side {
                let summary = call(
                    &client,
                    &url,
                    token,
                    "git_diff_summary",
                    json!({ "project": project, "include_untracked": false }),
                )
                .await?;
                summary["files"].as_array().map_or(0, Vec::len)
            } else {
                git(root, &["diff", "--numstat", "HEAD"], &[])?
                    .lines()
                    .count()
            };
            let ms = t.elapsed().as_secs_f64() * 1000.0;
            anyhow::ensure!(
                files == CHANGED_FILES,
                "{} side saw {files} changed files, not {CHANGED_FILES}",
                if wc_side { "wc" } else { "git" }
            );
            if round_no > 0 {
                if wc_side { &mut wc } else { &mut floor }.push(ms);
            }
        }
    }
    let ratios: Vec<f64> = wc.iter().zip(&floor).map(|(x, y)| x / y).collect();
    Ok(json!({
        "scenario": "diff_summary_vs_git",
        "repetitions": repetitions,
        "files": tree.text_files + tree.binary_files,
        "changed_files": CHANGED_FILES,
        "wc_git_diff_summary_median_ms": round(median(&wc)),
        "git_diff_numstat_median_ms": round(median(&floor)),
        "ratio": round(median(&ratios)),
    }))
}
